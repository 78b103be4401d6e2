/* The CIFAR-10 and image-list readers on inputs this test writes itself into
 * a fresh temporary directory (each test chdirs into its own and removes it
 * afterwards; paths in lists are relative, Darknet's convention): records
 * read back byte-exactly, limits, labels from class names and from
 * "path label" lines, resizing, JPEG within a tolerance, every error's status
 * and message, skip_bad, dispatch through st_source_open, reads from
 * several threads matching a single-threaded read, a list entry that is
 * one of the caller's outputs refused, and out of memory while decoding
 * told from a corrupt image.
 *
 * Also run under ThreadSanitizer (@tsan): it starts threads. */
#include "testlib.h"
#include "tmpdir.h"

#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <malloc.h>
#include <stb/stb_image_write.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "data/data.h"
#include "flat_png.h"


/* ---- writing inputs ---- */

static void write_text(const char *path, const char *text)
{
    tl_write_file(path, text, strlen(text));
}

static void make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0)
        fail_msg("cannot create directory %s", path);
}

/* ---- CIFAR ---- */

#define REC 3073

/* Record g of the test batches: label (g * 3 + 1) % 10, pixels a pattern of
 * g and the position. */
static unsigned char cifar_label(int g)
{
    return (unsigned char)((g * 3 + 1) % 10);
}

static unsigned char cifar_pixel(int g, int i)
{
    return (unsigned char)(g * 37 + i * 7 + (i >> 10) * 91);
}

static void write_cifar(const char *path, int first, int n)
{
    unsigned char *buf = malloc((size_t)n * REC);
    assert_non_null(buf);
    for (int r = 0; r < n; r++) {
        buf[(size_t)r * REC] = cifar_label(first + r);
        for (int i = 0; i < 3072; i++)
            buf[(size_t)r * REC + 1 + i] = cifar_pixel(first + r, i);
    }
    tl_write_file(path, buf, (size_t)n * REC);
    free(buf);
}

static void check_cifar_records(const st_source *s, long n)
{
    unsigned char pix[3072];
    for (long g = 0; g < n; g++) {
        int label = -1;
        st_error err = {0};
        assert_int_equal(s->ops->read(s, g, pix, &label, &err), ST_OK);
        assert_int_equal(label, cifar_label((int)g));
        for (int i = 0; i < 3072; i++)
            if (pix[i] != cifar_pixel((int)g, i))
                fail_msg("record %ld pixel %d: %d, expected %d", g, i, pix[i],
                         cifar_pixel((int)g, i));
    }
}

static void test_cifar_reads(void **state)
{
    (void)state;
    write_cifar("f1.bin", 0, 5);
    write_cifar("f2.bin", 5, 3);
    st_error err = {0};
    st_source *s = NULL;
    assert_int_equal(st_cifar_open(&s, "f1.bin,f2.bin", 0, 10, &err), ST_OK);
    assert_int_equal(s->count, 8);
    assert_int_equal(s->shape.c, 3);
    assert_int_equal(s->shape.h, 32);
    assert_int_equal(s->shape.w, 32);
    assert_int_equal(s->classes, 10);
    assert_int_equal(st_record_bytes(s), 3072);
    check_cifar_records(s, 8);
    st_source_close(s);

    /* limit: across the file boundary, and within the first file */
    long limits[3] = {6, 3, 100};
    long expect[3] = {6, 3, 8};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(st_cifar_open(&s, "f1.bin, f2.bin", limits[k], 10, &err), ST_OK);
        assert_int_equal(s->count, expect[k]);
        check_cifar_records(s, s->count);
        st_source_close(s);
    }

    /* through st_source_open: the .bin list is CIFAR */
    st_source_spec spec = {0};
    spec.path = "f1.bin,f2.bin";
    spec.classes = 10;
    assert_int_equal(st_source_open(&s, &spec, &err), ST_OK);
    assert_int_equal(s->count, 8);
    check_cifar_records(s, 8);
    st_source_close(s);
}

static void expect_cifar_error(const char *files, long limit, int classes, const char *n1,
                               const char *n2)
{
    st_error err = {0};
    st_source *s = NULL;
    st_status st = st_cifar_open(&s, files, limit, classes, &err);
    if (st != ST_EINPUT)
        fail_msg("%s: status %d, expected ST_EINPUT (%s)", files, st, err.msg);
    assert_null(s);
    tl_assert_contains(err.msg, n1);
    if (n2)
        tl_assert_contains(err.msg, n2);
}

