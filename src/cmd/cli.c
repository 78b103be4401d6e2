/* The training command's options: one table drives parsing and --help. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backends/choice_cache.h"
#include "base/cfg.h"
#include "dist/allreduce_algos.h"
#include "options.h"

#define TRAIN(field) offsetof(st_cli, train.field)

_Static_assert(ST_OPT_AUTO == ST_THREADS_AUTO, "-t auto is stored as the trainer reads it");

static const st_option options[] = {
    {"threads", 't', "N|auto", "Training", "worker threads, one model replica each (default: "
     "one per core); auto: the split of the cores between workers and intra-op threads that "
     "trains fastest, measured at set-up (a few iterations each) and kept in the choice cache",
     ST_OPT_INT_AUTO, TRAIN(threads), 1, 4096},
    {"batch", 'b', "N", "Training", "images per update (default: batch= in [net])", ST_OPT_INT,
     TRAIN(batch), 1, 1 << 20},
    {"subdivisions", 0, "S", "Training", "run each worker's shard in S pieces of batch / S "
     "images, accumulating their gradients before one update: the activations of one piece "
     "(default: subdivisions= in [net]; bsp, data-parallel)", ST_OPT_INT, TRAIN(subdivisions),
     1, 1 << 20},
    {"intra", 0, "N|auto", "Training", "intra-op threads per worker (default 1; all cores for "
     "one worker on networks over 16M parameters); auto: as -t auto", ST_OPT_INT_AUTO,
     TRAIN(intra), 1, 1024},
    {"bind", 0, "MODE", "Training", "pin the threads to cores (hwloc's topology, within the "
     "cores this process may use): auto (the default: when the workers x intra-op threads "
     "fit them, one core each; each worker's cores on one socket; the cores left over to the "
     "prefetcher), cores (pin even when they do not fit: they take turns) or none",
     ST_OPT_STRING, offsetof(st_cli, bind), 0, 0},
    {"sync", 0, "MODE", "Training", "bsp (default), ssp:S (at most S iterations ahead of the "
     "slowest worker) or asp", ST_OPT_STRING, offsetof(st_cli, sync), 0, 0},
    {"parallel", 0, "MODE", "Training", "data (every worker runs every layer on its shard), "
     "hybrid (fully connected layers model-parallel: each worker computes a slice of their "
     "neurons for the whole batch, so their gradients are held once; bsp only) or auto (the "
     "default: hybrid with several workers where those layers hold over 16M parameters)",
     ST_OPT_STRING, offsetof(st_cli, parallel), 0, 0},
    {"mp-group", 0, "G|auto", "Training", "with --parallel hybrid under mpirun: split the "
     "model-parallel fully connected layers over groups of G consecutive ranks (G divides the "
     "ranks; one worker a rank, -t 1), data-parallel between groups and for the other layers; "
     "auto: the G whose bytes communicated per rank are fewest (PCL-DNN's balance of a "
     "layer's weights against its activations)", ST_OPT_INT_AUTO, TRAIN(mp_group), 1, 4096},
    {"iters", 0, "N", "Training", "iterations to run (default: --epochs, else max_batches=; "
     "not with --epochs)", ST_OPT_LONG, TRAIN(iters), 1, LONG_MAX},
    {"epochs", 0, "N", "Training", "passes over the training set", ST_OPT_LONG, TRAIN(epochs), 1,
     1 << 20},
    {"stop-at-accuracy", 0, "X", "Training", "stop after the first test phase whose accuracy "
     "reaches X, a fraction (0 < X <= 1: 0.9) or a percentage (90%); needs test phases "
     "before the end (a test set, --test-interval)", ST_OPT_STRING,
     offsetof(st_cli, stop_accuracy), 0, 0},
    {"patience", 0, "N", "Training", "stop after N test phases in a row without a better "
     "accuracy than the best so far; needs test phases as --stop-at-accuracy does; with "
     "either, --snapshot-dir also keeps the best test phase's snapshot (NAME_best.snap)",
     ST_OPT_LONG, TRAIN(patience), 1, LONG_MAX},
    {"seed", 0, "N", "Training", "seed of weights, data order and dropout (default 1)",
     ST_OPT_U64, TRAIN(seed), 0, 0},
    {"backend", 0, "NAME", "Training", "compute backend: dnnl, ref or cpe (default dnnl)",
     ST_OPT_STRING, TRAIN(backend), 0, 0},
    {"precision", 0, "fp32|bf16", "Training", "what convolutions and inner products compute "
     "in: fp32 (the default) or bf16 (their operands rounded to bfloat16, the products "
     "summed in fp32, as torch.autocast; weights, gradients, the solver, batch norm, softmax "
     "and the loss stay fp32, and activations stay bf16 between layers that round them "
     "anyway). bf16 runs on ref (plain C, every host) and dnnl (where oneDNN's ISA is "
     "AVX-512)",
     ST_OPT_STRING, offsetof(st_cli, precision), 0, 0},
    {"conv-impl", 0, "NAME", "Training", "convolution implementation (dnnl): auto (the "
     "default: each convolution times its candidates on its first call and keeps the "
     "fastest), blocked (oneDNN's own layouts), nhwc, or gemm (im2col + sgemm); a forced "
     "layout that leaves a pass to oneDNN's reference code gives way to nhwc, else gemm",
     ST_OPT_STRING, TRAIN(conv_impl), 0, 0},
    {"kernel-choices", 0, "FILE|measure", "Training", "use the implementation choices in FILE "
     "(as --save-kernel-choices writes them) before the choice cache's; kernels neither names "
     "are measured. 'measure': read nothing from the cache, measure every kernel again and "
     "update the cache (./measure names a file)", ST_OPT_STRING, TRAIN(kernel_choices), 0, 0},
    {"save-kernel-choices", 0, "FILE", "Training", "write the implementation choices of "
     "this run (measured, cached or given) to FILE after set-up, for --kernel-choices; with "
     "--dry-run, measure them and write FILE without training",
     ST_OPT_STRING, TRAIN(save_kernel_choices), 0, 0},
    {"no-choice-cache", 0, NULL, "Training", "leave the kernel-choice cache alone: neither "
     "read it nor write it (default: measured choices are kept in "
     "$XDG_CACHE_HOME/singletrain, else ~/.cache/singletrain, and later runs of the same "
     "network, threads and machine take them, so that they compute the same bits)",
     ST_OPT_FLAG, offsetof(st_cli, no_choice_cache), 0, 0},
    {"force", 0, NULL, "Training", "run even when the memory the run would take is more than "
     "this process may take (MemAvailable, the cgroup's limit, ulimit -v and -d): a warning "
     "instead of the refusal", ST_OPT_FLAG, TRAIN(force), 0, 0},
    {"cpe-trace", 0, "FILE", "Training", "with --backend cpe: write the predicted SW26010 ms of "
     "every kernel and pass at every iteration to the CSV FILE", ST_OPT_STRING,
     TRAIN(cpe_trace), 0, 0},
    {"cpe-report", 0, "FILE", "Training", "with --backend cpe: write every kernel's predicted "
     "seconds per pass and strategy, and one processor's images/s, to the CSV FILE",
     ST_OPT_STRING, TRAIN(cpe_report), 0, 0},
    {"cpe-cost-only", 0, NULL, "Training", "with --backend cpe: emulate only the kernels' "
     "control flow, DMA and messages for their predicted time, not their arithmetic (whole "
     "networks in minutes; the losses are meaningless)", ST_OPT_FLAG, TRAIN(cpe_cost_only), 0,
     0},
    {"cpe-model", 0, "FILE", "Training", "with --backend cpe: the SW26010 model file whose "
     "constants cost the emulation (default: the built-in data/sw26010/model.conf; "
     "scripts/calibrate-sw26010.sh fits one on your measurements)", ST_OPT_STRING,
     TRAIN(cpe_model), 0, 0},
    {"cpe-machine", 0, "FILE", "Training", "with --backend cpe: the processor to emulate, as "
     "a machine description (default: the built-in SW26010, data/sw26010/sw26010.machine; "
     "data/sw26010/sw26010-pro.machine is an uncalibrated what-if)", ST_OPT_STRING,
     TRAIN(cpe_machine), 0, 0},
    {"data", 0, "FILE", "Data", "data file (train=, test=, ...: a packed store, IDX, CIFAR-10 "
     ".bin or an image list) overriding [net]; Darknet .data files; or 'synthetic'",
     ST_OPT_STRING, TRAIN(data), 0, 0},
    {"train-images", 0, "N", "Data", "use the first N training images (synthetic: make N)",
     ST_OPT_LONG, TRAIN(train_images), 1, LONG_MAX},
    {"test-images", 0, "N", "Data", "use the first N test images (synthetic: make N)",
     ST_OPT_LONG, TRAIN(test_images), 1, LONG_MAX},
    {"io-threads", 0, "N", "Data", "threads reading and decoding each batch (default 1)",
     ST_OPT_INT, TRAIN(io_threads), 1, 256},
    {"skip-bad-images", 0, NULL, "Data", "skip unreadable images of image lists and count "
     "them (default: stop with an error naming the file)", ST_OPT_FLAG, TRAIN(skip_bad_images),
     0, 0},
    {"no-verify", 0, NULL, "Data", "do not check a packed store's block checksums at start",
     ST_OPT_FLAG, TRAIN(no_verify), 0, 0},
    {"test-interval", 0, "N", "Output", "test every N iterations (default: every epoch and "
     "at the end)", ST_OPT_LONG, TRAIN(test_interval), 1, LONG_MAX},
    {"no-test", 0, NULL, "Output", "never run the test phase", ST_OPT_FLAG, TRAIN(no_test), 0, 0},
    {"log-every", 0, "N", "Output", "a progress line (or CSV row) every N iterations (default "
     "100)", ST_OPT_LONG, TRAIN(log_every), 1, LONG_MAX},
    {"log-format", 0, "FORMAT", "Output", "progress as live (one line rewritten in place: the "
     "default on a terminal), text (plain lines: the default otherwise) or csv (a CSV row per "
     "logged iteration and test phase on stdout, messages on stderr)", ST_OPT_STRING,
     offsetof(st_cli, log_format), 0, 0},
    {"metrics", 0, "FILE", "Output", "write the CSV rows to FILE as training goes (as "
     "FILE.partial, renamed to FILE when training ends)", ST_OPT_STRING,
     offsetof(st_cli, metrics), 0, 0},
    {"trace", 0, "FILE", "Output", "write a timeline of the run to FILE in the Chrome trace "
     "event format (open it in ui.perfetto.dev or chrome://tracing): a track per worker, "
     "the scheduler, the prefetcher and the communication thread, each iteration's phases "
     "and each layer's forward and backward; under mpirun one process per rank, in one "
     "file written by rank 0 (as FILE.partial, renamed to FILE when training ends)",
     ST_OPT_STRING, TRAIN(trace), 0, 0},
    {"trace-iters", 0, "A:B", "Output", "--trace records iterations A to B, at most "
     ST_TRACE_MAX_ITERS_TEXT " (default: 5 after the warm-up, or from iteration 5 without "
     "one)", ST_OPT_STRING, offsetof(st_cli, trace_iters), 0, 0},
    {"warmup", 0, "N", "Output", "leave the first N iterations out of the speed figures",
     ST_OPT_LONG, TRAIN(warmup), 0, LONG_MAX},
    {"profile", 0, NULL, "Output", "print per-layer times and the time split at the end",
     ST_OPT_FLAG, TRAIN(profile), 0, 0},
    {"fma-peak", 0, "GFLOPS", "Output", "--profile's roofline: one core's single-precision "
     "FMA peak (default: measured after training)", ST_OPT_STRING,
     offsetof(st_cli, fma_peak), 0, 0},
    {"snapshot-dir", 0, "DIR", "Snapshots", "save snapshots (weights and solver state) in DIR "
     "(created if missing): at the end as NAME_final.snap, every --snapshot-every iterations "
     "and on SIGINT / SIGTERM as NAME_ITER.snap, with --stop-at-accuracy or --patience the "
     "best test phase's as NAME_best.snap (NAME: the cfg's file name without its last "
     "extension)", ST_OPT_STRING,
     TRAIN(snapshot_dir), 0, 0},
    {"snapshot-every", 0, "N", "Snapshots", "also snapshot every N iterations (in --snapshot-dir, "
     "default the current directory)", ST_OPT_LONG, TRAIN(snapshot_every), 1, LONG_MAX},
    {"allreduce", 0, "NAME", "Multi-node", "under mpirun: "
     ST_ALLREDUCE_ALGOS(ST_ALLREDUCE_NAME_LIST) "or auto (time on the first iterations those "
     "the cost formulas put within 4x of the cheapest, and mpi, keep the fastest; default rhd)",
     ST_OPT_STRING, TRAIN(allreduce), 0, 0},
    {"allreduce-granularity", 0, "model|layer", "Multi-node", "auto: one algorithm for the "
     "whole gradient (model, default), or one per slice / bucket (layer)", ST_OPT_STRING,
     TRAIN(allreduce_granularity), 0, 0},
    {"supernode-size", 0, "Q", "Multi-node", "ranks 0..Q-1 form supernode 0, and so on (for "
     "rhd-supernode and the crossing-bytes count)", ST_OPT_INT, TRAIN(supernode_size), 1,
     1 << 20},
    {"sim-cross-bandwidth", 0, "F", "Multi-node", "slow messages between supernodes to F "
     "(0 < F <= 1) of the bandwidth inside one, to simulate Sunway's links (e.g. 0.25)",
     ST_OPT_STRING, offsetof(st_cli, sim_cross_bandwidth), 0, 0},
    {"overlap", 0, NULL, "Multi-node", "all-reduce each bucket of layers as soon as backward "
     "has produced it, on a communication thread, while backward goes on", ST_OPT_FLAG,
     TRAIN(overlap), 0, 0},
    {"rank-update", 0, "replicated|partitioned", "Multi-node", "replicated (default: every "
     "rank applies the solver to every weight and holds the whole solver state) or "
     "partitioned (each slice is reduce-scattered over the ranks, each rank updates and keeps "
     "the solver state of its 1/P of it, and the new weights are all-gathered; the same "
     "weights, a P-th of the state per rank). mpi, ring, rhd and rhd-supernode reduce-scatter "
     "and all-gather with their own halves; binomial, ps, butterfly and onesided run their "
     "whole all-reduce, then the ring's all-gather. Not with --overlap", ST_OPT_STRING,
     offsetof(st_cli, rank_update), 0, 0},
    {"pipeline", 0, "none|layer", "Multi-node", "layer: update each bucket of layers as soon "
     "as its gradient is reduced (across nodes: all-reduced, on --overlap's buckets and "
     "thread, which it implies; on one node: summed over the workers), and start each layer's "
     "next forward as soon as its bucket is updated, with no barrier between iterations; the "
     "weights of the run without it, bit for bit (across nodes, --overlap's). Bulk-synchronous "
     "and data-parallel; not with --rank-update partitioned. none: the default",
     ST_OPT_STRING, offsetof(st_cli, pipeline), 0, 0},
    {"bucket-size", 0, "BYTES", "Multi-node", "--overlap's smallest message (default 512K)",
     ST_OPT_SIZE, TRAIN(bucket_bytes), 1, (size_t)1 << 40},
    {"peer-timeout", 0, "SECONDS", "Multi-node", "end every rank with a message when one waits "
     "this long for the others (a rank stopped or hung), except for rank 0's test phases and "
     "snapshots; 0 waits forever (default 600)", ST_OPT_LONG, TRAIN(peer_timeout), 0,
     LONG_MAX},
    {"hparams", 0, "FILE", "Training", "an ONNX model's training settings: a file with one "
     "[net] section (batch=, solver=, learning_rate=, policy=, warmup=, momentum=, decay=, "
     "decay_mode=, the data keys ...) instead of MODEL.train beside MODEL.onnx", ST_OPT_STRING, TRAIN(hparams), 0, 0},
    {"weights", 0, "FILE", "Snapshots", "start from these weights: a snapshot or a Darknet "
     ".weights file (the solver starts afresh at iteration 0)", ST_OPT_STRING, TRAIN(weights),
     0, 0},
    {"resume", 0, "FILE", "Snapshots", "continue the run a snapshot stopped: weights, solver "
     "state, iteration; the same seed, batch and -t give the weights an uninterrupted run "
     "gives; a cfg whose settings differ from the snapshot's is refused", ST_OPT_STRING,
     TRAIN(resume), 0, 0},
    {"dry-run", 0, NULL, "Output", "check the cfg, the data and the options, print the layer "
     "table, the memory the run would take and what the process may take, and stop",
     ST_OPT_FLAG, offsetof(st_cli, dry_run), 0, 0},
    {"quiet", 'q', NULL, "Output", "only warnings and errors (no progress; --log-format "
     "csv rows and --metrics are still written)", ST_OPT_FLAG,
     offsetof(st_cli, quiet), 0, 0},
    {"verbose", 'v', NULL, "Output", "more detail", ST_OPT_FLAG, offsetof(st_cli, verbose), 0,
     0},
    {"help", 'h', NULL, "Other", "this help", ST_OPT_FLAG, offsetof(st_cli, help), 0, 0},
    {"version", 0, NULL, "Other", "print the version", ST_OPT_FLAG, offsetof(st_cli, version),
     0, 0},
    {"list-networks", 0, NULL, "Other", "print the networks a NET.cfg without a slash finds, "
     "in lookup order: the current directory, $SINGLETRAIN_PATH's folders (colon-separated), "
     "the installed networks (PREFIX/share/singletrain/networks; built in the sources, their "
     "data/); a name an earlier folder "
     "also has is marked shadowed", ST_OPT_FLAG, offsetof(st_cli, list_networks), 0, 0},
};


#define N_OPTIONS ((int)(sizeof options / sizeof options[0]))

static const char *const groups[] = {"Training", "Data", "Output", "Snapshots", "Multi-node",
                                     "Other", NULL};

void st_cli_help(FILE *out)
{
    st_options_help(out,
                    "usage: singletrain [options] NET.cfg\n"
                    "       singletrain pack SRC OUT [options]\n"
                    "       singletrain read SRC [options]\n"
                    "       singletrain predict NET.cfg WEIGHTS IMAGE... [options]\n"
                    "       singletrain eval NET.cfg WEIGHTS [options]\n"
                    "       singletrain export NET.cfg WEIGHTS OUT.weights [options]\n"
                    "       singletrain plan NET.cfg --nodes N1,N2,... [options]\n"
                    "\nTrains the Darknet-format network NET.cfg on CPUs. The commands pack\n"
                    "(a striped store from any data source), read (its reading speed), predict\n"
                    "(classify images), eval (test accuracy and loss of weights), export\n"
                    "(Darknet .weights) and plan (predicted speed on N nodes) have their own\n"
                    "--help.\n",
                    options, N_OPTIONS, groups);
    fprintf(out, "\nEach option may be given once. Outputs may not be inputs or each other.\n"
                 "\nExit status: 0 success, 2 bad usage or input, 1 run-time failure,\n"
                 "128 + the signal when SIGINT or SIGTERM stopped training.\n"
                 "The manual: man singletrain (make install puts it in PREFIX/share/man).\n"
                 "The guide: README.md and docs/README.md (its pages: docs/guide/) in the\n"
                 "singletrain sources, installed in PREFIX/share/doc/singletrain.\n"
                 "NET.cfg without a slash, not in the current directory: looked up in\n"
                 "$SINGLETRAIN_PATH (folders separated by ':'), then in the installed\n"
                 "networks, PREFIX/share/singletrain/networks (built in the sources:\n"
                 "their data/; --list-networks).\n");
}

/* --sync bsp | asp | ssp:S */
static st_status parse_sync(st_cli *cli, st_error *err)
{
    const char *v = cli->sync;
    if (!v || strcmp(v, "bsp") == 0)
        return ST_OK;
    if (strcmp(v, "asp") == 0) {
        cli->train.sync = ST_SYNC_ASP;
        return ST_OK;
    }
    if (strncmp(v, "ssp:", 4) == 0) {
        char *end;
        errno = 0;
        long s = strtol(v + 4, &end, 10);
        if (end != v + 4 && !*end && errno == 0 && s >= 0 && s <= 1 << 20) {
            cli->train.sync = ST_SYNC_SSP;
            cli->train.staleness = (int)s;
            return ST_OK;
        }
    }
    return st_fail(err, ST_EUSAGE, "option --sync: expected bsp, asp or ssp:S with S a "
                   "staleness from 0 to 1048576, got '%s'", v);
}

