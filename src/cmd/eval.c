/* singletrain eval NET WEIGHTS: test accuracy and loss of trained weights
 * on a data set's test split, in inference mode (batch norm's running
 * statistics, no dropout), as PyTorch's model.eval() loop reports them.
 *
 * It computes what the training's test phase computes (train/loop.c's
 * run_test, parallel/scheduler.c's worker_test): the test records
 * transformed as in testing, a forward pass per chunk, a sample correct
 * when its largest score (the first of equal ones) is its label, the loss
 * layers' losses summed in double over the chunks; accuracy = correct /
 * images, loss = that sum / images. The chunk is the batch of one piece
 * of a -t 1 run (batch= / subdivisions= of [net], or -b), so that eval of
 * a -t 1 run's final snapshot repeats its last test phase bit for bit on
 * the same kernels (--backend, --conv-impl) in the same precision (a
 * snapshot's, unless --precision says otherwise); a run whose test phase was
 * split over several workers sums in another order, and its loss agrees
 * to rounding. The data: --data FILE's test= (or valid=), else [net]'s,
 * else, with no data key at all, the synthetic test set training makes
 * (--data synthetic; --seed and --test-images as in training). */
#include "commands.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/status.h"
#include "data/data.h"
#include "net/hparams.h"
#include "net/net.h"
#include "netpath.h"
#include "options.h"
#include "train/darknet_weights.h"

/* training's synthetic test set (train/setup.c's SYNTHETIC_TEST) */
#define EVAL_SYNTHETIC_TEST 256

typedef struct eval_cli {
    int batch, intra, help;
    long test_images;
    uint64_t seed;
    const char *backend, *conv_impl, *data, *format, *hparams, *precision;
} eval_cli;

#define OPT(field) offsetof(eval_cli, field)

static const st_option options[] = {
    {"data", 0, "FILE", "Data", "data file whose test= (or valid=) is evaluated, overriding "
     "[net]'s; or 'synthetic': training's synthetic test set", ST_OPT_STRING, OPT(data), 0, 0},
    {"hparams", 0, "FILE", "Data", "an ONNX model's [net] settings (the data keys, "
     "batch=, the transform) instead of MODEL.train beside MODEL.onnx, as training's "
     "--hparams", ST_OPT_STRING, OPT(hparams), 0, 0},
    {"test-images", 0, "N", "Data", "use the first N test images (synthetic: make N; default "
     "256)", ST_OPT_LONG, OPT(test_images), 1, LONG_MAX},
    {"seed", 0, "N", "Data", "the synthetic test set's seed, as the training's --seed "
     "(default 1)", ST_OPT_U64, OPT(seed), 0, 0},
    {"batch", 'b', "N", "Compute", "images per forward pass (default: batch= / subdivisions= "
     "of [net], as a -t 1 training run's test phase)", ST_OPT_INT, OPT(batch), 1, 1 << 20},
    {"backend", 0, "B", "Compute", "dnnl (default), ref or cpe (an emulated SW26010 core "
     "group)", ST_OPT_STRING, OPT(backend), 0, 0},
    {"conv-impl", 0, "NAME", "Compute", "dnnl's convolution implementation, one of those "
     "training takes (default: the backend's first); the training's gives its bits",
     ST_OPT_STRING, OPT(conv_impl), 0, 0},
    {"intra", 0, "N", "Compute", "threads per forward pass (default 1)", ST_OPT_INT,
     OPT(intra), 1, 4096},
    {"precision", 0, "fp32|bf16", "Compute", "what convolutions and inner products compute "
     "in (default: a singletrain snapshot's, as its training's test phases; fp32 for other "
     "weights)", ST_OPT_STRING, OPT(precision), 0, 0},
    {"log-format", 0, "FORMAT", "Output", "text (default: \"test  accuracy 91.20%  loss "
     "0.2500  (10000 images)\", training's test line) or csv (a header and one row: "
     "accuracy as a fraction, loss, images)", ST_OPT_STRING, OPT(format), 0, 0},
    {"help", 'h', NULL, "Other", "this help", ST_OPT_FLAG, OPT(help), 0, 0},
};

#define N_OPTIONS ((int)(sizeof options / sizeof options[0]))

static const char *const groups[] = {"Data", "Compute", "Output", "Other", NULL};

/* Everything one evaluation holds; freed by evaluator_free whatever was
 * reached. */
typedef struct evaluator {
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    int have_net;
    const st_backend *be;
    float *weights;        /* [net.params.count] */
    st_source *test;
    st_transform transform;
    st_records_buf chunk;  /* images per forward pass: chunk.cap */
    st_replica rep;
    int have_rep;
} evaluator;

