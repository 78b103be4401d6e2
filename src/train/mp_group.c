/* Hybrid parallelism across nodes (--parallel hybrid --mp-group G|auto;
 * PCL-DNN): the group size, what it moves, and the model-parallel blocks
 * gathered where the whole network is needed.
 *
 * Per rank and iteration, with P ranks of B samples, Q = P / G, H the
 * parameters of the data-parallel layers and, per model-parallel layer,
 * W = in x out + out parameters (floats; a ring's all-reduce sends
 * 2 n (Q - 1) / Q of n floats over Q ranks):
 *   all-reduced   2 H (P - 1) / P + sum 2 (W / G) (Q - 1) / Q
 *   exchanged     sum (G - 1) B (2 in + 2 out / G): the input's
 *                 all-gather and its gradient's reduce-scatter, the
 *                 output's and its gradient's all-to-all (received)
 * G = 1 is data parallelism's 2 (H + sum W) (P - 1) / P. PCL-DNN's
 * balance: splitting a layer pays where its weights' bytes outweigh the
 * activations exchanged; auto takes the divisor G of P with the fewest
 * bytes in all (the smallest on a tie) and prints the table.
 *
 * A rank keeps its own blocks of the model-parallel weights and solver
 * state current (parallel/sched_bsp.c); rank 0 tests and writes snapshots,
 * so group 0's ranks (the blocks are the same in every group) send it
 * theirs first (trainer_gather_mp_blocks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_internal.h"

#define MB 1e-6

/* The bytes of group size G, per rank and iteration (the header's). */
static void mp_bytes(const st_trainer *t, int G, double *reduced, double *exchanged)
{
    int P = trainer_ranks(t), Q = P / G, first;
    size_t head;
    st_net_hybrid_split(&t->net, &first, &head);
    double B = (double)t->batch, mp = 0.0, moved = 0.0;
    for (int i = first; i < t->net.n_layers; i++) {
        const st_layer *l = t->net.layers[i];
        double in = (double)st_shape_count(l->in), out = (double)st_shape_count(l->out);
        size_t ranges[4][2];
        if (!l->ops->mp_block || !l->ops->model_parallel || !l->ops->model_parallel(l))
            continue;
        int n = l->ops->mp_block(l, 0, 1, ranges);
        for (int k = 0; k < n; k++)
            mp += (double)(ranges[k][1] - ranges[k][0]);
        moved += (G - 1) * B * (2.0 * in + 2.0 * out / G);
    }
    *reduced = 4.0 * (2.0 * (double)head * (P - 1) / P + 2.0 * (mp / G) * (Q - 1) / Q);
    *exchanged = 4.0 * moved;
}

void trainer_choose_mp_group(st_trainer *t)
{
    st_train_opts *o = &t->o;
    int P = trainer_ranks(t);
    if (P == 1 || o->hybrid != 1 || !o->mp_group)
        return;
    double red, ex;
    if (o->mp_group == ST_THREADS_AUTO) {
        char line[512];
        int len = snprintf(line, sizeof line, "mp-group auto: MB per rank per iteration, "
                           "all-reduced + exchanged in the group:");
        double best = 0.0;
        for (int G = 1; G <= P; G++) {
            if (P % G)
                continue;
            mp_bytes(t, G, &red, &ex);
            if (len < (int)sizeof line)
                len += snprintf(line + len, sizeof line - (size_t)len, " G=%d %.3f + %.3f", G,
                                MB * red, MB * ex);
            if (G == 1 || red + ex < best) {
                best = red + ex;
                o->mp_group = G;
            }
        }
        st_info(&t->log, "%s: G = %d", line, o->mp_group);
    }
    double red1, ex1;
    mp_bytes(t, 1, &red1, &ex1);
    mp_bytes(t, o->mp_group, &red, &ex);
    if (o->mp_group > 1)
        st_info(&t->log, "parallel: hybrid across nodes: the fully connected layers split over "
                "groups of %d ranks (%d group%s), data-parallel between them; all-reduced per "
                "rank per iteration %.3f MB (data parallelism: %.3f MB, %.1f%% less), "
                "exchanged in the group %.3f MB", o->mp_group, P / o->mp_group,
                P / o->mp_group > 1 ? "s" : "", MB * red, MB * red1,
                red1 > 0 ? 100.0 * (1.0 - red / red1) : 0.0, MB * ex);
}

st_status trainer_gather_mp_blocks(st_trainer *t, st_error *err)
{
    st_cluster *c = t->o.cluster;
    int G = t->o.mp_group, rank = st_cluster_rank(c);
    if (!trainer_mp_nodes(t) || !c || rank >= G)
        return ST_OK;
    /* range q of every part is one tensor's (st_net_mp_ranges), the parts' rows one after
     * the other: gathered in place, each part's from its offset of part 0's */
    int max = 4 * t->net.n_layers, planes = trainer_state_planes(t), n = 0;
    size_t(*ranges)[2] = calloc((size_t)G * (size_t)max, sizeof *ranges);
    int *counts = calloc(2 * (size_t)G, sizeof *counts), *displs = counts ? counts + G : NULL;
    st_status st = ranges && counts ? ST_OK
                                    : st_fail(err, ST_ENOMEM, "out of memory gathering the "
                                              "model-parallel blocks");
    if (st != ST_OK)
        st_cluster_abort(c, err); /* the others would wait for this rank */
    for (int j = 0; st == ST_OK && j < G; j++)
        n = st_net_mp_ranges(&t->net, j, G, ranges + (size_t)j * (size_t)max, max);
    for (int p = 0; st == ST_OK && p <= planes; p++) { /* the weights, then the state */
        float *arena = p == 0 ? t->ps.weights : t->ps.state + (size_t)(p - 1) * t->ps.count;
        for (int q = 0; st == ST_OK && q < n; q++) {
            size_t from = ranges[q][0];
            for (int j = 0; j < G; j++) {
                const size_t *r = ranges[(size_t)j * (size_t)max + (size_t)q];
                counts[j] = (int)(r[1] - r[0]);
                displs[j] = (int)(r[0] - from);
            }
            st = st_cluster_mp_gather(c, arena + from, counts, displs, err);
        }
    }
    free(counts);
    free(ranges);
    return st;
}
