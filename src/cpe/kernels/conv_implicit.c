/* Implicit convolution as swDNN and swCaffe built it (Fang et al., "swDNN:
 * a library for accelerating deep learning applications on Sunway
 * TaihuLight", IPDPS 2017, swCNNv12's batch-size-aware algorithm with its
 * DMA hoisted out of the inner loop; swCaffe's sw_conv_layer_impl.c for the
 * padding and the two backward passes): a CPE program over tensors with the
 * batch innermost.
 *
 * The core problem (st_cpe_swdnn_conv): unit stride,
 *     out[ro][co][no][b] = sum over kr, kc, ni of
 *                          w[kr][kc][no][ni] in[ro + kr - pr][co + kc - pc][ni][b]
 * with in [Ri][Ci][Ni][B], w [Kr][Kc][No][Ni], out [Ro][Co][No][B]; input
 * positions outside [0, Ri) x [0, Ci) are padding (coordinate mapping:
 * nothing padded is stored or fetched). The three passes of a convolution
 * are this problem with other roles (swCaffe's mapping):
 *   forward           in = x (H W C N), w = weights (Kh Kw Oc Ic), out = y
 *   backward-data     in = dy, w = weights rotated by 180 degrees with the
 *                     channel dimensions swapped (Kh Kw Ic Oc), pad K-1-p,
 *                     out = dx: a "full" convolution
 *   backward-weights  in = x in (H W N C) order: the batch is the reduction
 *                     dimension and the input channels the SIMD one;
 *                     w = dy with its output pixels as the kernel
 *                     (Oh Ow Oc N); out = dw (Kh Kw Oc Ic)
 *
 * Blocking (swDNN): CPE (r, c) holds the input block of batch slice r and
 * channel slice c (Ni/8 rows of B/8 values), the weight block of output
 * channel slice c and input channel slice r (No/8 rows of Ni/8), and the
 * output block of batch slice r and output channel slice c for CoStride
 * output columns; every multiply is one mesh GEMM step
 * (st_cpe_mesh_gemm_step): weights down the columns, inputs along the rows.
 * The register block is 4 output channels x 4 vectors of 4 batch values
 * and has no edge code (swDNN's gemm.S), and the reduction loop is
 * unrolled by two: each CPE's batch slice must be a multiple of 16 values,
 * its output-channel slice of 4, and its input-channel slice at least 2
 * and all equal - B a multiple of 128, No of 32, Ni of 8 and at least 16.
 * These shapes are refused (st_cpe_swdnn_conv_fits says why), as is any
 * stride but 1 and an LDM that cannot hold the blocks.
 *
 * Two designs run this loop (st_cpe_conv_design, include/cpe/kernels.h):
 * swDNN's swCNNv12 as described next, double-buffered, and swCaffe's float
 * kernels, which the cpe backend runs: one buffer per operand and every
 * transfer waited for before its multiply (sw_slave_conv_pad_float.c:
 * "fjr1buf"), one multiply's weight block per fetch, swCaffe's assertions
 * (Ni and No multiples of 32 and at least 64) and its CoStride formula,
 * whose LDM budget is counted in doubles (60 KB forward, 55 KB backward)
 * although the buffers hold floats. The float kernels' mesh GEMM
 * (gemm_float.S) is the double one's loop with vlds / ldse loads, which
 * widen floats into the 256-bit registers as they load: a register message
 * carries 4 floats as it carries 4 doubles, and no conversion instruction
 * is added.
 *
 * The loop (swCNNv12): for each block of CoStride output columns, for each
 * output row: zero the output block; for each kernel row kr whose input row
 * is inside the image: the weight blocks of that kernel row (all Kc of
 * them) are fetched into one of two buffers while the previous row's are
 * used; for each input column the block's outputs read, its input block is
 * fetched into one of two buffers while the previous column's is used, and
 * multiplied with the kernel column of each output column it reaches; then
 * the block's output columns are put one at a time, each waited for. When
 * a kernel row's weights do not fit the LDM (the backward-weights pass,
 * whose kernel is an output image), the weights are fetched per multiply,
 * double-buffered too, as swCaffe's float kernel does for every layer.
 *
 * LDM: two input blocks, two weight buffers and the output blocks; swDNN
 * gives them about 55 KB (the rest is the stack and the arguments) and
 * sets CoStride to the output columns that then fit less Kc - 1
 * (swCNNv12's test.c).
 *
 * Cost: the mesh GEMM's pipeline time per multiply, the DMA of every block
 * at the measured strided rates (the input blocks are Ni/8 rows of B/8
 * values: 64-byte blocks for B = 128 floats, a slow regime of the curve),
 * zeroing the output block as vector stores. */
