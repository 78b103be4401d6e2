/* The emulated SW26010 core group: a cluster of 8x8 CPEs, each with 64 KB of
 * LDM (local data memory), DMA between main memory and LDM, register
 * communication along rows and columns, and a cost model that turns what a
 * launch did into predicted SW26010 time. Usable on its own, without the
 * network: the `cpe` backend's kernels (GEMM, im2col/col2im, implicit
 * convolution, pooling, elementwise, layout transformation, the gradient
 * sum and the solver update, declared at the end) are CPE programs written
 * against this API. Hardware facts and their sources: ../shared/DESIGN.md,
 * "The SW26010 emulation", and the constants in st_cpe_cost_params_default
 * (src/cpe/cpe_cost.c).
 *
 * A CPE program is `void kernel(st_cpe *cpe, void *args)`, run on all 64
 * CPEs by one st_cpe_launch, as athread_spawn + athread_join run a slave
 * function. It follows the machine's rules, which the emulator enforces:
 *   - it computes on LDM only: buffers come from st_cpe_ldm_alloc (64 KB per
 *     CPE, released when the launch ends);
 *   - main memory is reached through DMA only (st_cpe_dma_*), including the
 *     args block, which kernels fetch into LDM as swCaffe's do;
 *   - register messages are 4 doubles (256 bits), sent to a CPE of the same
 *     row or column or broadcast along the row or column; floats are widened
 *     and narrowed around them (st_cpe_*_values do it);
 *   - it owns nothing outside LDM and its locals, so an illegal operation
 *     (LDM overflow, a message outside the row/column, a DMA whose LDM side
 *     is not in the CPE's allocated LDM or whose main side is LDM or a CPE
 *     stack, a wait that can never complete) stops the launch like a
 *     hardware exception: the call does not return, no CPE runs further, and
 *     st_cpe_launch returns ST_EINTERNAL with a message naming the kernel, the
 *     CPE and the request. Kernels therefore need no error paths.
 * What the emulator cannot see is a plain pointer dereference of main memory
 * from a kernel; kernels are reviewed for that (they touch args only through
 * DMA).
 *
 * Execution: the 64 programs run as user-space contexts on the calling
 * thread, switched only at communication points (a receive with an empty
 * FIFO, a send to a full FIFO, a barrier), in a fixed round-robin order
 * (src/cpe/cpe_cluster.c says why). Results and counters are identical run
 * to run; when every unfinished CPE is blocked the launch fails with a
 * deadlock report naming the kernel and what each CPE waits for.
 *
 * Time: each CPE keeps a clock in cycles. Computation advances it by the
 * flops the kernel declares (st_cpe_flops), the elements it rearranges in
 * LDM (st_cpe_moves) or explicit cycles (st_cpe_cycles); a DMA is queued on
 * the CPE's DMA channel and completes at a modelled time, paid only when the
 * kernel waits for it (so double buffering overlaps); a message arrives a
 * latency after it is sent; a barrier releases at the latest arrival. The
 * launch's predicted time is the clock of the CPE that finishes last, split
 * into compute / DMA wait / register communication / barrier, plus the
 * launch overhead.
 *
 * Ownership: a cluster is created and destroyed by one thread and launched
 * from that thread only; it owns the LDMs, the context stacks and nothing
 * else. One cluster per worker thread (one core group each). */
#ifndef ST_CPE_H
#define ST_CPE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h" /* st_act, st_pool_desc: the streaming kernels */
#include "solver.h"  /* st_solver_cfg, st_param_table: st_cpe_solver_update */
#include "status.h"

#define ST_CPE_ROWS 8
#define ST_CPE_COLS 8
#define ST_CPE_COUNT (ST_CPE_ROWS * ST_CPE_COLS)

/* LDM per CPE: 64 KB (swCaffe, DESIGN.md). */
#define ST_CPE_LDM_BYTES 65536

/* LDM allocations are aligned to 32 bytes, the width of a 256-bit vector
 * register, so vector loads and DMA land on aligned addresses. */
#define ST_CPE_LDM_ALIGN 32

/* A register message is 256 bits: 4 doubles (swCaffe: 256-bit messages,
 * doubles only). */
