/* The oneDNN backend (Intel oneDNN 2.x C API): this file is the backend
 * itself, each worker's context and the creation of a kernel from its
 * kind's entry. Every oneDNN call of singletrain is in this folder, so the
 * move to oneDNN 3's API touches nothing else: dnnl_prim.c (memory
 * descriptors, primitives, reorders), dnnl_kernel.c (the kernel record, its
 * edges, the passes several kinds share), one file per kernel kind
 * (dnnl_conv.c with dnnl_conv_measure.c, dnnl_fc.c, dnnl_pool.c,
 * dnnl_bnorm.c, dnnl_lrn.c, dnnl_eltwise.c: activation and softmax), and
 * dnnl_internal.h between them.
 *
 * Each worker has its own engine and stream (its st_bctx). A kernel holds,
 * for every batch size it was declared for, the primitives of its forward
 * and backward passes, all created when the kernel is created. Primitives
 * choose their layouts (format_tag any); activations stay in those layouts
 * from one layer to the next. Where a kernel's input arrives in another
 * layout, or its output must be plain, the kernel reorders at that edge
 * (its "edges", dnnl_kernel.c). Weights and their gradients are plain in
 * the shared arena: convolutions reorder the weights into their layout once
 * per forward and keep them for the backward pass, and reorder the weight
 * gradient back.
 * Inner products use the plain layouts directly (oneDNN runs them as GEMM).
 *
 * In --precision bf16 (where oneDNN's ISA is AVX-512: precision_supported)
 * convolutions and inner products read bf16 operands: src, the weights and
 * diff_dst are reordered to bf16 at the kernel's edges (round to nearest
 * even), the primitives sum in fp32 and write dst, diff_src and the weight
 * gradient in fp32, so the activations between layers stay fp32; the bias
 * gradient is summed from the fp32 diff_dst (dnnl_kernel.c). Given the
 * weights' bf16 copy (st_backend_opts.weights_bf16, made by
 * dnnl_bf16_convert once an iteration for every worker), the kernels
 * reorder that copy into their layouts, or read it where it is theirs
 * (the inner product's plain weights), and convert no weights.
 *
 * Scratchpads are user-managed: a kernel asks the worker for its largest
 * scratchpad (plus room for one temporary gradient) as scratch, and for
 * everything that must survive from forward to backward as workspace.
 *
 * Threads: oneDNN runs on OpenMP in Debian. ctx_create sets the calling
 * thread's OpenMP team size to the worker's intra-op thread count, so each
 * worker thread runs its primitives on that many threads (1 by default:
 * one core per worker, no oversubscription). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "base/cores.h"
#include "base/memory.h"
#include "dnnl_internal.h"

/* The kinds, indexed by st_kind; each is defined in its own file. */
static const dn_kind *const kinds[ST_K_COUNT] = {
#define DN_KIND_ENTRY(kind, stem, name) [kind] = &dn_kind_##stem,
    ST_KINDS(DN_KIND_ENTRY)
#undef DN_KIND_ENTRY
};

/* Distinct batch sizes, largest first. */
static int sorted_sizes(const st_kdesc *d, int *sizes, st_error *err)
{
    int count = 0;
    int n_in = d->batch_sizes ? d->n_batch_sizes : 0;
    for (int i = -1; i < n_in; i++) {
        int n = i < 0 ? d->n : d->batch_sizes[i];
        int seen = 0;
        for (int j = 0; j < count; j++)
            seen |= sizes[j] == n;
        if (seen || n < 1)
            continue;
        if (count == MAX_VARIANTS) {
            st_fail(err, ST_EINTERNAL, "more than %d batch sizes for one kernel", MAX_VARIANTS);
            return -1;
        }
        sizes[count++] = n;
    }
    for (int i = 1; i < count; i++)
        for (int j = i; j > 0 && sizes[j] > sizes[j - 1]; j--) {
            int t = sizes[j];
            sizes[j] = sizes[j - 1];
            sizes[j - 1] = t;
        }
    return count;
}

