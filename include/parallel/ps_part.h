/* The solver state split over the ranks of a multi-node run
 * (--rank-update partitioned; PCL-DNN's part-reduce / part-broadcast).
 *
 * Slice r of the parameter arena (ps.h; worker r's) is cut into P parts,
 * part q being the floats [floor(L q / P), floor(L (q+1) / P)) of the
 * slice's L (st_allreduce_part: the part an all-reduce algorithm's
 * reduce-scatter leaves on rank q, the same for every algorithm). Rank q
 * owns part q of every slice: after the reduce-scatter of slice r, worker
 * r applies the solver to that part alone and the parts' new weights are
 * all-gathered. The solver state of the floats a rank owns, and only
 * those, lives in a compact arena of its own: its part of slice 0, then
 * of slice 1, and so on, so every plane holds about count / P floats
 * rather than count. The weights and the gradient arenas stay whole on
 * every rank.
 *
 * Plane k of the state of arena float j, in this rank's part [start[r],
 * start[r] + len) of slice r, is state[k * owned + local[r] + j -
 * start[r]]. The layout depends on P, this rank and the slices (the
 * worker count) only. */
#ifndef ST_PS_PART_H
#define ST_PS_PART_H

#include <stddef.h>

#include "base/status.h"
#include "parallel/ps.h"

typedef struct st_ps_part {
    int ranks, rank;  /* P, and q: the rank whose parts these are */
    int n_slices;     /* the slices of the arena (workers) */
    size_t *start;    /* [n_slices] arena offset of this rank's part of slice r */
    size_t *local;    /* [n_slices + 1] its offset in the compact state; local[n_slices] =
                         owned */
    size_t owned;     /* floats this rank owns (its parts' total) */
    size_t count;     /* floats of the whole arena (ps->count) */
    int planes;       /* solver state planes */
    float *state;     /* [planes * owned], plane k at k * owned; zero at first */
} st_ps_part;

/* This rank's parts of ps's slices and its compact state of `planes`
 * planes (ps may hold no state of its own). */
st_status st_ps_part_init(st_ps_part *pp, const st_ps *ps, int ranks, int rank, int planes,
                          st_error *err);
void st_ps_part_free(st_ps_part *pp);

/* This rank's part of slice r: arena floats [*b, *e). */
void st_ps_part_range(const st_ps_part *pp, int r, size_t *b, size_t *e);

/* Apply the update of iteration iter to this rank's part of slice r with
 * the reduced gradient in ps->grads[0] (only the part is read; it must
 * hold the sum over every rank), on `threads`. */
void st_ps_part_apply(const st_ps_part *pp, st_ps *ps, int r, const st_solver_cfg *c, float lr,
                      long iter, int threads);

#endif
