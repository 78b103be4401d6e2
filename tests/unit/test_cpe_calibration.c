/* The emulator against the published measurements of data/sw26010/ (its
 * README gives each file's source), in cost-only mode:
 *
 *   STREAM (swCandle's PE_CONT and PE_STEP kernels, dma_stream_swcandle.csv):
 *     every size, step and kernel, as a CPE program that does what
 *     swCandle's does, against the measured MB/s;
 *   swDNN's double-precision convolution (swdnn_conv_1cg.csv,
 *     swdnn_conv_4cg.csv): every distinct configuration through
 *     st_cpe_swdnn_conv_run, against the median of its runs;
 *   DGEMM 4096^3 (st_cpe_gemm): its efficiency beside the published
 *     88.7-95% of peak.
 *
 * The cost model's DMA curve and latency were fitted to the STREAM figures
 * and its pipeline constants checked on swDNN's (src/cpe/cpe_cost.c), so
 * these tests hold the model to what it was calibrated on: a change to a
 * constant or to a kernel's declared work that moves the predictions away
 * from the machine fails here. The bounds below are today's errors with a
 * little margin, stated with each test. Each test prints its table.
 *
 * The CSVs are read from data/sw26010/ relative to the working directory:
 * run from the repository root, as scripts/run-tests.sh does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpe_testlib.h"

#include "cpe/cpe.h"
#include "cpe/kernels.h"

#define DATA_DIR "data/sw26010/"

/* ---- reading the CSVs ---- */

#define CSV_MAX_ROWS 256
#define CSV_MAX_COLS 12
#define CSV_FIELD 32

/* A CSV file: the header's names and every row's fields, as text. */
typedef struct csv_table {
    int rows, cols;
    char name[CSV_MAX_COLS][CSV_FIELD];
    char cell[CSV_MAX_ROWS][CSV_MAX_COLS][CSV_FIELD];
} csv_table;

static void csv_split(const char *line, char fields[CSV_MAX_COLS][CSV_FIELD], int *count,
                      const char *path, int line_no)
{
    *count = 0;
    const char *p = line;
    for (;;) {
        size_t len = strcspn(p, ",\r\n");
        if (*count == CSV_MAX_COLS || len >= CSV_FIELD)
            fail_msg("%s:%d: more than %d fields or a field longer than %d characters", path,
                     line_no, CSV_MAX_COLS, CSV_FIELD - 1);
        memcpy(fields[*count], p, len);
        fields[(*count)++][len] = '\0';
        if (p[len] != ',')
            break;
        p += len + 1;
    }
}

/* Read DATA_DIR file into a table allocated here (free it). */
static csv_table *csv_read(const char *file)
{
    char path[256];
    snprintf(path, sizeof path, "%s%s", DATA_DIR, file);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run the test from the repository root, as "
                 "scripts/run-tests.sh does)", path);
    csv_table *t = calloc(1, sizeof *t);
    assert_non_null(t);
    char line[512];
    int line_no = 0;
    while (fgets(line, sizeof line, f)) {
        line_no++;
        if (line[0] == '\n' || line[0] == '\r')
            continue;
        int count;
        if (line_no == 1) {
            csv_split(line, t->name, &t->cols, path, line_no);
            continue;
        }
        if (t->rows == CSV_MAX_ROWS)
            fail_msg("%s: more than %d rows", path, CSV_MAX_ROWS);
        csv_split(line, t->cell[t->rows], &count, path, line_no);
        if (count != t->cols)
            fail_msg("%s:%d: %d fields, the header has %d", path, line_no, count, t->cols);
        t->rows++;
    }
    fclose(f);
    if (t->rows == 0)
        fail_msg("%s: no rows", path);
    return t;
}

static int csv_column(const csv_table *t, const char *name)
{
    for (int c = 0; c < t->cols; c++)
        if (strcmp(t->name[c], name) == 0)
            return c;
    fail_msg("no column '%s' in the CSV", name);
    return -1;
}