#define ST_CPE_MSG_DOUBLES 4
#define ST_CPE_MSG_BYTES (ST_CPE_MSG_DOUBLES * 8)

/* Depth, in messages, of each CPE's receive FIFO per bus (one for its row,
 * one for its column). An assumption: no published figure was found, and 4
 * is this emulator's working value (a compile-time constant: the FIFOs are
 * fixed arrays). A sender blocks while the destination's FIFO is full, so a
 * program that relies on deeper buffering deadlocks here, as it would on a
 * machine with 4-deep buffers. */
#define ST_CPE_FIFO_DEPTH 4

/* DMA size classes: class b counts transfers of [2^b, 2^(b+1)) bytes
 * (contiguous: the transfer's size; strided: its block size); the last
 * class is open-ended (8 MB and more). */
#define ST_CPE_DMA_SIZE_CLASSES 24

typedef struct st_cpe st_cpe;
typedef struct st_cpe_cluster st_cpe_cluster;

/* A CPE program; args is the pointer given to st_cpe_launch (main memory). */
typedef void (*st_cpe_kernel)(st_cpe *cpe, void *args);

typedef enum st_cpe_dtype { ST_CPE_F32, ST_CPE_F64 } st_cpe_dtype;

/* The register-communication buses of a CPE: its row and its column. */
typedef enum st_cpe_bus { ST_CPE_ROW, ST_CPE_COL } st_cpe_bus;

typedef enum st_cpe_dma_mode {
    ST_CPE_DMA_CONTIGUOUS,
    ST_CPE_DMA_STRIDED,
    ST_CPE_DMA_MODES
} st_cpe_dma_mode;

/* ---- cost model (src/cpe/cpe_cost.c) ---- */

/* Every constant of the cost model; st_cpe_cost_params_default documents
 * each one's source. Bandwidths are per core group (all 64 CPEs). */
typedef struct st_cpe_cost_params {
    double clock_hz;                /* CPE clock */
    double flops_per_cycle;         /* peak per CPE */
    double compute_efficiency;      /* fraction of peak a kernel's loops reach */
    double ldm_move_cycles;         /* per element rearranged in LDM by scalar code */
    double dma_bandwidth;           /* bytes/s, large transfers from all 64 CPEs */
    double dma_latency_cycles;      /* per transfer */
    double dma_strided_min_block;   /* bytes; smaller strided blocks cost this much */
    double regcomm_p2p_bandwidth;   /* bytes/s, aggregate */
    double regcomm_bcast_bandwidth; /* bytes/s, aggregate */
    double regcomm_latency_cycles;  /* send to arrival, P2P and broadcast alike */
    double regcomm_recv_cycles;     /* one receive instruction */
    double barrier_cycles;          /* one cluster-wide synchronisation */
    double launch_seconds;          /* athread_spawn + athread_join */
    double mpe_flops;               /* flop/s the MPE sustains on scalar loops */
    double mpe_bandwidth;           /* bytes/s the MPE moves through its cache */
} st_cpe_cost_params;

st_cpe_cost_params st_cpe_cost_params_default(void);

/* Predicted time of work the MPE does itself (layers not ported to the
 * CPEs): a roofline, the larger of flops / mpe_flops and bytes read and
 * written / mpe_bandwidth, in seconds. */
double st_cpe_mpe_seconds(const st_cpe_cost_params *p, double flops, double bytes);

/* Predicted SW26010 time of one or more launches, in seconds. */
typedef struct st_cpe_time {
    double compute_s;  /* flops and declared cycles */
    double dma_s;      /* waiting for DMA not hidden behind computation */
    double regcomm_s;  /* sending, receiving and waiting for messages */
    double sync_s;     /* waiting at barriers */
    double launch_s;   /* launch overhead */
    double total_s;    /* the sum */
} st_cpe_time;

/* ---- counters ---- */

typedef struct st_cpe_dma_class {
    uint64_t transfers;
    uint64_t blocks; /* 1 per contiguous transfer, count per strided one */
    uint64_t bytes;
} st_cpe_dma_class;