#include <stdio.h>
#include <string.h>

#include "kernel_common.h"

typedef struct conv_args {
    st_cpe_swdnn_conv p;
    int cstride;  /* output columns per block */
    int wset;     /* weight blocks fetched together: Kc (a kernel row) or 1 */
    int bs, nis, nos; /* per-CPE slices of B, Ni, No */
} conv_args;

/* A multiply of the loop: block of output columns, output row, kernel row,
 * input column, kernel column. */
typedef struct conv_op {
    int blk, orow, kk, x, kcol;
    int done;
} conv_op;

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

static int max_int(int a, int b)
{
    return a > b ? a : b;
}

/* ---- the loop order ---- */

static int blocks_of(const conv_args *a)
{
    return (a->p.co + a->cstride - 1) / a->cstride;
}

/* Output columns [*o0, *o1) of block blk. */
static void block_cols(const conv_args *a, int blk, int *o0, int *o1)
{
    *o0 = blk * a->cstride;
    *o1 = min_int(*o0 + a->cstride, a->p.co);
}

/* Input columns the block's outputs read, inside the image. */
static void block_inputs(const conv_args *a, int blk, int *x0, int *x1)
{
    int o0, o1;
    block_cols(a, blk, &o0, &o1);
    *x0 = max_int(0, o0 - a->p.pc);
    *x1 = min_int(a->p.ci, o1 - 1 + a->p.kc - a->p.pc);
}

/* Kernel columns that take input column x to an output column of blk. */
static void op_kcols(const conv_args *a, int blk, int x, int *k0, int *k1)
{
    int o0, o1;
    block_cols(a, blk, &o0, &o1);
    *k0 = max_int(0, x + a->p.pc - o1 + 1);
    *k1 = min_int(a->p.kc, x + a->p.pc - o0 + 1);
}

static int row_inside(const conv_args *a, int orow, int kk)
{
    int y = orow + kk - a->p.pr;
    return y >= 0 && y < a->p.ri;
}

/* Settle op on the first valid multiply at or after it within its (blk,
 * orow); returns 0 when the row has none left. */
static int op_settle_row(const conv_args *a, conv_op *op)
{
    int x0, x1;
    block_inputs(a, op->blk, &x0, &x1);
    for (; op->kk < a->p.kr; op->kk++, op->x = x0, op->kcol = -1) {
        if (!row_inside(a, op->orow, op->kk))
            continue;
        if (op->x < x0)
            op->x = x0;
        for (; op->x < x1; op->x++, op->kcol = -1) {
            int k0, k1;
            op_kcols(a, op->blk, op->x, &k0, &k1);
            if (op->kcol < k0)
                op->kcol = k0;
            if (op->kcol < k1)
                return 1;
        }
    }
    return 0;
}

/* The first multiply of (blk, orow) or after, over every later row. */
static void op_settle(const conv_args *a, conv_op *op)
{
    int blocks = blocks_of(a);
    while (op->blk < blocks) {
        if (op_settle_row(a, op))
            return;
        op->kk = 0;
        op->x = 0;
        op->kcol = -1;
        if (++op->orow == a->p.ro) {
            op->orow = 0;
            op->blk++;
        }
    }
    op->done = 1;
}

static conv_op op_first(const conv_args *a, int blk, int orow)
{
    conv_op op = {blk, orow, 0, 0, -1, 0};
    op_settle(a, &op);
    return op;
}

