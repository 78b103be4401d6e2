/* singletrain: take SIGINT and SIGTERM in one place (signals.h), dispatch
 * to a command (pack, read, predict, eval, export, plan) or parse the command
 * line and train (the network argument looked up as netpath.h says); map the outcome to an exit code (0 success, 2 bad usage
 * or input, 1 run-time failure, 128 + the signal when SIGINT or SIGTERM
 * stopped the process). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dist/cluster.h"
#include "commands.h"
#include "net/net.h"
#include "base/progress.h"
#include "base/signals.h"
#include "base/stream.h"
#include "train/train.h"

#ifndef ST_VERSION
#define ST_VERSION "0.1"
#endif

/* The progress format: --log-format, else live on a terminal and plain
 * text lines otherwise. -q turns the live line off (nothing but warnings
 * and errors) and leaves csv rows on: they are the output asked for, and
 * the messages they would mix with go to stderr, where -q silences them. */
static st_progress_format progress_format(const st_cli *cli, st_log *log)
{
    st_progress_format format = cli->log_format ? cli->format
                                : isatty(STDOUT_FILENO) ? ST_PROGRESS_LIVE
                                                        : ST_PROGRESS_TEXT;
    if (format == ST_PROGRESS_LIVE && log->level < ST_LOG_INFO)
        format = ST_PROGRESS_TEXT;
    if (format == ST_PROGRESS_CSV)
        log->out = stderr;
    return format;
}

static st_status open_progress(const st_cli *cli, st_progress_format format, st_log *log,
                               st_progress **out, st_error *err)
{
    st_progress_opts po = {.format = format, .out = stdout, .metrics = cli->metrics,
                           .precision = st_precision_names[cli->train.precision]};
    st_status st = st_progress_create(out, &po, err);
    log->progress = *out;
    return st;
}

/* A failure's message under mpirun: naming this rank, or, when every
 * rank failed alike at the set-up (the same options or files refused),
 * said once for all by rank 0 (*quiet on the others). */
static void name_rank(const st_cluster *cluster, int alike, int *quiet, st_error *err)
{
    int rank = st_cluster_rank(cluster);
    *quiet = alike && rank > 0;
    if (alike)
        st_error_prefix(err, "every rank of %d: ", st_cluster_size(cluster));
    else
        st_error_prefix(err, "rank %d: ", rank);
}

/* Under mpirun, a command line this rank refused: the ranks still meet
 * where the set-up agrees (those whose command line was good get there
 * from train()), so that a refusal every rank reaches alike is printed
 * once and every rank ends. */
static st_status refuse_together(st_status st, const st_cli *cli, int *quiet, st_error *err)
{
    st_cluster *cluster = NULL;
    st_error local = *err;
    if (st_cluster_init(&cluster, NULL, NULL, &local) != ST_OK || !cluster)
        return st; /* this rank's own message, as without mpirun */
    st_cluster_set_timeout(cluster, (double)cli->train.peer_timeout);
    st_trainer_create_absent(cluster);
    int alike = 0;
    st_cluster_agree(cluster, st, NULL, &alike, &local);
    name_rank(cluster, alike, quiet, err);
    st_cluster_free(cluster);
    return st;
}

/* Train; under mpirun every rank agrees on the set-up first (a failure or
 * a difference on any rank stops them all, none waits for another). Ranks
 * other than 0 log warnings and errors only, their errors naming the rank
 * (a failure every rank has alike rank 0 alone prints, *quiet on the
 * others); rank 0 alone shows progress and writes --metrics. A signal
 * during the set-up ends the process at once (the metrics file, which has
 * no row yet, removed); from the training on it stops the run cleanly
 * (signals.h). */
