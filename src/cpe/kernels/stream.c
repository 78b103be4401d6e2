/* The parameter server's per-slice work as CPE programs: the gradient sum
 * of the sliced aggregation and the solver update, both over a range
 * [begin, end) of the parameter arena.
 *
 * Work split (both): the range is cut into 64 shares of whole 64-byte
 * lines (16 floats) from begin, one per CPE, each streamed through LDM in
 * chunks.
 *
 * Gradient sum: grads[0][i] = scale * (grads[0][i] + ... + grads[T-1][i]),
 * added in float in worker order and then scaled, the arithmetic of
 * st_ps_reduce_range, so the result is bitwise the same. A chunk of grads[0]
 * lands in an accumulator, those of grads[1..T-1] in two input buffers in
 * turn; each transfer is issued one step before the addition it feeds, and
 * two accumulators alternate so a chunk's put overlaps the next chunk's
 * sums. LDM: 4 chunks of GRAD_SUM_CHUNK floats and the T pointers. Cost per
 * float: T - 1 additions and a multiplication; DMA 4 T bytes in, 4 out.
 *
 * Solver update: w, g and the state planes' chunks come into LDM (the
 * planes packed, the chunk length apart), the CPE builds a parameter table
 * for the chunk (every tensor meeting it, cut to it, offsets from the
 * chunk's start) and calls st_solver_update on LDM, then w and the planes
 * go back. Every rule is elementwise and the same function runs, so the
 * result is bitwise st_solver_update's on the host. Two chunks are in
 * flight. The tensors are read from the table in main memory by DMA,
 * SOLVER_PARAM_WINDOW entries at a time, from the first one meeting the
 * CPE's share (found by the host). Alignment gaps between tensors travel
 * with their chunk and go back unchanged.
 * Flops declared per float (each +, -, *, / and square root counts one;
 * the expressions of src/ops/solver.c, with gd = g + decay w):
 *   sgd 6, nesterov 10, adagrad 9, rmsprop 12, adadelta 19, adam 16;
 *   running statistics 3; alignment gaps 0.
 * DMA per float: 4 (2 + planes) bytes in, 4 (1 + planes) out. */
#include <string.h>

#include "kernel_common.h"

/* ---- gradient sum ---- */

#define GRAD_SUM_CHUNK 2048 /* floats per buffer: 4 buffers, 32 KB */

typedef struct grad_sum_args {
    float *const *src; /* [n_src] arena pointers, main memory */
    int n_src;
    size_t begin, end;
    float scale;
    float *dst;        /* src[0] */
} grad_sum_args;

typedef struct grad_sum_cpe {
    const grad_sum_args *a;
    float **src;       /* LDM copy of the pointers */
    size_t lo, hi;     /* this CPE's share */
    float *acc[2], *in[2];
    st_cpe_reply acc_get[2], acc_put[2], in_get[2];
} grad_sum_cpe;

/* Loads are numbered u = chunk * T + source; sources 1.. alternate between
 * the two input buffers. */
static int grad_sum_input_buffer(size_t u, size_t T)
{
    size_t k = u / T, t = u % T;
    return (int)((k * (T - 1) + t - 1) % 2);
}

static void grad_sum_issue(st_cpe *cpe, grad_sum_cpe *s, size_t u)
{
    size_t T = (size_t)s->a->n_src, k = u / T, t = u % T;
    size_t at = s->lo + k * GRAD_SUM_CHUNK, m = cpe_min_size(GRAD_SUM_CHUNK, s->hi - at);
    if (t == 0) {
        int b = (int)(k % 2);
        st_cpe_dma_wait(cpe, &s->acc_put[b], s->acc_put[b].count); /* chunk k - 2 went out */
        cpe_reply_reset(&s->acc_get[b]);
        st_cpe_dma_get(cpe, s->acc[b], s->src[0] + at, m * sizeof(float), &s->acc_get[b]);
    } else {
        int b = grad_sum_input_buffer(u, T);
        cpe_reply_reset(&s->in_get[b]);
        st_cpe_dma_get(cpe, s->in[b], s->src[t] + at, m * sizeof(float), &s->in_get[b]);
    }
}

