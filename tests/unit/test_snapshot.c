/* The snapshot format (snapshot.h), on a small network, each test in its
 * own temporary directory: every single-bit flip of a snapshot, in each
 * header field, the settings and the payload, is refused by both readers
 * (weights alone and resume), the unflipped file read back exactly; the
 * settings tell another cfg from the same one written differently, and
 * name the first difference; non-finite weights or state are neither
 * written nor read; the kernel choices a snapshot keeps come back as they
 * were, under the header's checksum; so does the record of the test
 * phases (test-driven stopping), with or without choices, a snapshot
 * without one reading as none and one that does not hold refused; and the
 * rank count of a multi-rank run, a run of one writing none. */
#include "testlib.h"
#include "tmpdir.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <zlib.h>

#include "train/snapshot.h"

/* Conv + batch norm (running statistics), max pooling, connected. */
static const char *const CFG =
    "[net]\nbatch=4\nheight=6\nwidth=6\nchannels=1\nlearning_rate=0.01\nmomentum=0.9\n"
    "decay=0.0005\npolicy=steps\nsteps=100,200\nscales=.1,.1\n\n"
    "[convolutional]\nbatch_normalize=1\nfilters=2\nsize=3\nstride=1\npad=1\n"
    "activation=leaky\n\n"
    "[maxpool]\nsize=2\nstride=2\n\n"
    "[connected]\noutput=3\nactivation=linear\n\n"
    "[softmax]\n";

/* The header's fields: name, offset, bytes (snapshot.c's layout). */
static const struct {
    const char *name;
    int offset, bytes;
} FIELDS[] = {
    {"magic", 0, 8},       {"version", 8, 4},      {"header bytes", 12, 4},
    {"network hash", 16, 8}, {"iteration", 24, 8}, {"float count", 32, 8},
    {"seed", 40, 8},       {"batch", 48, 4},       {"workers", 52, 4},
    {"state planes", 56, 4}, {"settings bytes", 60, 4}, {"solver", 64, 16},
    {"payload CRC", 80, 4}, {"header CRC", 84, 4},
};
#define HEADER_BYTES 88

typedef struct fixture {
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    char *settings;
    size_t settings_bytes, count;
    float *w, *state; /* [count], [count] */
} fixture;

static void fixture_open(fixture *f, const char *text)
{
    memset(f, 0, sizeof *f);
    st_error err = {0};
    if (tl_build("net.cfg", text, &f->cfg, &f->hp, &f->net, &err) != ST_OK)
        fail_msg("building the network: %s", err.msg);
    if (st_hparams_settings(&f->cfg, &f->settings, &f->settings_bytes, &err) != ST_OK)
        fail_msg("%s", err.msg);
    f->count = f->net.params.count;
    f->w = calloc(f->count, sizeof *f->w);
    f->state = calloc(f->count, sizeof *f->state);
    assert_non_null(f->w);
    assert_non_null(f->state);
    st_params_init(&f->net.params, f->w, 5);
    for (size_t i = 0; i < f->count; i++)
        f->state[i] = 0.001f * (float)i - 0.1f;
}

static void fixture_close(fixture *f)
{
    free(f->w);
    free(f->state);
    free(f->settings);
    st_net_free(&f->net);
    st_cfg_free(&f->cfg);
}

static st_snapshot_meta meta_of(const fixture *f)
{
    st_snapshot_meta m = {.iteration = 1234, .seed = 99, .batch = 4, .workers = 2,
                          .state_planes = 1, .solver = "sgd", .settings = f->settings};
    return m;
}

/* f saved as path: the file's bytes (malloc'd), *len of them. */
static unsigned char *save_and_read(const fixture *f, const char *path, size_t *len)
{
    st_snapshot_meta m = meta_of(f);
    st_error err = {0};
    if (st_snapshot_save(path, &f->net, f->w, f->state, &m, &err) != ST_OK)
        fail_msg("saving %s: %s", path, err.msg);
    return tl_read_file(path, len);
}

