/* The scheduler of a launch's CPEs (cpe_cluster.c says why each CPE
 * program runs in a user-space context on the launching thread), and the
 * two ways a program stops running before its end: it blocks until what
 * it waits for holds (cpe_block), or an illegal operation stops it for
 * good (cpe_fault). Below everything that waits or fails - LDM, DMA,
 * register communication, the mesh GEMM, the barrier - and the launch,
 * so that the emulator's files call one way.
 *
 * Scheduling is round-robin over CPE 0..63: a CPE runs until it finishes or
 * blocks, then switches straight to the next CPE in cyclic order that can
 * run - one that has not started, or a blocked one whose wait (cpe->wait)
 * now holds - so a block costs one switch, not two through the launching
 * thread. When no CPE can run, control returns to the launching
 * thread: either every CPE has finished, or the rest wait for each other,
 * which is a deadlock. */
#include <stdarg.h>
#include <stdio.h>

#include "cpe_internal.h"

int cpe_line_has_room(const st_cpe *cpe, st_cpe_bus bus)
{
    int self = bus == ST_CPE_ROW ? cpe->col : cpe->row;
    for (int i = 0; i < cpe_line_length(cpe, bus); i++)
        if (i != self && cpe_line_peer((st_cpe *)cpe, bus, i)->in[bus].count >= ST_CPE_FIFO_DEPTH)
            return 0;
    return 1;
}

static int cpe_can_run(const st_cpe_cluster *cg, const st_cpe *cpe)
{
    if (cpe->state != CPE_BLOCKED)
        return cpe->state == CPE_READY;
    const cpe_wait *w = &cpe->wait;
    switch (w->kind) {
    case CPE_WAIT_RECV:
        return cpe->in[w->bus].count > 0;
    case CPE_WAIT_SEND:
        return cg->cpe[w->peer].in[w->bus].count < ST_CPE_FIFO_DEPTH;
    case CPE_WAIT_BCAST:
        return cpe_line_has_room(cpe, w->bus);
    case CPE_WAIT_BARRIER:
        return cg->barrier.generation != w->generation;
    case CPE_WAIT_MESH:
        return cg->mesh.generation != w->generation;
    case CPE_WAIT_NONE:
        break;
    }
    return 1;
}

st_cpe *cpe_sched_next(st_cpe_cluster *cg, int after)
{
    for (int d = 1; d <= cg->count; d++) {
        st_cpe *next = &cg->cpe[(after + d) % cg->count];
        if (cpe_can_run(cg, next)) {
            next->state = CPE_READY;
            return next;
        }
    }
    return NULL;
}

void cpe_block(st_cpe *cpe)
{
    st_cpe_cluster *cg = cpe->cg;
    cpe->state = CPE_BLOCKED;
    st_cpe *next = cpe_sched_next(cg, cpe->id);
    cpe_context_switch(&cpe->context, next ? &next->context : &cg->host);
    cpe->wait.kind = CPE_WAIT_NONE;
}

_Noreturn void cpe_fault(st_cpe *cpe, const char *fmt, ...)
{
    st_cpe_cluster *cg = cpe->cg;
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    st_fail(&cg->fault, ST_EINTERNAL, "kernel '%s': CPE (%d,%d): %s", cg->kernel_name, cpe->row,
            cpe->col, what);
    cpe->state = CPE_DONE;
    cpe_context_exit(&cpe->context, &cg->host);
}