static void grad_sum_kernel(st_cpe *cpe, void *args)
{
    grad_sum_cpe s;
    memset(&s, 0, sizeof s);
    s.a = cpe_kernel_args(cpe, args, sizeof *s.a);
    const grad_sum_args *a = s.a;
    size_t T = (size_t)a->n_src;
    s.src = st_cpe_ldm_alloc(cpe, T * sizeof *s.src, "source pointers");
    cpe_get_control_now(cpe, s.src, a->src, T * sizeof *s.src);
    for (int b = 0; b < 2; b++) {
        s.acc[b] = st_cpe_ldm_alloc(cpe, GRAD_SUM_CHUNK * sizeof(float), "accumulator");
        s.in[b] = st_cpe_ldm_alloc(cpe, GRAD_SUM_CHUNK * sizeof(float), "input chunk");
    }
    cpe_kernel_share(a->begin, a->end, 16, st_cpe_id(cpe), st_cpe_count(cpe), &s.lo, &s.hi);
    size_t chunks = (s.hi - s.lo + GRAD_SUM_CHUNK - 1) / GRAD_SUM_CHUNK, loads = chunks * T;
    if (loads > 0)
        grad_sum_issue(cpe, &s, 0);
    for (size_t u = 0; u < loads; u++) {
        if (u + 1 < loads)
            grad_sum_issue(cpe, &s, u + 1);
        size_t k = u / T, t = u % T;
        size_t at = s.lo + k * GRAD_SUM_CHUNK, m = cpe_min_size(GRAD_SUM_CHUNK, s.hi - at);
        int ab = (int)(k % 2);
        float *acc = s.acc[ab];
        if (t == 0) {
            st_cpe_dma_wait(cpe, &s.acc_get[ab], s.acc_get[ab].count);
        } else {
            int b = grad_sum_input_buffer(u, T);
            st_cpe_dma_wait(cpe, &s.in_get[b], s.in_get[b].count);
            const float *in = s.in[b];
            for (size_t i = 0; i < m && !st_cpe_cost_only(cpe); i++)
                acc[i] += in[i];
            cpe_vector_loop(cpe, m, 1.0, 3.0, 1.0);
        }
        if (t == T - 1) {
            for (size_t i = 0; i < m && !st_cpe_cost_only(cpe); i++)
                acc[i] *= a->scale;
            cpe_vector_loop(cpe, m, 1.0, 2.0, 1.0);
            cpe_reply_reset(&s.acc_put[ab]);
            st_cpe_dma_put(cpe, a->dst + at, acc, m * sizeof(float), &s.acc_put[ab]);
        }
    }
    for (int b = 0; b < 2; b++)
        st_cpe_dma_wait(cpe, &s.acc_put[b], s.acc_put[b].count);
}

/* Whether [a, a + an) and [b, b + bn) floats overlap. */
static int floats_overlap(const float *a, size_t an, const float *b, size_t bn)
{
    return a < b + bn && b < a + an;
}

st_status st_cpe_grad_sum(st_cpe_cluster *cg, float *const *grads, int n_grads, size_t begin,
                          size_t end, float scale, st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (n_grads < 1 || n_grads > ST_CPE_GRAD_SUM_MAX_SOURCES)
        return st_fail(err, ST_EINPUT, "grad_sum: %d gradient buffers (expected 1 to %d)",
                       n_grads, ST_CPE_GRAD_SUM_MAX_SOURCES);
    if (!grads)
        return st_fail(err, ST_EINPUT, "grad_sum: no gradient buffers given");
    if (begin > end)
        return st_fail(err, ST_EINPUT, "grad_sum: range [%zu, %zu) ends before it begins", begin,
                       end);
    for (int t = 0; t < n_grads; t++) {
        if (!grads[t])
            return st_fail(err, ST_EINPUT, "grad_sum: gradient buffer %d is NULL", t);
        if (t > 0 && floats_overlap(grads[t] + begin, end - begin, grads[0] + begin, end - begin))
            return st_fail(err, ST_EINPUT,
                           "grad_sum: gradient buffer %d overlaps buffer 0 in [%zu, %zu) "
                           "(expected separate arenas)",
                           t, begin, end);
    }
    if (begin == end)
        return ST_OK;
    grad_sum_args a = {.src = grads, .n_src = n_grads, .begin = begin, .end = end,
                       .scale = scale, .dst = grads[0]};
    return st_cpe_launch(cg, "grad_sum", grad_sum_kernel, &a, out, err);
}

/* ---- solver update ---- */

#define SOLVER_CHUNK 1024       /* floats per buffer: 2 slots of w, g, 2 planes: 32 KB */
#define SOLVER_PARAM_WINDOW 16  /* table entries fetched at once: 1.375 KB */
/* Tensors meeting one chunk: each starts on a 16-float boundary, so at most
 * one before the chunk and one per boundary inside it. */
#define SOLVER_CHUNK_PARAMS (SOLVER_CHUNK / ST_PARAM_ALIGN + 2)

typedef struct solver_args {
    st_solver_cfg cfg;
    const st_param *params; /* main memory, sorted by offset */
    int n_params;
    int planes;
    float lr;
    long iter;
    size_t begin, end, stride;
    float *w, *state;
    const float *g;
    /* per CPE: the first tensor ending after its share starts; last, so
     * that the CPEs fetch only the machine's CPEs' entries */
    int first_param[ST_CPE_MAX];
} solver_args;