static void op_advance(const conv_args *a, conv_op *op)
{
    op->kcol++;
    op_settle(a, op);
}

static int same_input(const conv_op *p, const conv_op *q)
{
    return p->blk == q->blk && p->orow == q->orow && p->kk == q->kk && p->x == q->x;
}

/* Ops sharing a weight fetch: a kernel row (wset = Kc) or one multiply. */
static int same_weights(const conv_args *a, const conv_op *p, const conv_op *q)
{
    return p->blk == q->blk && p->orow == q->orow && p->kk == q->kk &&
           (a->wset > 1 || (p->x == q->x && p->kcol == q->kcol));
}

/* ---- the CPE program ---- */

typedef struct conv_cpe {
    const conv_args *a;
    size_t elt;
    int row, col;
    void *in[2], *w[2], *out;
    st_cpe_reply in_get[2], w_get[2];
    conv_op in_at[2], w_at[2]; /* what each buffer holds or is receiving */
    int in_cur, w_cur;
} conv_cpe;

static const unsigned char *elem(const void *base, size_t at, size_t elt)
{
    return (const unsigned char *)base + at * elt;
}

static void fetch_input(st_cpe *cpe, conv_cpe *k, int buf, const conv_op *op)
{
    const st_cpe_swdnn_conv *p = &k->a->p;
    size_t y = (size_t)(op->orow + op->kk - p->pr);
    size_t at = ((y * (size_t)p->ci + (size_t)op->x) * (size_t)p->ni + (size_t)k->col * k->a->nis) *
                    (size_t)p->b + (size_t)k->row * k->a->bs;
    cpe_reply_reset(&k->in_get[buf]);
    cpe_get_rows_as(cpe, 1, k->in[buf], elem(p->in, at, k->elt), (size_t)k->a->bs * k->elt,
                    (size_t)p->b * k->elt, (size_t)k->a->nis, &k->in_get[buf]);
    k->in_at[buf] = *op;
}

static void fetch_weights(st_cpe *cpe, conv_cpe *k, int buf, const conv_op *op)
{
    const conv_args *a = k->a;
    const st_cpe_swdnn_conv *p = &a->p;
    size_t block = (size_t)a->nos * a->nis;
    int c0 = a->wset > 1 ? 0 : op->kcol, c1 = a->wset > 1 ? p->kc : op->kcol + 1;
    cpe_reply_reset(&k->w_get[buf]);
    for (int kcol = c0; kcol < c1; kcol++) {
        size_t at = (((size_t)op->kk * p->kc + (size_t)kcol) * (size_t)p->no +
                     (size_t)k->col * a->nos) * (size_t)p->ni + (size_t)k->row * a->nis;
        cpe_get_rows_as(cpe, 1,
                        (unsigned char *)k->w[buf] + (size_t)(kcol - c0) * block * k->elt,
                        elem(p->w, at, k->elt), (size_t)a->nis * k->elt,
                        (size_t)p->ni * k->elt, (size_t)a->nos, &k->w_get[buf]);
    }
    k->w_at[buf] = *op;
}

/* The next op after op whose input (weights) differ from op's; done when
 * none. */
static conv_op next_input(const conv_args *a, conv_op op)
{
    conv_op n = op;
    do
        op_advance(a, &n);
    while (!n.done && same_input(&n, &op));
    return n;
}

static conv_op next_weights(const conv_args *a, conv_op op)
{
    conv_op n = op;
    do
        op_advance(a, &n);
    while (!n.done && same_weights(a, &n, &op));
    return n;
}

/* Make op's input and weights current, waiting for them and prefetching
 * the next ones into the other buffers. */
