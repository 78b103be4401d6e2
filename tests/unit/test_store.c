/* The striped store (store.h) on inputs this test makes itself in a fresh
 * temporary directory per test: round trips from synthetic data, small IDX
 * files and the first 1,000 Fashion-MNIST test images over several stripe
 * counts and units (one record per unit, units that are not a multiple of
 * the record, more stripes than blocks, one stripe), directly and through
 * st_source_open; the default layout rule; reads from four threads at once;
 * every corruption the reader must catch (status and message); and crash
 * safety: a pack that fails midway leaves the previous store whole and no
 * new stripes behind, and a successful one removes the old generation.
 *
 * Also run under ThreadSanitizer (@tsan): it starts threads. */
#include "testlib.h"
#include "tmpdir.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data.h"
#include "data/store.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

/* ---- the temporary directory ---- */

/* dir/name in buf */
static const char *in_dir(char *buf, void **state, const char *name)
{
    if (snprintf(buf, PATH_MAX, "%s/%s", ((tl_tmpdir *)*state)->dir, name) >= PATH_MAX)
        fail_msg("path too long: %s", name);
    return buf;
}

/* ---- files ---- */

static long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void flip_byte(const char *path, long offset)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, offset, SEEK_SET), 0);
    int c = fgetc(f);
    assert_true(c != EOF);
    assert_int_equal(fseek(f, offset, SEEK_SET), 0);
    fputc(c ^ 0x5a, f);
    assert_int_equal(fclose(f), 0);
}

static void put_bytes(const char *path, long offset, const void *data, size_t len)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, offset, SEEK_SET), 0);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static uint64_t index_u64(const char *index, long offset)
{
    unsigned char b[8];
    FILE *f = fopen(index, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, offset, SEEK_SET), 0);
    assert_int_equal(fread(b, 1, 8, f), 8);
    fclose(f);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static uint32_t index_u32(const char *index, long offset)
{
    return (uint32_t)index_u64(index, offset); /* little-endian: the low half */
}

/* The index fields this test checks (offsets of store_format.h's layout). */
#define IX_GENERATION 16
#define IX_CLASSES 44
#define IX_STRIPES 48
#define IX_UNIT 52
#define IX_PER_BLOCK 60
#define IX_BLOCKS 64

static const char *stripe_path(char *buf, const char *index, unsigned k)
{
    if (snprintf(buf, PATH_MAX, "%s.%016llx.%03u", index,
                 (unsigned long long)index_u64(index, IX_GENERATION), k) >= PATH_MAX)
        fail_msg("path too long: %s", index);
    return buf;
}

/* Entries of dir starting with prefix. */
static int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

/* ---- sources ---- */

static st_source *synthetic(st_shape shape, int classes, long count, uint64_t seed)
{
    st_error err = {0};
    st_source *s = NULL;
    if (st_synthetic_open(&s, shape, classes, count, seed, 0, &err) != ST_OK)
        fail_msg("st_synthetic_open: %s", err.msg);
    return s;
}

/* A source that passes records through from another one but fails at
 * record fail_at: with an I/O error, or (bad_label) with a label out of
 * range. */
typedef struct failing_source {
    st_source base;
    st_source *inner;
    long fail_at;
    int bad_label;
} failing_source;

static st_status failing_read(const st_source *s, long index, unsigned char *pixels, int *label,
                              st_error *err)
{
    const failing_source *f = (const failing_source *)s;
    st_status st = f->inner->ops->read(f->inner, index, pixels, label, err);
    if (st == ST_OK && index == f->fail_at && f->bad_label)
        *label = s->classes;
    else if (st == ST_OK && index == f->fail_at)
        st = st_fail(err, ST_EIO, "failing source: record %ld cannot be read", index);
    return st;
}

static void failing_close(st_source *s)
{
    failing_source *f = (failing_source *)s;
    st_source_close(f->inner);
    free(f);
}

static const st_source_ops failing_ops = {failing_read, failing_close};