static st_status train(st_cli *cli, st_log *log, int *signal, int *quiet, st_error *err)
{
    st_cluster *cluster = NULL;
    st_status st = st_cluster_init(&cluster, NULL, NULL, err);
    if (st != ST_OK)
        return st;
    cli->train.cluster = cluster;
    st_cluster_set_timeout(cluster, (double)cli->train.peer_timeout);
    int rank = st_cluster_rank(cluster);
    if (rank > 0 && log->level > ST_LOG_QUIET)
        log->level = ST_LOG_QUIET;
    st_netpath_note(&cli->net, log);
    st_progress *progress = NULL;
    cli->train.stop = st_signals_stop_flag();
    st_trainer *t = NULL;
    st_progress_format format = progress_format(cli, log);
    cli->train.metrics = rank == 0 ? cli->metrics : NULL;
    st = st_trainer_create(&t, cli->cfg_path, &cli->train, log, err);
    if (st == ST_OK && rank == 0) /* after the trainer checked --metrics's path */
        st = open_progress(cli, format, log, &progress, err);
    const char *partial = st_progress_partial(progress);
    if (st == ST_OK && partial)
        st = st_signals_remove_on_exit(partial, err);
    if (progress)
        st_trainer_attach_progress(t, progress);
    int alike = 0;
    if (cluster) {
        st_cluster_fingerprint fp;
        if (t)
            st_trainer_fingerprint(t, &fp);
        st_error local = *err;
        st = st_cluster_agree(cluster, st, t ? &fp : NULL, &alike, err);
        if (local.code != ST_OK) /* this rank's own reason comes first */
            *err = local;
        if (st == ST_OK)
            st = st_cluster_start_workers(cluster, st_trainer_channels(t), err);
    }
    st_train_result res = {0};
    int ran = st == ST_OK;
    if (ran) {
        st_signals_set_graceful(1);
        if (partial)
            st_signals_keep(partial); /* its rows are the run's record from now on */
        st = st_trainer_run(t, &res, err);
        *signal = res.signal ? res.signal : st_signals_caught();
    }
    st_trainer_free(t);
    st_status pst = st_progress_close(progress, err); /* FILE.partial to FILE, whatever happened */
    log->progress = NULL;
    if (st == ST_OK)
        st = pst;
    if (ran && cluster) /* every rank ends alike: the first failure, any signal */
        st = st_cluster_outcome(cluster, st, signal, err);
    if (st == ST_OK && !res.signal && *signal)
        st_warn(log, "%s%s after the last iteration: the run finished as it would have",
                strsignal(*signal), st_signals_caught() ? "" : " on another rank");
    if (st != ST_OK && cluster)
        name_rank(cluster, alike && !ran, quiet, err);
    st_cluster_free(cluster);
    return st;
}

/* The exit code once the output is known to be whole: a run that succeeded
 * but whose stdout or stderr lost lines (a closed pipe, a full disk) fails. */
static int output_checked(int code)
{
    if (!st_streams_failed() || code != 0)
        return code;
    if (!ferror(stderr))
        fprintf(stderr, "singletrain: standard output: a write failed: the output is "
                "incomplete\n");
    return 1;
}

/* Training, or --help, --version, --list-networks and --dry-run. */
static int train_command(int argc, char **argv)
{
    st_error err = {0};
    st_cli cli;
    int quiet = 0;
    st_status st = st_cli_parse(&cli, argc, argv, &err);
    if (st != ST_OK && st_cluster_launched())
        st = refuse_together(st, &cli, &quiet, &err);
    if (st == ST_OK && cli.help) {
        st_cli_help(stdout);
        return 0;
    }
    if (st == ST_OK && cli.version) {
        printf("singletrain %s\n", ST_VERSION);
        return 0;
    }
    if (st == ST_OK && cli.list_networks) {
        st = st_netpath_list(stdout, &err);
        return st == ST_OK ? 0 : st_cmd_exit_code(NULL, st, &err);
    }
    st_log log = st_log_default(cli.level);
    if (st == ST_OK && cli.dry_run) {
        st_netpath_note(&cli.net, &log);
        st = st_trainer_dry_run(cli.cfg_path, &cli.train, &log, &err);
    }
    int signal = 0;
    if (st == ST_OK && !cli.dry_run)
        st = train(&cli, &log, &signal, &quiet, &err);
    if (st != ST_OK)
        return quiet ? st_exit_code(st) : st_cmd_exit_code(NULL, st, &err);
    return signal ? 128 + signal : 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } commands[] = {{"pack", st_cmd_pack},       {"read", st_cmd_read},
                    {"predict", st_cmd_predict}, {"eval", st_cmd_eval},
                    {"export", st_cmd_export},   {"plan", st_cmd_plan}};
    st_error err = {0};
    if (st_signals_start(&err) != ST_OK) {
        fprintf(stderr, "singletrain: %s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; argc > 1 && i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return output_checked(commands[i].run(argc - 1, argv + 1));
    return output_checked(train_command(argc, argv));
}