static void conv_stage(st_cpe *cpe, conv_cpe *k, const conv_op *op)
{
    const conv_args *a = k->a;
    if (!same_input(&k->in_at[k->in_cur], op)) {
        k->in_cur = !k->in_cur;
        st_cpe_dma_wait(cpe, &k->in_get[k->in_cur], k->in_get[k->in_cur].count);
        conv_op next = next_input(a, *op);
        if (!next.done)
            fetch_input(cpe, k, !k->in_cur, &next);
    }
    if (!same_weights(a, &k->w_at[k->w_cur], op)) {
        k->w_cur = !k->w_cur;
        st_cpe_dma_wait(cpe, &k->w_get[k->w_cur], k->w_get[k->w_cur].count);
        conv_op next = next_weights(a, *op);
        if (!next.done)
            fetch_weights(cpe, k, !k->w_cur, &next);
    }
}

/* swCaffe's float kernels: op's input fetched into the one input buffer
 * and waited for when it changes, then op's weight block, waited for. */
static void conv_stage_waited(st_cpe *cpe, conv_cpe *k, const conv_op *op)
{
    if (!same_input(&k->in_at[0], op)) {
        fetch_input(cpe, k, 0, op);
        st_cpe_dma_wait(cpe, &k->in_get[0], k->in_get[0].count);
    }
    fetch_weights(cpe, k, 0, op);
    st_cpe_dma_wait(cpe, &k->w_get[0], k->w_get[0].count);
    k->in_cur = k->w_cur = 0;
}

static void conv_multiply(st_cpe *cpe, conv_cpe *k, const conv_op *op)
{
    const conv_args *a = k->a;
    int o0, o1;
    block_cols(a, op->blk, &o0, &o1);
    int ocol = op->x + a->p.pc - op->kcol;
    size_t out_block = (size_t)a->nos * a->bs, w_block = (size_t)a->nos * a->nis;
    int wi = a->wset > 1 ? op->kcol : 0;
    st_cpe_mesh_gemm g = {
        .type = a->p.type,
        .c = (unsigned char *)k->out + (size_t)(ocol - o0) * out_block * k->elt,
        .ni = (size_t)a->nos, .nj = (size_t)a->bs, .ldc = (size_t)a->bs,
        .col_op = (unsigned char *)k->w[k->w_cur] + (size_t)wi * w_block * k->elt,
        .col_nk = (size_t)a->nis, .ld_col = (size_t)a->nis,
        .row_op = k->in[k->in_cur], .row_nk = (size_t)a->nis, .ld_row = (size_t)a->bs,
        .float_msgs = a->p.design == ST_CPE_CONV_SWCAFFE_FLOAT && a->p.type == ST_CPE_F32,
    };
    st_cpe_mesh_gemm_step(cpe, &g);
}

/* The output columns [o0, o1) of row orow between LDM and memory. */
static void conv_outputs(st_cpe *cpe, conv_cpe *k, int orow, int o0, int o1, int put)
{
    const conv_args *a = k->a;
    const st_cpe_swdnn_conv *p = &a->p;
    size_t out_block = (size_t)a->nos * a->bs;
    for (int ocol = o0; ocol < o1; ocol++) {
        size_t at = (((size_t)orow * p->co + (size_t)ocol) * (size_t)p->no +
                     (size_t)k->col * a->nos) * (size_t)p->b + (size_t)k->row * a->bs;
        unsigned char *ldm = (unsigned char *)k->out + (size_t)(ocol - o0) * out_block * k->elt;
        st_cpe_reply reply = {0};
        if (put)
            cpe_put_rows_as(cpe, 1, (unsigned char *)p->out + at * k->elt, ldm,
                            (size_t)a->bs * k->elt, (size_t)p->b * k->elt,
                            (size_t)a->nos, &reply);
        else
            cpe_get_rows_as(cpe, 1, ldm, elem(p->out, at, k->elt), (size_t)a->bs * k->elt,
                            (size_t)p->b * k->elt, (size_t)a->nos, &reply);
        st_cpe_dma_wait(cpe, &reply, reply.count);
    }
}