/* The options that name one of a list, in the order the table gives them:
 * --parallel data | hybrid | auto, --bind auto | cores | none,
 * --rank-update replicated | partitioned, --pipeline none | layer,
 * --precision fp32 | bf16; each absent one the trainer's default. */
static st_status parse_choices(st_cli *cli, st_error *err)
{
    static const char *const parallel_names[] = {"auto", "data", "hybrid", NULL};
    static const char *const rank_update_names[] = {"replicated", "partitioned", NULL};
    static const char *const pipeline_names[] = {"none", "layer", NULL};
    st_train_opts *o = &cli->train;
    int parallel = o->hybrid + 1, bind = (int)o->bind, update = (int)o->rank_update,
        pipeline = o->pipeline, precision = (int)o->precision;
    st_status st;
    if ((st = st_option_choice("parallel", cli->parallel, parallel_names,
                               "data, hybrid or auto", &parallel, err)) ||
        (st = st_option_choice("bind", cli->bind, st_bind_names, "auto, cores or none", &bind,
                               err)) ||
        (st = st_option_choice("rank-update", cli->rank_update, rank_update_names,
                               "replicated or partitioned", &update, err)) ||
        (st = st_option_choice("pipeline", cli->pipeline, pipeline_names, "none or layer",
                               &pipeline, err)) ||
        (st = st_option_choice("precision", cli->precision, st_precision_names,
                               "fp32 or bf16", &precision, err)))
        return st;
    o->hybrid = parallel - 1;
    o->bind = (st_bind)bind;
    o->rank_update = (st_rank_update)update;
    o->pipeline = pipeline;
    o->precision = (st_precision)precision;
    return ST_OK;
}