static st_source *failing(st_source *inner, long fail_at, int bad_label)
{
    failing_source *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = *inner;
    f->base.ops = &failing_ops;
    f->inner = inner;
    f->fail_at = fail_at;
    f->bad_label = bad_label;
    return &f->base;
}

/* ---- packing and comparing ---- */

static st_status pack(const st_source *src, const char *out, int stripes, size_t unit,
                      int threads, st_error *err)
{
    st_log log = tl_silent_log();
    st_pack_opts o = {stripes, unit, threads, &log, NULL};
    long written = -1;
    st_status st = st_store_pack(src, out, &o, &written, err);
    if (st == ST_OK)
        assert_int_equal(written, src->count);
    return st;
}

static void pack_ok(const st_source *src, const char *out, int stripes, size_t unit,
                    int threads)
{
    st_error err = {0};
    if (pack(src, out, stripes, unit, threads, &err) != ST_OK)
        fail_msg("st_store_pack %s (stripes %d, unit %zu): %s", out, stripes, unit, err.msg);
}

static st_source *open_store(const char *path, long limit, int classes, int verify)
{
    st_error err = {0};
    st_source *s = NULL;
    if (st_store_open(&s, path, limit, classes, verify, NULL, &err) != ST_OK)
        fail_msg("st_store_open %s: %s", path, err.msg);
    return s;
}

/* The first n records of a and b are identical, pixels and labels. */
static void assert_same_records(const st_source *a, const st_source *b, long n)
{
    assert_int_equal(a->shape.c, b->shape.c);
    assert_int_equal(a->shape.h, b->shape.h);
    assert_int_equal(a->shape.w, b->shape.w);
    assert_true(a->count >= n && b->count >= n);
    size_t per = st_record_bytes(a);
    unsigned char *pa = malloc(per), *pb = malloc(per);
    assert_non_null(pa);
    assert_non_null(pb);
    for (long i = 0; i < n; i++) {
        st_error err = {0};
        int la = -1, lb = -2;
        if (a->ops->read(a, i, pa, &la, &err) != ST_OK ||
            b->ops->read(b, i, pb, &lb, &err) != ST_OK)
            fail_msg("record %ld: %s", i, err.msg);
        if (la != lb || memcmp(pa, pb, per) != 0)
            fail_msg("record %ld differs: %s label %d, %s label %d", i, a->name, la, b->name, lb);
    }
    free(pa);
    free(pb);
}

/* Pack src to out with this layout and read it back every way. */
static void round_trip(const st_source *src, const char *out, int stripes, size_t unit,
                       int threads)
{
    pack_ok(src, out, stripes, unit, threads);
    st_source *s = open_store(out, 0, src->classes, 1);
    assert_int_equal(s->count, src->count);
    assert_true(s->classes <= src->classes);
    assert_string_equal(s->name, out);
    assert_same_records(src, s, src->count);
    st_source_close(s);

    uint32_t n = index_u32(out, IX_STRIPES);
    if (stripes)
        assert_int_equal(n, (uint32_t)stripes);
    char path[PATH_MAX];
    for (uint32_t k = 0; k < n; k++)
        assert_true(file_size(stripe_path(path, out, k)) >= 0);
    assert_true(file_size(stripe_path(path, out, n)) < 0);

    /* through st_source_open, limited */
    long limit = src->count > 10 ? src->count / 3 : 1;
    st_source_spec spec = {.path = out, .limit = limit, .classes = src->classes, .verify = 1};
    st_error err = {0};
    if (st_source_open(&s, &spec, &err) != ST_OK)
        fail_msg("st_source_open %s: %s", out, err.msg);
    assert_int_equal(s->count, limit);
    assert_same_records(src, s, limit);
    st_source_close(s);
}

/* ---- round trips ---- */

