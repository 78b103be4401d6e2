/* Darknet .weights files (darknet_weights.h), each test in its own
 * temporary directory: a save -> load round trip of a network with
 * [convolutional] + batch norm, [batchnorm], and [connected] with and
 * without batch norm (every tensor bitwise except the running variance,
 * which converts between the two batch-norm formulas and must come back
 * within one ulp and give the same forward pass); load -> save giving back
 * the same bytes; the byte layout of a tiny network read back as raw
 * header words and floats (Darknet's order, biases first); old headers
 * (int32 seen) and transposed connected weights; truncated, over-long and
 * missing files, [batchnorm] biases and other tensors Darknet cannot hold,
 * each with its status and message; and st_weights_load_any telling a
 * snapshot from a .weights file. */
#include "testlib.h"
#include "tmpdir.h"

#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "backends/backend.h"
#include "train/darknet_weights.h"
#include "base/rng.h"

/* Every kind of tensor the format holds. */
static const char *const NET_CFG =
    "[net]\nheight=6\nwidth=6\nchannels=3\n\n"
    "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\npad=1\n"
    "activation=leaky\n\n"
    "[batchnorm]\n\n"
    "[maxpool]\nsize=2\nstride=2\n\n"
    "[connected]\noutput=5\nbatch_normalize=1\nactivation=relu\n\n"
    "[connected]\noutput=3\nactivation=linear\n\n"
    "[softmax]\n";

/* Small enough to check every float: 2x2x1 input; conv (batch norm) 2
 * filters of 1x1; connected 8 -> 2; batchnorm over its 2 channels. */
static const char *const TINY_CFG =
    "[net]\nheight=2\nwidth=2\nchannels=1\n\n"
    "[convolutional]\nbatch_normalize=1\nfilters=2\nsize=1\nstride=1\nactivation=linear\n\n"
    "[connected]\noutput=2\nactivation=linear\n\n"
    "[batchnorm]\n\n"
    "[softmax]\n";

typedef struct built {
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    float *w; /* [net.params.count] */
} built;

static void build(built *b, const char *text)
{
    st_error err = {0};
    if (tl_build("test.cfg", text, &b->cfg, &b->hp, &b->net, &err) != ST_OK)
        fail_msg("building the test network: %s", err.msg);
    b->w = calloc(b->net.params.count, sizeof *b->w);
    assert_non_null(b->w);
}

static void unbuild(built *b)
{
    free(b->w);
    st_net_free(&b->net);
    st_cfg_free(&b->cfg);
}

static const st_param *param(const st_net *net, const char *name)
{
    for (int i = 0; i < net->params.n; i++)
        if (strcmp(net->params.p[i].name, name) == 0)
            return &net->params.p[i];
    fail_msg("no tensor %s", name);
    return NULL;
}

/* Random values for every tensor: variances in [0.05, 2.05), the
 * [batchnorm] layer's biases 0 (Darknet has no place for them). */
static void randomize(built *b, uint64_t seed)
{
    st_rng rng;
    st_rng_seed(&rng, seed, 7);
    for (int i = 0; i < b->net.params.n; i++) {
        const st_param *p = &b->net.params.p[i];
        const st_layer *l = b->net.layers[p->layer];
        int variance = strstr(p->name, "rolling_variance") != NULL;
        int bn_bias = l->ops == &st_batchnorm_ops && strstr(p->name, "biases") != NULL;
        for (size_t j = 0; j < p->count; j++)
            b->w[p->offset + j] = bn_bias    ? 0.0f
                                  : variance ? 0.05f + 2.0f * st_rng_uniform(&rng)
                                             : st_rng_normal(&rng);
    }
}

static long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static unsigned char *slurp(const char *path, long *size)
{
    *size = file_size(path);
    assert_true(*size >= 0);
    unsigned char *buf = malloc((size_t)*size + 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(buf);
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, (size_t)*size, f), (size_t)*size);
    fclose(f);
    return buf;
}

/* Distance in ulps of two finite floats of the same sign. */
static long ulps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return labs((long)ia - (long)ib);
}

