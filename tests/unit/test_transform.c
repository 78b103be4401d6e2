/* The records-to-inputs transform (data/transform.c) against hand-computed
 * values: the plain copy with mean and scale; crop_pad=P, torchvision's
 * RandomCrop(size, padding=P): each training input is the record shifted by
 * (dy, dx) in [-P, P], the pixels shifted in from outside 0 (so
 * (0 - mean) * scale), every shift of that range reached over many samples
 * and no other, the same sample giving the same input, testing the record
 * itself; mirror with it; and the cfg's refusal of crop_pad without crop. */
#include "testlib.h"

#include <string.h>

#include "data/data.h"

enum { C = 2, H = 5, W = 6, P = 2 };

static st_transform transform_of(int crop, int pad, int mirror)
{
    st_transform t;
    memset(&t, 0, sizeof t);
    t.input = (st_shape){C, H, W};
    t.mean[0] = 3.0f;
    t.mean[1] = 5.0f;
    t.scale = 0.5f;
    t.crop = crop;
    t.crop_pad = pad;
    t.mirror = mirror;
    t.seed = 7;
    return t;
}

/* A record whose every pixel differs: 1 + c * 40 + y * 7 + x (none is 0). */
static void record(unsigned char *px)
{
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                px[(c * H + y) * W + x] = (unsigned char)(1 + c * 40 + y * 7 + x);
}

/* The input the record shifted by (dy, dx), mirrored or not, should give. */
static float expected(const unsigned char *px, int c, int y, int x, int dy, int dx, int flip)
{
    const float mean[C] = {3.0f, 5.0f};
    int sx = (flip ? W - 1 - x : x) + dx, sy = y + dy;
    unsigned char v = sy >= 0 && sy < H && sx >= 0 && sx < W ? px[(c * H + sy) * W + sx] : 0;
    return ((float)v - mean[c]) * 0.5f;
}

/* Which shift (dy, dx) in [-P, P]^2 and mirroring x is; 0 if none. */
static int shift_of(const unsigned char *px, const float *x, int *dy, int *dx, int *flip)
{
    for (*flip = 0; *flip < 2; (*flip)++)
        for (*dy = -P; *dy <= P; (*dy)++)
            for (*dx = -P; *dx <= P; (*dx)++) {
                int same = 1;
                for (int c = 0; c < C && same; c++)
                    for (int y = 0; y < H && same; y++)
                        for (int i = 0; i < W && same; i++)
                            same = x[(c * H + y) * W + i] == expected(px, c, y, i, *dy, *dx,
                                                                      *flip);
                if (same)
                    return 1;
            }
    return 0;
}

static void test_plain(void **state)
{
    (void)state;
    unsigned char px[C * H * W];
    float x[C * H * W];
    record(px);
    st_transform t = transform_of(0, 0, 0);
    st_transform_apply(&t, t.input, px, x, 1, 3);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int i = 0; i < W; i++)
                assert_true(x[(c * H + y) * W + i] == expected(px, c, y, i, 0, 0, 0));
}

static void test_crop_pad(void **state)
{
    (void)state;
    unsigned char px[C * H * W];
    float x[C * H * W], again[C * H * W];
    record(px);
    st_transform t = transform_of(1, P, 0);
    int seen[2 * P + 1][2 * P + 1] = {{0}};
    for (long sample = 0; sample < 2000; sample++) {
        int dy, dx, flip;
        st_transform_apply(&t, t.input, px, x, 1, sample);
        if (!shift_of(px, x, &dy, &dx, &flip) || flip)
            fail_msg("sample %ld: not the record shifted by at most %d (or it is mirrored)",
                     sample, P);
        seen[dy + P][dx + P]++;
        st_transform_apply(&t, t.input, px, again, 1, sample);
        assert_memory_equal(x, again, sizeof x);
    }
    /* 25 shifts, 2000 draws: each expected 80 times; none missing */
    for (int i = 0; i <= 2 * P; i++)
        for (int j = 0; j <= 2 * P; j++) {
            print_message("shift (%d, %d): %d\n", i - P, j - P, seen[i][j]);
            assert_true(seen[i][j] > 40);
        }
    /* testing: the centre of the framed record, the record itself */
    int dy, dx, flip;
    st_transform_apply(&t, t.input, px, x, 0, 5);
    assert_true(shift_of(px, x, &dy, &dx, &flip));
    assert_int_equal(dy, 0);
    assert_int_equal(dx, 0);
    assert_int_equal(flip, 0);
}

static void test_crop_pad_mirror(void **state)
{
    (void)state;
    unsigned char px[C * H * W];
    float x[C * H * W];
    record(px);
    st_transform t = transform_of(1, P, 1);
    int flips = 0;
    for (long sample = 0; sample < 400; sample++) {
        int dy, dx, flip;
        st_transform_apply(&t, t.input, px, x, 1, sample);
        if (!shift_of(px, x, &dy, &dx, &flip))
            fail_msg("sample %ld: not a shift of at most %d, mirrored or not", sample, P);
        flips += flip;
    }
    print_message("mirrored: %d of 400\n", flips);
    assert_true(flips > 150 && flips < 250);
}

static void test_cfg_keys(void **state)
{
    (void)state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    const char *head = "[net]\nheight=5\nwidth=6\nchannels=2\n";
    char text[256];
    snprintf(text, sizeof text, "%scrop=1\ncrop_pad=4\n[connected]\noutput=2\n", head);
    assert_int_equal(tl_build("pad.cfg", text, &cfg, &hp, &net, &err), ST_OK);
    assert_int_equal(hp.transform.crop_pad, 4);
    st_net_free(&net);
    st_cfg_free(&cfg);
    snprintf(text, sizeof text, "%scrop_pad=4\n[connected]\noutput=2\n", head);
    assert_int_equal(tl_build("pad.cfg", text, &cfg, &hp, &net, &err), ST_EINPUT);
    tl_assert_contains(err.msg, ":5: crop_pad=4 frames the record for a random crop: expected "
                                "crop=1 with it");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_crop_pad),
        cmocka_unit_test(test_crop_pad_mirror),
        cmocka_unit_test(test_cfg_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