static void test_round_trip_synthetic(void **state)
{
    char out[PATH_MAX];
    st_source *src = synthetic((st_shape){3, 5, 7}, 10, 103, 7);
    size_t rec = 4 + 3 * 5 * 7;
    struct {
        int stripes;
        size_t unit;
        int threads;
    } layouts[] = {
        {0, 0, 2},                 /* the default */
        {1, 0, 1},                 /* one stripe */
        {3, rec, 3},               /* one record per unit */
        {4, rec * 5 / 2, 4},       /* 2.5 records per unit */
        {50, 0, 2},                /* more stripes than blocks */
        {7, 1000, 1},              /* an arbitrary unit */
        {0, rec * 200, 2},         /* everything in one block */
        {2, rec * 103, 8},         /* exactly one full block */
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "syn%zu", i);
        round_trip(src, in_dir(out, state, name), layouts[i].stripes, layouts[i].unit,
                   layouts[i].threads);
    }
    /* more stripes than blocks: the extra stripes are empty files */
    char path[PATH_MAX];
    in_dir(out, state, "syn4");
    assert_int_equal(index_u64(out, IX_BLOCKS), 35); /* 3 records a block */
    assert_int_equal(file_size(stripe_path(path, out, 49)), 0);
    st_source_close(src);
}

/* The default rule: 103 records over N' = 32 gives ceil(103 / 32) = 4
 * records a block, 26 blocks, 26 stripes; a unit holds whole records. */
static void test_default_layout(void **state)
{
    char out[PATH_MAX];
    st_source *src = synthetic((st_shape){3, 5, 7}, 10, 103, 7);
    pack_ok(src, in_dir(out, state, "default"), 0, 0, 2);
    assert_int_equal(index_u32(out, IX_PER_BLOCK), 4);
    assert_int_equal(index_u64(out, IX_UNIT), 4 * 109);
    assert_int_equal(index_u64(out, IX_BLOCKS), 26);
    assert_int_equal(index_u32(out, IX_STRIPES), 26);
    /* 1 + the largest label */
    assert_int_equal(index_u32(out, IX_CLASSES), 10);
    /* --stripes 5: 21 records a block, 5 blocks */
    pack_ok(src, in_dir(out, state, "five"), 5, 0, 2);
    assert_int_equal(index_u32(out, IX_PER_BLOCK), 21);
    assert_int_equal(index_u64(out, IX_BLOCKS), 5);
    /* a unit of 1000 bytes: 9 records a block, 12 blocks, 12 stripes;
     * blocks are padded to the unit except the last of each stripe */
    pack_ok(src, in_dir(out, state, "unit"), 0, 1000, 2);
    assert_int_equal(index_u32(out, IX_PER_BLOCK), 9);
    assert_int_equal(index_u64(out, IX_BLOCKS), 12);
    assert_int_equal(index_u32(out, IX_STRIPES), 12);
    char path[PATH_MAX];
    assert_int_equal(file_size(stripe_path(path, out, 0)), 9 * 109);
    assert_int_equal(file_size(stripe_path(path, out, 11)), (103 - 99) * 109);
    pack_ok(src, in_dir(out, state, "unit2"), 5, 1000, 2);
    assert_int_equal(file_size(stripe_path(path, out, 0)), 2 * 1000 + 9 * 109);
    assert_int_equal(file_size(stripe_path(path, out, 1)), 2 * 1000 + 4 * 109); /* 1, 6, 11 */
    assert_int_equal(file_size(stripe_path(path, out, 2)), 1000 + 9 * 109);
    st_source_close(src);
}

/* Write IDX images (count x h x w, pixel (i, j) = (i * 7 + j) mod 256) and
 * labels (i mod 10). */