static double csv_number(const csv_table *t, int row, const char *name)
{
    const char *text = t->cell[row][csv_column(t, name)];
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end != '\0')
        fail_msg("row %d, column %s: '%s' is not a number", row + 2, name, text);
    return v;
}

/* ---- error summaries ---- */

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* |ratio - 1| of n ratios: the median and the largest, and how many are
 * within 30%. */
typedef struct error_summary {
    int n, within_30;
    double median, max;
} error_summary;

static error_summary summarise(const double *ratio, int n)
{
    error_summary s = {n, 0, 0.0, 0.0};
    double *err = malloc((size_t)(n ? n : 1) * sizeof *err);
    assert_non_null(err);
    for (int i = 0; i < n; i++) {
        err[i] = fabs(ratio[i] - 1.0);
        s.within_30 += err[i] <= 0.30;
        s.max = err[i] > s.max ? err[i] : s.max;
    }
    qsort(err, (size_t)n, sizeof *err, compare_doubles);
    s.median = n == 0 ? 0.0 : n % 2 ? err[n / 2] : 0.5 * (err[n / 2 - 1] + err[n / 2]);
    free(err);
    return s;
}

static void expect_summary(const char *what, error_summary s, double median_bound,
                           double max_bound)
{
    printf("%s: %d points, median |error| %.1f%%, max %.1f%%\n", what, s.n, 100 * s.median,
           100 * s.max);
    if (!(s.median <= median_bound && s.max <= max_bound))
        fail_msg("%s: median |error| %.1f%% (bound %.1f%%), max %.1f%% (bound %.1f%%)", what,
                 100 * s.median, 100 * median_bound, 100 * s.max, 100 * max_bound);
}

/* ---- STREAM: swCandle's PE_CONT and PE_STEP kernels ---- */

typedef enum stream_op { STREAM_COPY, STREAM_SCALE, STREAM_ADD, STREAM_TRIAD, STREAM_OPS } stream_op;

static const char *const stream_columns[STREAM_OPS] = {"copy_MBps", "scale_MBps", "add_MBps",
                                                       "triad_MBps"};

/* One kernel's launch: each CPE moves `chunks` transfers of count blocks
 * of block bytes, pitch bytes apart in main memory (count 1: contiguous),
 * from b (and c) to a, with loop between. Every chunk of a CPE uses the
 * same addresses, its own span: the cost model has no addresses in it
 * (a transfer costs by its sizes alone), and the arrays stay small. */
typedef struct stream_args {
    double *a, *b, *c;
    size_t span;  /* bytes of main memory per CPE */
    size_t block, pitch, count, chunks;
    int inputs;   /* 1: copy, scale; 2: add, triad */
    st_cpe_loop loop;
} stream_args;

static void stream_transfer(st_cpe *cpe, const stream_args *a, int put, char *mem, char *ldm,
                            st_cpe_reply *reply)
{
    if (a->count == 1 && put)
        st_cpe_dma_put(cpe, mem, ldm, a->block, reply);
    else if (a->count == 1)
        st_cpe_dma_get(cpe, ldm, mem, a->block, reply);
    else if (put)
        st_cpe_dma_put_strided(cpe, mem, ldm, a->block, a->pitch, a->count, reply);
    else
        st_cpe_dma_get_strided(cpe, ldm, mem, a->block, a->pitch, a->count, reply);
}

/* swCandle's slave loop: get the input(s), wait, the SIMD loop, put,
 * wait. */