/* What one or more launches did. Sums over the 64 CPEs, except ldm_peak. */
typedef struct st_cpe_counters {
    uint64_t launches;
    uint64_t flops;         /* declared by kernels (st_cpe_flops) */
    double work_cycles;     /* declared non-flop work (st_cpe_cycles) */
    uint64_t ldm_moves;     /* elements rearranged in LDM (st_cpe_moves) */
    uint64_t dma_get_bytes; /* main memory -> LDM */
    uint64_t dma_put_bytes; /* LDM -> main memory */
    st_cpe_dma_class dma[ST_CPE_DMA_MODES][ST_CPE_DMA_SIZE_CLASSES];
    uint64_t msgs_p2p;      /* messages sent to one CPE */
    uint64_t msgs_bcast;    /* row or column broadcasts (one per send) */
    uint64_t msgs_received;
    size_t ldm_peak;        /* bytes, the largest over the CPEs and launches */
    uint64_t barriers;      /* completed cluster-wide barriers */
    /* The predicted time from the CPEs' clocks (overlap included), costed
     * with the cluster's parameters at launch time. */
    st_cpe_time time;
    int critical_cpe;       /* id of the CPE that finished last (last launch) */
} st_cpe_counters;

/* Add src to dst (times and counts add, ldm_peak takes the larger). */
void st_cpe_counters_add(st_cpe_counters *dst, const st_cpe_counters *src);

uint64_t st_cpe_counters_dma_transfers(const st_cpe_counters *c);

/* The size class of a transfer or block of bytes (bytes >= 1). */
int st_cpe_dma_size_class(size_t bytes);

/* Predicted time from the counts alone, as if the work were spread evenly
 * over the 64 CPEs and nothing overlapped: compute, DMA and messages one
 * after another. Cheap to re-evaluate under other parameters; compared with
 * c->time it shows how much overlap and how much imbalance the kernel has.
 * Exact for strided blocks when dma_strided_min_block is a power of two. */
void st_cpe_cost_counts(const st_cpe_cost_params *p, const st_cpe_counters *c, st_cpe_time *out);

/* ---- the cluster (host side: the MPE) ---- */

/* Allocate a cluster: 64 LDMs and 64 context stacks, once. */
st_status st_cpe_cluster_create(st_cpe_cluster **out, st_error *err);
void st_cpe_cluster_destroy(st_cpe_cluster *cg);

/* The parameters later launches are costed with (default:
 * st_cpe_cost_params_default()). */
void st_cpe_cluster_set_cost_params(st_cpe_cluster *cg, const st_cpe_cost_params *p);
const st_cpe_cost_params *st_cpe_cluster_cost_params(const st_cpe_cluster *cg);

/* Run fn(cpe, args) on all 64 CPEs to completion. name appears in every
 * message. On success *out (if not NULL) holds this launch's counters; on
 * failure it is zeroed and err says what went wrong: ST_EINTERNAL for an
 * illegal program or a deadlock, ST_EINPUT for bad arguments. */
st_status st_cpe_launch(st_cpe_cluster *cg, const char *name, st_cpe_kernel fn, void *args,
                        st_cpe_counters *out, st_error *err);

/* ---- inside a CPE program ---- */

int st_cpe_row(const st_cpe *cpe);
int st_cpe_col(const st_cpe *cpe);
int st_cpe_id(const st_cpe *cpe); /* row * 8 + col */

/* LDM: a stack allocator per CPE, emptied at each launch. LDM keeps its
 * contents between launches, as the hardware's does; nothing is zeroed.
 * Overflow stops the launch with a message naming what and bytes. */
void *st_cpe_ldm_alloc(st_cpe *cpe, size_t bytes, const char *what);
size_t st_cpe_ldm_mark(const st_cpe *cpe);
void st_cpe_ldm_release(st_cpe *cpe, size_t mark); /* free everything allocated after mark */

/* DMA. A transfer is issued and returns at once; the reply counter counts
 * issued transfers, and st_cpe_dma_wait(cpe, &reply, n) waits until n of
 * them have completed (athread_get/athread_put with a reply word). The data
 * moves at issue (one address space), so only time depends on the wait;
 * still, read an LDM buffer or reuse a main-memory buffer only after its
 * wait, as on the machine. Zero a reply before use (st_cpe_reply r = {0}).
 * Waiting for fewer replies than were issued is charged the completion of
 * the last one: give each buffer its own reply when double-buffering. */