static void write_idx(const char *images, const char *labels, int count, int h, int w)
{
    size_t n = (size_t)count * h * w;
    unsigned char *d = malloc(16 + n);
    assert_non_null(d);
    unsigned char head[16] = {0, 0, 8, 3, 0, 0, (unsigned char)(count >> 8), (unsigned char)count,
                              0, 0, 0, (unsigned char)h, 0, 0, 0, (unsigned char)w};
    memcpy(d, head, 16);
    for (size_t j = 0; j < n; j++)
        d[16 + j] = (unsigned char)((j / ((size_t)h * w)) * 7 + j % 251);
    tl_write_file(images, d, 16 + n);
    unsigned char lhead[8] = {0, 0, 8, 1, 0, 0, (unsigned char)(count >> 8), (unsigned char)count};
    memcpy(d, lhead, 8);
    for (int i = 0; i < count; i++)
        d[8 + i] = (unsigned char)(i % 10);
    tl_write_file(labels, d, 8 + (size_t)count);
    free(d);
}

static void test_round_trip_idx(void **state)
{
    char images[PATH_MAX], labels[PATH_MAX], out[PATH_MAX];
    write_idx(in_dir(images, state, "img.idx"), in_dir(labels, state, "lab.idx"), 37, 6, 4);
    st_error err = {0};
    st_source *src = NULL;
    if (st_idx_open(&src, images, labels, 0, 10, &err) != ST_OK)
        fail_msg("st_idx_open: %s", err.msg);
    round_trip(src, in_dir(out, state, "idx0"), 0, 0, 2);
    round_trip(src, in_dir(out, state, "idx1"), 3, 100, 3); /* 4 records a block */
    round_trip(src, in_dir(out, state, "idx2"), 1, 28, 1);  /* one record a block */
    round_trip(src, in_dir(out, state, "idx3"), 64, 0, 2);
    st_source_close(src);
}

static void test_round_trip_fashion_mnist(void **state)
{
    char out[PATH_MAX];
    st_error err = {0};
    st_source *src = NULL;
    if (st_idx_open(&src, FMNIST "/t10k-images-idx3-ubyte.gz", FMNIST "/t10k-labels-idx1-ubyte.gz",
                    1000, 10, &err) != ST_OK)
        fail_msg("st_idx_open: %s", err.msg);
    assert_int_equal(src->count, 1000);
    round_trip(src, in_dir(out, state, "fm0"), 0, 0, 2);
    round_trip(src, in_dir(out, state, "fm1"), 5, 10000, 4);
    round_trip(src, in_dir(out, state, "fm2"), 1, 0, 1);
    round_trip(src, in_dir(out, state, "fm3"), 32, 788 * 3, 2);
    /* a store packed again (SRC a store): the same records */
    st_source *s = open_store(out, 0, 10, 1);
    round_trip(s, in_dir(out, state, "fm4"), 3, 0, 2);
    st_source_close(s);
    /* packed in place over itself: the old stripes go, the records stay */
    s = open_store(out, 0, 10, 0);
    pack_ok(s, out, 7, 0, 2);
    st_source_close(s);
    s = open_store(out, 0, 10, 1);
    assert_same_records(src, s, 1000);
    st_source_close(s);
    assert_int_equal(count_entries(((tl_tmpdir *)*state)->dir, "fm4."), 7);
    st_source_close(src);
}

/* ---- four readers at once ---- */

typedef struct reader_arg {
    const st_source *store;
    const unsigned char *pixels; /* expected, [count, per] */
    const int *labels;
    int t;
    long mismatches;
} reader_arg;

static void *reader_main(void *p)
{
    reader_arg *a = p;
    size_t per = st_record_bytes(a->store);
    unsigned char *buf = malloc(per);
    long n = a->store->count;
    for (int pass = 0; buf && pass < 3; pass++)
        for (long j = 0; j < n; j++) {
            /* each thread its own order */
            long i = (j * (2 * a->t + 1) + a->t * n / 4) % n;
            int label = -1;
            st_error err = {0};
            if (a->store->ops->read(a->store, i, buf, &label, &err) != ST_OK ||
                label != a->labels[i] || memcmp(buf, a->pixels + (size_t)i * per, per) != 0)
                a->mismatches++;
        }
    if (!buf)
        a->mismatches = -1;
    free(buf);
    return NULL;
}