/* Whether both readers refuse path; err gets the resume's message. */
static int refused(const fixture *f, const char *path, st_error *err)
{
    float *w = calloc(f->count, sizeof *w), *state = calloc(f->count, sizeof *state);
    assert_non_null(w);
    assert_non_null(state);
    st_error load_err = {0};
    st_snapshot_meta m = {.settings = NULL};
    st_status a = st_snapshot_load(path, &f->net, w, NULL, &load_err);
    st_status b = st_snapshot_resume(path, &f->net, w, state, 1, &m, err);
    free(m.settings);
    free(w);
    free(state);
    return a != ST_OK && b != ST_OK;
}

/* Every bit of the file flipped, one at a time: each refused. */
static void test_every_bit_flip_refused(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, CFG);
    st_error err = {0};
    size_t len;
    unsigned char *bytes = save_and_read(&f, "a.snap", &len);
    assert_int_equal(len, HEADER_BYTES + f.settings_bytes + 2 * f.count * sizeof(float));

    /* the unflipped file reads back exactly */
    float *w = calloc(f.count, sizeof *w), *back = calloc(f.count, sizeof *back);
    st_snapshot_meta got = {.settings = NULL};
    assert_int_equal(st_snapshot_resume("a.snap", &f.net, w, back, 1, &got, &err), ST_OK);
    assert_memory_equal(w, f.w, f.count * sizeof *w);
    assert_memory_equal(back, f.state, f.count * sizeof *back);
    assert_int_equal(got.iteration, 1234);
    assert_int_equal(got.seed, 99);
    assert_int_equal(got.batch, 4);
    assert_int_equal(got.workers, 2);
    assert_string_equal(got.solver, "sgd");
    assert_string_equal(got.settings, f.settings);
    free(got.settings);

    size_t flips = 0, refusals = 0;
    size_t field_flips[sizeof FIELDS / sizeof FIELDS[0]] = {0};
    /* b.snap: a copy, one byte of it changed in place at a time */
    tl_write_file("b.snap", bytes, len);
    int fd = open("b.snap", O_WRONLY);
    assert_true(fd >= 0);
    for (size_t at = 0; at < len; at++)
        for (int bit = 0; bit < 8; bit++) {
            unsigned char flipped = bytes[at] ^ (unsigned char)(1u << bit);
            assert_int_equal(pwrite(fd, &flipped, 1, (off_t)at), 1);
            st_error e = {0};
            flips++;
            if (!refused(&f, "b.snap", &e))
                fail_msg("a flip of bit %d of byte %zu was accepted", bit, at);
            refusals++;
            for (size_t k = 0; k < sizeof FIELDS / sizeof FIELDS[0]; k++)
                if ((int)at >= FIELDS[k].offset && (int)at < FIELDS[k].offset + FIELDS[k].bytes)
                    field_flips[k]++;
            assert_int_equal(pwrite(fd, &bytes[at], 1, (off_t)at), 1);
        }
    close(fd);
    for (size_t k = 0; k < sizeof FIELDS / sizeof FIELDS[0]; k++)
        assert_int_equal(field_flips[k], 8 * (size_t)FIELDS[k].bytes);
    print_message("%zu of %zu single-bit flips refused: %d in the header (every field), %zu in "
                  "the settings, %zu in the payload\n", refusals, flips, 8 * HEADER_BYTES,
                  8 * f.settings_bytes, 8 * 2 * f.count * sizeof(float));
    free(w);
    free(back);
    free(bytes);
    fixture_close(&f);
}

