/* Elementwise kernels as CPE programs: activation forward and backward,
 * bias add fused with the activation, and the bias gradient.
 *
 * Activations and bias add: the flat range of count (n c per_channel)
 * floats is cut into 64 shares of whole 64-byte lines, one per CPE, each
 * streamed in chunks of ELT_CHUNK floats with two chunks in flight (the
 * next chunk's gets are issued before the current one is worked on; a
 * slot's put is waited for only when the slot is refilled). The work on a
 * chunk is st_act_forward / st_act_backward on LDM, so results are bitwise
 * the reference's; with accumulate, diff_src's chunk comes in too and gets
 * the product added, as the reference does.
 *
 * Bias add: the bias of a chunk's rows ((sample, channel) pairs of
 * per_channel floats). When c <= BIAS_RESIDENT_MAX the whole bias is
 * fetched once per CPE; otherwise each chunk fetches the bias values of its
 * rows (one get, or two when the rows wrap from channel c - 1 to 0).
 *
 * Bias gradient, db[ch] = sum over s, i of dy[s, ch, i] in double. Two
 * splits, by which fits the shape:
 *   by channel range (c >= 64, at most BIAS_GRAD_RANGE_MAX channels per
 *     CPE, and c a multiple of 64 or per_channel < 64): CPE k sums channels
 *     [k c / 64, (k + 1) c / 64), reading every sample's block of them (one
 *     strided get for several samples when they fit a chunk), each
 *     channel's sum in sample-then-position order: bitwise the reference.
 *   by sequence (the rest: few channels, or long planes that a channel
 *     range would balance badly): the channel-major sequence of all n c
 *     per_channel values is cut into 64 equal shares. A channel inside one
 *     share is summed there (bitwise the reference); a channel cut between
 *     CPEs gets partial sums, written to a 64 x 2 array of doubles in main
 *     memory; after a barrier the CPE holding the channel's first part adds
 *     the parts in CPE order (within 1e-6 relative of the reference).
 * Chunks are ELT_CHUNK floats, two in flight.
 *
 * Flops declared per float: activation forward linear 0, relu 1, leaky 2,
 * logistic ACT_EXP_FLOPS + 2, tanh ACT_EXP_FLOPS + 4; backward linear 0,
 * relu 1, leaky 2, logistic 3, tanh 3; plus 1 for a bias add or for an
 * accumulation into diff_src; the bias gradient 1 per float plus one per
 * partial sum combined. DMA: every float in and out once (bias gradient:
 * in once); bias values as described. */
#include <string.h>

#include "kernel_common.h"

#define ELT_CHUNK 2048          /* floats per buffer */
#define ELT_MAX_INPUTS 3        /* activation backward with accumulate: y, dy, dx */
#define BIAS_RESIDENT_MAX 2048  /* channels whose whole bias one CPE keeps in LDM */
#define BIAS_GRAD_RANGE_MAX 1024 /* channels one CPE sums by channel range (8 KB of sums) */
#define BIAS_GRAD_RUN 256       /* finished channels buffered before one put */
/* An assumption of this model: expf or tanhf as a range reduction and a
 * polynomial of about 8 fused multiply-adds. */
#define ACT_EXP_FLOPS 16

static uint64_t act_forward_flops(st_act act)
{
    switch (act) {
    case ST_ACT_LINEAR: return 0;
    case ST_ACT_RELU: return 1;
    case ST_ACT_LEAKY: return 2;
    case ST_ACT_LOGISTIC: return ACT_EXP_FLOPS + 2;
    case ST_ACT_TANH: return ACT_EXP_FLOPS + 4;
    case ST_ACT_COUNT: break;
    }
    return 0;
}

static uint64_t act_backward_flops(st_act act)
{
    switch (act) {
    case ST_ACT_LINEAR: return 0;
    case ST_ACT_RELU: return 1;
    case ST_ACT_LEAKY: return 2;
    case ST_ACT_LOGISTIC: return 3;
    case ST_ACT_TANH: return 3;
    case ST_ACT_COUNT: break;
    }
    return 0;
}