static void test_cifar_errors(void **state)
{
    (void)state;
    write_cifar("good.bin", 0, 2);
    /* truncated: two records and a bit */
    write_cifar("trunc.bin", 0, 3);
    assert_int_equal(truncate("trunc.bin", 2 * REC + 100), 0);
    expect_cifar_error("trunc.bin", 0, 10, "trunc.bin: truncated: 6246 bytes",
                       "is not a whole number of 3073-byte records");
    expect_cifar_error("good.bin,trunc.bin", 0, 10, "trunc.bin: truncated", NULL);
    /* a label >= classes, in record 1 */
    unsigned char two[2 * REC] = {0};
    two[0] = 3;
    two[REC] = 10;
    tl_write_file("label.bin", two, sizeof two);
    expect_cifar_error("label.bin", 0, 10, "label.bin: record 1 has label 10",
                       "below the network's 10 classes");
    /* ... kept out by the limit: fine */
    st_error err = {0};
    st_source *s = NULL;
    assert_int_equal(st_cifar_open(&s, "label.bin", 1, 10, &err), ST_OK);
    assert_int_equal(s->count, 1);
    st_source_close(s);
    /* missing, empty, empty name */
    expect_cifar_error("good.bin,missing.bin", 0, 10, "missing.bin: cannot open",
                       "No such file");
    tl_write_file("empty.bin", "", 0);
    expect_cifar_error("empty.bin", 0, 10, "empty.bin: empty", NULL);
    expect_cifar_error("good.bin,,good.bin", 0, 10, "empty file name", NULL);
}

/* ---- image lists ---- */

/* Pixel c of (x, y) in test pattern k, interleaved images. */
static unsigned char pattern(int k, int x, int y, int c)
{
    return (unsigned char)(k * 41 + x * 23 + y * 11 + c * 67);
}

static unsigned char *make_image(int k, int w, int h, int comp)
{
    unsigned char *img = malloc((size_t)w * h * comp);
    assert_non_null(img);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < comp; c++)
                img[((size_t)y * w + x) * comp + c] = pattern(k, x, y, c);
    return img;
}

/* Write pattern k as path (by its extension: png, bmp or jpg). */
static void write_image(const char *path, int k, int w, int h, int comp)
{
    unsigned char *img = make_image(k, w, h, comp);
    const char *ext = strrchr(path, '.');
    int ok = 0;
    if (strcmp(ext, ".png") == 0)
        ok = stbi_write_png(path, w, h, comp, img, w * comp);
    else if (strcmp(ext, ".bmp") == 0)
        ok = stbi_write_bmp(path, w, h, comp, img);
    else if (strcmp(ext, ".jpg") == 0)
        ok = stbi_write_jpg(path, w, h, comp, img, 100);
    free(img);
    if (!ok)
        fail_msg("cannot write %s", path);
}

static void write_uniform_png(const char *path, int w, int h, const unsigned char rgb[3])
{
    unsigned char *img = malloc((size_t)w * h * 3);
    assert_non_null(img);
    for (int i = 0; i < w * h; i++)
        memcpy(img + (size_t)i * 3, rgb, 3);
    assert_true(stbi_write_png(path, w, h, 3, img, w * 3) != 0);
    free(img);
}

/* Compare a planar record with pattern k (interleaved), within tol. */
static void check_pattern(const unsigned char *pix, int k, int w, int h, int comp, int tol,
                          const char *what)
{
    for (int c = 0; c < comp; c++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int got = pix[((size_t)c * h + y) * w + x];
                int want = pattern(k, x, y, c);
                if (abs(got - want) > tol)
                    fail_msg("%s: channel %d (%d, %d): %d, expected %d (tolerance %d)", what, c,
                             x, y, got, want, tol);
            }
}

static st_image_opts image_opts(int c, int h, int w)
{
    st_image_opts o = {.shape = {c, h, w}};
    return o;
}

static st_source *open_list(const char *list, const char *names, long limit, int classes,
                            const st_image_opts *o)
{
    st_error err = {0};
    st_source *s = NULL;
    st_status st = st_images_open(&s, list, names, limit, classes, o, &err);
    if (st != ST_OK)
        fail_msg("st_images_open %s: %s", list, err.msg);
    return s;
}