static void evaluator_free(evaluator *e)
{
    if (e->have_rep)
        st_replica_free(&e->rep);
    st_source_close(e->test);
    if (e->have_net) {
        st_net_free(&e->net);
        st_cfg_free(&e->cfg);
    }
    free(e->weights);
    st_records_buf_free(&e->chunk);
}

/* --conv-impl: a name of the backend's (not auto: the training's measured
 * choice is in its snapshot, not here). */
static st_status check_conv_impl(const st_backend *be, const char *impl, st_error *err)
{
    if (!impl)
        return ST_OK;
    char names[256] = "";
    for (int i = 0; be->conv_impls && be->conv_impls[i]; i++) {
        if (strcmp(be->conv_impls[i], impl) == 0)
            return ST_OK;
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", be->conv_impls[i]);
    }
    if (!be->conv_impls)
        return st_fail(err, ST_EUSAGE, "option --conv-impl %s: the %s backend has one "
                       "implementation of each kernel: leave the option out", impl, be->name);
    return st_fail(err, ST_EUSAGE, "option --conv-impl: expected one of the %s backend's "
                   "convolution implementations (%s), got '%s'", be->name, names, impl);
}

/* The test split: --data's, else [net]'s; synthetic when asked, or when
 * neither names any data (as training does). */
static st_status open_test(evaluator *e, const eval_cli *o, const char *cfg_path,
                           st_error *err)
{
    st_log log = st_log_default(ST_LOG_QUIET);
    int synthetic = o->data && strcmp(o->data, "synthetic") == 0;
    st_data_paths d = e->hp.data;
    st_status st = ST_OK;
    if (o->data && !synthetic) {
        memset(&d, 0, sizeof d);
        st = st_data_paths_load(o->data, &d, &log, err);
    }
    const char *where = o->data && !synthetic ? o->data : cfg_path;
    if (st == ST_OK && d.classes && d.classes != e->net.classes)
        st = st_fail(err, ST_EINPUT, "%s: classes=%d but the network has %d outputs", where,
                     d.classes, e->net.classes);
    if (st != ST_OK)
        return st;
    if (synthetic || (!d.train[0] && !d.test[0]))
        return st_synthetic_open(&e->test, e->hp.image_size, e->net.classes,
                                 o->test_images ? o->test_images : EVAL_SYNTHETIC_TEST, o->seed,
                                 ST_SYNTHETIC_TEST_FIRST, err);
    if (!d.test[0])
        return st_fail(err, ST_EINPUT, "%s: no test data: expected test= (or valid=) naming "
                       "the split to evaluate", where);
    long skipped = 0;
    st_source_spec spec = {
        .path = d.test, .labels = d.test_labels, .names = d.names[0] ? d.names : NULL,
        .limit = o->test_images, .classes = e->net.classes, .verify = 1,
        .images = {.shape = e->hp.image_size, .skipped = &skipped},
    };
    char net_where[ST_PATH_MAX + 32];
    snprintf(net_where, sizeof net_where, "%s:%d [net]", e->cfg.path, e->cfg.secs[0].line);
    st = st_source_open(&e->test, &spec, err);
    if (st == ST_OK)
        st = st_transform_check(&e->transform, e->test, net_where, err);
    if (st != ST_OK)
        st_error_prefix(err, "%s: test=: ", where);
    return st;
}

static st_status setup(evaluator *e, const eval_cli *o, const char *cfg_path,
                       const char *weights_path, st_error *err)
{
    st_log log = st_log_default(ST_LOG_QUIET);
    st_status st = st_backend_find(o->backend, &e->be, err);
    if (st == ST_OK)
        st = check_conv_impl(e->be, o->conv_impl, err);
    if (st == ST_OK)
        st = st_net_load(cfg_path, o->hparams, &e->cfg, &e->hp, &e->net, &log, err);
    if (st != ST_OK)
        return st;
    e->have_net = 1;
    e->transform = e->hp.transform;
    e->transform.seed = o->seed;
    e->weights = st_calloc(e->net.params.count ? e->net.params.count : 1, sizeof(float),
                           "weights", err);
    if (!e->weights)
        return ST_ENOMEM;
    st_precision trained, precision;
    if ((st = st_weights_load_precision(weights_path, &e->net, e->weights, &trained, err)) ||
        (st = st_cmd_precision(e->be, o->precision, weights_path, trained, &precision, err)) ||
        (st = open_test(e, o, cfg_path, err)))
        return st;
    int S = e->hp.subdivisions > 0 ? e->hp.subdivisions : 1;
    int chunk = o->batch ? o->batch : (e->hp.batch + S - 1) / S;
    if (chunk > e->test->count)
        chunk = (int)e->test->count;
    if (chunk < 1)
        return st_fail(err, ST_EINPUT, "%s: the test split has no records", e->test->name);
    int sizes[2] = {chunk, (int)(e->test->count % chunk)};
    if ((st = st_records_buf_init(&e->chunk, chunk, st_shape_count(e->net.input),
                                  st_record_bytes(e->test), err)) != ST_OK)
        return st;
    st_replica_opts ro = {.n = chunk, .batch_sizes = sizes, .n_batch_sizes = sizes[1] ? 2 : 1,
                          .training = 0,
                          .backend = {.intra_threads = o->intra ? o->intra : 1,
                                      .conv_impl = o->conv_impl, .precision = precision}};
    st = st_replica_init(&e->rep, &e->net, e->be, &ro, err);
    e->have_rep = st == ST_OK;
    return st;
}