/* The bytes of a solver_args block the CPEs of a cpes-CPE core group
 * fetch. */
static size_t solver_args_bytes(int cpes)
{
    return offsetof(solver_args, first_param) + (size_t)cpes * sizeof(int);
}

/* Flops per float of the rule (header comment). */
static uint64_t solver_flops_per_float(const st_solver_cfg *c, st_param_kind kind)
{
    if (kind == ST_PARAM_STAT)
        return 3;
    return (uint64_t)st_solver_rules[c->rule].flops;
}

typedef struct solver_slot {
    float *w, *g, *state; /* state: planes packed m floats apart */
    size_t at, m;
    st_cpe_reply get, put;
} solver_slot;

/* The table entries [first, first + count) in LDM. */
typedef struct param_window {
    st_param *entry;
    int first, count;
} param_window;

static const st_param *param_at(st_cpe *cpe, const solver_args *a, param_window *win, int i)
{
    if (i < win->first || i >= win->first + win->count) {
        win->first = i;
        win->count = a->n_params - i < SOLVER_PARAM_WINDOW ? a->n_params - i : SOLVER_PARAM_WINDOW;
        cpe_get_control_now(cpe, win->entry, a->params + i,
                            (size_t)win->count * sizeof(st_param));
    }
    return &win->entry[i - win->first];
}

/* local = the tensors meeting [at, at + m), cut to it, offsets from at;
 * *next is the first tensor not wholly before the chunk and moves past the
 * ones that end inside it. Returns the chunk's flops. */
static uint64_t solver_chunk_table(st_cpe *cpe, const solver_args *a, param_window *win,
                                   int *next, size_t at, size_t m, st_param_table *local)
{
    uint64_t flops = 0;
    size_t end = at + m;
    local->n = 0;
    local->count = m;
    for (int i = *next; i < a->n_params; i++, *next = i) {
        const st_param *p = param_at(cpe, a, win, i);
        if (p->offset >= end)
            break;
        size_t pe = p->offset + p->count;
        size_t b = p->offset > at ? p->offset : at, e = pe < end ? pe : end;
        if (b < e) {
            st_param *q = &local->p[local->n++];
            q->kind = p->kind;
            q->keep = p->keep;
            q->offset = b - at;
            q->count = e - b;
            flops += (e - b) * solver_flops_per_float(&a->cfg, p->kind);
        }
        if (pe > end)
            break;
    }
    return flops;
}

static void solver_issue(st_cpe *cpe, const solver_args *a, solver_slot *slot, size_t at,
                         size_t m)
{
    st_cpe_dma_wait(cpe, &slot->put, slot->put.count); /* its last chunk went out */
    cpe_reply_reset(&slot->get);
    slot->at = at;
    slot->m = m;
    st_cpe_dma_get(cpe, slot->w, a->w + at, m * sizeof(float), &slot->get);
    st_cpe_dma_get(cpe, slot->g, a->g + at, m * sizeof(float), &slot->get);
    for (int k = 0; k < a->planes; k++)
        st_cpe_dma_get(cpe, slot->state + (size_t)k * m, a->state + (size_t)k * a->stride + at,
                       m * sizeof(float), &slot->get);
}