static void read_ok(const st_source *s, long i, unsigned char *pix, int *label)
{
    st_error err = {0};
    st_status st = s->ops->read(s, i, pix, label, &err);
    if (st != ST_OK)
        fail_msg("read %ld: %s", i, err.msg);
}

static void make_class_tree(void)
{
    make_dir("img");
    make_dir("img/cat");
    make_dir("img/dog");
    write_image("img/cat/1.png", 1, 8, 8, 3);
    write_image("img/dog/2.bmp", 2, 8, 8, 3);
    write_image("img/cat/3.jpg", 3, 8, 8, 3);
    const unsigned char rgb[3] = {100, 150, 200};
    write_uniform_png("img/dog/4.png", 16, 8, rgb);
    write_image("img/cat/5.png", 5, 8, 8, 1);
    write_image("img/dog/6.bmp", 6, 8, 8, 1);
    write_text("names.txt", "cat\n\ndog\n");
}

static void test_images_names(void **state)
{
    (void)state;
    make_class_tree();
    write_text("rgb.txt", "# RGB images\n"
                          "img/cat/1.png\n"
                          "\n"
                          "   img/dog/2.bmp  \r\n"
                          "img/cat/3.jpg\n"
                          "\t# a comment after blanks\n"
                          "img/dog/4.png\n");
    st_image_opts o = image_opts(3, 8, 8);
    st_source *s = open_list("rgb.txt", "names.txt", 0, 2, &o);
    assert_int_equal(s->count, 4);
    assert_int_equal(s->shape.c, 3);
    assert_int_equal(s->shape.h, 8);
    assert_int_equal(s->shape.w, 8);
    assert_int_equal(s->classes, 2);
    assert_string_equal(s->name, "rgb.txt");
    unsigned char pix[3 * 8 * 8];
    int label = -1;
    read_ok(s, 0, pix, &label);
    assert_int_equal(label, 0);
    check_pattern(pix, 1, 8, 8, 3, 0, "PNG");
    read_ok(s, 1, pix, &label);
    assert_int_equal(label, 1);
    check_pattern(pix, 2, 8, 8, 3, 0, "BMP");
    read_ok(s, 2, pix, &label);
    assert_int_equal(label, 0);
    check_pattern(pix, 3, 8, 8, 3, 8, "JPEG");
    /* 16 x 8 resized to 8 x 8: still uniform */
    read_ok(s, 3, pix, &label);
    assert_int_equal(label, 1);
    const int rgb[3] = {100, 150, 200};
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 64; i++)
            if (abs(pix[c * 64 + i] - rgb[c]) > 1)
                fail_msg("resized channel %d pixel %d: %d, expected %d", c, i, pix[c * 64 + i],
                         rgb[c]);
    st_source_close(s);

    /* limit */
    s = open_list("rgb.txt", "names.txt", 2, 2, &o);
    assert_int_equal(s->count, 2);
    read_ok(s, 1, pix, &label);
    check_pattern(pix, 2, 8, 8, 3, 0, "BMP under a limit");
    st_source_close(s);

    /* grey: PNG stored grey, BMP stored as grey RGB */
    write_text("grey.txt", "img/cat/5.png\nimg/dog/6.bmp\n");
    o = image_opts(1, 8, 8);
    s = open_list("grey.txt", "names.txt", 0, 2, &o);
    assert_int_equal(s->count, 2);
    read_ok(s, 0, pix, &label);
    assert_int_equal(label, 0);
    check_pattern(pix, 5, 8, 8, 1, 0, "grey PNG");
    read_ok(s, 1, pix, &label);
    assert_int_equal(label, 1);
    check_pattern(pix, 6, 8, 8, 1, 0, "grey BMP");
    st_source_close(s);

    /* resizing to another shape */
    o = image_opts(3, 4, 6);
    s = open_list("rgb.txt", "names.txt", 0, 2, &o);
    assert_int_equal(st_record_bytes(s), 3 * 4 * 6);
    read_ok(s, 3, pix, &label);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 24; i++)
            assert_true(abs(pix[c * 24 + i] - rgb[c]) <= 1);
    st_source_close(s);

    /* through st_source_open */
    st_source_spec spec = {0};
    spec.path = "rgb.txt";
    spec.names = "names.txt";
    spec.classes = 2;
    spec.images = image_opts(3, 8, 8);
    st_error err = {0};
    assert_int_equal(st_source_open(&s, &spec, &err), ST_OK);
    assert_int_equal(s->count, 4);
    read_ok(s, 0, pix, &label);
    assert_int_equal(label, 0);
    check_pattern(pix, 1, 8, 8, 3, 0, "PNG through st_source_open");
    st_source_close(s);
}