/* ---- the flat stream: activations and bias add ---- */

typedef struct elt_args {
    st_act act;
    size_t count;
    const float *in[ELT_MAX_INPUTS]; /* main memory, indexed like the range */
    int inputs;
    float *out;      /* where buffer out_buf goes back */
    int out_buf;
    int accumulate;  /* act_backward */
    /* bias_act */
    const float *bias; /* [c] or NULL */
    size_t c, per_channel;
    int bias_resident;
} elt_args;

typedef struct elt_slot {
    float *buf[ELT_MAX_INPUTS];
    float *bias; /* bias_act, bias not resident: the chunk's rows' values */
    size_t at, m;
    st_cpe_reply get, put;
} elt_slot;

typedef struct elt_cpe elt_cpe;
typedef void (*elt_work)(st_cpe *cpe, const elt_cpe *e, elt_slot *slot);

struct elt_cpe {
    const elt_args *a;
    const float *bias_all; /* bias_act, bias resident: [c] */
    elt_slot slot[2];
    elt_work work;
};

/* The rows (sample, channel) of [at, at + m): [*r0, *r1]. */
static void chunk_rows(const elt_args *a, size_t at, size_t m, size_t *r0, size_t *r1)
{
    *r0 = at / a->per_channel;
    *r1 = (at + m - 1) / a->per_channel;
}

static void elt_issue(st_cpe *cpe, elt_cpe *e, elt_slot *slot, size_t at, size_t m)
{
    const elt_args *a = e->a;
    st_cpe_dma_wait(cpe, &slot->put, slot->put.count); /* its last chunk went out */
    cpe_reply_reset(&slot->get);
    slot->at = at;
    slot->m = m;
    for (int i = 0; i < a->inputs; i++)
        st_cpe_dma_get(cpe, slot->buf[i], a->in[i] + at, m * sizeof(float), &slot->get);
    if (a->bias && !a->bias_resident) {
        size_t r0, r1;
        chunk_rows(a, at, m, &r0, &r1);
        size_t rows = r1 - r0 + 1, ch0 = r0 % a->c;
        size_t first = cpe_min_size(rows, a->c - ch0);
        st_cpe_dma_get(cpe, slot->bias, a->bias + ch0, first * sizeof(float), &slot->get);
        if (rows > first)
            st_cpe_dma_get(cpe, slot->bias + first, a->bias, (rows - first) * sizeof(float),
                           &slot->get);
    }
}

static void elt_run(st_cpe *cpe, elt_cpe *e)
{
    const elt_args *a = e->a;
    size_t lo, hi;
    cpe_kernel_share(0, a->count, 16, st_cpe_id(cpe), st_cpe_count(cpe), &lo, &hi);
    size_t chunks = (hi - lo + ELT_CHUNK - 1) / ELT_CHUNK;
    if (chunks > 0)
        elt_issue(cpe, e, &e->slot[0], lo, cpe_min_size(ELT_CHUNK, hi - lo));
    for (size_t k = 0; k < chunks; k++) {
        elt_slot *cur = &e->slot[k % 2];
        if (k + 1 < chunks) {
            size_t at = lo + (k + 1) * ELT_CHUNK;
            elt_issue(cpe, e, &e->slot[(k + 1) % 2], at, cpe_min_size(ELT_CHUNK, hi - at));
        }
        st_cpe_dma_wait(cpe, &cur->get, cur->get.count);
        e->work(cpe, e, cur);
        cpe_reply_reset(&cur->put);
        st_cpe_dma_put(cpe, a->out + cur->at, cur->buf[a->out_buf], cur->m * sizeof(float),
                       &cur->put);
    }
    for (int s = 0; s < 2; s++)
        st_cpe_dma_wait(cpe, &e->slot[s].put, e->slot[s].put.count);
}

