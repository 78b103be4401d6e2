/* Helpers shared by the tests of the emulated SW26010 core group
 * (test_cpe, test_cpe_conv, test_cpe_kernels, test_cpe_calibration): a
 * cluster that fails the test when it cannot be made, reproducible random
 * values, float buffers and their bitwise comparison, counters compared
 * field by field, the cost-only check every kernel's test runs, and the
 * index of an activation in each layout of st_cpe_relayout. */
#ifndef ST_CPE_TESTLIB_H
#define ST_CPE_TESTLIB_H

#include <math.h>
#include <stdlib.h>

#include "testlib.h"

#include "cpe/cpe.h"
#include "cpe/kernels.h"

/* The machine the tests' clusters emulate: the built-in SW26010
 * (data/sw26010/sw26010.machine, which test_cpe_model checks against
 * these): an 8 x 8 mesh, 64 KB of LDM per CPE. */
#define SW_ROWS 8
#define SW_COLS 8
#define SW_CPES (SW_ROWS * SW_COLS)
#define SW_LDM_BYTES 65536

/* The built-in machine description, read once per test program. */
static inline const st_cpe_machine *sw26010(void)
{
    static st_cpe_machine m;
    static int loaded;
    st_error err = {0};
    if (!loaded && st_cpe_machine_load(&m, NULL, &err) != ST_OK)
        fail_msg("st_cpe_machine_load: %s", err.msg);
    loaded = 1;
    return &m;
}

static inline st_cpe_cluster *cluster_new(void)
{
    st_cpe_cluster *cg = NULL;
    st_error err = {0};
    if (st_cpe_cluster_create(&cg, NULL, &err) != ST_OK)
        fail_msg("st_cpe_cluster_create: %s", err.msg);
    return cg;
}

/* xorshift64: uniform values in [-1, 1), the same every run. */
static inline double rand_unit(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return (double)(x >> 11) / (double)(1ull << 52) - 1.0;
}

/* got within rel of want (relative), both printed otherwise. */
static inline void assert_close(double got, double want, double rel, const char *what)
{
    if (!(fabs(got - want) <= rel * fabs(want)))
        fail_msg("%s: got %.17g, expected %.17g", what, got, want);
}

static inline float *floats_new(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

/* n values uniform in [-scale, scale), from seed. */
static inline void fill_uniform(float *p, size_t n, float scale, uint64_t seed)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++)
        p[i] = scale * (float)rand_unit(&s);
}

/* NaN where a kernel must write: an element it skips stays NaN. */
static inline void fill_nan(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
}

static inline void assert_floats_equal(const float *got, const float *want, size_t n,
                                       const char *what)
{
    if (memcmp(got, want, n * sizeof *got) == 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof *got) != 0)
            fail_msg("%s: [%zu] = %.9g, expected %.9g (bitwise)", what, i, got[i], want[i]);
}

/* Fail unless a and b are equal as st_cpe_counters_equal sees them, naming
 * the first field that differs with both values. */
static inline void expect_counters_equal(const st_cpe_counters *a, const st_cpe_counters *b,
                                         const char *what)
{
    if (st_cpe_counters_equal(a, b))
        return;
    const struct {
        const char *name;
        double x, y;
    } fields[] = {
        {"launches", (double)a->launches, (double)b->launches},
        {"flops", (double)a->flops, (double)b->flops},
        {"compute_cycles", a->compute_cycles, b->compute_cycles},
        {"dma_get_bytes", (double)a->dma_get_bytes, (double)b->dma_get_bytes},
        {"dma_put_bytes", (double)a->dma_put_bytes, (double)b->dma_put_bytes},
        {"DMA transfers", (double)st_cpe_counters_dma_transfers(a),
         (double)st_cpe_counters_dma_transfers(b)},
        {"msgs_p2p", (double)a->msgs_p2p, (double)b->msgs_p2p},
        {"msgs_bcast", (double)a->msgs_bcast, (double)b->msgs_bcast},
        {"msgs_received", (double)a->msgs_received, (double)b->msgs_received},
        {"mesh_msgs_bcast", (double)a->mesh_msgs_bcast, (double)b->mesh_msgs_bcast},
        {"mesh_msgs_received", (double)a->mesh_msgs_received, (double)b->mesh_msgs_received},
        {"mesh_gemms", (double)a->mesh_gemms, (double)b->mesh_gemms},
        {"ldm_peak", (double)a->ldm_peak, (double)b->ldm_peak},
        {"barriers", (double)a->barriers, (double)b->barriers},
        {"time.compute_s", a->time.compute_s, b->time.compute_s},
        {"time.dma_s", a->time.dma_s, b->time.dma_s},
        {"time.regcomm_s", a->time.regcomm_s, b->time.regcomm_s},
        {"time.sync_s", a->time.sync_s, b->time.sync_s},
        {"time.total_s", a->time.total_s, b->time.total_s},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].x != fields[i].y)
            fail_msg("%s: counters differ: %s %.17g and %.17g", what, fields[i].name,
                     fields[i].x, fields[i].y);
    fail_msg("%s: counters differ in the DMA size classes", what);
}