typedef struct st_cpe_reply {
    int count;         /* transfers issued on this counter */
    double done_cycle; /* when the last of them completes */
} st_cpe_reply;

/* Contiguous: bytes from main memory to LDM / from LDM to main memory. */
void st_cpe_dma_get(st_cpe *cpe, void *ldm_dst, const void *main_src, size_t bytes,
                    st_cpe_reply *reply);
void st_cpe_dma_put(st_cpe *cpe, void *main_dst, const void *ldm_src, size_t bytes,
                    st_cpe_reply *reply);

/* Strided: count blocks of block_bytes, pitch_bytes apart in main memory
 * (pitch >= block), packed one after another in LDM. */
void st_cpe_dma_get_strided(st_cpe *cpe, void *ldm_dst, const void *main_src, size_t block_bytes,
                            size_t pitch_bytes, size_t count, st_cpe_reply *reply);
void st_cpe_dma_put_strided(st_cpe *cpe, void *main_dst, const void *ldm_src, size_t block_bytes,
                            size_t pitch_bytes, size_t count, st_cpe_reply *reply);

void st_cpe_dma_wait(st_cpe *cpe, st_cpe_reply *reply, int n);

/* Register communication. st_cpe_send goes to a CPE of the same row (row
 * bus) or the same column (column bus); any other destination, or the CPE
 * itself, is illegal. A broadcast reaches the 7 other CPEs of the row or
 * column. A receive takes the oldest message in the CPE's FIFO for that bus
 * (messages carry no sender: programs keep senders apart as on the
 * machine). Sends block while a destination FIFO is full; receives block
 * while it is empty. */
void st_cpe_send(st_cpe *cpe, int dst_row, int dst_col, const double msg[ST_CPE_MSG_DOUBLES]);
void st_cpe_bcast(st_cpe *cpe, st_cpe_bus bus, const double msg[ST_CPE_MSG_DOUBLES]);
void st_cpe_recv(st_cpe *cpe, st_cpe_bus bus, double msg[ST_CPE_MSG_DOUBLES]);

/* n values of type (LDM) as ceil(n / 4) messages, floats widened to doubles
 * on the way out and narrowed on the way in, the last message padded. */
void st_cpe_send_values(st_cpe *cpe, int dst_row, int dst_col, st_cpe_dtype type,
                        const void *src, size_t n);
void st_cpe_bcast_values(st_cpe *cpe, st_cpe_bus bus, st_cpe_dtype type, const void *src,
                         size_t n);
void st_cpe_recv_values(st_cpe *cpe, st_cpe_bus bus, st_cpe_dtype type, void *dst, size_t n);

/* Barrier over all 64 CPEs (athread_syn(ARRAY_SCOPE)). */
void st_cpe_sync(st_cpe *cpe);

/* Declare work for the cost model: n floating-point operations (a fused
 * multiply-add counts 2); n elements rearranged within LDM by scalar code
 * (im2col packing, gathers); or cycles of other work. */
void st_cpe_flops(st_cpe *cpe, uint64_t n);
void st_cpe_moves(st_cpe *cpe, uint64_t n);
void st_cpe_cycles(st_cpe *cpe, double cycles);

size_t st_cpe_dtype_size(st_cpe_dtype type);

/* ---- kernels (src/cpe/cpe_<kernel>.c) ---- */

/* C = alpha * op(A) * op(B) + beta * C, row-major; op(X) is X or X^T as
 * trans_x says. op(A) is m x k, op(B) k x n, C m x n; lda, ldb, ldc are
 * row pitches in elements of the stored matrices (A: m x k, or k x m
 * when transposed). beta == 0 does not read C. One launch ("gemm"); *out
 * (if not NULL) gets its counters. */
st_status st_cpe_gemm(st_cpe_cluster *cg, st_cpe_dtype type, int trans_a, int trans_b, size_t m,
                      size_t n, size_t k, double alpha, const void *a, size_t lda, const void *b,
                      size_t ldb, double beta, void *c, size_t ldc, st_cpe_counters *out,
                      st_error *err);