static void conv_kernel(st_cpe *cpe, void *args)
{
    conv_cpe k;
    memset(&k, 0, sizeof k);
    k.a = cpe_kernel_args(cpe, args, sizeof(conv_args));
    const conv_args *a = k.a;
    k.elt = st_cpe_dtype_size(a->p.type);
    k.row = st_cpe_row(cpe);
    k.col = st_cpe_col(cpe);
    size_t in_block = (size_t)a->nis * a->bs, w_block = (size_t)a->nos * a->nis;
    size_t out_block = (size_t)a->nos * a->bs;
    int buffers = a->p.design == ST_CPE_CONV_SWCAFFE_FLOAT ? 1 : 2;
    for (int b = 0; b < buffers; b++) {
        k.in[b] = st_cpe_ldm_alloc(cpe, in_block * k.elt, "input block");
        k.w[b] = st_cpe_ldm_alloc(cpe, (size_t)a->wset * w_block * k.elt, "weight blocks");
    }
    for (int b = 0; b < 2; b++)
        k.in_at[b].blk = k.w_at[b].blk = -1; /* holds nothing */
    k.out = st_cpe_ldm_alloc(cpe, (size_t)a->cstride * out_block * k.elt, "output blocks");
    int waited = a->p.design == ST_CPE_CONV_SWCAFFE_FLOAT;
    conv_op first = op_first(a, 0, 0);
    if (!first.done && !waited) {
        fetch_input(cpe, &k, 1, &first);
        fetch_weights(cpe, &k, 1, &first);
    }
    for (int blk = 0; blk < blocks_of(a); blk++)
        for (int orow = 0; orow < a->p.ro; orow++) {
            int o0, o1;
            block_cols(a, blk, &o0, &o1);
            if (a->p.accumulate) {
                conv_outputs(cpe, &k, orow, o0, o1, 0);
            } else {
                /* swCaffe zeroes its whole CoStride buffer, swDNN the block */
                int zeroed = waited ? a->cstride : o1 - o0;
                cpe_vector_loop(cpe, (size_t)zeroed * out_block, 0.0, 1.0, 0.0);
                if (!st_cpe_cost_only(cpe))
                    memset(k.out, 0, (size_t)(o1 - o0) * out_block * k.elt);
            }
            for (conv_op op = op_first(a, blk, orow);
                 !op.done && op.blk == blk && op.orow == orow; op_advance(a, &op)) {
                if (waited)
                    conv_stage_waited(cpe, &k, &op);
                else
                    conv_stage(cpe, &k, &op);
                conv_multiply(cpe, &k, &op);
            }
            conv_outputs(cpe, &k, orow, o0, o1, 1);
        }
}

/* ---- the host side ---- */

/* What a pass calls the core problem's three dimensions: the SIMD one (B),
 * the one over CPE columns (No) and the reduction (Ni). */
typedef struct conv_names {
    const char *simd, *scalar, *reduction;
} conv_names;

static const conv_names core_names = {"values of the SIMD dimension", "output channels",
                                      "input channels"};

/* swCaffe's float design (p->b already checked): its assertions on the
 * channels, one weight block per multiply, CoStride = (budget in doubles -
 * input block - weight block) / output block. */
static int swcaffe_plan(const st_cpe_machine *machine, const st_cpe_swdnn_conv *p,
                        const conv_names *names, conv_args *a, char *why, size_t len)
{
    if (p->no % 32 != 0 || p->no < 64) {
        snprintf(why, len, "%d %s: swCaffe's float kernel needs a multiple of 32, at least 64",
                 p->no, names->scalar);
        return 0;
    }
    if (p->ni % 32 != 0 || p->ni < 64) {
        snprintf(why, len, "%d %s: swCaffe's float kernel needs a multiple of 32, at least 64",
                 p->ni, names->reduction);
        return 0;
    }
    int side = machine->mesh_cols;
    a->bs = p->b / side;
    a->nis = p->ni / side;
    a->nos = p->no / side;
    int budget = p->ldm_budget > 0 ? p->ldm_budget
                                   : machine->ldm_bytes - ST_CPE_SWCAFFE_BACKWARD_LDM_RESERVE;
    long in = (long)a->nis * a->bs, w = (long)a->nos * a->nis, out = (long)a->nos * a->bs;
    long cstride = (budget / (long)sizeof(double) - in - w) / out;
    if (cstride < 1) {
        snprintf(why, len, "the LDM cannot hold an input block (%d x %d), a weight block (%d x "
                 "%d) and an output block (%d x %d) counted as doubles in swCaffe's %d KB",
                 a->nis, a->bs, a->nos, a->nis, a->nos, a->bs, budget / 1024);
        return 0;
    }
    a->wset = 1;
    a->cstride = cstride < p->co ? (int)cstride : p->co;
    return 1;
}