/* Fetch the arguments, allocate the slots (and the resident bias), run. */
static void elt_kernel(st_cpe *cpe, void *args, elt_work work)
{
    elt_cpe e;
    memset(&e, 0, sizeof e);
    e.a = cpe_kernel_args(cpe, args, sizeof(elt_args));
    e.work = work;
    const elt_args *a = e.a;
    if (a->bias && a->bias_resident) {
        float *bias = st_cpe_ldm_alloc(cpe, a->c * sizeof(float), "bias");
        cpe_get_now(cpe, bias, a->bias, a->c * sizeof(float));
        e.bias_all = bias;
    }
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < a->inputs; i++)
            e.slot[s].buf[i] = st_cpe_ldm_alloc(cpe, ELT_CHUNK * sizeof(float), "chunk");
        if (a->bias && !a->bias_resident)
            e.slot[s].bias = st_cpe_ldm_alloc(
                cpe, (ELT_CHUNK / a->per_channel + 2) * sizeof(float), "chunk bias");
    }
    elt_run(cpe, &e);
}

static void act_forward_work(st_cpe *cpe, const elt_cpe *e, elt_slot *slot)
{
    double fp = (double)act_forward_flops(e->a->act);
    if (!st_cpe_cost_only(cpe))
        st_act_forward(e->a->act, slot->buf[0], slot->m);
    cpe_vector_loop(cpe, slot->m, fp, 2.0, fp);
}

static void act_backward_work(st_cpe *cpe, const elt_cpe *e, elt_slot *slot)
{
    float *dy = slot->buf[1];
    double fp = (double)act_backward_flops(e->a->act), mem = 3.0;
    if (!st_cpe_cost_only(cpe))
        st_act_backward(e->a->act, slot->buf[0], dy, dy, slot->m);
    if (e->a->accumulate) {
        float *dx = slot->buf[2];
        for (size_t i = 0; i < slot->m && !st_cpe_cost_only(cpe); i++)
            dx[i] += dy[i];
        fp += 1.0;
        mem += 1.0;
    }
    cpe_vector_loop(cpe, slot->m, fp, mem, fp);
}

static void bias_act_work(st_cpe *cpe, const elt_cpe *e, elt_slot *slot)
{
    const elt_args *a = e->a;
    float *y = slot->buf[0];
    double fp = (double)act_forward_flops(a->act);
    if (a->bias)
        fp += 1.0;
    cpe_vector_loop(cpe, slot->m, fp, 2.0, fp);
    if (st_cpe_cost_only(cpe))
        return;
    if (a->bias) {
        size_t r0, r1, end = slot->at + slot->m;
        chunk_rows(a, slot->at, slot->m, &r0, &r1);
        for (size_t r = r0; r <= r1; r++) {
            float b = e->bias_all ? e->bias_all[r % a->c] : slot->bias[r - r0];
            size_t from = r * a->per_channel > slot->at ? r * a->per_channel : slot->at;
            size_t to = cpe_min_size((r + 1) * a->per_channel, end);
            for (size_t i = from; i < to; i++)
                y[i - slot->at] += b;
        }
    }
    st_act_forward(a->act, y, slot->m);
}

static void act_forward_kernel(st_cpe *cpe, void *args)
{
    elt_kernel(cpe, args, act_forward_work);
}

static void act_backward_kernel(st_cpe *cpe, void *args)
{
    elt_kernel(cpe, args, act_backward_work);
}

static void bias_act_kernel(st_cpe *cpe, void *args)
{
    elt_kernel(cpe, args, bias_act_work);
}

static st_status check_act(const char *name, st_act act, st_error *err)
{
    if ((unsigned)act >= ST_ACT_COUNT)
        return st_fail(err, ST_EINPUT, "%s: unknown activation %d", name, (int)act);
    return ST_OK;
}