/* --kernel-choices measure (a file of that name is ./measure), and the
 * choice cache's directory unless --no-choice-cache ("" when the
 * environment names none: the trainer warns if it measures). */
static void choose_choice_cache(st_cli *cli)
{
    st_train_opts *o = &cli->train;
    if (o->kernel_choices && strcmp(o->kernel_choices, "measure") == 0) {
        o->kernel_choices = NULL;
        o->remeasure = 1;
    }
    if (cli->no_choice_cache)
        o->choice_cache = NULL;
    else if (st_choice_cache_default_dir(cli->choice_cache, sizeof cli->choice_cache,
                                         cli->choice_cache_why, sizeof cli->choice_cache_why))
        o->choice_cache = cli->choice_cache;
    else
        o->choice_cache = "";
    o->choice_cache_why = cli->choice_cache_why;
}

/* --trace-iters A:B, 0 <= A <= B, at most ST_TRACE_MAX_ITERS of them */
static st_status parse_trace_iters(st_cli *cli, st_error *err)
{
    const char *v = cli->trace_iters;
    if (!v)
        return ST_OK;
    char *colon, *end = NULL;
    errno = 0;
    long a = strtol(v, &colon, 10), b = *colon == ':' ? strtol(colon + 1, &end, 10) : -1;
    if (colon == v || *colon != ':' || end == colon + 1 || *end || errno || a < 0 || b < a ||
        b - a >= ST_TRACE_MAX_ITERS || !strchr("0123456789", *v) ||
        !strchr("0123456789", colon[1]))
        return st_fail(err, ST_EUSAGE, "option --trace-iters: expected A:B, the iterations A "
                       "to B with 0 <= A <= B, at most %d of them, got '%s'",
                       ST_TRACE_MAX_ITERS, v);
    cli->train.trace_first = a;
    cli->train.trace_last = b;
    return ST_OK;
}