/* Address space oneDNN may need while it creates a kernel's primitives.
 * It does not check its own allocations (one that fails there is a
 * segmentation fault), so under a limit on the address space (ulimit -v
 * or -d) this much must be available before it starts: malloc's arena of
 * a new thread alone reserves 64 MB. */
#define BUILD_HEADROOM ((size_t)128 << 20)

static int address_space_limited(void)
{
    struct rlimit as, data;
    return (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
           (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
}

/* Under a limit, BUILD_HEADROOM must be available before oneDNN builds
 * (what: what is being built, for the message). */
static st_status check_headroom(const st_bctx *c, const char *what, st_error *err)
{
    if (!c->limited)
        return ST_OK;
    void *headroom = malloc(BUILD_HEADROOM);
    if (!headroom)
        return st_fail(err, ST_ENOMEM, "out of memory creating %s: the %zu MB of address "
                       "space its set-up may need are not available", what,
                       BUILD_HEADROOM >> 20);
    free(headroom);
    return ST_OK;
}

static st_status dnnl_kernel_create(st_bctx *c, const st_kdesc *d, st_kernel **out,
                                    st_error *err)
{
    st_status hst = check_headroom(c, "a oneDNN kernel", err);
    if (hst != ST_OK)
        return hst;
    if ((unsigned)d->kind >= ST_K_COUNT)
        return st_fail(err, ST_EINTERNAL, "oneDNN backend: no kernel kind %d", (int)d->kind);
    /* bf16 activations (st_kdesc.dst_bf16) come out of convolutions and
     * inner products in bf16, and out of max pooling of bf16 ones; they go
     * into those and into the activation's backward */
    const dnnl_memory_desc_t *in = d->src_layout;
    int in_bf16 = in && in->data_type == dnnl_bf16, weighted = d->kind == ST_K_CONV ||
                                                             d->kind == ST_K_FC;
    int max_pool = d->kind == ST_K_POOL && ((const st_pool_desc *)d)->alg == ST_POOL_MAX;
    if ((d->dst_bf16 && !((weighted && c->precision == ST_PRECISION_BF16) ||
                          (max_pool && in_bf16))) ||
        (in_bf16 && !weighted && d->kind != ST_K_POOL && d->kind != ST_K_ACT))
        return st_fail(err, ST_EINTERNAL, "oneDNN backend: a %s kernel %s bf16 activations",
                       st_kind_name(d->kind), in_bf16 ? "given" : "asked for");
    int sizes[MAX_VARIANTS];
    int n_sizes = sorted_sizes(d, sizes, err);
    if (n_sizes < 0)
        return ST_EINTERNAL;
    dn_kernel *k = st_calloc(1, sizeof *k, "oneDNN kernel", err);
    dn_variant *v = st_calloc((size_t)n_sizes, sizeof *v, "oneDNN kernel variants", err);
    if (!k || !v) {
        free(k);
        free(v);
        return ST_ENOMEM;
    }
    k->v = v;
    k->base.ops = &kinds[d->kind]->ops;
    k->base.kind = d->kind;
    k->ctx = c;
    k->operand_dt = c->precision == ST_PRECISION_BF16 &&
                            (d->kind == ST_K_CONV || d->kind == ST_K_FC)
                        ? dnnl_bf16
                        : dnnl_f32;
    k->w_given = c->weights_bf16 && k->operand_dt == dnnl_bf16;
    memcpy(&k->d, d, st_kdesc_size(d->kind));
    k->d.base.n = sizes[0];
    k->d.base.batch_sizes = NULL;
    k->ws_src = k->ws_dst = k->ws_ddst = k->ws_prim = k->ws_w = k->ws_wd = k->ws_dw = NONE;
    st_status st = ST_OK;
    for (int i = 0; i < n_sizes && st == ST_OK; i++) {
        k->v[i].n = sizes[i];
        k->n_var = i + 1;
        st = kinds[d->kind]->build(k, &k->v[i], i == 0, err);
    }
    if (st != ST_OK) {
        dn_kernel_destroy(&k->base);
        return st;
    }
    k->base.scratch_bytes = (k->scratchpad + 63) / 64 * 64 + k->tmp_bytes;
    *out = &k->base;
    return ST_OK;
}

static st_status dnnl_ctx_create(const st_backend_opts *o, st_bctx **out, st_error *err)
{
    st_bctx *c = st_calloc(1, sizeof *c, "oneDNN context", err);
    if (!c)
        return ST_ENOMEM;
    c->worker = o->worker;
    c->conv_impl = o->conv_impl;
    c->choices = o->choices;
    c->precision = o->precision;
    c->weights_bf16 = o->weights_bf16;
    c->limited = address_space_limited();
    st_status hst = check_headroom(c, "a oneDNN context", err);
    if (hst != ST_OK) {
        free(c);
        return hst;
    }
    omp_set_num_threads(o->intra_threads > 0 ? o->intra_threads : 1);
    dnnl_status_t s = dnnl_engine_create(&c->engine, dnnl_cpu, 0);
    if (s == dnnl_success)
        s = dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags);
    /* oneDNN generates the code of its sgemm at its first real call (about
     * 7 MB with the library code it touches, once per process; a 1 x 1
     * product takes another path and generates less), each path's kernels
     * under a once-flag of its own, and does not check those allocations:
     * one that fails is a segmentation fault (in dnnl_sgemm, pthread_once),
     * as it was under ulimit -v when the first product ran in training
     * while the readers decoded large images. So the products the kernels
     * make run here, in set-up, inside the memory estimate (whose plan of
     * a worker creates this context) and after the headroom check: an 8 x
     * 8 x 8 product (the blocked JIT GEMM and its packing kernels), and
     * the inner product's forward, dst^T = W * src^T, with 2 outputs (with
     * AVX-512, fewer than 16 outputs take oneDNN's "small-n" kernels,
     * generated apart at their first use; elsewhere the same GEMM). */
    float a[64] = {0}, b[64] = {0}, product[64];
    if (s == dnnl_success)
        s = dnnl_sgemm('N', 'N', 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, product, 8);
    if (s == dnnl_success)
        s = dnnl_sgemm('N', 'T', 2, 8, 8, 1.0f, a, 8, b, 8, 0.0f, product, 8);
    if (s != dnnl_success) {
        if (c->engine)
            dnnl_engine_destroy(c->engine);
        free(c);
        return dn_fail(err, "engine and stream creation", s);
    }
    *out = c;
    return ST_OK;
}

static void dnnl_ctx_destroy(st_bctx *c)
{
    if (!c)
        return;
    dnnl_stream_destroy(c->stream);
    dnnl_engine_destroy(c->engine);
    free(c);
}

/* The instruction set oneDNN dispatches to (ONEDNN_MAX_CPU_ISA can lower
 * it), as its name without "cpu_isa_": avx2, avx512_core_bf16 ... */
static const char *effective_isa(void)
{
    const char *isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
    return strncmp(isa, "cpu_isa_", 8) == 0 ? isa + 8 : isa;
}

/* st_backend.choice_context: what a measured choice holds for. oneDNN's
 * version (its implementations and their names), the instruction set it
 * dispatches to and the CPU model (the timings) decide which
 * implementation exists and wins; the activations between layers are
 * 32-bit floats, and a choice made for bf16 operands has the precision in
 * its key (dnnl_conv.c's choice_key); the candidates besides oneDNN's own
 * (dnnl_conv_matmul.c's, dnnl_fc.c's sgemm), so that choices measured
 * without them are measured again. */
static void dnnl_choice_context(char *buf, size_t size)
{
    const dnnl_version_t *v = dnnl_version();
    char cpu[160];
    st_cpu_model(cpu, sizeof cpu);
    snprintf(buf, size, "oneDNN %d.%d.%d (%s), isa %s, cpu %s, f32; bf16 weight gradients "
             "also as im2col+matmul and sgemm", v->major, v->minor, v->patch,
             v->hash ? v->hash : "no hash", effective_isa(), cpu);
}

/* st_backend.precision_supported: bf16 where oneDNN's instruction set is
 * AVX-512 (avx512_core) or wider: there oneDNN 2.6 has bf16 convolutions
 * and inner products, emulated on avx512_core and avx512_core_vnni,
 * native with avx512_core_bf16 (vdpbf16ps) and AMX. AVX2 and below (and
 * ONEDNN_MAX_CPU_ISA set to them) have none. The ISA enum is a set of
 * bits, each wider ISA holding the narrower's. */
static int dnnl_precision_supported(st_precision p, char *why, size_t size)
{
    if (p == ST_PRECISION_FP32)
        return 1;
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), need = dnnl_cpu_isa_avx512_core;
    if ((isa & need) == need)
        return 1;
    snprintf(why, size, "has no %s on this CPU (ISA %s, as oneDNN reports it): oneDNN's %s "
             "needs AVX-512 (avx512_core, emulated; native with avx512_core_bf16 or AMX); "
             "--backend ref --precision %s computes the same arithmetic (bf16 operands, fp32 "
             "sums) in plain C, slowly", st_precision_names[p], effective_isa(),
             st_precision_names[p], st_precision_names[p]);
    return 0;
}