/* Flips named: which message each field's flip gives. */
static void test_field_messages(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, CFG);
    size_t len;
    unsigned char *bytes = save_and_read(&f, "a.snap", &len);
    const struct {
        int offset;
        const char *message;
    } cases[] = {
        {0, "bad magic"},
        {8, "snapshot format version 2, expected 3 (written by an older singletrain)"},
        {24, "snapshot header checksum mismatch"}, /* iteration */
        {40, "snapshot header checksum mismatch"}, /* seed */
        {52, "snapshot header checksum mismatch"}, /* workers */
        {63, "corrupt snapshot header (settings of"}, /* settings bytes, high byte */
        {HEADER_BYTES + 3, "snapshot header checksum mismatch"}, /* settings */
        {(int)len - 1, "snapshot checksum mismatch"},             /* last state float */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int at = cases[k].offset;
        unsigned char mask = at == 8 ? 0x01 : 0x10; /* version 3 -> 2 */
        bytes[at] ^= mask;
        tl_write_file("b.snap", bytes, len);
        bytes[at] ^= mask;
        st_error e = {0};
        assert_true(refused(&f, "b.snap", &e));
        tl_assert_contains(e.msg, cases[k].message);
    }
    free(bytes);
    fixture_close(&f);
}

/* The settings: the same cfg written differently compares equal; another
 * value, an added key, a removed key, a layer's key are named. */
static void test_settings_name_the_difference(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, CFG);
    static const struct {
        const char *from, *to, *message;
    } cases[] = {
        /* the same settings: comments, spaces, key order, batch, data */
        {"momentum=0.9\n", "momentum = 0.9   # the default\n", NULL},
        {"learning_rate=0.01\nmomentum=0.9\n", "momentum=0.9\nlearning_rate=0.01\n", NULL},
        {"batch=4\n", "batch=64\nmax_batches=5000\ntrain=x.idx\n", NULL},
        /* other settings */
        {"momentum=0.9\n", "momentum=0.95\n",
         "net.cfg:7: [net] momentum=0.95, but the snapshot has momentum=0.9"},
        {"decay=0.0005\n", "decay=0.0005\nburn_in=10\n",
         "net.cfg:9: [net] burn_in=10, but the snapshot has no burn_in="},
        {"decay=0.0005\n", "",
         "net.cfg:1: [net] has no decay=, but the snapshot has decay=0.0005"},
        {"scales=.1,.1\n", "scales=.1,.5\n",
         "net.cfg:11: [net] scales=.1,.5, but the snapshot has scales=.1,.1"},
        {"activation=leaky\n", "activation=relu\n",
         "[convolutional] activation=relu, but the snapshot has activation=leaky"},
        {"[maxpool]\nsize=2\nstride=2\n", "[maxpool]\nsize=2\n",
         "[maxpool] has no stride=, but the snapshot has stride=2"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[2048];
        const char *at = strstr(CFG, cases[k].from);
        assert_non_null(at);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - CFG), CFG, cases[k].to,
                 at + strlen(cases[k].from));
        fixture g;
        fixture_open(&g, text);
        char msg[512] = "";
        int differ = st_hparams_settings_differ(&g.cfg, f.settings, f.settings_bytes,
                                                "the snapshot", msg, sizeof msg);
        if (!cases[k].message && differ)
            fail_msg("case %zu: the same settings compared different: %s", k, msg);
        if (cases[k].message && !differ)
            fail_msg("case %zu: other settings compared the same", k);
        if (cases[k].message)
            tl_assert_contains(msg, cases[k].message);
        fixture_close(&g);
    }
    fixture_close(&f);
}

/* A checksum over bytes, as the writer computes it. */
static uint32_t crc_of(const unsigned char *p, size_t n)
{
    return (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)n);
}

/* Non-finite weights are not written; a file holding them (its checksums
 * made right) is not read, nor one holding a negative running variance. */