st_status st_cpe_act_forward(st_cpe_cluster *cg, st_act act, size_t count, const float *src,
                             float *dst, st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    st_status st = check_act("act_forward", act, err);
    if (st != ST_OK)
        return st;
    if (!src || !dst)
        return st_fail(err, ST_EINPUT, "act_forward: no %s given", !src ? "src" : "dst");
    if (count == 0 || (act == ST_ACT_LINEAR && src == dst))
        return ST_OK;
    elt_args a = {.act = act, .count = count, .in = {src}, .inputs = 1, .out = dst};
    return st_cpe_launch(cg, "act_forward", act_forward_kernel, &a, out, err);
}

st_status st_cpe_act_backward(st_cpe_cluster *cg, st_act act, size_t count, const float *dst,
                              const float *diff_dst, float *diff_src, int accumulate,
                              st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    st_status st = check_act("act_backward", act, err);
    if (st != ST_OK)
        return st;
    if (!dst || !diff_dst || !diff_src)
        return st_fail(err, ST_EINPUT, "act_backward: no %s given",
                       !dst ? "dst" : !diff_dst ? "diff_dst" : "diff_src");
    if (count == 0 || (act == ST_ACT_LINEAR && !accumulate && diff_src == diff_dst))
        return ST_OK;
    elt_args a = {.act = act, .count = count, .in = {dst, diff_dst, diff_src},
                  .inputs = accumulate ? 3 : 2, .out = diff_src, .out_buf = accumulate ? 2 : 1,
                  .accumulate = accumulate != 0};
    return st_cpe_launch(cg, "act_backward", act_backward_kernel, &a, out, err);
}

st_status st_cpe_bias_act(st_cpe_cluster *cg, int n, int c, size_t per_channel,
                          const float *bias, st_act act, float *y, st_cpe_counters *out,
                          st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    st_status st = check_act("bias_act", act, err);
    if (st != ST_OK)
        return st;
    if (n < 1 || c < 1 || per_channel < 1)
        return st_fail(err, ST_EINPUT,
                       "bias_act: shape [%d, %d, %zu] (expected samples, channels and values "
                       "per channel >= 1)",
                       n, c, per_channel);
    if (!y)
        return st_fail(err, ST_EINPUT, "bias_act: no y given");
    if (!bias && act == ST_ACT_LINEAR)
        return ST_OK;
    elt_args a = {.act = act, .count = (size_t)n * (size_t)c * per_channel, .in = {y},
                  .inputs = 1, .out = y, .bias = bias, .c = (size_t)c,
                  .per_channel = per_channel, .bias_resident = c <= BIAS_RESIDENT_MAX};
    return st_cpe_launch(cg, "bias_act", bias_act_kernel, &a, out, err);
}

/* ---- bias gradient ---- */

typedef enum bias_grad_split { SPLIT_BY_CHANNEL_RANGE, SPLIT_BY_SEQUENCE } bias_grad_split;

typedef struct bias_grad_args {
    const float *dy;
    float *db;
    size_t n, c, per_channel;
    bias_grad_split split;
    double *partial; /* [CPEs][2], main memory: by sequence, channels cut between CPEs */
} bias_grad_args;

/* Elements [j0, j1) of a block of rows: rows of len floats, pitch floats
 * apart from base; element j is row j / len, column j % len, and column x
 * belongs to channel channel0 + x / per_channel. By channel range a CPE
 * has one segment (its channels, all samples); by sequence, one per
 * channel its share meets. */
typedef struct row_segment {
    const float *base;
    size_t len, pitch, j0, j1;
    size_t channel0, channels;
} row_segment;

/* A chunk: m elements of segment seg from j, whole rows when rows > 0. */
typedef struct bg_chunk {
    size_t seg, j, m, rows;
} bg_chunk;

typedef struct bg_slot {
    float *x;
    bg_chunk chunk;
    st_cpe_reply get;
} bg_slot;