/* Plan a: slices, weight staging and CoStride; 0 with why (in the pass's
 * names) when the blocking cannot take the problem. */
static int conv_plan(const st_cpe_machine *machine, const st_cpe_swdnn_conv *p,
                     const conv_names *names, conv_args *a, char *why, size_t len)
{
    memset(a, 0, sizeof *a);
    a->p = *p;
    int side = machine->mesh_cols;
    if (p->b % (16 * side) != 0) {
        snprintf(why, len, "%d %s: each CPE row gets %d, not whole 4 x 4 register blocks of 16 "
                 "(swDNN's blocking needs a multiple of %d)", p->b, names->simd, p->b / side,
                 16 * side);
        return 0;
    }
    if (p->design == ST_CPE_CONV_SWCAFFE_FLOAT)
        return swcaffe_plan(machine, p, names, a, why, len);
    if (p->no % (4 * side) != 0) {
        snprintf(why, len, "%d %s: each CPE column gets %d, not whole register blocks of 4 "
                 "(swDNN's blocking needs a multiple of %d)", p->no, names->scalar,
                 p->no / side, 4 * side);
        return 0;
    }
    if (p->ni % side != 0 || p->ni < 2 * side) {
        snprintf(why, len, "%d %s do not split into %d equal slices of at least 2 (swDNN's "
                 "reduction loop is unrolled by two)", p->ni, names->reduction, side);
        return 0;
    }
    a->bs = p->b / side;
    a->nis = p->ni / side;
    a->nos = p->no / side;
    size_t elt = st_cpe_dtype_size(p->type);
    int swdnn_budget = machine->ldm_bytes - ST_CPE_SWDNN_LDM_RESERVE;
    double budget = (double)swdnn_budget / (double)elt;
    double in = (double)a->nis * a->bs, w = (double)a->nos * a->nis;
    double out = (double)a->nos * a->bs;
    /* A kernel row of weights at a time (swCNNv12, which then keeps Kc - 1
     * output blocks in reserve), else one multiply's (swCaffe's float
     * kernel). */
    for (int wset = p->kc; wset >= 1; wset = wset > 1 ? 1 : 0) {
        double left = budget - 2.0 * in - 2.0 * wset * w;
        int reserve = wset > 1 ? p->kc - 1 : 0;
        int cstride = left > 0 ? (int)(left / out) - reserve : 0;
        if (cstride >= 1) {
            a->wset = wset;
            a->cstride = cstride < p->co ? cstride : p->co;
            return 1;
        }
    }
    snprintf(why, len, "the LDM cannot hold two input blocks (%d x %d), two weight blocks "
             "(%d x %d) and one output block (%d x %d) of %zu-byte values in swDNN's %d KB",
             a->nis, a->bs, a->nos, a->nis, a->nos, a->bs, elt, swdnn_budget / 1024);
    return 0;
}

int st_cpe_swdnn_conv_fits(const st_cpe_machine *machine, const st_cpe_swdnn_conv *p, char *why,
                           size_t len)
{
    conv_args a;
    return conv_plan(machine, p, &core_names, &a, why, len);
}

