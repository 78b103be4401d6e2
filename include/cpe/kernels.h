/* The CPE programs of the emulated SW26010 core group (src/cpe/kernels/):
 * GEMM, im2col and col2im, swDNN's implicit convolution, the tensor
 * transformation layer, and the streaming kernels (pooling, activations,
 * bias, the gradient sum, the solver update). Each is a host-side call that
 * checks its arguments and runs one or more launches on a cluster
 * (cpe/cpe.h, the machine they are written against), filling *out (if not
 * NULL) with the launches' counters. They take the network's descriptors
 * (ops/kdesc.h: activations, pooling) and the solver's step (ops/solver.h),
 * which the machine itself does not need. */
#ifndef ST_CPE_KERNELS_H
#define ST_CPE_KERNELS_H

#include <stddef.h>

#include "base/status.h"
#include "cpe/cpe.h"
#include "ops/kdesc.h"  /* st_act, st_pool_desc: the streaming kernels */
#include "ops/solver.h" /* st_solver_step: st_cpe_solver_update */

/* ---- GEMM (src/cpe/kernels/gemm.c) ---- */

/* C = alpha * op(A) * op(B) + beta * C, row-major; op(X) is X or X^T as
 * trans_x says. op(A) is m x k, op(B) k x n, C m x n; lda, ldb, ldc are
 * row pitches in elements of the stored matrices (A: m x k, or k x m
 * when transposed). beta == 0 does not read C. One launch ("gemm"); *out
 * (if not NULL) gets its counters. */
st_status st_cpe_gemm(st_cpe_cluster *cg, st_cpe_dtype type, int trans_a, int trans_b, size_t m,
                      size_t n, size_t k, double alpha, const void *a, size_t lda, const void *b,
                      size_t ldb, double beta, void *c, size_t ldc, st_cpe_counters *out,
                      st_error *err);

/* A batch of products in one launch, the batch folded into the GEMM's
 * blocking: for i < batch, X_i = X + i stride_x (elements), and either
 *   C_i = alpha op(A_i) op(B_i) + beta C_i          (reduce 0), or
 *   C = alpha sum_i op(A_i) op(B_i) + beta C        (reduce 1: the batch
 *                                                   extends K; stride_c unused).
 * Shapes and pitches as st_cpe_gemm; a stride of 0 shares that operand.
 * batch 0 counts as 1. */
typedef struct st_cpe_gemm_desc {
    st_cpe_dtype type;
    int trans_a, trans_b;
    size_t m, n, k;
    double alpha, beta;
    const void *a;
    size_t lda, stride_a;
    const void *b;
    size_t ldb, stride_b;
    void *c;
    size_t ldc, stride_c;
    size_t batch;
    int reduce;
} st_cpe_gemm_desc;

st_status st_cpe_gemm_batched(st_cpe_cluster *cg, const st_cpe_gemm_desc *d, st_cpe_counters *out,
                              st_error *err);

/* ---- convolution: im2col and col2im (src/cpe/kernels/im2col.c), implicit
 * (src/cpe/kernels/conv_implicit.c) ---- */

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

/* col [n][c kh kw][oh ow] = im2col of the n images src [n][c][ih][iw],
 * floats; positions in the padding read as 0. One launch ("im2col"). */
st_status st_cpe_im2col(st_cpe_cluster *cg, const st_cpe_conv_geom *geom, int n,
                        const float *src, float *col, st_cpe_counters *out, st_error *err);

/* dsrc [n][c][ih][iw] = col2im(dcol, laid out as st_cpe_im2col's col)
 * (added to dsrc when accumulate is nonzero): each input position gets the
 * sum of the col entries that im2col copied from it. One launch
 * ("col2im"). */
st_status st_cpe_col2im(st_cpe_cluster *cg, const st_cpe_conv_geom *geom, int n,
                        const float *dcol, float *dsrc, int accumulate, st_cpe_counters *out,
                        st_error *err);

