/* snapdiff NET.cfg A.snap B.snap TOLERANCE: compare the weights of two
 * snapshots of NET.cfg tensor by tensor; the difference of a tensor is
 * max |a - b| / max |a| over its values (relative to its scale, so values
 * near zero do not dominate). Prints the largest and the tensor it is in;
 * exit 0 when it is at most TOLERANCE, 1 when above, 2 on bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/cfg.h"
#include "net/hparams.h"
#include "base/log.h"
#include "net/net.h"
#include "train/snapshot.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: snapdiff NET.cfg A.snap B.snap TOLERANCE\n");
        return 2;
    }
    st_log log = st_log_default(ST_LOG_QUIET);
    st_error err = {0};
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_status st = st_net_load(argv[1], NULL, &cfg, &hp, &net, &log, &err);
    float *a = NULL, *b = NULL;
    if (st == ST_OK) {
        a = calloc(net.params.count, sizeof *a);
        b = calloc(net.params.count, sizeof *b);
        st = a && b ? ST_OK : st_fail(&err, ST_ENOMEM, "out of memory");
    }
    if (st == ST_OK)
        st = st_snapshot_load(argv[2], &net, a, NULL, &err);
    if (st == ST_OK)
        st = st_snapshot_load(argv[3], &net, b, NULL, &err);
    if (st != ST_OK) {
        fprintf(stderr, "snapdiff: %s\n", err.msg);
        return 2;
    }
    double worst = 0.0;
    const char *where = "";
    for (int i = 0; i < net.params.n; i++) {
        const st_param *p = &net.params.p[i];
        double diff = 0.0, scale = 0.0;
        for (size_t k = p->offset; k < p->offset + p->count; k++) {
            diff = fmax(diff, fabs((double)a[k] - (double)b[k]));
            scale = fmax(scale, fabs((double)a[k]));
        }
        double rel = scale > 0.0 ? diff / scale : diff;
        if (rel > worst || isnan(rel)) {
            worst = rel;
            where = p->name;
        }
    }
    double tol = atof(argv[4]);
    printf("largest relative difference %.3g (%s), tolerance %.3g\n", worst, where, tol);
    free(a);
    free(b);
    st_net_free(&net);
    st_cfg_free(&cfg);
    return worst <= tol ? 0 : 1;
}
