/* The mesh GEMM (st_cpe_mesh_gemm_step, include/cpe/cpe.h): one step of the
 * register-communication matrix product of swDNN and swCaffe, as a
 * collective of the 64 CPEs.
 *
 * What the machine runs (swDNN's gemm.c / swCaffe's gemm_float.S): for
 * ccCore = 0..7, for each register block of C (4 scalars of the column
 * operand x 4 vectors of the row operand: 16 accumulators loaded from
 * LDM), for each k of slice ccCore: the CPEs of column ccCore load their
 * row-operand vectors (vld) and put them to their row (putr), the others
 * get them (getr); the CPEs of row ccCore load their column-operand scalars
 * extended to vectors (ldse) and put them down their column (putc), the
 * others get them (getc); every CPE issues 16 multiply-adds; then the block
 * goes back to LDM. The values go from register to register, one message
 * per vector of the row operand and one per scalar of the column operand,
 * and are re-sent for every block they meet.
 *
 * Why a collective. Emulated one message at a time, a VGG-16 iteration
 * would be some 10^11 messages; since every CPE of a row and column runs
 * the same loop in lockstep (a get waits for its put), the step's time is
 * a function of the block shapes and each CPE's role, which this file
 * computes in closed form from the pipeline model, and its data can be
 * summed directly from the owners' LDM once every CPE has arrived. Counts
 * of messages and cycles are those of the loop above (every CPE runs the
 * largest block's loop); a CPE's flops are its own block's products, so
 * that a narrow product, which leaves CPEs idle or half-filled, shows its
 * useful flops, not the mesh's issue.
 *
 * Time per step s, for a CPE owning nothing, the row operand (column s),
 * the column operand (row s) or both ((s, s)): each block of ib x jb
 * accumulators iterates nk_s times with ib jb multiply-adds on P0, and on
 * P1 jb gets (owners: jb loads and jb puts) plus ib gets (owners: ib loads
 * and ib puts), each message (get or put) float_msg_cycles more in a loop
 * that moves floats as doubles (float_msgs),
 * an accumulator chain of fma_latency_cycles; the block's
 * ib jb loads and ib jb stores of C issue on P1 among the iterations, and
 * gemm_block_cycles covers the drain and the set-up between blocks. The
 * dimensions are the largest in the mesh (ni over columns, nj over rows,
 * in vectors of 4): the lockstep loop runs the same blocks on every CPE,
 * so a CPE with fewer rows computes on padding. The step lasts as long as
 * its slowest role, (s, s), for everyone; the collective starts at the
 * last arrival. Multiply-add issue cycles count as compute, the rest
 * (gets, puts, waiting) as register communication. */
#include <stdlib.h>
#include <string.h>

#include "cpe_internal.h"

st_status cpe_mesh_init(cpe_mesh *m, size_t ldm_bytes, st_error *err)
{
    memset(m, 0, sizeof *m);
    /* the longest C row: a whole LDM of floats */
    size_t row_max = ldm_bytes / sizeof(float);
    m->row_sum = st_calloc(row_max, sizeof *m->row_sum, "the mesh GEMM's row sum", err);
    if (!m->row_sum)
        return ST_ENOMEM;
    m->row_sum_count = row_max;
    return ST_OK;
}

void cpe_mesh_free(cpe_mesh *m)
{
    free(m->row_sum);
    m->row_sum = NULL;
}

/* ---- checks ---- */

static size_t span_bytes(size_t rows, size_t cols, size_t ld, size_t elt)
{
    return rows == 0 || cols == 0 ? 0 : ((rows - 1) * ld + cols) * elt;
}

/* This CPE's own arguments: its blocks lie in its LDM. */
static void mesh_check_own(st_cpe *cpe, const st_cpe_mesh_gemm *g)
{
    if (g->type != ST_CPE_F32 && g->type != ST_CPE_F64)
        cpe_fault(cpe, "mesh GEMM: unknown element type %d", (int)g->type);
    size_t elt = st_cpe_dtype_size(g->type);
    struct {
        const char *what;
        const void *p;
        size_t rows, cols, ld;
    } blk[3] = {{"C", g->c, g->ni, g->nj, g->ldc},
                {"column operand", g->col_op, g->col_trans ? g->col_nk : g->ni,
                 g->col_trans ? g->ni : g->col_nk, g->ld_col},
                {"row operand", g->row_op, g->row_nk, g->nj, g->ld_row}};
    for (int b = 0; b < 3; b++) {
        size_t bytes = span_bytes(blk[b].rows, blk[b].cols, blk[b].ld, elt);
        if (bytes == 0)
            continue;
        if (blk[b].ld < blk[b].cols)
            cpe_fault(cpe, "mesh GEMM: the %s's row pitch %zu is less than its %zu columns",
                      blk[b].what, blk[b].ld, blk[b].cols);
        if (!cpe_ldm_owns(cpe, blk[b].p, bytes))
            cpe_fault(cpe, "mesh GEMM: the %s (%zu x %zu, %zu bytes at %p) is not in this "
                      "CPE's allocated LDM", blk[b].what, blk[b].rows, blk[b].cols, bytes,
                      blk[b].p);
    }
    if (g->nj > cpe->cg->mesh.row_sum_count)
        cpe_fault(cpe, "mesh GEMM: C rows of %zu values exceed the LDM", g->nj);
}