static void solver_kernel(st_cpe *cpe, void *args)
{
    const solver_args *a = cpe_kernel_args(cpe, args, solver_args_bytes(st_cpe_count(cpe)));
    int id = st_cpe_id(cpe);
    size_t lo, hi;
    cpe_kernel_share(a->begin, a->end, ST_PARAM_ALIGN, id, st_cpe_count(cpe), &lo, &hi);
    if (lo >= hi)
        return;
    param_window win = {
        st_cpe_ldm_alloc(cpe, SOLVER_PARAM_WINDOW * sizeof(st_param), "tensor table window"), 0,
        0};
    st_param_table local = {
        .p = st_cpe_ldm_alloc(cpe, SOLVER_CHUNK_PARAMS * sizeof(st_param), "chunk tensor table")};
    solver_slot slot[2];
    memset(slot, 0, sizeof slot);
    for (int s = 0; s < 2; s++) {
        slot[s].w = st_cpe_ldm_alloc(cpe, SOLVER_CHUNK * sizeof(float), "weights chunk");
        slot[s].g = st_cpe_ldm_alloc(cpe, SOLVER_CHUNK * sizeof(float), "gradient chunk");
        slot[s].state = st_cpe_ldm_alloc(cpe, (size_t)a->planes * SOLVER_CHUNK * sizeof(float),
                                         "state chunk");
    }
    int next = a->first_param[id];
    size_t chunks = (hi - lo + SOLVER_CHUNK - 1) / SOLVER_CHUNK;
    solver_issue(cpe, a, &slot[0], lo, cpe_min_size(SOLVER_CHUNK, hi - lo));
    for (size_t k = 0; k < chunks; k++) {
        solver_slot *cur = &slot[k % 2];
        /* The table first: a window refill waits for its own transfer only,
         * not behind the next chunk's. */
        uint64_t flops = solver_chunk_table(cpe, a, &win, &next, cur->at, cur->m, &local);
        if (k + 1 < chunks) {
            size_t at = lo + (k + 1) * SOLVER_CHUNK;
            solver_issue(cpe, a, &slot[(k + 1) % 2], at, cpe_min_size(SOLVER_CHUNK, hi - at));
        }
        st_cpe_dma_wait(cpe, &cur->get, cur->get.count);
        if (!st_cpe_cost_only(cpe))
            st_solver_update(&a->cfg, &local, a->lr, a->iter, 0, cur->m, cur->w, cur->state,
                             cur->m, cur->g);
        double per_value = cur->m ? (double)flops / (double)cur->m : 0.0;
        cpe_vector_loop(cpe, cur->m, per_value, 3.0 + 2.0 * a->planes, per_value);
        cpe_reply_reset(&cur->put);
        st_cpe_dma_put(cpe, a->w + cur->at, cur->w, cur->m * sizeof(float), &cur->put);
        for (int p = 0; p < a->planes; p++)
            st_cpe_dma_put(cpe, a->state + (size_t)p * a->stride + cur->at,
                           cur->state + (size_t)p * cur->m, cur->m * sizeof(float), &cur->put);
    }
    for (int s = 0; s < 2; s++)
        st_cpe_dma_wait(cpe, &slot[s].put, slot[s].put.count);
}

/* The first tensor of t ending after arena float `at` (t sorted). */
static int first_param_after(const st_param_table *t, size_t at)
{
    int lo = 0, hi = t->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (t->p[mid].offset + t->p[mid].count > at)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

st_status st_cpe_solver_update(st_cpe_cluster *cg, const st_solver_step *step, size_t begin,
                               size_t end, float *w, float *state, size_t stride, const float *g,
                               st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    const st_solver_cfg *c = step ? step->cfg : NULL;
    const st_param_table *t = step ? step->table : NULL;
    if (!c || !t || !w || !state || !g)
        return st_fail(err, ST_EINPUT, "solver_update: no %s given",
                       !c ? "solver configuration" : !t ? "parameter table" : !w ? "weights"
                       : !state                         ? "solver state"
                                                        : "gradient");
    if ((unsigned)c->rule >= ST_SOLVER_RULE_COUNT)
        return st_fail(err, ST_EINPUT, "solver_update: unknown update rule %d", (int)c->rule);
    if (begin > end || end > t->count)
        return st_fail(err, ST_EINPUT,
                       "solver_update: range [%zu, %zu) is not inside the %zu-float arena", begin,
                       end, t->count);
    int planes = st_solver_state_per_param(c);
    if (planes > 1 && stride < end)
        return st_fail(err, ST_EINPUT,
                       "solver_update: state planes %zu floats apart overlap the range ending at "
                       "%zu",
                       stride, end);
    size_t prev_end = 0;
    for (int i = 0; i < t->n; i++) {
        const st_param *p = &t->p[i];
        if (p->offset % ST_PARAM_ALIGN || p->offset < prev_end || p->offset + p->count > t->count)
            return st_fail(err, ST_EINPUT,
                           "solver_update: tensor %d (%s) at offset %zu, %zu floats: expected "
                           "tensors sorted by offset, apart, on %d-float boundaries and inside "
                           "the %zu-float arena",
                           i, p->name, p->offset, p->count, ST_PARAM_ALIGN, t->count);
        prev_end = p->offset + p->count;
    }
    if (begin == end)
        return ST_OK;
    solver_args a = {.cfg = *c, .params = t->p, .n_params = t->n, .planes = planes,
                     .lr = step->lr, .iter = step->iter, .begin = begin, .end = end, .stride = stride, .w = w,
                     .state = state, .g = g};
    int cpes = st_cpe_cluster_machine(cg)->cpes;
    for (int k = 0; k < cpes; k++) {
        size_t lo, hi;
        cpe_kernel_share(begin, end, ST_PARAM_ALIGN, k, cpes, &lo, &hi);
        a.first_param[k] = first_param_after(t, lo);
    }
    return st_cpe_launch(cg, "solver_update", solver_kernel, &a, out, err);
}