/* The two kernel designs of the implicit convolution:
 *   ST_CPE_CONV_SWDNN          swDNN's swCNNv12 (double precision, as its
 *                              published GFLOPS were measured): input and
 *                              weight blocks double-buffered, a kernel row
 *                              of weights per fetch where it fits, swDNN's
 *                              55 KB LDM budget, B a multiple of 128, No of
 *                              32, Ni 8 equal slices of at least 2;
 *   ST_CPE_CONV_SWCAFFE_FLOAT  swCaffe's float kernels (sw_slave_conv_pad_
 *                              float.c, sw_slave_conv_full_pad_float_v2.c),
 *                              which the cpe backend runs: one buffer per
 *                              operand, every transfer waited for before
 *                              the multiply ("fjr1buf"), one weight block
 *                              per multiply, each output column put and
 *                              waited for; CoStride from an LDM budget
 *                              counted in doubles (ldm_budget: swCaffe's 60
 *                              KB forward, 55 KB backward); swCaffe's
 *                              assertions: B a multiple of 128, Ni and No
 *                              multiples of 32 and at least 64. */
typedef enum st_cpe_conv_design { ST_CPE_CONV_SWDNN, ST_CPE_CONV_SWCAFFE_FLOAT } st_cpe_conv_design;

/* Implicit convolution as swDNN built it (src/cpe/kernels/conv_implicit.c says
 * how): the core problem, unit stride,
 *     out[ro][co][no][b] = sum over kr, kc, ni of
 *                          w[kr][kc][no][ni] in[ro + kr - pr][co + kc - pc][ni][b]
 * in [ri][ci][ni][b], w [kr][kc][no][ni], out [ro][co][no][b] (overwritten,
 * or added to with accumulate); input positions outside the image are
 * padding. */
typedef struct st_cpe_swdnn_conv {
    st_cpe_conv_design design;
    int ldm_budget; /* bytes per CPE the blocks may take (0: swDNN's, the machine's LDM less
                       ST_CPE_SWDNN_LDM_RESERVE) */
    st_cpe_dtype type;
    int ri, ci, ro, co;
    int kr, kc, pr, pc;
    int ni, no, b;
    const void *in, *w;
    void *out;
    int accumulate;
} st_cpe_swdnn_conv;

/* What swDNN's and swCaffe's kernels keep of the LDM beside the blocks
 * (their stack and arguments): swDNN's test.c gives the blocks 55 of 64
 * KB, swCaffe's sw_conv_layer_impl.c 60 KB forward and 55 KB backward. On
 * another LDM the blocks get the LDM less the same reserve. */
#define ST_CPE_SWDNN_LDM_RESERVE (9 * 1024)
#define ST_CPE_SWCAFFE_FORWARD_LDM_RESERVE (4 * 1024)
#define ST_CPE_SWCAFFE_BACKWARD_LDM_RESERVE (9 * 1024)

/* Whether swDNN's blocking takes p on machine's core group (its slices
 * are B, Ni and No over the mesh's side, 8 on the SW26010); otherwise why
 * (a sentence in why). */
int st_cpe_swdnn_conv_fits(const st_cpe_machine *machine, const st_cpe_swdnn_conv *p, char *why,
                           size_t len);

/* Run p in one launch named name; ST_EINPUT (with the reason) when it does
 * not fit cg's machine. */
st_status st_cpe_swdnn_conv_run(st_cpe_cluster *cg, const st_cpe_swdnn_conv *p, const char *name,
                                st_cpe_counters *out, st_error *err);

typedef enum st_cpe_conv_pass {
    ST_CPE_CONV_FORWARD,
    ST_CPE_CONV_BACKWARD_DATA,
    ST_CPE_CONV_BACKWARD_WEIGHTS,
    ST_CPE_CONV_PASSES
} st_cpe_conv_pass;