/* A convolution's geometry for im2col / col2im (one image, one group), as
 * in st_conv_desc: input [c, ih, iw], col [c kh kw, oh ow]; ph, pw pad the
 * top and left, the bottom and right padding follow from oh, ow. oc, the
 * output channels, is read by the implicit convolution only (im2col and
 * col2im ignore it). */
typedef struct st_cpe_conv_geom {
    int c, ih, iw;
    int oh, ow;
    int kh, kw, sh, sw;
    int ph, pw;
    int oc;
} st_cpe_conv_geom;

/* col = im2col(src), floats; positions in the padding read as 0 (by
 * coordinate test, nothing padded is stored). One launch ("im2col"). */
st_status st_cpe_im2col(st_cpe_cluster *cg, const st_cpe_conv_geom *geom, const float *src,
                        float *col, st_cpe_counters *out, st_error *err);

/* dsrc += col2im(dcol): each input position gets the sum of the col
 * entries that im2col copied from it. One launch ("col2im"). */
st_status st_cpe_col2im(st_cpe_cluster *cg, const st_cpe_conv_geom *geom, const float *dcol,
                        float *dsrc, st_cpe_counters *out, st_error *err);

/* Implicit convolution (src/cpe/cpe_conv_implicit.c): no im2col matrix;
 * all n images of one group in one launch, floats, NCHW, geom->c input and
 * geom->oc output channels; x [n, c, ih, iw], w [oc, c, kh, kw],
 * y / dy [n, oc, oh, ow]. Padding by coordinate mapping. Any geometry
 * whose smallest blocks fit the LDM; others are refused with ST_EINPUT.
 * One launch each ("conv_implicit_forward", "..._backward_data",
 * "..._backward_weights"); *out (if not NULL) gets its counters.
 *   forward:          y = conv(x, w) (overwritten; no bias, no activation)
 *   backward_data:    dx = conv^T(dy, w), added to dx when accumulate is
 *                     nonzero, else overwriting it
 *   backward_weights: dw = sum over images and positions of dy x
 *                     (overwritten) */
st_status st_cpe_conv_implicit_forward(st_cpe_cluster *cg, const st_cpe_conv_geom *geom, int n,
                                       const float *x, const float *w, float *y,
                                       st_cpe_counters *out, st_error *err);
st_status st_cpe_conv_implicit_backward_data(st_cpe_cluster *cg, const st_cpe_conv_geom *geom,
                                             int n, const float *dy, const float *w, float *dx,
                                             int accumulate, st_cpe_counters *out, st_error *err);
st_status st_cpe_conv_implicit_backward_weights(st_cpe_cluster *cg, const st_cpe_conv_geom *geom,
                                                int n, const float *x, const float *dy, float *dw,
                                                st_cpe_counters *out, st_error *err);

/* Whether the implicit scheme suits geom (host side, no launch): all three
 * passes fit the LDM and both channel counts fill the 8x8 blocking well
 * enough to be worth timing against im2col + GEMM. A guard against
 * hopeless cases (a single input channel), not a choice between schemes. */
int st_cpe_conv_implicit_suits(const st_cpe_conv_geom *geom);

/* ---- streaming kernels: pooling, elementwise, layout, parameter server ----
 * Each processes a whole batch (or range) in one launch, the work split
 * over the 64 CPEs and streamed through LDM in chunks, double-buffered, so
 * any size works. Arguments are checked on the host (ST_EINPUT with a
 * message naming the kernel); *out (if not NULL) gets the launch's
 * counters. Results equal the reference backend's bit for bit except where
 * a comment says otherwise. */

/* Pooling over NCHW floats, with st_pool_desc's semantics (windows reaching
 * outside the input use the valid positions only; an empty window gives 0);
 * d's base is not read. src [n, c, ih, iw], dst [n, c, oh, ow]; argmax
 * [n, c, oh, ow] is the reference backend's max-pooling workspace: the
 * input offset within the plane of each output's maximum (the first one in
 * row-major order among equals), -1 for an empty window. Forward writes it
 * when not NULL (max only; ignored for average). One launch
 * ("pool_forward"). */
st_status st_cpe_pool_forward(st_cpe_cluster *cg, const st_pool_desc *d, int n, const float *src,
                              float *dst, int *argmax, st_cpe_counters *out, st_error *err);