static void test_nonfinite_refused(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, CFG);
    st_snapshot_meta m = meta_of(&f);
    st_error err = {0};
    const st_param *p = &f.net.params.p[f.net.params.n - 1]; /* 2.biases or weights */
    f.w[p->offset + 1] = NAN;
    assert_int_equal(st_snapshot_save("nan.snap", &f.net, f.w, f.state, &m, &err),
                     ST_EDIVERGED);
    tl_assert_contains(err.msg, "nan.snap: not saved: layer 2 [connected]");
    assert_int_equal(access("nan.snap", F_OK), -1);
    f.w[p->offset + 1] = 0.5f;
    f.state[3] = INFINITY;
    st_error_clear(&err);
    assert_int_equal(st_snapshot_save("inf.snap", &f.net, f.w, f.state, &m, &err),
                     ST_EDIVERGED);
    tl_assert_contains(err.msg, "in plane 0 of the solver state");
    f.state[3] = 0.0f;

    /* a NaN weight behind right checksums */
    size_t len;
    unsigned char *bytes = save_and_read(&f, "a.snap", &len);
    size_t payload = HEADER_BYTES + f.settings_bytes;
    float nan = NAN;
    memcpy(bytes + payload + (p->offset + 1) * sizeof(float), &nan, sizeof nan);
    uint32_t crc = crc_of(bytes + payload, len - payload);
    memcpy(bytes + 80, &crc, sizeof crc);
    uint32_t hcrc = crc32(crc_of(bytes, 84), bytes + HEADER_BYTES, (uInt)f.settings_bytes);
    memcpy(bytes + 84, &hcrc, sizeof hcrc);
    tl_write_file("b.snap", bytes, len);
    float *w = calloc(f.count, sizeof *w);
    st_error_clear(&err);
    assert_int_equal(st_snapshot_load("b.snap", &f.net, w, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "b.snap: layer 2 [connected] (cfg line");
    tl_assert_contains(err.msg, "[1] is nan: expected finite weights");

    /* a negative running variance behind right checksums (issue 36) */
    const st_param *var = NULL;
    for (int i = 0; i < f.net.params.n && !var; i++)
        if (strcmp(f.net.params.p[i].name, "0.rolling_variance") == 0)
            var = &f.net.params.p[i];
    assert_non_null(var);
    free(bytes);
    bytes = save_and_read(&f, "c.snap", &len);
    float negative = -0.25f;
    memcpy(bytes + payload + (var->offset + 1) * sizeof(float), &negative, sizeof negative);
    crc = crc_of(bytes + payload, len - payload);
    memcpy(bytes + 80, &crc, sizeof crc);
    hcrc = crc32(crc_of(bytes, 84), bytes + HEADER_BYTES, (uInt)f.settings_bytes);
    memcpy(bytes + 84, &hcrc, sizeof hcrc);
    tl_write_file("d.snap", bytes, len);
    st_error_clear(&err);
    assert_int_equal(st_snapshot_load("d.snap", &f.net, w, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "d.snap: layer 0 [convolutional] (cfg line");
    tl_assert_contains(err.msg, "0.rolling_variance[1] is -0.25: expected a running variance "
                       "of at least 0");
    free(w);
    free(bytes);
    fixture_close(&f);
}

/* The kernel choices ride after the settings and a NUL: read back exactly,
 * absent when none were given, and every bit of them checked. */
static void test_choices_kept(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, CFG);
    static const char choices[] =
        "0.conv n2 1x6x6>2x6x6 k3x3 s1x1 p1x1 g1 fwd+bwd_weights = nhwc brgconv:avx512_core - "
        "jit:avx512_core\n";
    st_snapshot_meta m = meta_of(&f);
    m.choices = (char *)choices;
    st_error err = {0};
    if (st_snapshot_save("c.snap", &f.net, f.w, f.state, &m, &err) != ST_OK)
        fail_msg("%s", err.msg);
    float *w = calloc(f.count, sizeof *w), *st = calloc(f.count, sizeof *st);
    assert_non_null(w);
    assert_non_null(st);
    st_snapshot_meta back = {.settings = NULL};
    if (st_snapshot_resume("c.snap", &f.net, w, st, 1, &back, &err) != ST_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(back.settings, f.settings);
    assert_non_null(back.choices);
    assert_string_equal(back.choices, choices);
    free(back.settings);
    /* the header counts settings, NUL and choices */
    size_t len;
    unsigned char *bytes = tl_read_file("c.snap", &len);
    uint32_t settings_bytes;
    memcpy(&settings_bytes, bytes + 60, sizeof settings_bytes);
    assert_int_equal(settings_bytes, f.settings_bytes + 1 + strlen(choices));
    for (size_t at = HEADER_BYTES + f.settings_bytes; at < HEADER_BYTES + settings_bytes;
         at++) {
        bytes[at] ^= 0x10;
        tl_write_file("flip.snap", bytes, len);
        st_error_clear(&err);
        if (!refused(&f, "flip.snap", &err))
            fail_msg("a flipped bit at byte %zu (in the kernel choices) was read", at);
        tl_assert_contains(err.msg, "checksum mismatch");
        bytes[at] ^= 0x10;
    }
    free(bytes);
    /* none given: none read */
    m.choices = NULL;
    if (st_snapshot_save("n.snap", &f.net, f.w, f.state, &m, &err) != ST_OK)
        fail_msg("%s", err.msg);
    back = (st_snapshot_meta){.settings = NULL};
    if (st_snapshot_resume("n.snap", &f.net, w, st, 1, &back, &err) != ST_OK)
        fail_msg("%s", err.msg);
    assert_null(back.choices);
    free(back.settings);
    free(w);
    free(st);
    fixture_close(&f);
}

/* The test record rides after the choices' section (empty when there are
 * none): read back exactly, the choices unchanged; none written, none
 * read; a record that cannot be (more phases since the best than phases)
 * refused naming it. */
static void test_test_record_kept(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, CFG);
    static const char choices[] = "0.conv n2 1x6x6>2x6x6 k3x3 s1x1 p1x1 g1 fwd = nhwc\n";
    const st_test_record record = {.phases = 7, .best_accuracy = 0.987654321987654321,
                                   .best_iteration = 600, .since_best = 2};
    float *w = calloc(f.count, sizeof *w), *st = calloc(f.count, sizeof *st);
    assert_non_null(w);
    assert_non_null(st);
    for (int with_choices = 0; with_choices < 2; with_choices++) {
        st_snapshot_meta m = meta_of(&f);
        m.choices = with_choices ? (char *)choices : NULL;
        m.tests = record;
        st_error err = {0};
        if (st_snapshot_save("t.snap", &f.net, f.w, f.state, &m, &err) != ST_OK)
            fail_msg("%s", err.msg);
        st_snapshot_meta back = {.settings = NULL};
        if (st_snapshot_resume("t.snap", &f.net, w, st, 1, &back, &err) != ST_OK)
            fail_msg("%s", err.msg);
        assert_string_equal(back.settings, f.settings);
        if (with_choices)
            assert_string_equal(back.choices, choices);
        else
            assert_null(back.choices);
        assert_int_equal(back.tests.phases, record.phases);
        assert_true(back.tests.best_accuracy == record.best_accuracy); /* exactly */
        assert_int_equal(back.tests.best_iteration, record.best_iteration);
        assert_int_equal(back.tests.since_best, record.since_best);
        free(back.settings);
        if (st_snapshot_load("t.snap", &f.net, w, NULL, &err) != ST_OK) /* weights alone */
            fail_msg("%s", err.msg);
    }
    /* none: none read (as from a snapshot written before the record) */
    st_snapshot_meta m = meta_of(&f);
    st_error err = {0};
    if (st_snapshot_save("n.snap", &f.net, f.w, f.state, &m, &err) != ST_OK)
        fail_msg("%s", err.msg);
    st_snapshot_meta back = {.settings = NULL};
    back.tests.phases = 99;
    if (st_snapshot_resume("n.snap", &f.net, w, st, 1, &back, &err) != ST_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(back.tests.phases, 0);
    free(back.settings);
    size_t len;
    unsigned char *bytes = tl_read_file("n.snap", &len);
    assert_int_equal(len, HEADER_BYTES + f.settings_bytes + 2 * f.count * sizeof(float));
    free(bytes);
    /* one that does not hold */
    m.tests = record;
    m.tests.since_best = m.tests.phases;
    if (st_snapshot_save("bad.snap", &f.net, f.w, f.state, &m, &err) != ST_OK)
        fail_msg("%s", err.msg);
    back = (st_snapshot_meta){.settings = NULL};
    assert_int_equal(st_snapshot_resume("bad.snap", &f.net, w, st, 1, &back, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "bad.snap: corrupt snapshot header (test record 'test_phases=7");
    assert_null(back.settings);
    free(w);
    free(st);
    fixture_close(&f);
}

/* The rank count of a multi-rank run rides after the test record (empty
 * when there is none): read back with and without choices and a record,
 * the rest unchanged; a run of one process writes none (the file as it
 * was) and reads back 1; a count below 2 in the file is refused. */
static void test_ranks_kept(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, CFG);
    static const char choices[] = "0.conv n2 1x6x6>2x6x6 k3x3 s1x1 p1x1 g1 fwd = nhwc\n";
    const st_test_record record = {.phases = 3, .best_accuracy = 0.5, .best_iteration = 20,
                                   .since_best = 1};
    float *w = calloc(f.count, sizeof *w), *st = calloc(f.count, sizeof *st);
    assert_non_null(w);
    assert_non_null(st);
    st_error err = {0};
    for (int with = 0; with < 4; with++) {
        st_snapshot_meta m = meta_of(&f);
        m.choices = with & 1 ? (char *)choices : NULL;
        if (with & 2)
            m.tests = record;
        m.ranks = 3;
        if (st_snapshot_save("r.snap", &f.net, f.w, f.state, &m, &err) != ST_OK)
            fail_msg("%s", err.msg);
        st_snapshot_meta back = {.settings = NULL};
        if (st_snapshot_resume("r.snap", &f.net, w, st, 1, &back, &err) != ST_OK)
            fail_msg("choices %d, test record %d: %s", with & 1, with >> 1, err.msg);
        assert_int_equal(back.ranks, 3);
        assert_string_equal(back.settings, f.settings);
        if (with & 1)
            assert_string_equal(back.choices, choices);
        else
            assert_null(back.choices);
        assert_int_equal(back.tests.phases, with & 2 ? record.phases : 0);
        assert_int_equal(back.iteration, 1234);
        free(back.settings);
    }
    st_snapshot_meta m = meta_of(&f);
    m.ranks = 1;
    if (st_snapshot_save("one.snap", &f.net, f.w, f.state, &m, &err) != ST_OK)
        fail_msg("%s", err.msg);
    size_t len;
    unsigned char *bytes = tl_read_file("one.snap", &len);
    assert_int_equal(len, HEADER_BYTES + f.settings_bytes + 2 * f.count * sizeof(float));
    free(bytes);
    st_snapshot_meta back = {.settings = NULL};
    if (st_snapshot_resume("one.snap", &f.net, w, st, 1, &back, &err) != ST_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(back.ranks, 1);
    free(back.settings);
    /* "ranks=2" made "ranks=1", the header's checksum redone: a count of 1
     * is never written, so the file is corrupt */
    m.ranks = 2;
    if (st_snapshot_save("bad.snap", &f.net, f.w, f.state, &m, &err) != ST_OK)
        fail_msg("%s", err.msg);
    bytes = tl_read_file("bad.snap", &len);
    uint32_t settings_bytes;
    memcpy(&settings_bytes, bytes + 60, 4);
    unsigned char *digit = bytes + HEADER_BYTES + settings_bytes - 1;
    assert_int_equal(*digit, '2');
    *digit = '1';
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), bytes, 84);
    crc = (uint32_t)crc32(crc, bytes + HEADER_BYTES, settings_bytes);
    memcpy(bytes + 84, &crc, 4);
    tl_write_file("bad.snap", bytes, len);
    free(bytes);
    back = (st_snapshot_meta){.settings = NULL};
    assert_int_equal(st_snapshot_resume("bad.snap", &f.net, w, st, 1, &back, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "bad.snap: corrupt snapshot header (run record 'ranks=1'");
    free(w);
    free(st);
    fixture_close(&f);
}

/* The precision rides in the run record, after the rank count: read back
 * with one process and several, with and without a test record; an fp32
 * run writes none (test_ranks_kept: one process's file as it was), and a
 * record naming fp32 (never written) is refused. */
static void test_precision_kept(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, CFG);
    const st_test_record record = {.phases = 2, .best_accuracy = 0.25, .best_iteration = 10,
                                   .since_best = 0};
    float *w = calloc(f.count, sizeof *w), *st = calloc(f.count, sizeof *st);
    assert_non_null(w);
    assert_non_null(st);
    st_error err = {0};
    for (int with = 0; with < 4; with++) {
        st_snapshot_meta m = meta_of(&f);
        m.ranks = with & 1 ? 4 : 1;
        if (with & 2)
            m.tests = record;
        m.precision = ST_PRECISION_BF16;
        if (st_snapshot_save("p.snap", &f.net, f.w, f.state, &m, &err) != ST_OK)
            fail_msg("%s", err.msg);
        st_snapshot_meta back = {.settings = NULL};
        if (st_snapshot_resume("p.snap", &f.net, w, st, 1, &back, &err) != ST_OK)
            fail_msg("ranks %d, test record %d: %s", m.ranks, with >> 1, err.msg);
        assert_int_equal(back.precision, ST_PRECISION_BF16);
        assert_int_equal(back.ranks, m.ranks);
        assert_int_equal(back.tests.phases, with & 2 ? record.phases : 0);
        assert_string_equal(back.settings, f.settings);
        free(back.settings);
    }
    /* "precision=bf16" made "precision=fp32", the header's checksum redone */
    st_snapshot_meta m = meta_of(&f);
    m.precision = ST_PRECISION_BF16;
    if (st_snapshot_save("bad.snap", &f.net, f.w, f.state, &m, &err) != ST_OK)
        fail_msg("%s", err.msg);
    size_t len;
    unsigned char *bytes = tl_read_file("bad.snap", &len);
    uint32_t settings_bytes;
    memcpy(&settings_bytes, bytes + 60, 4);
    unsigned char *name = bytes + HEADER_BYTES + settings_bytes - 4;
    assert_memory_equal(name, "bf16", 4);
    memcpy(name, "fp32", 4);
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), bytes, 84);
    crc = (uint32_t)crc32(crc, bytes + HEADER_BYTES, settings_bytes);
    memcpy(bytes + 84, &crc, 4);
    tl_write_file("bad.snap", bytes, len);
    free(bytes);
    st_snapshot_meta back = {.settings = NULL};
    assert_int_equal(st_snapshot_resume("bad.snap", &f.net, w, st, 1, &back, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "bad.snap: corrupt snapshot header (run record "
                                "'precision=fp32'");
    free(w);
    free(st);
    fixture_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        tl_tmpdir_test(test_choices_kept),
        tl_tmpdir_test(test_test_record_kept),
        tl_tmpdir_test(test_ranks_kept),
        tl_tmpdir_test(test_precision_kept),
        tl_tmpdir_test(test_every_bit_flip_refused),
        tl_tmpdir_test(test_field_messages),
        tl_tmpdir_test(test_settings_name_the_difference),
        tl_tmpdir_test(test_nonfinite_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