/* --stop-at-accuracy X: a fraction in (0, 1], or a percentage in (0, 100]
 * ending in '%' as the test lines print the accuracy ("99%", "99.5%"); a
 * bare number above 1 is refused, not read as a percentage. */
static st_status parse_accuracy(st_cli *cli, st_error *err)
{
    const char *v = cli->stop_accuracy;
    if (!v)
        return ST_OK;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    int percent = end != v && *end == '%';
    if (end == v || *(end + percent) || errno || !(x > 0.0 && x <= (percent ? 100.0 : 1.0)) ||
        st_decimal_length(v) != (size_t)(end - v))
        return st_fail(err, ST_EUSAGE, "option --stop-at-accuracy: expected a fraction X with "
                       "0 < X <= 1 (such as 0.9) or a percentage P%% with 0 < P <= 100 (such "
                       "as 90%%), got '%s'", v);
    cli->train.stop_accuracy = percent ? x / 100.0 : x;
    return ST_OK;
}

st_status st_cli_parse(st_cli *cli, int argc, char **argv, st_error *err)
{
    memset(cli, 0, sizeof *cli);
    cli->train = st_train_defaults();
    const char *pos[8];
    int n_pos = 0;
    st_status st = st_options_parse(options, N_OPTIONS, cli, argc, argv, pos, 8, &n_pos, err);
    cli->level = cli->quiet ? ST_LOG_QUIET : cli->verbose ? ST_LOG_DEBUG : ST_LOG_INFO;
    if (st == ST_OK)
        st = parse_sync(cli, err);
    if (st == ST_OK)
        st = parse_choices(cli, err);
    if (st == ST_OK)
        st = st_option_real("sim-cross-bandwidth", cli->sim_cross_bandwidth, 1.0,
                            "a fraction F with 0 < F <= 1", &cli->train.sim_cross_bandwidth,
                            err);
    if (st == ST_OK)
        st = st_option_real("fma-peak", cli->fma_peak, 1e6, "GFLOP/s per core, above 0",
                            &cli->train.fma_peak, err);
    int format = (int)cli->format;
    if (st == ST_OK)
        st = st_option_choice("log-format", cli->log_format, st_progress_format_names,
                              "live, text or csv", &format, err);
    cli->format = (st_progress_format)format;
    if (st == ST_OK)
        st = parse_accuracy(cli, err);
    if (st == ST_OK)
        st = parse_trace_iters(cli, err);
    if (st == ST_OK)
        choose_choice_cache(cli);
    if (st != ST_OK || cli->help || cli->version || cli->list_networks)
        return st;
    if (n_pos != 1)
        return st_fail(err, ST_EUSAGE, "expected one network cfg file, got %d arguments (usage: "
                       "singletrain [options] NET.cfg; see --help)", n_pos);
    st = st_netpath_find(&cli->net, pos[0], err);
    cli->cfg_path = cli->net.path;
    return st;
}
