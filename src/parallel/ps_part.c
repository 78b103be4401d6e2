/* The partitioned solver state: this rank's parts of the slices and their
 * compact state arena; see ps_part.h. */
#include "parallel/ps_part.h"

#include <stdlib.h>
#include <string.h>

#include "base/memory.h"
#include "dist/allreduce_algos.h"

void st_ps_part_free(st_ps_part *pp)
{
    free(pp->start);
    free(pp->local);
    st_free_aligned(pp->state);
    memset(pp, 0, sizeof *pp);
}

st_status st_ps_part_init(st_ps_part *pp, const st_ps *ps, int ranks, int rank, int planes,
                          st_error *err)
{
    memset(pp, 0, sizeof *pp);
    if (ranks < 1 || rank < 0 || rank >= ranks)
        return st_fail(err, ST_EINTERNAL, "rank %d of %d: no such rank", rank, ranks);
    pp->ranks = ranks;
    pp->rank = rank;
    pp->n_slices = ps->n_workers;
    pp->count = ps->count;
    pp->planes = planes;
    pp->start = st_calloc((size_t)pp->n_slices, sizeof *pp->start, "the state's parts", err);
    pp->local = st_calloc((size_t)pp->n_slices + 1, sizeof *pp->local, "the state's parts",
                          err);
    if (!pp->start || !pp->local) {
        st_ps_part_free(pp);
        return ST_ENOMEM;
    }
    for (int r = 0; r < pp->n_slices; r++) {
        size_t offset, len;
        st_allreduce_part(ps->slice[r + 1] - ps->slice[r], ranks, rank, &offset, &len);
        pp->start[r] = ps->slice[r] + offset;
        pp->local[r + 1] = pp->local[r] + len;
    }
    pp->owned = pp->local[pp->n_slices];
    pp->state = st_alloc_aligned(pp->owned * (size_t)planes * sizeof(float),
                                 "this rank's part of the solver state", err);
    if (!pp->state) {
        st_ps_part_free(pp);
        return ST_ENOMEM;
    }
    return ST_OK;
}

void st_ps_part_range(const st_ps_part *pp, int r, size_t *b, size_t *e)
{
    *b = pp->start[r];
    *e = pp->start[r] + (pp->local[r + 1] - pp->local[r]);
}

void st_ps_part_apply(const st_ps_part *pp, st_ps *ps, int r, const st_solver_cfg *c, float lr,
                      long iter, int threads)
{
    size_t b, e;
    st_ps_part_range(pp, r, &b, &e);
    st_ps_apply_range(ps, b, e, pp->state + pp->local[r], pp->owned, c, lr, iter, threads);
}