/* diff_src [n, c, ih, iw] (+)= pooling^T(diff_dst [n, c, oh, ow]): max
 * routes each gradient to its argmax (required), average spreads
 * diff_dst / (valid positions) over the window. Overwrites diff_src, or adds
 * to it when accumulate is nonzero (st_kargs). One launch
 * ("pool_backward"). */
st_status st_cpe_pool_backward(st_cpe_cluster *cg, const st_pool_desc *d, int n,
                               const float *diff_dst, const int *argmax, float *diff_src,
                               int accumulate, st_cpe_counters *out, st_error *err);

/* dst [count] = act(src [count]), st_act_forward's formulas; src may equal
 * dst (linear in place launches nothing). One launch ("act_forward"). */
st_status st_cpe_act_forward(st_cpe_cluster *cg, st_act act, size_t count, const float *src,
                             float *dst, st_cpe_counters *out, st_error *err);

/* diff_src [count] (+)= diff_dst [count] * act'(dst [count]), as
 * st_act_backward; added when accumulate is nonzero. diff_src may equal
 * diff_dst (linear in place without accumulate launches nothing). One
 * launch ("act_backward"). */
st_status st_cpe_act_backward(st_cpe_cluster *cg, st_act act, size_t count, const float *dst,
                              const float *diff_dst, float *diff_src, int accumulate,
                              st_cpe_counters *out, st_error *err);

/* y [n, c, per_channel]: y[s, ch, i] += bias[ch] (bias [c], NULL: none),
 * then y = act(y), in place. One launch ("bias_act"). */
st_status st_cpe_bias_act(st_cpe_cluster *cg, int n, int c, size_t per_channel,
                          const float *bias, st_act act, float *y, st_cpe_counters *out,
                          st_error *err);

/* db [c] = sum over s and i of dy [n, c, per_channel] [s, ch, i], summed in
 * double and overwriting db. Bitwise the reference's sample-then-position
 * order when the CPEs split by channel ranges; when they split channels'
 * sums (few channels), partial sums are added in double: within 1e-6
 * relative. One launch ("bias_grad"). */
st_status st_cpe_bias_grad(st_cpe_cluster *cg, int n, int c, size_t per_channel, const float *dy,
                           float *db, st_cpe_counters *out, st_error *err);

/* Layout transformation between NCHW and swCaffe's CPE layout with the
 * batch innermost: src [n, c, h, w] -> dst [c, h, w, n], and back. dst
 * must not overlap src. One launch each ("nchw_to_chwn", "chwn_to_nchw"). */
st_status st_cpe_nchw_to_chwn(st_cpe_cluster *cg, int n, int c, int h, int w, const float *src,
                              float *dst, st_cpe_counters *out, st_error *err);
st_status st_cpe_chwn_to_nchw(st_cpe_cluster *cg, int n, int c, int h, int w, const float *src,
                              float *dst, st_cpe_counters *out, st_error *err);

/* Most gradient buffers st_cpe_grad_sum adds. */
#define ST_CPE_GRAD_SUM_MAX_SOURCES 1024

/* The sliced aggregation's sum, bitwise as st_ps_reduce_range: for i in
 * [begin, end), grads[0][i] = scale * (grads[0][i] + grads[1][i] + ... +
 * grads[n_grads - 1][i]), added in float in that order, scaled last.
 * grads is an array of n_grads pointers to gradient arenas (main memory);
 * grads[1..] are only read and must not overlap grads[0]'s range. One
 * launch ("grad_sum"). */
st_status st_cpe_grad_sum(st_cpe_cluster *cg, float *const *grads, int n_grads, size_t begin,
                          size_t end, float scale, st_cpe_counters *out, st_error *err);

/* st_solver_update on the CPEs, bitwise the same: step's update (rule,
 * tensor table sorted by offset as st_params_add makes it, lr, iteration)
 * of arena floats [begin, end): weights w, state planes stride floats apart
 * (st_solver_state_per_param of them), gradient g. One launch
 * ("solver_update"). */
st_status st_cpe_solver_update(st_cpe_cluster *cg, const st_solver_step *step, size_t begin,
                               size_t end, float *w, float *state, size_t stride, const float *g,
                               st_cpe_counters *out, st_error *err);

#endif
