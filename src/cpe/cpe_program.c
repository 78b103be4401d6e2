/* What a CPE program asks of the CPE it runs on (include/cpe/cpe.h),
 * besides LDM, DMA, register communication and the mesh GEMM, which have
 * their files: its place in the mesh and the machine's sizes, the barrier,
 * work declared on its clock (a loop's cost; cycles of computation, which
 * the mesh GEMM declares too), whether the launch is cost-only, and an
 * element type's size. Below the mesh GEMM and the CPE programs
 * (kernels/), above the scheduler (cpe_sched.c), where the barrier
 * blocks. */
#include "cpe_internal.h"

int st_cpe_row(const st_cpe *cpe)
{
    return cpe->row;
}

int st_cpe_col(const st_cpe *cpe)
{
    return cpe->col;
}

int st_cpe_id(const st_cpe *cpe)
{
    return cpe->id;
}

int st_cpe_mesh_rows(const st_cpe *cpe)
{
    return cpe->cg->rows;
}

int st_cpe_mesh_cols(const st_cpe *cpe)
{
    return cpe->cg->cols;
}

int st_cpe_count(const st_cpe *cpe)
{
    return cpe->cg->count;
}

size_t st_cpe_ldm_bytes(const st_cpe *cpe)
{
    return cpe->cg->ldm_bytes;
}

int st_cpe_vector_doubles(const st_cpe *cpe)
{
    return cpe->cg->machine.vector_doubles;
}

void st_cpe_sync(st_cpe *cpe)
{
    st_cpe_cluster *cg = cpe->cg;
    cpe_barrier *b = &cg->barrier;
    unsigned generation = b->generation;
    if (cpe->clock.now > b->latest_arrival)
        b->latest_arrival = cpe->clock.now;
    if (++b->arrived == cg->count) {
        b->release_cycle = b->latest_arrival + cg->params.barrier_cycles;
        b->arrived = 0;
        b->latest_arrival = 0.0;
        b->generation++;
        cg->barriers++;
    } else {
        cpe->wait.kind = CPE_WAIT_BARRIER;
        cpe->wait.generation = generation;
        cpe_block(cpe);
    }
    cpe->clock.sync += b->release_cycle - cpe->clock.now;
    cpe->clock.now = b->release_cycle;
}

void cpe_clock_compute(st_cpe *cpe, double cycles, double fp_cycles, uint64_t flops)
{
    if (fp_cycles > cycles)
        fp_cycles = cycles;
    cpe->counts.flops += flops;
    cpe->counts.compute_cycles += cycles;
    cpe->clock.compute += fp_cycles;
    cpe->clock.regcomm += cycles - fp_cycles;
    cpe->clock.now += cycles;
}

void st_cpe_loop_run(st_cpe *cpe, const st_cpe_loop *loop)
{
    double cycles = st_cpe_loop_cycles(&cpe->cg->params, loop);
    cpe->counts.flops += loop->flops;
    cpe->counts.compute_cycles += cycles;
    cpe->clock.compute += cycles;
    cpe->clock.now += cycles;
}

int st_cpe_cost_only(const st_cpe *cpe)
{
    return cpe->cg->cost_only;
}

size_t st_cpe_dtype_size(st_cpe_dtype type)
{
    return type == ST_CPE_F64 ? sizeof(double) : sizeof(float);
}