static void test_images_path_label(void **state)
{
    (void)state;
    make_dir("a");
    write_image("a/x.png", 7, 8, 8, 3);
    write_image("a/with space.bmp", 8, 8, 8, 3);
    write_text("list.txt", "a/x.png 2\n"
                           "  a/with space.bmp\t 0  \n"
                           "# a/x.png 1\n"
                           "a/x.png    1\n");
    st_image_opts o = image_opts(3, 8, 8);
    st_source *s = open_list("list.txt", NULL, 0, 3, &o);
    assert_int_equal(s->count, 3);
    unsigned char pix[3 * 8 * 8];
    int label = -1;
    read_ok(s, 0, pix, &label);
    assert_int_equal(label, 2);
    check_pattern(pix, 7, 8, 8, 3, 0, "x.png");
    read_ok(s, 1, pix, &label);
    assert_int_equal(label, 0);
    check_pattern(pix, 8, 8, 8, 3, 0, "with space.bmp");
    read_ok(s, 2, pix, &label);
    assert_int_equal(label, 1);
    st_source_close(s);
    /* an empty names string is no names file */
    s = open_list("list.txt", "", 0, 3, &o);
    assert_int_equal(s->count, 3);
    st_source_close(s);
}

static void expect_open_error(const char *list, const char *names, int classes,
                              const st_image_opts *o, const char *n1, const char *n2,
                              const char *n3)
{
    st_error err = {0};
    st_source *s = NULL;
    st_status st = st_images_open(&s, list, names, 0, classes, o, &err);
    if (st != ST_EINPUT)
        fail_msg("%s: status %d, expected ST_EINPUT (%s)", list, st, err.msg);
    assert_null(s);
    tl_assert_contains(err.msg, n1);
    if (n2)
        tl_assert_contains(err.msg, n2);
    if (n3)
        tl_assert_contains(err.msg, n3);
}