/* The class scores of one fixed input on the ref backend. */
static void forward(const built *b, const float *w, float *scores)
{
    const st_backend *be;
    st_error err = {0};
    st_replica r;
    st_replica_opts o = {.n = 1, .backend = {.intra_threads = 1}};
    assert_int_equal(st_backend_find("ref", &be, &err), ST_OK);
    if (st_replica_init(&r, &b->net, be, &o, &err) != ST_OK)
        fail_msg("st_replica_init: %s", err.msg);
    size_t n_in = st_shape_count(b->net.input);
    float *x = malloc(n_in * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n_in; i++)
        x[i] = (float)((i * 37) % 11) / 11.0f;
    st_shard s = {.n = 1, .x = x};
    st_step_info info = {0};
    double loss = 0.0;
    if (st_replica_forward(&r, w, &s, &info, &loss, &err) != ST_OK)
        fail_msg("st_replica_forward: %s", err.msg);
    memcpy(scores, st_replica_output(&r, b->net.output_layer),
           (size_t)b->net.classes * sizeof *scores);
    free(x);
    st_replica_free(&r);
}

static void test_round_trip(void **state)
{
    (void)state;
    built b;
    build(&b, NET_CFG);
    randomize(&b, 11);
    st_error err = {0};
    size_t floats = 0;
    assert_int_equal(st_darknet_weights_floats(&b.net, &floats, &err), ST_OK);
    /* conv 4 + 12 + 4*3*9; batchnorm 12; connected 5 + 5*36 + 15; connected 3 + 15 */
    assert_int_equal(floats, 4 + 12 + 108 + 12 + 5 + 180 + 15 + 3 + 15);
    if (st_darknet_weights_save("a.weights", &b.net, b.w, 123456789012ull, &err) != ST_OK)
        fail_msg("save: %s", err.msg);
    assert_int_equal(file_size("a.weights"), ST_DARKNET_HEADER_BYTES + 4 * (long)floats);

    float *back = malloc(b.net.params.count * sizeof *back);
    assert_non_null(back);
    for (size_t i = 0; i < b.net.params.count; i++)
        back[i] = NAN;
    uint64_t seen = 0;
    if (st_darknet_weights_load("a.weights", &b.net, back, &seen, &err) != ST_OK)
        fail_msg("load: %s", err.msg);
    assert_int_equal(seen, 123456789012ull);
    for (int i = 0; i < b.net.params.n; i++) {
        const st_param *p = &b.net.params.p[i];
        int variance = strstr(p->name, "rolling_variance") != NULL;
        for (size_t j = 0; j < p->count; j++) {
            float want = b.w[p->offset + j], got = back[p->offset + j];
            if (variance ? ulps(want, got) > 1 : memcmp(&want, &got, sizeof want) != 0)
                fail_msg("%s[%zu]: saved %.9g, loaded %.9g", p->name, j, (double)want,
                         (double)got);
        }
    }
    float s1[3], s2[3];
    forward(&b, b.w, s1);
    forward(&b, back, s2);
    for (int c = 0; c < 3; c++)
        if (fabsf(s1[c] - s2[c]) > 1e-6f)
            fail_msg("class %d: %.9g before the round trip, %.9g after", c, (double)s1[c],
                     (double)s2[c]);

    /* Darknet's variances survive load -> save bitwise: the same bytes. */
    if (st_darknet_weights_save("b.weights", &b.net, back, seen, &err) != ST_OK)
        fail_msg("save again: %s", err.msg);
    long na, nb;
    unsigned char *a = slurp("a.weights", &na), *bb = slurp("b.weights", &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, bb, (size_t)na);
    free(a);
    free(bb);
    free(back);
    unbuild(&b);
}