typedef struct bg_cpe {
    const bias_grad_args *a;
    int id, cpes;
    size_t lo, hi;         /* by sequence: the share of the channel-major sequence */
    size_t first_channel;  /* by channel range: c0; by sequence: the share's first channel */
    size_t segments;
    bg_slot slot[2];
    double *sums;          /* the current segment's channels */
    float *run;            /* finished channels waiting for one put */
    size_t run_first, run_count;
    double *partial;       /* by sequence: [2] the cut channels' sums, put from here */
    st_cpe_reply run_put, partial_put;
} bg_cpe;

static row_segment bg_segment(const bg_cpe *b, size_t g)
{
    const bias_grad_args *a = b->a;
    size_t P = a->per_channel, pitch = a->c * P;
    row_segment s;
    if (a->split == SPLIT_BY_CHANNEL_RANGE) {
        size_t lo, hi;
        cpe_kernel_share(0, a->c, 1, b->id, b->cpes, &lo, &hi);
        s = (row_segment){a->dy + lo * P, (hi - lo) * P, pitch, 0, a->n * (hi - lo) * P, lo,
                          hi - lo};
        return s;
    }
    size_t ch = b->first_channel + g, span = a->n * P, start = ch * span;
    size_t j0 = b->lo > start ? b->lo - start : 0;
    size_t j1 = cpe_min_size(b->hi, start + span) - start;
    s = (row_segment){a->dy + ch * P, P, pitch, j0, j1, ch, 1};
    return s;
}

/* The chunk starting at element j of segment g. */
static bg_chunk bg_chunk_at(const bg_cpe *b, size_t g, size_t j)
{
    row_segment s = bg_segment(b, g);
    bg_chunk k = {g, j, 0, 0};
    size_t col = j % s.len;
    if (col == 0 && s.len <= ELT_CHUNK)
        k.rows = cpe_min_size(ELT_CHUNK / s.len, (s.j1 - j) / s.len);
    k.m = k.rows > 0 ? k.rows * s.len : cpe_min_size(cpe_min_size(ELT_CHUNK, s.len - col), s.j1 - j);
    return k;
}

/* The chunk after k, or one with m == 0 at the end. */
static bg_chunk bg_chunk_next(const bg_cpe *b, bg_chunk k)
{
    row_segment s = bg_segment(b, k.seg);
    if (k.j + k.m < s.j1)
        return bg_chunk_at(b, k.seg, k.j + k.m);
    if (k.seg + 1 < b->segments)
        return bg_chunk_at(b, k.seg + 1, bg_segment(b, k.seg + 1).j0);
    bg_chunk end = {k.seg + 1, 0, 0, 0};
    return end;
}

static void bg_issue(st_cpe *cpe, const bg_cpe *b, bg_slot *slot, bg_chunk k)
{
    row_segment s = bg_segment(b, k.seg);
    slot->chunk = k;
    cpe_reply_reset(&slot->get);
    const float *from = s.base + k.j / s.len * s.pitch + k.j % s.len;
    if (k.rows > 0)
        cpe_get_rows(cpe, slot->x, from, s.len * sizeof(float), s.pitch * sizeof(float), k.rows,
                     &slot->get);
    else
        st_cpe_dma_get(cpe, slot->x, from, k.m * sizeof(float), &slot->get);
}

/* sums[x / per_channel] += the value at column x, for the columns
 * [col, col + m) of one row, in column order (each channel's running sum
 * kept in a register over its run of columns: the same additions). */
static void bg_add_row(double *sums, const float *x, size_t col, size_t m, size_t per_channel)
{
    size_t ch = col / per_channel, i = col % per_channel;
    for (size_t k = 0; k < m; ch++, i = 0) {
        size_t run = cpe_min_size(per_channel - i, m - k);
        double sum = sums[ch];
        for (size_t e = 0; e < run; e++)
            sum += x[k + e];
        sums[ch] = sum;
        k += run;
    }
}