/* ---- the cost-only check ---- */

/* One kernel launch on cg with the arguments ctx holds, its counters into
 * *out. */
typedef st_status (*cpe_test_launch)(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                     st_error *err);

/* Main memory a launch writes. */
typedef struct cpe_test_output {
    void *at;
    size_t bytes;
} cpe_test_output;

#define CPE_TEST_SENTINEL 0xa5

/* Run launch in full into *full (failing the test with its message if it
 * fails), then again in cost-only mode over outputs filled with a byte
 * pattern: the counters must be the full run's and every output must keep
 * the pattern. The outputs get the full run's results back, so the caller
 * checks them afterwards as if it had launched once. */
static inline void run_and_check_cost_only(st_cpe_cluster *cg, cpe_test_launch launch, void *ctx,
                                           const cpe_test_output *outs, int n_outs,
                                           st_cpe_counters *full, const char *what)
{
    st_error err = {0};
    if (launch(cg, ctx, full, &err) != ST_OK)
        fail_msg("%s: %s", what, err.msg);
    unsigned char *saved[4];
    assert_true(n_outs <= 4);
    for (int i = 0; i < n_outs; i++) {
        saved[i] = malloc(outs[i].bytes ? outs[i].bytes : 1);
        assert_non_null(saved[i]);
        memcpy(saved[i], outs[i].at, outs[i].bytes);
        memset(outs[i].at, CPE_TEST_SENTINEL, outs[i].bytes);
    }
    st_cpe_counters cost;
    st_cpe_cluster_set_cost_only(cg, 1);
    st_status st = launch(cg, ctx, &cost, &err);
    st_cpe_cluster_set_cost_only(cg, 0);
    if (st != ST_OK)
        fail_msg("%s, cost-only: %s", what, err.msg);
    char label[200];
    snprintf(label, sizeof label, "%s: full and cost-only", what);
    expect_counters_equal(full, &cost, label);
    for (int i = 0; i < n_outs; i++) {
        const unsigned char *p = outs[i].at;
        for (size_t b = 0; b < outs[i].bytes; b++)
            if (p[b] != CPE_TEST_SENTINEL)
                fail_msg("%s: cost-only mode wrote output %d at byte %zu (0x%02x)", what, i, b,
                         p[b]);
        memcpy(outs[i].at, saved[i], outs[i].bytes);
        free(saved[i]);
    }
}

/* ---- layouts ---- */

/* The offset of sample s, channel ch, pixel (y, x) of n samples of c x h x
 * w in layout l (include/cpe/kernels.h, st_cpe_layout). */
static inline size_t layout_at(st_cpe_layout l, int n, int c, int h, int w, int s, int ch, int y,
                               int x)
{
    size_t N = (size_t)n, C = (size_t)c, H = (size_t)h, W = (size_t)w;
    size_t S = (size_t)s, K = (size_t)ch, Y = (size_t)y, X = (size_t)x;
    switch (l) {
    case ST_CPE_NCHW:
        return ((S * C + K) * H + Y) * W + X;
    case ST_CPE_HWCN:
        return ((Y * W + X) * C + K) * N + S;
    case ST_CPE_HWNC:
        return ((Y * W + X) * N + S) * C + K;
    }
    return 0;
}

#endif