static void test_byte_layout(void **state)
{
    (void)state;
    built b;
    build(&b, TINY_CFG);
    /* tensor k gets 100 k + index, in the order the table registered them */
    for (int k = 0; k < b.net.params.n; k++) {
        const st_param *p = &b.net.params.p[k];
        for (size_t j = 0; j < p->count; j++)
            b.w[p->offset + j] = (float)(100 * (k + 1) + (int)j);
    }
    const st_param *bnb = param(&b.net, "2.biases");
    memset(b.w + bnb->offset, 0, bnb->count * sizeof(float));
    st_error err = {0};
    if (st_darknet_weights_save("t.weights", &b.net, b.w, 42, &err) != ST_OK)
        fail_msg("save: %s", err.msg);
    long size;
    unsigned char *raw = slurp("t.weights", &size);
    /* header 20; conv 2 + 2 + 2 + 2 + 2; connected 2 + 16; batchnorm 2 + 2 + 2 */
    assert_int_equal(size, 20 + 4 * (10 + 18 + 6));
    int32_t head[3];
    uint64_t seen;
    memcpy(head, raw, sizeof head);
    memcpy(&seen, raw + 12, sizeof seen);
    assert_int_equal(head[0], 0);
    assert_int_equal(head[1], 2);
    assert_int_equal(head[2], 0);
    assert_int_equal(seen, 42);
    const float *f = (const float *)(raw + 20);
    static const char *const order[] = {
        "0.biases", "0.scales", "0.rolling_mean", "0.rolling_variance", "0.weights",
        "1.biases", "1.weights",
        "2.scales", "2.rolling_mean", "2.rolling_variance",
    };
    size_t at = 0;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        const st_param *p = param(&b.net, order[k]);
        for (size_t j = 0; j < p->count; j++, at++) {
            float v = b.w[p->offset + j], d = f[at];
            if (strstr(order[k], "rolling_variance")) {
                /* Darknet's divisor sqrt(d) + 1e-6 equals singletrain's sqrt(v + 1e-5) */
                double ours = sqrt((double)v + 1e-5), theirs = sqrt((double)d) + 1e-6;
                if (fabs(ours - theirs) > 1e-6 * ours)
                    fail_msg("%s[%zu] = %g is stored as %g: divisors %.9g and %.9g differ",
                             order[k], j, (double)v, (double)d, ours, theirs);
            } else if (d != v) {
                fail_msg("float %zu of the file: %g, expected %s[%zu] = %g", at, (double)d,
                         order[k], j, (double)v);
            }
        }
    }
    assert_int_equal(at, 34);
    free(raw);
    unbuild(&b);
}

/* A file with Darknet's older header (int32 seen), and one whose major
 * above 1000 marks connected weights stored [inputs][outputs]. */
static void test_old_headers(void **state)
{
    (void)state;
    built b;
    build(&b, TINY_CFG);
    const st_param *fcw = param(&b.net, "1.weights");
    float body[34];
    for (int i = 0; i < 34; i++)
        body[i] = (float)(i + 1);
    for (int t = 0; t < 2; t++) {
        int32_t head[4] = {t ? 1001 : 0, 1, 0, 77}; /* major, minor, revision, int32 seen */
        FILE *fp = fopen("old.weights", "wb");
        assert_non_null(fp);
        assert_int_equal(fwrite(head, sizeof head, 1, fp), 1);
        assert_int_equal(fwrite(body, sizeof body, 1, fp), 1);
        assert_int_equal(fclose(fp), 0);
        st_error err = {0};
        uint64_t seen = 0;
        if (st_darknet_weights_load("old.weights", &b.net, b.w, &seen, &err) != ST_OK)
            fail_msg("load (major %d): %s", head[0], err.msg);
        assert_int_equal(seen, 77);
        assert_true(b.w[param(&b.net, "0.biases")->offset] == 1.0f);
        /* connected weights are floats 13..28 of the body: [2][8], or [8][2] */
        for (int o = 0; o < 2; o++)
            for (int i = 0; i < 8; i++) {
                float want = t ? body[12 + i * 2 + o] : body[12 + o * 8 + i];
                assert_true(b.w[fcw->offset + (size_t)(o * 8 + i)] == want);
            }
    }
    unbuild(&b);
}

