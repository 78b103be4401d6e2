/* What the scheduler (scheduler.c) and its training loops (sched_bsp.c,
 * sched_async.c) share, below all three so that they call one way: a
 * worker's part of the weights' bf16 copy, the workers' first failure,
 * the first value that is not finite, an iteration's trace events. */
#include <stdio.h>

#include "sched_internal.h"

int sched_bf16_shared(const st_sched_opts *o)
{
    return o->precision == ST_PRECISION_BF16 && !o->bf16_per_kernel;
}

st_status sched_bf16_refresh(st_worker *w, size_t b, size_t e)
{
    st_sched *s = w->s;
    return st_bf16_weights_refresh(s->bf16, w->replica.backend, w->replica.bctx,
                                   s->ps->weights, b, e, &w->err);
}

void sched_first_nonfinite(const st_sched *s, int r0, int r1, const int *images, char *buf,
                           size_t len)
{
    const st_net *net = s->net;
    char layer[128];
    for (int i = 0; i < net->n_layers; i++)
        for (int r = r0; r < r1; r++) {
            const st_replica *rep = &s->w[r].replica;
            int bf16 = rep->out_bf16[i] == ST_OUT_BF16_STORED;
            size_t per = rep->out_bytes[i] / (size_t)rep->n / (bf16 ? 2 : sizeof(float));
            const float *out = st_replica_output(rep, i);
            if (!(bf16 ? st_bf16_all_finite((const uint16_t *)out, per * (size_t)images[r - r0])
                       : st_all_finite(out, per * (size_t)images[r - r0]))) {
                snprintf(buf, len, "the output of %s is not finite",
                         st_net_layer_label(net, i, layer, sizeof layer));
                return;
            }
        }
    const st_param_table *t = &net->params;
    for (int i = net->n_layers - 1; i >= 0; i--)
        for (int k = 0; k < t->n; k++) {
            const st_param *p = &t->p[k];
            for (int r = r0; r < r1 && p->layer == i; r++) {
                size_t held = st_ps_grad_floats(t, r, s->ps->shared_from, s->ps->tail_applied);
                size_t at = 0;
                int applied_bad = sched_mp_bad(s->mp, r, &at) && at >= p->offset &&
                                  at < p->offset + p->count;
                if ((p->offset < held && !st_all_finite(s->ps->grads[r] + p->offset, p->count)) ||
                    applied_bad) {
                    snprintf(buf, len, "the gradient of %s, %s, is not finite", p->name,
                             st_net_layer_label(net, i, layer, sizeof layer));
                    return;
                }
            }
        }
    snprintf(buf, len, "the loss is not finite");
}

st_status sched_collect_status(st_sched *s, st_error *err)
{
    for (int r = 0; r < s->T; r++)
        if (s->w[r].status != ST_OK) {
            st_fail(err, s->w[r].status, "%s", s->w[r].err.msg);
            return s->w[r].status;
        }
    return ST_OK;
}

void sched_trace_iteration(st_trace_track *tr, long it, const sched_phase *phases, int n,
                           const double *t, const char *text_key, const char *text)
{
    if (!tr)
        return;
    st_trace_event e = {.name = "iteration", .index = (int)it, .cat = "iteration",
                        .iteration = it, .text_key = text_key, .text = text, .t0 = t[0],
                        .t1 = t[n]};
    st_trace_add(tr, &e);
    for (int k = 0; k < n; k++)
        st_trace_span(tr, phases[k].cat, phases[k].name, it, t[k], t[k + 1]);
}