/* The agreement every CPE's blocks need (checked by the last to arrive,
 * which stops the launch naming the CPEs that disagree). */
static void mesh_check_shapes(st_cpe *last, const cpe_mesh *m)
{
    int cols = last->cg->cols;
    for (int i = 0; i < last->cg->count; i++) {
        int r = i / cols, c = i % cols;
        const st_cpe_mesh_gemm *g = &m->op[i], *first_of_col = &m->op[c],
                               *first_of_row = &m->op[r * cols];
        const st_cpe_mesh_gemm *diag_r = &m->op[r * cols + r], *diag_c = &m->op[c * cols + c];
        if (g->type != m->op[0].type || g->unroll != m->op[0].unroll ||
            g->float_msgs != m->op[0].float_msgs)
            cpe_fault(last, "mesh GEMM: CPE (%d,%d) and CPE (0,0) use different element types "
                      "or loops", r, c);
        if (g->ni != first_of_col->ni)
            cpe_fault(last, "mesh GEMM: CPE (%d,%d) has %zu C rows, CPE (0,%d) %zu: a column "
                      "must agree", r, c, g->ni, c, first_of_col->ni);
        if (g->nj != first_of_row->nj)
            cpe_fault(last, "mesh GEMM: CPE (%d,%d) has %zu C columns, CPE (%d,0) %zu: a row "
                      "must agree", r, c, g->nj, r, first_of_row->nj);
        /* The column operand CPE (r, c) owns is slice r, the row operand
         * slice c; CPE (s, s) owns both of slice s. */
        if (g->col_nk != diag_r->row_nk)
            cpe_fault(last, "mesh GEMM: CPE (%d,%d) owns a column operand of %zu k, CPE "
                      "(%d,%d) a row operand of %zu: slice %d must agree", r, c, g->col_nk, r, r,
                      diag_r->row_nk, r);
        if (g->row_nk != diag_c->row_nk)
            cpe_fault(last, "mesh GEMM: CPE (%d,%d) owns a row operand of %zu k, CPE (%d,%d) "
                      "%zu: slice %d must agree", r, c, g->row_nk, c, c, diag_c->row_nk, c);
    }
}

/* ---- the arithmetic ---- */

static double load(const void *p, size_t at, st_cpe_dtype type)
{
    return type == ST_CPE_F64 ? ((const double *)p)[at] : (double)((const float *)p)[at];
}

/* CPE i's C += sum over s of colop(s, c) rowop(r, s), each step's sum in
 * double added to C in its type. */
static void mesh_multiply(cpe_mesh *m, int cols, int i)
{
    int r = i / cols, c = i % cols;
    const st_cpe_mesh_gemm *g = &m->op[i];
    double *sum = m->row_sum;
    for (int s = 0; s < cols; s++) {
        const st_cpe_mesh_gemm *a = &m->op[s * cols + c], *b = &m->op[r * cols + s];
        size_t nk = b->row_nk;
        if (nk == 0 || g->ni == 0 || g->nj == 0)
            continue;
        for (size_t ii = 0; ii < g->ni; ii++) {
            memset(sum, 0, g->nj * sizeof *sum);
            for (size_t k = 0; k < nk; k++) {
                double x = load(a->col_op, a->col_trans ? k * a->ld_col + ii : ii * a->ld_col + k,
                                g->type);
                if (g->type == ST_CPE_F64) {
                    const double *row = (const double *)b->row_op + k * b->ld_row;
                    for (size_t j = 0; j < g->nj; j++)
                        sum[j] += x * row[j];
                } else {
                    const float *row = (const float *)b->row_op + k * b->ld_row;
                    for (size_t j = 0; j < g->nj; j++)
                        sum[j] += x * (double)row[j];
                }
            }
            if (g->type == ST_CPE_F64) {
                double *crow = (double *)g->c + ii * g->ldc;
                for (size_t j = 0; j < g->nj; j++)
                    crow[j] += sum[j];
            } else {
                float *crow = (float *)g->c + ii * g->ldc;
                for (size_t j = 0; j < g->nj; j++)
                    crow[j] = (float)((double)crow[j] + sum[j]);
            }
        }
    }
}

/* ---- the time ---- */

/* Cycles of one step for a CPE of the given roles, over the blocks of an
 * ni x nj_vec (vectors) C with nk iterations each; *fp gets the
 * multiply-add issue cycles. */