static void stream_kernel(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    stream_args *a = st_cpe_ldm_alloc(cpe, sizeof *a, "arguments");
    st_cpe_dma_get_control(cpe, a, args, sizeof *a, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
    size_t bytes = a->block * a->count, at = (size_t)st_cpe_id(cpe) * a->span;
    char *x = st_cpe_ldm_alloc(cpe, bytes, "x");
    char *y = st_cpe_ldm_alloc(cpe, bytes, "y");
    for (size_t i = 0; i < a->chunks; i++) {
        st_cpe_reply get = {0}, put = {0};
        stream_transfer(cpe, a, 0, (char *)a->b + at, x, &get);
        if (a->inputs == 2)
            stream_transfer(cpe, a, 0, (char *)a->c + at, y, &get);
        st_cpe_dma_wait(cpe, &get, get.count);
        st_cpe_loop_run(cpe, &a->loop);
        stream_transfer(cpe, a, 1, (char *)a->a + at, a->inputs == 2 ? y : x, &put);
        st_cpe_dma_wait(cpe, &put, 1);
    }
}

/* The SIMD loop over one chunk of `doubles`, from swCandle's slave code:
 * PE_CONT copy and scale take 32 doubles an iteration (8 vector loads
 * and 8 stores; scale 8 multiplies), add and triad 16 (8 loads, 4 adds or
 * multiply-adds, 4 stores), at least one iteration; PE_STEP copy has no
 * loop, scale 4 doubles an iteration (a load, a multiply, a store), add
 * and triad 4 (2 loads, an add or multiply-add, a store). */
static st_cpe_loop stream_loop(stream_op op, int strided, size_t doubles)
{
    int two = op == STREAM_ADD || op == STREAM_TRIAD;
    st_cpe_loop l = {0};
    if (strided) {
        if (op != STREAM_COPY)
            l = (st_cpe_loop){.iterations = (double)(doubles / 4), .fp = 1, .mem = two ? 3 : 2};
    } else {
        size_t per = two ? 16 : 32;
        l = (st_cpe_loop){.iterations = (double)((doubles + per - 1) / per),
                          .fp = two ? 4 : op == STREAM_SCALE ? 8 : 0, .mem = two ? 12 : 16};
    }
    l.flops = (uint64_t)(doubles * (op == STREAM_COPY ? 0 : op == STREAM_TRIAD ? 2 : 1));
    return l;
}

/* PE_CONT: each CPE streams STREAM_CONT_CHUNKS chunks (swCandle's arrays
 * give thousands at small sizes; 256 make the argument fetch < 0.2% of the
 * time). PE_STEP: 64 rounds of 24 KB per CPE, as swCandle's NR. */
#define STREAM_CONT_CHUNKS 256
#define STREAM_STEP_ROUNDS 64
#define STREAM_STEP_BYTES 24576

/* Predicted MB/s of one row's kernel (PE_CONT: transfers of block bytes;
 * PE_STEP: 24 KB in blocks of block bytes with gaps of gap bytes),
 * counting swCandle's bytes, reads and writes of the moved data; the time
 * excludes the launch, which swCandle's large arrays make negligible. mem:
 * mem_bytes of main memory for 64 spans. */
static double stream_predict(st_cpe_cluster *cg, stream_op op, int strided, size_t block,
                             size_t gap, double *mem, size_t mem_bytes)
{
    size_t count = strided ? STREAM_STEP_BYTES / block : 1, pitch = block + gap;
    stream_args a = {
        .a = mem, .b = mem, .c = mem,
        .span = (count - 1) * pitch + block,
        .block = block, .pitch = pitch, .count = count,
        .chunks = strided ? STREAM_STEP_ROUNDS : STREAM_CONT_CHUNKS,
        .inputs = op == STREAM_ADD || op == STREAM_TRIAD ? 2 : 1,
        .loop = stream_loop(op, strided, count * block / 8),
    };
    /* a, b and c may share memory: cost-only mode moves nothing. */
    if (a.span * SW_CPES > mem_bytes)
        fail_msg("stream: %zu bytes per CPE, more than the %zu allocated", a.span,
                 mem_bytes / SW_CPES);
    st_cpe_counters n;
    st_error err = {0};
    if (st_cpe_launch(cg, "stream", stream_kernel, &a, &n, &err) != ST_OK)
        fail_msg("stream: %s", err.msg);
    double moved = (double)(a.inputs + 1) * (double)(a.block * a.count) * (double)a.chunks *
                   SW_CPES;
    return moved / (n.time.total_s - n.time.launch_s) / 1e6;
}

/* Today: PE_CONT within 11.6% from 64 B up (median 1.9%), 15-41% too
 * slow below 64 B (median 36%). PE_STEP, whose medians over the steps gave
 * the curve: within 13.6% from blocks of 64 B up (median 2.3%); below, the
 * measurements scatter with the step (32 B blocks 32 B apart measure
 * slower than 16 B ones) and the curve, their median made non-decreasing,
 * is within 53.5% (median 16.5%). Asserted, with a little margin: PE_CONT
 * from 64 B median 3% and max 12.5%, below 64 B always too slow, median
 * 40%, max 42%; PE_STEP from 64 B median 3%, max 15%, below median 20%,
 * max 55%. */
static void test_stream(void **state)
{
    (void)state;
    csv_table *t = csv_read("dma_stream_swcandle.csv");
    st_cpe_cluster *cg = cluster_new();
    st_cpe_cluster_set_cost_only(cg, 1);
    /* The widest span: 24 KB in blocks with gaps of 4 blocks. */
    size_t mem_bytes = SW_CPES * (size_t)5 * STREAM_STEP_BYTES;
    double *mem = malloc(mem_bytes);
    assert_non_null(mem);
    double cont_large[CSV_MAX_ROWS * STREAM_OPS], cont_small[CSV_MAX_ROWS * STREAM_OPS];
    double step_large[CSV_MAX_ROWS * STREAM_OPS], step_small[CSV_MAX_ROWS * STREAM_OPS];
    int n_large = 0, n_small = 0, n_step_large = 0, n_step_small = 0;
    int mode = csv_column(t, "mode");
    printf("swCandle STREAM, MB/s measured / predicted (ratio)\n");
    printf("%-7s %5s %6s  %-22s %-22s %-22s %-22s\n", "mode", "step", "bytes", "copy", "scale",
           "add", "triad");
    for (int r = 0; r < t->rows; r++) {
        int strided = strcmp(t->cell[r][mode], "PE_STEP") == 0;
        if (!strided && strcmp(t->cell[r][mode], "PE_CONT") != 0)
            fail_msg("row %d: mode '%s'", r + 2, t->cell[r][mode]);
        size_t gap = (size_t)csv_number(t, r, "step_doubles") * 8;
        size_t size = (size_t)csv_number(t, r, "bsize_or_dmasize_doubles") * 8;
        printf("%-7s %5zu %6zu ", t->cell[r][mode], gap / 8, size);
        for (int op = 0; op < STREAM_OPS; op++) {
            double measured = csv_number(t, r, stream_columns[op]);
            double predicted = stream_predict(cg, (stream_op)op, strided, size, gap, mem,
                                              mem_bytes);
            double ratio = predicted / measured;
            printf(" %7.0f / %7.0f (%4.2f)", measured, predicted, ratio);
            if (strided && size >= 64)
                step_large[n_step_large++] = ratio;
            else if (strided)
                step_small[n_step_small++] = ratio;
            else if (size >= 64)
                cont_large[n_large++] = ratio;
            else
                cont_small[n_small++] = ratio;
        }
        printf("\n");
    }
    /* Below 64 B every kernel is predicted too slow, never too fast. */
    for (int i = 0; i < n_small; i++)
        if (!(cont_small[i] < 1.0))
            fail_msg("PE_CONT below 64 B: ratio %.3f, expected < 1", cont_small[i]);
    expect_summary("PE_CONT, 64 B to 24 KB", summarise(cont_large, n_large), 0.03, 0.125);
    expect_summary("PE_CONT, 8 to 32 B", summarise(cont_small, n_small), 0.40, 0.42);
    expect_summary("PE_STEP, blocks of 64 B to 8 KB", summarise(step_large, n_step_large),
                   0.03, 0.15);
    expect_summary("PE_STEP, blocks of 8 to 32 B", summarise(step_small, n_step_small), 0.20,
                   0.55);
    free(mem);
    st_cpe_cluster_destroy(cg);
    free(t);
}

/* ---- swDNN's convolution ---- */

/* A configuration of the swDNN CSVs and its runs' GFLOPS. */
typedef struct swdnn_config {
    int cgs, b, ni, no, ri, ci, ro, co, k;
    double gflops[64];
    int runs;
} swdnn_config;

#define SWDNN_MAX_CONFIGS 256

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Distinct configurations of a file, in their order of first appearance. */
static int swdnn_configs(const char *file, swdnn_config *out)
{
    csv_table *t = csv_read(file);
    int n = 0;
    for (int r = 0; r < t->rows; r++) {
        swdnn_config c = {
            (int)csv_number(t, r, "core_groups"), (int)csv_number(t, r, "B"),
            (int)csv_number(t, r, "Ni"), (int)csv_number(t, r, "No"),
            (int)csv_number(t, r, "Ri"), (int)csv_number(t, r, "Ci"),
            (int)csv_number(t, r, "Ro"), (int)csv_number(t, r, "Co"),
            (int)csv_number(t, r, "K"), {0}, 0,
        };
        int i = 0;
        while (i < n && memcmp(&out[i], &c, offsetof(swdnn_config, gflops)) != 0)
            i++;
        if (i == n) {
            if (n == SWDNN_MAX_CONFIGS)
                fail_msg("%s: more than %d configurations", file, SWDNN_MAX_CONFIGS);
            out[n++] = c;
        }
        if (out[i].runs == 64)
            fail_msg("%s: more than 64 runs of one configuration", file);
        out[i].gflops[out[i].runs++] = csv_number(t, r, "gflops");
    }
    free(t);
    return n;
}

/* Predicted GFLOPS of a configuration: the core problem in double on one
 * core group, unpadded (ri = ro + k - 1); on 4 core groups each runs a
 * quarter of the output rows, and the GFLOPS are the whole problem's flops
 * over one core group's time. */
static double swdnn_predict(st_cpe_cluster *cg, const swdnn_config *c)
{
    int ro = c->ro / c->cgs;
    if (ro * c->cgs != c->ro || c->ri != c->ro + c->k - 1 || c->ci != c->co + c->k - 1)
        fail_msg("swDNN configuration B %d Ni %d No %d %dx%d -> %dx%d K %d on %d core groups: "
                 "not an unpadded convolution whose rows split evenly",
                 c->b, c->ni, c->no, c->ri, c->ci, c->ro, c->co, c->k, c->cgs);
    size_t in = (size_t)(ro + c->k - 1) * c->ci * c->ni * c->b;
    size_t w = (size_t)c->k * c->k * c->no * c->ni, out = (size_t)ro * c->co * c->no * c->b;
    /* Never touched: cost-only mode moves nothing. */
    double *buf = calloc(in + w + out, sizeof(double));
    assert_non_null(buf);
    st_cpe_swdnn_conv p = {.type = ST_CPE_F64, .ri = ro + c->k - 1, .ci = c->ci, .ro = ro,
                           .co = c->co, .kr = c->k, .kc = c->k, .ni = c->ni, .no = c->no,
                           .b = c->b, .in = buf, .w = buf + in, .out = buf + in + w};
    st_cpe_counters n;
    st_error err = {0};
    if (st_cpe_swdnn_conv_run(cg, &p, "swdnn", &n, &err) != ST_OK)
        fail_msg("swDNN configuration B %d Ni %d No %d: %s", c->b, c->ni, c->no, err.msg);
    free(buf);
    double flops = 2.0 * c->b * c->ni * c->no * (double)c->ro * c->co * c->k * c->k;
    return flops / n.time.total_s / 1e9;
}

/* Today: median |error| 6.1% on one core group (7 configurations), 6.9%
 * on four (174), the largest 34.8% and 31.8%; 175 of the 181 within 30%.
 * Asserted: medians within 7.5%, none beyond 36%, at least 172 within
 * 30%. */
static void test_swdnn(void **state)
{
    (void)state;
    static const char *const files[] = {"swdnn_conv_1cg.csv", "swdnn_conv_4cg.csv"};
    swdnn_config *configs = calloc(SWDNN_MAX_CONFIGS, sizeof *configs);
    assert_non_null(configs);
    st_cpe_cluster *cg = cluster_new();
    st_cpe_cluster_set_cost_only(cg, 1);
    int total = 0, within = 0;
    for (int f = 0; f < 2; f++) {
        int n = swdnn_configs(files[f], configs);
        double ratio[SWDNN_MAX_CONFIGS];
        printf("swDNN %s: GFLOPS, the median of the runs against the prediction\n", files[f]);
        printf("%3s %4s %4s %4s %3s %3s %3s %3s %2s %4s %9s %9s %6s\n", "cgs", "B", "Ni", "No",
               "Ri", "Ci", "Ro", "Co", "K", "runs", "measured", "predicted", "ratio");
        for (int i = 0; i < n; i++) {
            const swdnn_config *c = &configs[i];
            double runs[64];
            memcpy(runs, c->gflops, sizeof runs);
            double measured = median_of(runs, c->runs), predicted = swdnn_predict(cg, c);
            ratio[i] = predicted / measured;
            printf("%3d %4d %4d %4d %3d %3d %3d %3d %2d %4d %9.1f %9.1f %6.3f\n", c->cgs, c->b,
                   c->ni, c->no, c->ri, c->ci, c->ro, c->co, c->k, c->runs, measured, predicted,
                   ratio[i]);
        }
        error_summary s = summarise(ratio, n);
        total += n;
        within += s.within_30;
        expect_summary(files[f], s, 0.075, 0.36);
    }
    printf("swDNN: %d of %d configurations within 30%%\n", within, total);
    if (total != 181 || within < 172)
        fail_msg("swDNN: %d of %d configurations within 30%% (expected at least 172 of 181)",
                 within, total);
    st_cpe_cluster_destroy(cg);
    free(configs);
}

/* ---- DGEMM ---- */

/* 4096^3 in double, cost-only: the published one-core-group DGEMMs reach
 * 88.7% (register-communication-aware DGEMM, ICPP 2017) to 95% (Jiang et
 * al., ICPP 2017) of the 742.4 GFlop/s peak. The model gives about 59%:
 * lower, because here each CPE fetches its own A and B blocks with strided
 * DMA of short rows (gemm.c) while the published kernels move larger
 * contiguous transfers, and the vendor blocking (gemm.c: a cube of 32, the
 * largest whose seven double blocks fit 64 KB) fetches B for every 32 rows
 * of C; the bound keeps the prediction in 50-70%. */
static void test_dgemm(void **state)
{
    (void)state;
    const size_t n = 4096;
    /* Never touched: cost-only mode moves nothing. */
    double *a = calloc(n * n, sizeof *a), *b = calloc(n * n, sizeof *b);
    double *c = calloc(n * n, sizeof *c);
    assert_true(a && b && c);
    st_cpe_cluster *cg = cluster_new();
    st_cpe_cluster_set_cost_only(cg, 1);
    st_cpe_counters counters;
    st_error err = {0};
    if (st_cpe_gemm(cg, ST_CPE_F64, 0, 0, n, n, n, 1.0, a, n, b, n, 0.0, c, n, &counters, &err) !=
        ST_OK)
        fail_msg("dgemm: %s", err.msg);
    const st_cpe_cost_params *p = st_cpe_cluster_cost_params(cg);
    double peak = p->clock_hz * p->flops_per_cycle * SW_CPES;
    double efficiency = 2.0 * (double)n * n * n / counters.time.total_s / peak;
    printf("DGEMM %zu^3, one core group: predicted %.1f%% of the %.1f GFlop/s peak (compute "
           "%.3f s, DMA %.3f s, register communication %.3f s); published 88.7-95%%\n",
           n, 100 * efficiency, peak / 1e9, counters.time.compute_s, counters.time.dma_s,
           counters.time.regcomm_s);
    if (!(efficiency >= 0.50 && efficiency <= 0.70))
        fail_msg("DGEMM %zu^3: %.1f%% of peak predicted, expected 50-70%%", n, 100 * efficiency);
    st_cpe_cluster_destroy(cg);
    free(a);
    free(b);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_swdnn),
        cmocka_unit_test(test_dgemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