/* The test split in chunks: correct answers and the summed loss. */
static st_status evaluate(evaluator *e, const eval_cli *o, long *correct, double *loss,
                          st_error *err)
{
    st_status st = st_replica_test(&e->rep, e->weights, e->test, &e->transform, o->seed,
                                   &e->chunk, 0, e->test->count, correct, loss, err);
    if (st != ST_OK)
        return st;
    if (!isfinite(*loss))
        return st_fail(err, ST_EDIVERGED, "the test loss is not finite (%g): the weights give "
                       "non-finite scores on the test split", *loss);
    return ST_OK;
}

static st_status run_eval(const eval_cli *o, const char **pos, st_error *err)
{
    evaluator e;
    memset(&e, 0, sizeof e);
    long correct = 0;
    double loss = 0.0;
    st_status st = setup(&e, o, pos[0], pos[1], err);
    if (st == ST_OK)
        st = evaluate(&e, o, &correct, &loss, err);
    if (st == ST_OK) {
        long n = e.test->count;
        double accuracy = (double)correct / (double)n, mean = loss / (double)n;
        if (o->format && strcmp(o->format, "csv") == 0)
            printf("accuracy,loss,images\n%.6f,%.6g,%ld\n", accuracy, mean, n);
        else
            printf("test  accuracy %.2f%%  loss %.4f  (%ld images)\n", 100.0 * accuracy, mean,
                   n);
        if (fflush(stdout) != 0)
            st = st_fail(err, ST_EIO, "standard output: write failed: %s", strerror(errno));
    }
    evaluator_free(&e);
    return st;
}

int st_cmd_eval(int argc, char **argv)
{
    eval_cli o = {.backend = "dnnl", .seed = 1};
    st_error err = {0};
    const char *pos[2];
    int n_pos = 0;
    st_status st = st_options_parse(options, N_OPTIONS, &o, argc, argv, pos, 2, &n_pos, &err);
    if (st == ST_OK && o.help) {
        st_options_help(stdout, "usage: singletrain eval NET.cfg WEIGHTS [options]\n\n"
                        "Tests WEIGHTS (a singletrain snapshot, a Darknet .weights file or "
                        "an ONNX model's initializers; for an ONNX model NET, NET itself) "
                        "on the test split of the data set in inference mode (batch norm's "
                        "running statistics, no dropout) and prints the accuracy and mean "
                        "loss per image as the training's test phase does: the same numbers "
                        "as a -t 1 run's test phase for the same weights (give its "
                        "--backend and --conv-impl for the same bits; a test phase split "
                        "over several workers sums the loss in another order).\n", options,
                        N_OPTIONS, groups);
        return 0;
    }
    if (st == ST_OK && o.format && strcmp(o.format, "text") != 0 && strcmp(o.format, "csv") != 0)
        st = st_fail(&err, ST_EUSAGE, "option --log-format: expected text or csv, got '%s'",
                     o.format);
    if (st == ST_OK && n_pos != 2)
        st = st_fail(&err, ST_EUSAGE, "expected NET.cfg and WEIGHTS, got %d argument%s (usage: "
                     "singletrain eval NET.cfg WEIGHTS [options])", n_pos,
                     n_pos == 1 ? "" : "s");
    st_netpath net;
    if (st == ST_OK && (st = st_netpath_find_for(&net, "eval", pos[0], 0, &err)) == ST_OK)
        pos[0] = net.path;
    if (st == ST_OK)
        st = run_eval(&o, pos, &err);
    return st_cmd_exit_code("eval", st, &err);
}