/* st_backend.bf16_on_tiles: where oneDNN dispatches to avx512_core_amx,
 * its bf16 convolutions are AMX kernels (brgconv and jit
 * avx512_core_amx_bf16 in oneDNN 2.6). */
static int dnnl_bf16_on_tiles(void)
{
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), need = dnnl_cpu_isa_avx512_core_amx;
    return (isa & need) == need;
}

/* st_backend.bf16_convert: a oneDNN reorder of the count floats into
 * bf16, the conversion of the kernels' own reorders of the weights (both
 * oneDNN's JIT reorder: native vcvtneps2bf16 with avx512_core_bf16, which
 * flushes denormals, emulated on avx512_core, which keeps them); made at
 * each call, from oneDNN's primitive cache after the first. */
static st_status dnnl_bf16_convert(st_bctx *c, const float *src, uint16_t *dst, size_t count,
                                   st_error *err)
{
    if (count == 0)
        return ST_OK;
    dnnl_dims_t dims = {(dnnl_dim_t)count};
    dnnl_memory_desc_t from, to;
    dn_exec e = {0};
    size_t sp = 0;
    void *scratch = NULL;
    st_status st = dn_md_plain(&from, 1, dims, err);
    if (st == ST_OK) {
        to = dn_md_as(&from, dnnl_bf16);
        st = dn_make_reorder(c, &e, &from, &to, 0, &sp, err);
    }
    if (st == ST_OK && sp && !(scratch = st_alloc_aligned(sp, "bf16 conversion scratchpad",
                                                          err)))
        st = ST_ENOMEM;
    if (st == ST_OK)
        st = dn_run_reorder(c, &e, src, dst, scratch, err);
    st_free_aligned(scratch);
    dn_exec_free(&e);
    return st;
}

