/* lrsched MODEL [--hparams FILE] ITERS: the learning rate of each of ITERS
 * iterations of MODEL (a cfg, or an ONNX model with its [net] sidecar or
 * FILE), one "ITER RATE" line each, RATE to 9 significant digits: the
 * schedule singletrain trains with, for tests/e2e/test_schedule.sh to set
 * against PyTorch's. Like the trainer, a [net] without max_batches= runs
 * its schedule over the ITERS iterations (train/setup.c's plan_schedule).
 * Exit 0, or 2 on bad input with the loader's message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cfg.h"
#include "base/log.h"
#include "net/net.h"
#include "ops/solver.h"

int main(int argc, char **argv)
{
    const char *hparams = argc == 5 && strcmp(argv[2], "--hparams") == 0 ? argv[3] : NULL;
    char *end = NULL;
    long iters = argc == 3 || hparams ? strtol(argv[argc - 1], &end, 10) : 0;
    if (!end || *end || iters < 1) {
        fprintf(stderr, "usage: lrsched MODEL [--hparams FILE] ITERS (ITERS at least 1)\n");
        return 2;
    }
    st_log log = st_log_default(ST_LOG_QUIET);
    st_error err = {0};
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    if (st_net_load(argv[1], hparams, &cfg, &hp, &net, &log, &err) != ST_OK) {
        fprintf(stderr, "lrsched: %s\n", err.msg);
        return 2;
    }
    if (!hp.solver.lr.max_batches)
        hp.solver.lr.max_batches = iters;
    for (long i = 0; i < iters; i++)
        printf("%ld %.9g\n", i, st_lr_at(&hp.solver.lr, i));
    st_net_free(&net);
    st_cfg_free(&cfg);
    return 0;
}