static void bg_flush_run(st_cpe *cpe, bg_cpe *b)
{
    if (b->run_count == 0)
        return;
    cpe_reply_reset(&b->run_put);
    st_cpe_dma_put(cpe, b->a->db + b->run_first, b->run, b->run_count * sizeof(float),
                   &b->run_put);
    st_cpe_dma_wait(cpe, &b->run_put, 1); /* run is refilled next */
    b->run_count = 0;
}

/* A channel summed entirely on this CPE: db[ch] = sum, via the run. */
static void bg_finished_channel(st_cpe *cpe, bg_cpe *b, size_t ch, double sum)
{
    if (b->run_count == BIAS_GRAD_RUN || (b->run_count > 0 && ch != b->run_first + b->run_count))
        bg_flush_run(cpe, b);
    if (b->run_count == 0)
        b->run_first = ch;
    b->run[b->run_count++] = (float)sum;
}

/* Segment g is summed: its channels go to db, or (a channel cut between
 * CPEs, by sequence) its partial sum to partial[id][0] for the share's
 * first channel, [id][1] for its last. */
static void bg_segment_done(st_cpe *cpe, bg_cpe *b, size_t g)
{
    const bias_grad_args *a = b->a;
    row_segment s = bg_segment(b, g);
    if (a->split == SPLIT_BY_CHANNEL_RANGE || (s.j0 == 0 && s.j1 == a->n * a->per_channel)) {
        for (size_t k = 0; k < s.channels; k++)
            bg_finished_channel(cpe, b, s.channel0 + k, b->sums[k]);
        return;
    }
    int which = g == 0 ? 0 : 1;
    b->partial[which] = b->sums[0];
    st_cpe_dma_put(cpe, a->partial + 2 * b->id + which, &b->partial[which], sizeof(double),
                   &b->partial_put);
}

/* By sequence, after the barrier: the channel cut between this CPE and the
 * next ones, if this CPE holds its first part, gets the parts added in CPE
 * order. */
static void bg_combine(st_cpe *cpe, bg_cpe *b)
{
    const bias_grad_args *a = b->a;
    size_t span = a->n * a->per_channel;
    size_t last = (b->hi - 1) / span;
    if (b->hi % span == 0 || last * span < b->lo)
        return; /* the last channel ends here, or began on an earlier CPE */
    double *parts = st_cpe_ldm_alloc(cpe, 2 * (size_t)b->cpes * sizeof(double), "partial sums");
    cpe_get_now(cpe, parts, a->partial, 2 * (size_t)b->cpes * sizeof(double));
    double sum = parts[2 * b->id + (b->segments == 1 ? 0 : 1)];
    uint64_t adds = 0;
    for (int k = b->id + 1; k < b->cpes; k++) {
        size_t lo, hi;
        cpe_kernel_share(0, a->c * span, 1, k, b->cpes, &lo, &hi);
        if (lo >= (last + 1) * span)
            break;
        if (lo < hi) {
            sum += parts[2 * k];
            adds++;
        }
    }
    cpe_scalar_loop(cpe, adds, 1.0, 1.0, 0.0, 1.0);
    float *value = st_cpe_ldm_alloc(cpe, sizeof *value, "combined sum");
    *value = (float)sum;
    cpe_put_now(cpe, a->db + last, value, sizeof *value);
}