static void test_images_errors(void **state)
{
    (void)state;
    make_class_tree();
    st_image_opts o = image_opts(3, 8, 8);

    write_text("missing.txt", "img/cat/1.png\n\nimg/cat/nothere.png\n");
    expect_open_error("missing.txt", "names.txt", 2, &o, "missing.txt:3: img/cat/nothere.png",
                      "cannot read", "No such file");

    make_dir("img/bird");
    write_image("img/bird/7.png", 7, 8, 8, 3);
    write_text("noclass.txt", "img/cat/1.png\nimg/bird/7.png\n");
    expect_open_error("noclass.txt", "names.txt", 2, &o, "noclass.txt:2: img/bird/7.png",
                      "none of the 2 class names", "names.txt");

    make_dir("img/bobcat");
    write_image("img/bobcat/8.png", 8, 8, 8, 3);
    write_text("cats.txt", "cat\nbobcat\n");
    write_text("two.txt", "img/bobcat/8.png\n");
    expect_open_error("two.txt", "cats.txt", 2, &o, "two.txt:1: img/bobcat/8.png",
                      "\"cat\" and class \"bobcat\"", "expected exactly one");

    write_text("range.txt", "img/cat/1.png 1\nimg/dog/2.bmp 2\n");
    expect_open_error("range.txt", NULL, 2, &o, "range.txt:2: img/dog/2.bmp: label 2",
                      "below the network's 2 classes", NULL);
    write_text("word.txt", "img/cat/1.png cat\n");
    expect_open_error("word.txt", NULL, 2, &o, "word.txt:1: img/cat/1.png: label \"cat\"",
                      "non-negative integer", NULL);
    write_text("neg.txt", "img/cat/1.png -1\n");
    expect_open_error("neg.txt", NULL, 2, &o, "neg.txt:1: img/cat/1.png: label \"-1\"", NULL, NULL);
    write_text("nolabel.txt", "\nimg/cat/1.png\n");
    expect_open_error("nolabel.txt", NULL, 2, &o, "nolabel.txt:2", "PATH LABEL", NULL);

    expect_open_error("missing.txt", "names.txt", 3, &o, "names.txt: 2 class names",
                      "the network has 3 classes", NULL);
    expect_open_error("missing.txt", "nonames.txt", 2, &o, "nonames.txt: cannot open", NULL,
                      NULL);
    expect_open_error("nolist.txt", "names.txt", 2, &o, "nolist.txt: cannot open", NULL,
                      NULL);
    write_text("empty.txt", "# nothing\n\n");
    expect_open_error("empty.txt", "names.txt", 2, &o, "empty.txt: no images listed", NULL,
                      NULL);
    write_text("dupnames.txt", "cat\ndog\ncat\n");
    expect_open_error("noclass.txt", "dupnames.txt", 3, &o, "dupnames.txt:3",
                      "repeats line 1", NULL);
    st_image_opts four = image_opts(4, 8, 8);
    expect_open_error("range.txt", NULL, 2, &four, "range.txt: images decode to 4 channels",
                      NULL, NULL);

    /* a corrupt PNG opens (it is readable) and fails at read */
    const char garbage[] = "this is not a PNG file at all, just some bytes";
    tl_write_file("img/cat/bad.png", garbage, sizeof garbage);
    write_text("corrupt.txt", "img/cat/1.png\nimg/cat/bad.png\n");
    st_source *s = open_list("corrupt.txt", "names.txt", 0, 2, &o);
    assert_int_equal(s->count, 2);
    unsigned char pix[3 * 8 * 8];
    int label = -1;
    st_error err = {0};
    assert_int_equal(s->ops->read(s, 1, pix, &label, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "img/cat/bad.png: cannot decode image: ");
    read_ok(s, 0, pix, &label);
    st_source_close(s);
}

static void test_images_skip_bad(void **state)
{
    (void)state;
    make_class_tree();
    const char garbage[] = "GIF89a? no: garbage";
    tl_write_file("img/dog/bad.png", garbage, sizeof garbage);
    write_text("list.txt", "img/cat/1.png\n"
                           "img/dog/missing.png\n"
                           "img/dog/2.bmp\n"
                           "img/dog/bad.png\n"
                           "img/cat/3.jpg\n");
    long skipped = 0;
    st_image_opts o = {.shape = {3, 8, 8}, .skip_bad = 1, .skipped = &skipped};
    st_source *s = open_list("list.txt", "names.txt", 0, 2, &o);
    assert_int_equal(s->count, 4); /* the missing file is dropped */
    assert_int_equal(skipped, 1);
    unsigned char pix[3 * 8 * 8];
    int label = -1;
    int expect_k[4] = {1, 2, 3, 3}; /* bad.png's place is taken by 3.jpg */
    int expect_label[4] = {0, 1, 0, 0};
    for (int pass = 0; pass < 2; pass++)
        for (long i = 0; i < 4; i++) {
            read_ok(s, i, pix, &label);
            assert_int_equal(label, expect_label[i]);
            check_pattern(pix, expect_k[i], 8, 8, 3, expect_k[i] == 3 ? 8 : 0, "skip_bad");
        }
    assert_int_equal(skipped, 2); /* counted once, however often it is read */
    st_source_close(s);

    /* the last entry bad: wraps to the first */
    write_text("wrap.txt", "img/cat/1.png\nimg/dog/bad.png\n");
    o.skipped = NULL;
    s = open_list("wrap.txt", "names.txt", 0, 2, &o);
    read_ok(s, 1, pix, &label);
    assert_int_equal(label, 0);
    check_pattern(pix, 1, 8, 8, 3, 0, "wrapped");
    st_source_close(s);

    /* nothing decodes */
    write_text("allbad.txt", "img/dog/bad.png\nimg/dog/missing.png\n");
    skipped = 0;
    o.skipped = &skipped;
    s = open_list("allbad.txt", "names.txt", 0, 2, &o);
    assert_int_equal(s->count, 1);
    st_error err = {0};
    assert_int_equal(s->ops->read(s, 0, pix, &label, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "allbad.txt: none of the 1 listed images can be decoded");
    assert_int_equal(skipped, 2);
    st_source_close(s);

    /* nothing readable at all */
    write_text("allmissing.txt", "img/dog/missing.png\n");
    expect_open_error("allmissing.txt", "names.txt", 2, &o,
                      "allmissing.txt: none of the 1 listed images can be read", NULL, NULL);
}

/* ---- several readers at once ---- */

#define N_THREADS 4

typedef struct reader_job {
    const st_source *s;
    int start;
    unsigned char *pixels; /* [count, record bytes] */
    int *labels;
    st_status st;
    char msg[1024];
} reader_job;

static void *reader(void *arg)
{
    reader_job *j = arg;
    size_t per = st_record_bytes(j->s);
    long n = j->s->count;
    j->st = ST_OK;
    for (long k = 0; k < n && j->st == ST_OK; k++) {
        long i = (j->start + k * (j->start % 2 ? -1 : 1) + 2 * n) % n;
        st_error err = {0};
        j->st = j->s->ops->read(j->s, i, j->pixels + (size_t)i * per, &j->labels[i], &err);
        if (j->st != ST_OK)
            snprintf(j->msg, sizeof j->msg, "%s", err.msg);
    }
    return NULL;
}

static void check_concurrent(const st_source *s)
{
    size_t per = st_record_bytes(s);
    long n = s->count;
    reader_job ref = {s, 0, malloc((size_t)n * per), malloc((size_t)n * sizeof(int)), 0, ""};
    assert_non_null(ref.pixels);
    assert_non_null(ref.labels);
    reader(&ref);
    if (ref.st != ST_OK)
        fail_msg("single-threaded read: %s", ref.msg);
    reader_job jobs[N_THREADS];
    pthread_t tid[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        jobs[t] = (reader_job){s, (int)(t * n / N_THREADS), calloc((size_t)n, per),
                               calloc((size_t)n, sizeof(int)), 0, ""};
        assert_non_null(jobs[t].pixels);
        assert_non_null(jobs[t].labels);
    }
    for (int t = 0; t < N_THREADS; t++)
        assert_int_equal(pthread_create(&tid[t], NULL, reader, &jobs[t]), 0);
    for (int t = 0; t < N_THREADS; t++)
        assert_int_equal(pthread_join(tid[t], NULL), 0);
    for (int t = 0; t < N_THREADS; t++) {
        if (jobs[t].st != ST_OK)
            fail_msg("thread %d: %s", t, jobs[t].msg);
        assert_memory_equal(jobs[t].pixels, ref.pixels, (size_t)n * per);
        assert_memory_equal(jobs[t].labels, ref.labels, (size_t)n * sizeof(int));
        free(jobs[t].pixels);
        free(jobs[t].labels);
    }
    free(ref.pixels);
    free(ref.labels);
}

static void test_concurrent_reads(void **state)
{
    (void)state;
    /* images of several sizes and formats, most needing a resize */
    const char *ext[3] = {".png", ".bmp", ".jpg"};
    const int size[5][2] = {{12, 10}, {16, 16}, {8, 8}, {20, 6}, {5, 9}};
    char path[64], line[96];
    char *text = calloc(1, 40 * sizeof line);
    assert_non_null(text);
    for (int k = 0; k < 15; k++) {
        snprintf(path, sizeof path, "im%02d%s", k, ext[k % 3]);
        write_image(path, k, size[k % 5][0], size[k % 5][1], 3);
    }
    const char garbage[] = "not an image";
    tl_write_file("bad.png", garbage, sizeof garbage);
    for (int i = 0; i < 40; i++) {
        int k = (i * 7) % 15;
        if (i == 17)
            snprintf(line, sizeof line, "bad.png 1\n");
        else
            snprintf(line, sizeof line, "im%02d%s %d\n", k, ext[k % 3], k % 4);
        strcat(text, line);
    }
    write_text("list.txt", text);
    free(text);

    long skipped = 0;
    st_image_opts o = {.shape = {3, 8, 8}, .skip_bad = 1, .skipped = &skipped};
    st_source *s = open_list("list.txt", NULL, 0, 4, &o);
    assert_int_equal(s->count, 40);
    check_concurrent(s);
    assert_int_equal(skipped, 1);
    st_source_close(s);

    o = image_opts(1, 7, 9);
    write_text("good.txt", "im00.png 0\nim01.bmp 1\nim02.jpg 2\nim03.png 3\nim04.bmp 0\n");
    s = open_list("good.txt", NULL, 0, 4, &o);
    check_concurrent(s);
    st_source_close(s);

    write_cifar("c.bin", 0, 50);
    st_error err = {0};
    assert_int_equal(st_cifar_open(&s, "c.bin", 0, 10, &err), ST_OK);
    check_concurrent(s);
    st_source_close(s);
}

/* An image list whose entry is one of the caller's outputs is refused at
 * open, naming the output, the list's line and the image, whichever name
 * the entry goes by (a link to it); 20,000 entries before it take one
 * look-up each in the outputs' hash table, whatever their number (200
 * here, each found, none mistaken for another). */
static void test_images_outputs_refused(void **state)
{
    (void)state;
    write_image("a.png", 1, 8, 8, 3);
    write_image("out.png", 2, 8, 8, 3);
    assert_int_equal(symlink("out.png", "link.png"), 0);
    enum { OUTPUTS = 200, ENTRIES = 20000 };
    static char names[OUTPUTS][32];
    st_output_ids ids = {0};
    st_error err = {0};
    for (int i = 0; i < OUTPUTS; i++) {
        snprintf(names[i], sizeof names[i], "o%03d.csv", i);
        write_text(names[i], "x\n");
        const st_named_path p = {"--metrics", names[i]};
        assert_int_equal(st_output_ids_add(&ids, &p, &err), ST_OK);
    }
    const st_named_path none = {"--cpe-trace", "absent.csv"}; /* not there: left out */
    assert_int_equal(st_output_ids_add(&ids, &none, &err), ST_OK);
    const st_named_path out = {"--save-kernel-choices", "out.png"};
    assert_int_equal(st_output_ids_add(&ids, &out, &err), ST_OK);
    assert_int_equal(ids.n, OUTPUTS + 1);
    struct stat sb;
    for (int i = 0; i < OUTPUTS; i++) {
        assert_int_equal(stat(names[i], &sb), 0);
        const st_output_id *o = st_output_ids_find(&ids, &sb);
        assert_non_null(o);
        assert_string_equal(o->path, names[i]);
    }
    assert_int_equal(stat("a.png", &sb), 0);
    assert_null(st_output_ids_find(&ids, &sb));

    FILE *f = fopen("long.txt", "w");
    assert_non_null(f);
    for (int i = 0; i < ENTRIES; i++)
        fputs("a.png 0\n", f);
    fputs("link.png 1\n", f);
    fclose(f);
    st_image_opts o = {.shape = {3, 8, 8}, .outputs = &ids};
    st_source *s = NULL;
    assert_int_equal(st_images_open(&s, "long.txt", NULL, 0, 2, &o, &err), ST_EUSAGE);
    assert_null(s);
    tl_assert_contains(err.msg, "--save-kernel-choices out.png is long.txt:20001's image "
                                "link.png: writing it would destroy that input");
    /* without it among the outputs, the list opens */
    st_output_ids_free(&ids);
    err = (st_error){0};
    assert_int_equal(st_images_open(&s, "long.txt", NULL, 0, 2, &o, &err), ST_OK);
    assert_int_equal(s->count, ENTRIES + 1);
    st_source_close(s);
}

/* ---- out of memory while decoding ---- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1 /* their allocators reserve terabytes: no address-space limit */
#else
#define SANITIZED 0
#endif

/* The process's VmSize in bytes. */
static size_t vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0)
            kb = (size_t)strtoull(line + 7, NULL, 10);
    if (f)
        fclose(f);
    return kb * 1024;
}