static void expect_load_error(const built *b, const char *path, const char *needle1,
                              const char *needle2)
{
    st_error err = {0};
    float *w = calloc(b->net.params.count, sizeof *w);
    assert_non_null(w);
    assert_int_equal(st_darknet_weights_load(path, &b->net, w, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, path);
    tl_assert_contains(err.msg, needle1);
    if (needle2)
        tl_assert_contains(err.msg, needle2);
    free(w);
}

static void test_bad_files(void **state)
{
    (void)state;
    built b;
    build(&b, NET_CFG);
    randomize(&b, 5);
    st_error err = {0};
    if (st_darknet_weights_save("good.weights", &b.net, b.w, 1, &err) != ST_OK)
        fail_msg("save: %s", err.msg);
    long size;
    unsigned char *raw = slurp("good.weights", &size);

    tl_write_file("short.weights", raw, 10);
    expect_load_error(&b, "short.weights", "truncated .weights file: 10 bytes",
                      "shorter than Darknet's header");
    /* 20 + 4 * (136 floats of layers 0 and 1 + 7): inside layer 3, the first [connected] */
    long cut = 20 + 4 * (136 + 7);
    tl_write_file("cut.weights", raw, (size_t)cut);
    char want[128];
    snprintf(want, sizeof want, "%ld bytes, but this network needs %ld", cut, size);
    expect_load_error(&b, "cut.weights", want, "it ends in layer 3 [connected] (cfg line 20)");
    tl_write_file("cut.weights", raw, (size_t)size - 1);
    expect_load_error(&b, "cut.weights", "ends in layer 4 [connected] (cfg line 25)", NULL);

    unsigned char *longer = malloc((size_t)size + 12);
    assert_non_null(longer);
    memcpy(longer, raw, (size_t)size);
    memset(longer + size, 0, 12);
    tl_write_file("long.weights", longer, (size_t)size + 12);
    snprintf(want, sizeof want, "%ld bytes, but this network's take %ld", size + 12, size);
    expect_load_error(&b, "long.weights", want, "12 bytes are left over");
    expect_load_error(&b, "missing.weights", "cannot open weights", NULL);

    /* Darknet has no place for a [batchnorm] layer's biases: not zero, no file */
    b.w[param(&b.net, "1.biases")->offset + 2] = 0.5f;
    st_error e2 = {0};
    assert_int_equal(st_darknet_weights_save("bn.weights", &b.net, b.w, 1, &e2), ST_EINPUT);
    tl_assert_contains(e2.msg, "bn.weights: layer 1 [batchnorm] (cfg line 14): 1.biases[2] = 0.5");
    assert_true(file_size("bn.weights") < 0);
    free(longer);
    free(raw);
    unbuild(&b);
}

/* A tensor the format has no place for (none of singletrain's layers has
 * one today; a future layer type would): an error naming the layer, for
 * saving and for loading. */
static void test_foreign_tensor(void **state)
{
    (void)state;
    built b;
    build(&b, TINY_CFG);
    st_error err = {0};
    int id;
    assert_int_equal(st_params_add(&b.net.params, 3, "weights", 4, ST_PARAM_WEIGHT,
                                   ST_INIT_ZERO, 0.0f, &id, &err), ST_OK);
    float *w = calloc(b.net.params.count, sizeof *w);
    assert_non_null(w);
    size_t floats = 1;
    assert_int_equal(st_darknet_weights_floats(&b.net, &floats, &err), ST_EINPUT);
    assert_int_equal(floats, 0);
    tl_assert_contains(err.msg, "layer 3 [softmax] (cfg line 19) has the learnable tensor "
                       "3.weights, which Darknet's .weights format has no place for");
    st_error e2 = {0};
    assert_int_equal(st_darknet_weights_save("f.weights", &b.net, w, 0, &e2), ST_EINPUT);
    tl_assert_contains(e2.msg, "f.weights: layer 3 [softmax]");
    assert_true(file_size("f.weights") < 0);
    st_error e3 = {0};
    assert_int_equal(st_darknet_weights_load("f.weights", &b.net, w, NULL, &e3), ST_EINPUT);
    tl_assert_contains(e3.msg, "f.weights: layer 3 [softmax]");
    free(w);
    unbuild(&b);
}

static void test_load_any(void **state)
{
    (void)state;
    built b;
    build(&b, TINY_CFG);
    randomize(&b, 3);
    st_error err = {0};
    if (st_darknet_weights_save("x.weights", &b.net, b.w, 9, &err) != ST_OK)
        fail_msg("save: %s", err.msg);
    float *w = calloc(b.net.params.count, sizeof *w);
    assert_non_null(w);
    assert_int_equal(st_weights_load_any("x.weights", &b.net, w, &err), ST_OK);
    assert_true(w[param(&b.net, "1.weights")->offset + 5] ==
                b.w[param(&b.net, "1.weights")->offset + 5]);
    /* the snapshot magic sends the file to the snapshot reader */
    tl_write_file("x.snap", "STSNAPSH\1\0", 10);
    assert_int_equal(st_weights_load_any("x.snap", &b.net, w, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "x.snap: ");
    tl_assert_contains(err.msg, "snapshot");
    st_error e2 = {0};
    assert_int_equal(st_weights_load_any("none.weights", &b.net, w, &e2), ST_EINPUT);
    tl_assert_contains(e2.msg, "none.weights: cannot open weights");
    free(w);
    unbuild(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        tl_tmpdir_test(test_round_trip),
        tl_tmpdir_test(test_byte_layout),
        tl_tmpdir_test(test_old_headers),
        tl_tmpdir_test(test_bad_files),
        tl_tmpdir_test(test_foreign_tensor),
        tl_tmpdir_test(test_load_any),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
