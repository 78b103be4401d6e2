/* The command line: one option table drives parsing and --help. */
#ifndef ST_CLI_H
#define ST_CLI_H

#include "base/log.h"
#include "base/progress.h"
#include "base/status.h"
#include "netpath.h"
#include "train/train.h"

typedef struct st_cli {
    st_train_opts train;
    st_log_level level;
    const char *cfg_path; /* net.path: the network argument as given or found */
    st_netpath net;       /* where the network argument was found (netpath.h) */
    const char *sync;   /* --sync text */
    const char *parallel; /* --parallel text */
    const char *bind;     /* --bind text */
    const char *rank_update;         /* --rank-update text */
    const char *pipeline;            /* --pipeline text */
    const char *precision;           /* --precision text */
    const char *sim_cross_bandwidth; /* --sim-cross-bandwidth text */
    const char *fma_peak;            /* --fma-peak text */
    const char *stop_accuracy;       /* --stop-at-accuracy text */
    const char *log_format; /* --log-format text, or NULL: live on a terminal, else text */
    st_progress_format format; /* --log-format parsed (when given) */
    const char *metrics;    /* --metrics FILE, or NULL */
    const char *trace_iters; /* --trace-iters text */
    int quiet, verbose;
    int help, version;
    int list_networks; /* --list-networks */
    int dry_run; /* set up as far as the memory estimate (st_trainer_dry_run), stop */
    int no_choice_cache;            /* --no-choice-cache */
    char choice_cache[ST_PATH_MAX]; /* the choice cache's directory (train.choice_cache) */
    char choice_cache_why[320];     /* why there is none (train.choice_cache_why) */
} st_cli;

/* Parse argv; errors are ST_EUSAGE naming the option and what it expects. */
st_status st_cli_parse(st_cli *cli, int argc, char **argv, st_error *err);

void st_cli_help(FILE *out);

#endif