/* The address space limited to what the process has now and extra more. */
static void limit_address_space(size_t extra)
{
    struct rlimit r = {vm_size() + extra, RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &r) != 0) {
        perror("setrlimit");
        _exit(9);
    }
}

#define BIG 3000 /* a 3000 x 3000 RGB PNG: 27 MB of rows and 27 MB of pixels at once */

typedef struct oom_reader {
    const st_source *s;
    long index;
    pthread_barrier_t *warm, *go;
    st_status st;
    st_error err;
} oom_reader;

static void *oom_read(void *arg)
{
    oom_reader *r = arg;
    pthread_barrier_wait(r->warm);
    pthread_barrier_wait(r->go);
    unsigned char *pix = malloc(st_record_bytes(r->s));
    int label;
    r->st = pix ? r->s->ops->read(r->s, r->index, pix, &label, &r->err) : ST_ENOMEM;
    free(pix);
    return NULL;
}

/* The argument that makes this program run out_of_memory_cases alone. */
#define OOM_CHILD "--out-of-memory-cases"

/* In a child process (its address space limited): exit 0 when each case
 * behaves, else a case's number, its message on stderr. Blocks above 1 MB
 * are mapped and unmapped each time (glibc would otherwise raise its
 * threshold to the size of the first one freed and keep the next ones in
 * its heap, mapped when freed), and every thread allocates from the one
 * main arena (a thread's first malloc would otherwise reserve 64 to 128 MB
 * of address space for an arena of its own, at any moment under the
 * limit, failing a decode that had room), so the address space in use is
 * what the decodes hold. */