static void test_concurrent_reads(void **state)
{
    char out[PATH_MAX];
    enum { COUNT = 499 };
    st_source *src = synthetic((st_shape){3, 8, 8}, 10, COUNT, 3);
    size_t per = st_record_bytes(src);
    unsigned char *pixels = malloc(COUNT * per);
    int *labels = malloc(COUNT * sizeof *labels);
    assert_non_null(pixels);
    assert_non_null(labels);
    for (long i = 0; i < COUNT; i++) {
        st_error err = {0};
        assert_int_equal(src->ops->read(src, i, pixels + i * per, &labels[i], &err), ST_OK);
    }
    pack_ok(src, in_dir(out, state, "conc"), 4, 1000, 4);
    st_source *s = open_store(out, 0, 10, 1);
    pthread_t tid[4];
    reader_arg args[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (reader_arg){s, pixels, labels, t, 0};
        assert_int_equal(pthread_create(&tid[t], NULL, reader_main, &args[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(tid[t], NULL);
        assert_int_equal(args[t].mismatches, 0);
    }
    st_source_close(s);
    st_source_close(src);
    free(pixels);
    free(labels);
}

/* ---- corruption ---- */

/* A fresh store at out: 103 records of 109 bytes, 4 records a block, 26
 * blocks over 4 stripes. */
static void fresh_store(const char *out)
{
    st_source *src = synthetic((st_shape){3, 5, 7}, 10, 103, 11);
    pack_ok(src, out, 4, 500, 2);
    st_source_close(src);
}

static void expect_open_error(const char *path, int classes, int verify, const char *needle)
{
    st_error err = {0};
    st_source *s = NULL;
    st_status st = st_store_open(&s, path, 0, classes, verify, NULL, &err);
    if (st == ST_OK) {
        st_source_close(s);
        fail_msg("%s opened; expected an error containing \"%s\"", path, needle);
    }
    assert_int_equal(st, ST_EINPUT);
    tl_assert_contains(err.msg, needle);
    tl_assert_contains(err.msg, path);
    assert_null(s);
}

static void test_corrupt_index(void **state)
{
    char out[PATH_MAX];
    in_dir(out, state, "c");
    long size = 72 + 26 * 4 + 4;

    fresh_store(out);
    assert_int_equal(file_size(out), size);
    assert_int_equal(truncate(out, size / 2), 0);
    expect_open_error(out, 10, 0, "truncated index");
    assert_int_equal(truncate(out, 40), 0);
    expect_open_error(out, 10, 0, "truncated index");
    assert_int_equal(truncate(out, 0), 0);
    expect_open_error(out, 10, 0, "truncated index");

    fresh_store(out);
    assert_int_equal(truncate(out, size - 1), 0);
    expect_open_error(out, 10, 0, "truncated index");

    fresh_store(out);
    put_bytes(out, 0, "STSTORE?", 8);
    expect_open_error(out, 10, 0, "not a singletrain store");

    fresh_store(out);
    put_bytes(out, 8, "\x02\0\0\0", 4);
    expect_open_error(out, 10, 0, "store format version 2, expected 1");

    fresh_store(out);
    flip_byte(out, 72 + 4 * 3); /* block 3's CRC */
    expect_open_error(out, 10, 0, "index is corrupt");

    fresh_store(out);
    flip_byte(out, 36); /* the record count */
    expect_open_error(out, 10, 0, "index is corrupt");

    fresh_store(out);
    flip_byte(out, size - 2); /* the index CRC itself */
    expect_open_error(out, 10, 0, "index is corrupt");

    /* trailing bytes */
    fresh_store(out);
    FILE *f = fopen(out, "ab");
    assert_non_null(f);
    fputs("xx", f);
    fclose(f);
    expect_open_error(out, 10, 0, "index is corrupt");

    /* more classes than the network */
    fresh_store(out);
    expect_open_error(out, 3, 0, "the store has 10 classes but the network has 3 outputs");

    /* missing index */
    in_dir(out, state, "nope");
    expect_open_error(out, 10, 0, "cannot open store index");
}

static void test_corrupt_stripes(void **state)
{
    char out[PATH_MAX], path[PATH_MAX];
    in_dir(out, state, "s");

    /* a flipped byte in block 5 (stripe 1, second block, record 2) */
    fresh_store(out);
    flip_byte(stripe_path(path, out, 1), 500 + 2 * 109 + 30);
    expect_open_error(out, 10, 1, "block 5 in stripe 1: checksum mismatch: the store is corrupt");
    st_source *s = open_store(out, 0, 10, 0); /* not verified: opens */
    assert_int_equal(s->count, 103);
    st_source_close(s);

    /* a flipped byte in the padding is not data: the checksums hold */
    fresh_store(out);
    flip_byte(stripe_path(path, out, 0), 4 * 109 + 10);
    st_source_close(open_store(out, 0, 10, 1));

    fresh_store(out);
    assert_int_equal(unlink(stripe_path(path, out, 2)), 0);
    expect_open_error(out, 10, 0, "missing stripe 2 of 4");
    expect_open_error(out, 10, 0, path);

    fresh_store(out);
    stripe_path(path, out, 3);
    assert_int_equal(truncate(path, file_size(path) - 1), 0);
    expect_open_error(out, 10, 0, "truncated stripe 3");
    expect_open_error(out, 10, 1, "truncated stripe 3");

    fresh_store(out);
    stripe_path(path, out, 0);
    assert_int_equal(truncate(path, 0), 0);
    expect_open_error(out, 10, 0, "truncated stripe 0");

    /* a corrupt label is caught on read */
    fresh_store(out);
    put_bytes(stripe_path(path, out, 0), 109, "\x63\0\0\0", 4); /* record 1: label 99 */
    s = open_store(out, 0, 10, 0);
    unsigned char px[105];
    int label;
    st_error err = {0};
    assert_int_equal(s->ops->read(s, 1, px, &label, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "record 1 has label 99");
    st_source_close(s);

    /* the same failures through st_source_open, as training opens it */
    fresh_store(out);
    assert_int_equal(unlink(stripe_path(path, out, 0)), 0);
    st_source_spec spec = {.path = out, .classes = 10, .verify = 1};
    s = NULL;
    st_error err2 = {0};
    assert_int_equal(st_source_open(&s, &spec, &err2), ST_EINPUT);
    tl_assert_contains(err2.msg, "missing stripe 0");
}

/* Packing errors: a unit smaller than a record, a label out of range. */
static void test_pack_errors(void **state)
{
    char out[PATH_MAX];
    st_source *src = synthetic((st_shape){3, 5, 7}, 10, 20, 1);
    st_error err = {0};
    assert_int_equal(pack(src, in_dir(out, state, "small"), 2, 108, 1, &err), ST_EUSAGE);
    tl_assert_contains(err.msg, "a stripe unit of 108 bytes cannot hold one record of 109 bytes");
    assert_int_equal(count_entries(((tl_tmpdir *)*state)->dir, "small"), 0);

    st_source *bad = failing(src, 13, 1);
    st_error err2 = {0};
    assert_int_equal(pack(bad, in_dir(out, state, "label"), 2, 0, 3, &err2), ST_EINPUT);
    tl_assert_contains(err2.msg, "record 13 has label 10, not in [0, 10)");
    assert_int_equal(count_entries(((tl_tmpdir *)*state)->dir, "label"), 0);
    st_source_close(bad);
}

/* ---- crash safety ---- */

static void test_failed_pack_keeps_the_store(void **state)
{
    const char *dir = ((tl_tmpdir *)*state)->dir;
    char out[PATH_MAX], path[PATH_MAX];
    in_dir(out, state, "store");
    st_source *a = synthetic((st_shape){1, 6, 6}, 5, 300, 1);
    pack_ok(a, out, 3, 0, 2);
    uint64_t gen_a = index_u64(out, IX_GENERATION);
    assert_int_equal(count_entries(dir, "store"), 4);

    /* packs that fail at the first, a middle and the last record; from
     * one thread and several; with another layout */
    long fail_at[] = {0, 157, 299, 57};
    int threads[] = {1, 3, 4, 1};
    for (int i = 0; i < 4; i++) {
        st_source *b = failing(synthetic((st_shape){1, 6, 6}, 5, 300, 2), fail_at[i], 0);
        st_error err = {0};
        assert_int_equal(pack(b, out, 5, 100, threads[i], &err), ST_EIO);
        snprintf(path, sizeof path, "failing source: record %ld cannot be read", fail_at[i]);
        tl_assert_contains(err.msg, path);
        st_source_close(b);
        /* OUT is still store A, whole; no new stripe is left */
        assert_int_equal(index_u64(out, IX_GENERATION), gen_a);
        st_source *s = open_store(out, 0, 5, 1);
        assert_int_equal(s->count, 300);
        assert_same_records(a, s, 300);
        st_source_close(s);
        assert_int_equal(count_entries(dir, "store"), 4);
    }

    /* a failing pack where no store was: nothing at all remains */
    st_source *c = failing(synthetic((st_shape){1, 6, 6}, 5, 300, 2), 200, 0);
    st_error err = {0};
    assert_int_equal(pack(c, in_dir(path, state, "never"), 0, 0, 2, &err), ST_EIO);
    assert_int_equal(count_entries(dir, "never"), 0);
    st_source_close(c);

    /* leftovers of crashed packs are removed by the next successful one;
     * files that only look like stripes are not */
    const char *junk[] = {"store.0123456789abcdef.000", "store.0123456789abcdef.1234",
                          "store.0123456789abcdef.x", "store.0123456789abcdeg.000",
                          "store.0123456789ABCDEF.000", "store.0123456789abcdef.00",
                          "store.notes", "storeX.0123456789abcdef.000"};
    for (int i = 0; i < 8; i++)
        tl_write_file(in_dir(path, state, junk[i]), "junk", 4);
    assert_int_equal(count_entries(dir, "store"), 12);

    /* a successful pack replaces A and removes A's stripes */
    st_source *b = synthetic((st_shape){1, 6, 6}, 5, 250, 2);
    pack_ok(b, out, 4, 0, 2);
    assert_true(index_u64(out, IX_GENERATION) != gen_a);
    st_source *s = open_store(out, 0, 5, 1);
    assert_int_equal(s->count, 250);
    assert_same_records(b, s, 250);
    st_source_close(s);
    if (snprintf(path, sizeof path, "%s.%016llx.000", out, (unsigned long long)gen_a) >=
        (int)sizeof path)
        fail_msg("path too long: %s", out);
    assert_true(file_size(path) < 0);
    assert_true(file_size(in_dir(path, state, junk[0])) < 0);
    assert_true(file_size(in_dir(path, state, junk[1])) < 0);
    for (int i = 2; i < 8; i++)
        assert_true(file_size(in_dir(path, state, junk[i])) == 4);
    /* the index, 4 stripes of B, the 6 look-alikes; no temporary file */
    assert_int_equal(count_entries(dir, "store"), 1 + 4 + 6);
    st_source_close(a);
    st_source_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        tl_tmpdir_test(test_round_trip_synthetic),
        tl_tmpdir_test(test_default_layout),
        tl_tmpdir_test(test_round_trip_idx),
        tl_tmpdir_test(test_round_trip_fashion_mnist),
        tl_tmpdir_test(test_concurrent_reads),
        tl_tmpdir_test(test_corrupt_index),
        tl_tmpdir_test(test_corrupt_stripes),
        tl_tmpdir_test(test_pack_errors),
        tl_tmpdir_test(test_failed_pack_keeps_the_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