st_status st_cpe_swdnn_conv_run(st_cpe_cluster *cg, const st_cpe_swdnn_conv *p, const char *name,
                                st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (p->type != ST_CPE_F32 && p->type != ST_CPE_F64)
        return st_fail(err, ST_EINPUT, "%s: unknown element type %d", name, (int)p->type);
    if (p->ri < 1 || p->ci < 1 || p->ro < 1 || p->co < 1 || p->kr < 1 || p->kc < 1 || !p->in ||
        !p->w || !p->out)
        return st_fail(err, ST_EINPUT, "%s: bad geometry or NULL tensors", name);
    conv_args a;
    char why[256];
    if (!conv_plan(st_cpe_cluster_machine(cg), p, &core_names, &a, why, sizeof why))
        return st_fail(err, ST_EINPUT, "%s: %s", name, why);
    return st_cpe_launch(cg, name, conv_kernel, &a, out, err);
}

/* ---- the convolution's passes ---- */

static int pass_geometry_ok(const st_cpe_conv_geom *g, char *why, size_t len)
{
    if (g->sh != 1 || g->sw != 1) {
        snprintf(why, len, "stride %d x %d: swDNN's blocking steps one input column and row at a "
                 "time (unit stride only)", g->sh, g->sw);
        return 0;
    }
    return 1;
}

st_cpe_swdnn_conv st_cpe_conv_pass_problem(const st_cpe_machine *machine,
                                           const st_cpe_conv_geom *g, int n, st_cpe_conv_pass pass,
                                           const void *in, const void *w, void *out)
{
    int reserve = pass == ST_CPE_CONV_FORWARD ? ST_CPE_SWCAFFE_FORWARD_LDM_RESERVE
                                              : ST_CPE_SWCAFFE_BACKWARD_LDM_RESERVE;
    st_cpe_swdnn_conv p = {.design = ST_CPE_CONV_SWCAFFE_FLOAT,
                           .ldm_budget = machine->ldm_bytes - reserve,
                           .type = ST_CPE_F32, .in = in, .w = w, .out = out};
    switch (pass) {
    case ST_CPE_CONV_FORWARD:
        p.ri = g->ih; p.ci = g->iw; p.ro = g->oh; p.co = g->ow;
        p.kr = g->kh; p.kc = g->kw; p.pr = g->ph; p.pc = g->pw;
        p.ni = g->c; p.no = g->oc; p.b = n;
        break;
    case ST_CPE_CONV_BACKWARD_DATA:
        p.ri = g->oh; p.ci = g->ow; p.ro = g->ih; p.co = g->iw;
        p.kr = g->kh; p.kc = g->kw; p.pr = g->kh - 1 - g->ph; p.pc = g->kw - 1 - g->pw;
        p.ni = g->oc; p.no = g->c; p.b = n;
        break;
    case ST_CPE_CONV_BACKWARD_WEIGHTS:
        p.ri = g->ih; p.ci = g->iw; p.ro = g->kh; p.co = g->kw;
        p.kr = g->oh; p.kc = g->ow; p.pr = g->ph; p.pc = g->pw;
        p.ni = n; p.no = g->oc; p.b = g->c;
        break;
    case ST_CPE_CONV_PASSES:
        break;
    }
    return p;
}

int st_cpe_conv_implicit_fits(const st_cpe_machine *machine, const st_cpe_conv_geom *g, int n,
                              st_cpe_conv_pass pass, char *why, size_t len)
{
    if (!pass_geometry_ok(g, why, len))
        return 0;
    static const conv_names pass_names[ST_CPE_CONV_PASSES] = {
        {"images", "output channels", "input channels"},
        {"images", "input channels", "output channels"},
        {"input channels", "output channels", "images"},
    };
    st_cpe_swdnn_conv p = st_cpe_conv_pass_problem(machine, g, n, pass, g, g, (void *)g);
    conv_args a;
    if (!conv_plan(machine, &p, &pass_names[pass], &a, why, len))
        return 0;
    char weights_why[256];
    if (pass == ST_CPE_CONV_BACKWARD_DATA &&
        !st_cpe_conv_implicit_fits(machine, g, n, ST_CPE_CONV_BACKWARD_WEIGHTS, weights_why,
                                   sizeof weights_why)) {
        snprintf(why, len, "swCaffe computes backward-data with backward-weights, which cannot "
                 "run implicitly: %s", weights_why);
        return 0;
    }
    return 1;
}