/* st_backend.choice_syntax: a convolution's plan (dnnl_conv.c) or an
 * inner product's weight-gradient choice (dnnl_fc.c). */
static int dnnl_choice_syntax(const char *value, char *why, size_t size)
{
    if (dn_fc_choice_syntax(value) || dn_conv_choice_syntax(value, why, size))
        return 1;
    size_t at = strlen(why);
    snprintf(why + at, size - at, "; or, an inner product's weight gradient in bf16, "
             "inner-product or sgemm");
    return 0;
}

/* st_backend.layouts_equal: the kernels' dst_layouts are oneDNN memory
 * descriptors. */
static int dnnl_layouts_equal(const void *a, const void *b)
{
    return dnnl_memory_desc_equal(a, b);
}

const st_backend st_backend_dnnl = {
    .name = "dnnl",
    .conv_impls = dn_conv_impls,
    .choice_syntax = dnnl_choice_syntax,
    .choice_context = dnnl_choice_context,
    .precision_supported = dnnl_precision_supported,
    .bf16_on_tiles = dnnl_bf16_on_tiles,
    .bf16_convert = dnnl_bf16_convert,
    .layouts_equal = dnnl_layouts_equal,
    .ctx_create = dnnl_ctx_create,
    .ctx_destroy = dnnl_ctx_destroy,
    .kernel_create = dnnl_kernel_create,
};