/* A convolution pass (geom, n images, floats) as the core problem in
 * swCaffe's float design, with its roles, LDM budgets and layouts (H, W, C,
 * N: the batch innermost):
 *   forward           in x [ih][iw][c][n], w [kh][kw][oc][c], out y [oh][ow][oc][n]
 *   backward-data     in dy [oh][ow][oc][n], w rotated [kh][kw][c][oc] with
 *                     w_rot[i][j] = w[kh-1-i][kw-1-j], out dx [ih][iw][c][n]
 *   backward-weights  in x [ih][iw][n][c], w dy [oh][ow][oc][n],
 *                     out dw [kh][kw][oc][c] */
st_cpe_swdnn_conv st_cpe_conv_pass_problem(const st_cpe_machine *machine,
                                           const st_cpe_conv_geom *geom, int n,
                                           st_cpe_conv_pass pass, const void *in, const void *w,
                                           void *out);

/* Whether the implicit scheme (swCaffe's float design) can run the pass;
 * otherwise why. Backward-data runs implicitly only where backward-weights
 * can too: swCaffe computes both in one routine (sw_conv_backward_pad_impl_f),
 * so a layer whose backward-weights its blocking refuses has no implicit
 * backward at all. */
int st_cpe_conv_implicit_fits(const st_cpe_machine *machine, const st_cpe_conv_geom *geom, int n,
                              st_cpe_conv_pass pass, char *why, size_t len);

/* ---- the tensor transformation layer (src/cpe/kernels/layout.c) ---- */

/* count transposes in one launch: for i < count, the rows x cols matrix at
 * src + i src_stride (rows src_ld floats apart) becomes the cols x rows
 * matrix at dst + i dst_stride (rows dst_ld apart). Strides may be
 * negative; dst must not overlap src. */
typedef struct st_cpe_transpose {
    const float *src;
    float *dst;
    size_t rows, cols, count;
    size_t src_ld, dst_ld;
    ptrdiff_t src_stride, dst_stride;
} st_cpe_transpose;

st_status st_cpe_transpose_batched(st_cpe_cluster *cg, const st_cpe_transpose *t,
                                   const char *name, st_cpe_counters *out, st_error *err);

/* Activation layouts of n samples of c x h x w floats: NCHW; swDNN's, the
 * batch innermost, [h][w][c][n]; and the backward-weights input's,
 * [h][w][n][c]. */
typedef enum st_cpe_layout { ST_CPE_NCHW, ST_CPE_HWCN, ST_CPE_HWNC } st_cpe_layout;

const char *st_cpe_layout_name(st_cpe_layout l);

/* dst (layout to) = src (layout from), one launch named FROM_to_TO; from
 * must differ from to, and dst must not overlap src. */
st_status st_cpe_relayout(st_cpe_cluster *cg, int n, int c, int h, int w, st_cpe_layout from,
                          const float *src, st_cpe_layout to, float *dst, st_cpe_counters *out,
                          st_error *err);

/* Weights [oc][c][kh][kw] -> swDNN's [kh][kw][oc][c], or (rotated) the
 * backward-data pass's [kh][kw][c][oc] with position (i, j) taken from
 * (kh-1-i, kw-1-j), which needs scratch of oc c kh kw floats (two
 * launches). And back from [kh][kw][oc][c]. */
st_status st_cpe_weights_to_swdnn(st_cpe_cluster *cg, int oc, int c, int kh, int kw,
                                  const float *w, float *dst, float *scratch, int rotated,
                                  st_cpe_counters *out, st_error *err);
st_status st_cpe_weights_from_swdnn(st_cpe_cluster *cg, int oc, int c, int kh, int kw,
                                    const float *src, float *w, st_cpe_counters *out,
                                    st_error *err);

/* ---- streaming kernels: pooling, elementwise, parameter server
 * (src/cpe/kernels/pool.c, eltwise.c, stream.c) ----
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