static void bias_grad_kernel(st_cpe *cpe, void *args)
{
    bg_cpe b;
    memset(&b, 0, sizeof b);
    b.a = cpe_kernel_args(cpe, args, sizeof(bias_grad_args));
    b.id = st_cpe_id(cpe);
    b.cpes = st_cpe_count(cpe);
    const bias_grad_args *a = b.a;
    size_t span = a->n * a->per_channel, max_channels = 1;
    if (a->split == SPLIT_BY_CHANNEL_RANGE) {
        size_t lo, hi;
        cpe_kernel_share(0, a->c, 1, b.id, b.cpes, &lo, &hi);
        b.segments = hi > lo ? 1 : 0;
        b.first_channel = lo;
        max_channels = (a->c + (size_t)b.cpes - 1) / (size_t)b.cpes;
    } else {
        cpe_kernel_share(0, a->c * span, 1, b.id, b.cpes, &b.lo, &b.hi);
        b.first_channel = b.lo / span;
        b.segments = b.hi > b.lo ? (b.hi - 1) / span - b.first_channel + 1 : 0;
    }
    b.sums = st_cpe_ldm_alloc(cpe, max_channels * sizeof(double), "channel sums");
    b.run = st_cpe_ldm_alloc(cpe, BIAS_GRAD_RUN * sizeof(float), "finished channels");
    b.partial = st_cpe_ldm_alloc(cpe, 2 * sizeof(double), "cut channels' sums");
    for (int s = 0; s < 2; s++)
        b.slot[s].x = st_cpe_ldm_alloc(cpe, ELT_CHUNK * sizeof(float), "chunk");
    if (b.segments > 0) {
        bg_chunk k = bg_chunk_at(&b, 0, bg_segment(&b, 0).j0);
        bg_issue(cpe, &b, &b.slot[0], k);
        memset(b.sums, 0, max_channels * sizeof(double));
        for (int i = 0; k.m > 0; i++) {
            bg_slot *cur = &b.slot[i % 2];
            bg_chunk next = bg_chunk_next(&b, k);
            if (next.m > 0)
                bg_issue(cpe, &b, &b.slot[(i + 1) % 2], next);
            st_cpe_dma_wait(cpe, &cur->get, cur->get.count);
            row_segment s = bg_segment(&b, k.seg);
            if (!st_cpe_cost_only(cpe) && k.rows > 0)
                for (size_t r = 0; r < k.rows; r++)
                    bg_add_row(b.sums, cur->x + r * s.len, 0, s.len, a->per_channel);
            else if (!st_cpe_cost_only(cpe))
                bg_add_row(b.sums, cur->x, k.j % s.len, k.m, a->per_channel);
            cpe_vector_loop(cpe, k.m, 1.0, 1.0, 1.0);
            if (next.seg != k.seg) {
                bg_segment_done(cpe, &b, k.seg);
                memset(b.sums, 0, max_channels * sizeof(double));
            }
            k = next;
        }
    }
    bg_flush_run(cpe, &b);
    if (a->split == SPLIT_BY_SEQUENCE) {
        st_cpe_dma_wait(cpe, &b.partial_put, b.partial_put.count);
        st_cpe_sync(cpe);
        if (b.segments > 0)
            bg_combine(cpe, &b);
    }
}

st_status st_cpe_bias_grad(st_cpe_cluster *cg, int n, int c, size_t per_channel, const float *dy,
                           float *db, st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (n < 1 || c < 1 || per_channel < 1)
        return st_fail(err, ST_EINPUT,
                       "bias_grad: shape [%d, %d, %zu] (expected samples, channels and values "
                       "per channel >= 1)",
                       n, c, per_channel);
    if (!dy || !db)
        return st_fail(err, ST_EINPUT, "bias_grad: no %s given", !dy ? "dy" : "db");
    size_t cpes = (size_t)st_cpe_cluster_machine(cg)->cpes;
    size_t channels = (size_t)c, per_cpe = (channels + cpes - 1) / cpes;
    int by_range = channels >= cpes && per_cpe <= BIAS_GRAD_RANGE_MAX &&
                   (channels % cpes == 0 || per_channel < 64);
    double partial[2 * ST_CPE_MAX];
    memset(partial, 0, sizeof partial);
    bias_grad_args a = {.dy = dy, .db = db, .n = (size_t)n, .c = channels,
                        .per_channel = per_channel,
                        .split = by_range ? SPLIT_BY_CHANNEL_RANGE : SPLIT_BY_SEQUENCE,
                        .partial = partial};
    return st_cpe_launch(cg, "bias_grad", bias_grad_kernel, &a, out, err);
}