static double role_cycles(const st_cpe_cost_params *p, int float_msgs, size_t ni,
                          size_t nj_vec, size_t nk, int unroll, int row_owner, int col_owner,
                          double *fp)
{
    double per_msg = 1.0 + (float_msgs ? p->float_msg_cycles : 0.0);
    double cycles = 0.0;
    *fp = 0.0;
    for (size_t i0 = 0; i0 < ni; i0 += 4) {
        double ib = (double)(ni - i0 < 4 ? ni - i0 : 4);
        for (size_t j0 = 0; j0 < nj_vec; j0 += 4) {
            double jb = (double)(nj_vec - j0 < 4 ? nj_vec - j0 : 4);
            /* The C block's loads and stores issue on P1 among the
             * iterations' gets (swDNN's scheduling), so they cost only
             * where P1 is already the busier pipeline. */
            st_cpe_loop loop = {
                .iterations = (double)nk,
                .fp = ib * jb,
                .mem = (row_owner ? 1.0 + per_msg : per_msg) * jb +
                       (col_owner ? 1.0 + per_msg : per_msg) * ib + 2.0 * ib * jb / (double)nk,
                .chain = p->fma_latency_cycles,
                .unroll = unroll,
            };
            cycles += st_cpe_loop_cycles(p, &loop) + p->gemm_block_cycles;
            *fp += (double)nk * ib * jb;
        }
    }
    return cycles;
}

double st_cpe_mesh_step_cycles(const st_cpe_cost_params *p, int float_msgs, size_t ni,
                               size_t nj_vec, size_t nk, int unroll, double *fp)
{
    double worst = 0.0;
    for (int role = 0; role < 4; role++) {
        double c = role_cycles(p, float_msgs, ni, nj_vec, nk, unroll, role & 1, role >> 1, fp);
        if (c > worst)
            worst = c;
    }
    return worst;
}

/* Every CPE's clock and counters for the collective just completed. */
static void mesh_account(st_cpe_cluster *cg)
{
    cpe_mesh *m = &cg->mesh;
    const st_cpe_cost_params *p = &cg->params;
    size_t ni = 0, nj = 0;
    double start = 0.0;
    int cols = cg->cols;
    for (int i = 0; i < cg->count; i++) {
        if (m->op[i].ni > ni)
            ni = m->op[i].ni;
        if (m->op[i].nj > nj)
            nj = m->op[i].nj;
        if (m->arrival[i] > start)
            start = m->arrival[i];
    }
    size_t nj_vec = (nj + 3) / 4, blocks_i = (ni + 3) / 4, blocks_j = (nj_vec + 3) / 4;
    double total = 0.0, fp_total = 0.0;
    uint64_t k_sum = 0; /* the steps' k extents, which every CPE's block multiplies */
    for (int s = 0; s < cols; s++) {
        size_t nk = m->op[s * cols + s].row_nk;
        if (nk == 0 || ni == 0 || nj == 0)
            continue;
        double fp = 0.0, worst = st_cpe_mesh_step_cycles(p, m->op[0].float_msgs, ni, nj_vec, nk,
                                                         m->op[0].unroll, &fp);
        total += worst;
        fp_total += fp;
        k_sum += nk;
        uint64_t row_msgs = (uint64_t)blocks_i * nj_vec * nk;
        uint64_t col_msgs = (uint64_t)blocks_j * ni * nk;
        for (int i = 0; i < cg->count; i++) {
            st_cpe_counters *n = &cg->cpe[i].counts;
            int r = i / cols, c = i % cols;
            uint64_t sent = (c == s ? row_msgs : 0) + (r == s ? col_msgs : 0);
            uint64_t received = (c != s ? row_msgs : 0) + (r != s ? col_msgs : 0);
            n->msgs_bcast += sent;
            n->mesh_msgs_bcast += sent;
            n->msgs_received += received;
            n->mesh_msgs_received += received;
        }
    }
    for (int i = 0; i < cg->count; i++) {
        st_cpe *cpe = &cg->cpe[i];
        cpe->clock.regcomm += start - m->arrival[i];
        cpe->clock.now = start;
        cpe_clock_compute(cpe, total, fp_total,
                          2 * (uint64_t)m->op[i].ni * m->op[i].nj * k_sum);
    }
}

void st_cpe_mesh_gemm_step(st_cpe *cpe, const st_cpe_mesh_gemm *g)
{
    st_cpe_cluster *cg = cpe->cg;
    cpe_mesh *m = &cg->mesh;
    mesh_check_own(cpe, g);
    m->op[cpe->id] = *g;
    m->arrival[cpe->id] = cpe->clock.now;
    unsigned generation = m->generation;
    if (++m->arrived < cg->count) {
        cpe->wait.kind = CPE_WAIT_MESH;
        cpe->wait.generation = generation;
        cpe_block(cpe);
        return;
    }
    mesh_check_shapes(cpe, m);
    if (!cg->cost_only)
        for (int i = 0; i < cg->count; i++)
            mesh_multiply(m, cg->cols, i);
    mesh_account(cg);
    m->arrived = 0;
    m->generation++;
    m->collectives++;
}