static int out_of_memory_cases(void)
{
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_ARENA_MAX, 1);
    st_shape sh = {3, 8, 8};
    unsigned char pix[3 * 8 * 8];
    st_error err = {0};
    /* 1. room for no decode of it at all: out of memory, naming it */
    limit_address_space((size_t)30 << 20);
    st_status st = st_image_decode("big0.png", sh, pix, &err);
    if (st != ST_ENOMEM ||
        !strstr(err.msg, "big0.png: out of memory decoding this 3000 x 3000 image")) {
        fprintf(stderr, "big0.png: status %d: %s\n", st, err.msg);
        return 1;
    }
    /* 2. four readers of one list, room for one decode at a time (not two):
     * a read that fails for the others' memory decodes again alone */
    st_image_opts o = {.shape = sh};
    st_source *s = NULL;
    err = (st_error){0};
    limit_address_space((size_t)1 << 40);
    if (st_images_open(&s, "big.txt", NULL, 0, 2, &o, &err) != ST_OK) {
        fprintf(stderr, "big.txt: %s\n", err.msg);
        return 2;
    }
    pthread_barrier_t warm, go;
    pthread_barrier_init(&warm, NULL, 5);
    pthread_barrier_init(&go, NULL, 5);
    oom_reader r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (oom_reader){s, i, &warm, &go, ST_OK, {0}};
        pthread_create(&th[i], NULL, oom_read, &r[i]);
    }
    pthread_barrier_wait(&warm);
    limit_address_space((size_t)80 << 20);
    pthread_barrier_wait(&go);
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        if (r[i].st != ST_OK) {
            fprintf(stderr, "reader %d: status %d: %s\n", i, r[i].st, r[i].err.msg);
            bad = 1;
        }
    }
    st_source_close(s);
    if (bad)
        return 2;
    /* 3. a corrupt image with a well-formed header, memory to spare: corrupt */
    limit_address_space((size_t)1 << 40);
    err = (st_error){0};
    st = st_image_decode("corrupt.png", sh, pix, &err);
    if (st != ST_EINPUT || !strstr(err.msg, "corrupt.png: cannot decode image")) {
        fprintf(stderr, "corrupt.png: status %d: %s\n", st, err.msg);
        return 3;
    }
    return 0;
}

/* Out of memory while decoding was reported as a corrupt image (stb_image
 * left a stale failure reason, "no SOI", or the readers' decodes together
 * did not fit), and skipped as one under skip_bad: (1) a valid image that
 * cannot be decoded for memory is ST_ENOMEM saying so; (2) four readers of
 * one list with room for one decode at a time all succeed; (3) a corrupt
 * image with memory to spare is still corrupt. Not under the sanitizers. */
static void test_images_out_of_memory(void **state)
{
    (void)state;
    if (SANITIZED) {
        printf("SKIP out of memory while decoding: no address-space limit under a sanitizer\n");
        return;
    }
    FILE *list = fopen("big.txt", "w");
    assert_non_null(list);
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "big%d.png", i);
        assert_int_equal(tl_write_flat_png(name, BIG, BIG), 0);
        fprintf(list, "%s %d\n", name, i % 2);
    }
    fclose(list);
    /* corrupt.png: big0.png with its compressed rows overwritten past 1 kB */
    size_t len;
    unsigned char *bytes = tl_read_file("big0.png", &len);
    assert_true(len > 4096);
    memset(bytes + 1024, 0x55, 2048);
    tl_write_file("corrupt.png", bytes, len);
    free(bytes);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* a fresh process: no free blocks of the earlier tests to reuse */
        execl("/proc/self/exe", "test_readers", OOM_CHILD, (char *)NULL);
        _exit(8);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("case %d failed (%s %d; its message above)", WIFEXITED(status) ?
                 WEXITSTATUS(status) : 0, WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], OOM_CHILD) == 0)
        return out_of_memory_cases();
    const struct CMUnitTest tests[] = {
        tl_tmpdir_test(test_cifar_reads),
        tl_tmpdir_test(test_cifar_errors),
        tl_tmpdir_test(test_images_names),
        tl_tmpdir_test(test_images_path_label),
        tl_tmpdir_test(test_images_errors),
        tl_tmpdir_test(test_images_skip_bad),
        tl_tmpdir_test(test_concurrent_reads),
        tl_tmpdir_test(test_images_outputs_refused),
        tl_tmpdir_test(test_images_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
