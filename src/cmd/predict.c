/* singletrain predict NET.cfg WEIGHTS IMAGE...: classify image files with a
 * trained network, Darknet's `classifier predict` for singletrain.
 *
 * The weights are a singletrain snapshot, a Darknet .weights file or an
 * ONNX model's initializers (darknet_weights.h's st_weights_load_any; NET
 * itself, when an ONNX model, named again as WEIGHTS). Each image is decoded as an image list's entries are
 * (data.h: stretched to the [net] input size, or to image_size= and then
 * centre-cropped with crop=1) and transformed as in testing (input_mean=,
 * input_scale=), then one forward pass of a single-sample replica (net.h)
 * on the chosen backend gives the class scores. Darknet letterboxes an
 * image whose shape differs from the input instead of stretching it: for
 * images of the input size the two see the same pixels. */
#include "commands.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "train/darknet_weights.h"
#include "data/data.h"
#include "base/fileio.h"
#include "net/hparams.h"
#include "base/log.h"
#include "net/net.h"
#include "netpath.h"
#include "options.h"
#include "base/status.h"

#define DEFAULT_TOP 5

typedef struct predict_cli {
    int top, scores, help;
    const char *backend, *names, *data, *hparams, *precision;
} predict_cli;

#define OPT(field) offsetof(predict_cli, field)

static const st_option options[] = {
    {"top", 'k', "N", "Output", "print the N most likely classes of each image (default 5, or "
     "the class count when smaller)", ST_OPT_INT, OPT(top), 1, 1 << 24},
    {"names", 0, "FILE", "Output", "class names, one per line (default: names= or labels= of "
     "--data, else of the cfg; else class numbers)", ST_OPT_STRING, OPT(names), 0, 0},
    {"data", 0, "FILE", "Output", "a data file (e.g. Darknet's .data) whose names= or labels= "
     "names the classes", ST_OPT_STRING, OPT(data), 0, 0},
    {"scores", 0, NULL, "Output", "print every class's score instead: the path, then one "
     "tab-separated column per class (darknet classifier test's format)", ST_OPT_FLAG,
     OPT(scores), 0, 0},
    {"backend", 0, "B", "Compute", "dnnl (default), ref or cpe (an emulated SW26010 core group)", ST_OPT_STRING, OPT(backend), 0, 0},
    {"precision", 0, "fp32|bf16", "Compute", "what convolutions and inner products compute "
     "in (default: a singletrain snapshot's, as its training; fp32 for other weights)",
     ST_OPT_STRING, OPT(precision), 0, 0},
    {"hparams", 0, "FILE", "Compute", "an ONNX model's [net] settings (the transform: "
     "input_mean=, input_scale=) instead of MODEL.train beside MODEL.onnx, as training's "
     "--hparams", ST_OPT_STRING, OPT(hparams), 0, 0},
    {"help", 'h', NULL, "Other", "this help", ST_OPT_FLAG, OPT(help), 0, 0},
};

#define N_OPTIONS ((int)(sizeof options / sizeof options[0]))

static const char *const groups[] = {"Output", "Compute", "Other", NULL};

/* Everything one run holds; freed by predictor_free whatever was reached. */
typedef struct predictor {
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    int have_net;
    float *weights;    /* [net.params.count] */
    char **names;      /* [net.classes], or NULL: class numbers */
    st_replica rep;
    int have_rep;
    st_shape stored;   /* decoded image: input channels, image_size */
    st_records_buf image; /* one: its decoded pixels and its input */
    int *top;          /* [k] class indices, most likely first */
} predictor;

static void predictor_free(predictor *p)
{
    if (p->have_rep)
        st_replica_free(&p->rep);
    if (p->have_net) {
        st_class_names_free(p->names, p->net.classes);
        st_net_free(&p->net);
        st_cfg_free(&p->cfg);
    }
    free(p->weights);
    st_records_buf_free(&p->image);
    free(p->top);
}

/* The class names: --names, else names= of --data, else of the cfg. */
static st_status load_names(predictor *p, const predict_cli *o, const st_log *log,
                            st_error *err)
{
    const char *path = o->names;
    st_data_paths d;
    memset(&d, 0, sizeof d);
    if (!path && o->data) {
        st_status st = st_data_paths_load(o->data, &d, log, err);
        if (st != ST_OK)
            return st;
        if (d.classes && d.classes != p->net.classes)
            return st_fail(err, ST_EINPUT, "%s: classes=%d but %s has %d outputs", o->data,
                           d.classes, p->cfg.path, p->net.classes);
        path = d.names[0] ? d.names : NULL;
    }
    if (!path && p->hp.data.names[0])
        path = p->hp.data.names;
    if (!path)
        return ST_OK;
    return st_class_names_read(path, p->net.classes, &p->names, err);
}

static st_status setup(predictor *p, const predict_cli *o, const char *cfg_path,
                       const char *weights_path, int top, st_error *err)
{
    st_log log = st_log_default(ST_LOG_QUIET);
    const st_backend *be;
    st_status st = st_backend_find(o->backend, &be, err);
    if (st == ST_OK)
        st = st_net_load(cfg_path, o->hparams, &p->cfg, &p->hp, &p->net, &log, err);
    if (st != ST_OK)
        return st;
    p->have_net = 1;
    st_shape in = p->net.input;
    if (in.c != 1 && in.c != 3)
        return st_fail(err, ST_EINPUT, "%s:%d: the input has %d channels: predict decodes "
                       "images to 1 (grey) or 3 (RGB)", cfg_path, p->cfg.secs[0].line, in.c);
    p->stored = (st_shape){in.c, p->hp.image_size.h, p->hp.image_size.w};
    p->weights = st_calloc(p->net.params.count ? p->net.params.count : 1, sizeof(float),
                           "weights", err);
    p->top = st_calloc((size_t)top, sizeof(int), "the top classes", err);
    if (!p->weights || !p->top)
        return ST_ENOMEM;
    if ((st = st_records_buf_init(&p->image, 1, st_shape_count(in), st_shape_count(p->stored),
                                  err)) != ST_OK)
        return st;
    st_precision trained, precision;
    if ((st = st_weights_load_precision(weights_path, &p->net, p->weights, &trained, err)) ||
        (st = st_cmd_precision(be, o->precision, weights_path, trained, &precision, err)) ||
        (st = load_names(p, o, &log, err)))
        return st;
    st_replica_opts ro = {.n = 1, .training = 0,
                          .backend = {.intra_threads = 1, .precision = precision}};
    st = st_replica_init(&p->rep, &p->net, be, &ro, err);
    p->have_rep = st == ST_OK;
    return st;
}

/* Indices of the k largest scores, largest first; ties keep the lower
 * class first (as Darknet's top_k). */
static void top_k(const float *score, int n, int k, int *idx)
{
    for (int j = 0; j < k; j++)
        idx[j] = -1;
    for (int i = 0; i < n; i++) {
        int cur = i;
        for (int j = 0; j < k && cur >= 0; j++) {
            if (idx[j] < 0 || score[cur] > score[idx[j]]) {
                int swap = idx[j];
                idx[j] = cur;
                cur = swap;
            }
        }
    }
}

static st_status predict_one(predictor *p, const predict_cli *o, const char *path, int top,
                             st_error *err)
{
    char why[160];
    st_regular_why(path, why, sizeof why);
    if (why[0])
        return st_fail(err, ST_EINPUT, "%s: cannot read image: %s", path, why);
    st_status st = st_image_decode(path, p->stored, p->image.pixels, err);
    if (st != ST_OK)
        return st;
    st_transform_apply(&p->hp.transform, p->stored, p->image.pixels, p->image.x, 0, 0);
    st_shard shard = {.n = 1, .x = p->image.x, .labels = NULL, .sample0 = 0};
    st_step_info info = {.training = 0, .seed = 0, .iteration = 0};
    double loss = 0.0;
    st = st_replica_forward(&p->rep, p->weights, &shard, &info, &loss, err);
    if (st != ST_OK)
        return st;
    const float *score = st_replica_output(&p->rep, p->net.output_layer);
    int classes = p->net.classes;
    for (int c = 0; c < classes; c++)
        if (!isfinite(score[c]))
            return st_fail(err, ST_EDIVERGED, "%s: the score of class %d is %g: the network's "
                           "output is not finite for this image", path, c, (double)score[c]);
    if (o->scores) {
        printf("%s", path);
        for (int c = 0; c < classes; c++)
            printf("\t%.9g", (double)score[c]);
        printf("\n");
        return ST_OK;
    }
    top_k(score, classes, top, p->top);
    for (int j = 0; j < top; j++) {
        int c = p->top[j];
        if (p->names)
            printf("%s: %.2f%% %s\n", path, 100.0 * (double)score[c], p->names[c]);
        else
            printf("%s: %.2f%% %d\n", path, 100.0 * (double)score[c], c);
    }
    return ST_OK;
}

static st_status run_predict(const predict_cli *o, const char **pos, int n_pos, st_error *err)
{
    predictor p;
    memset(&p, 0, sizeof p);
    int top = o->top ? o->top : DEFAULT_TOP;
    st_status st = setup(&p, o, pos[0], pos[1], top, err);
    if (st == ST_OK && top > p.net.classes) {
        if (o->top)
            st = st_fail(err, ST_EUSAGE, "option --top: %d classes asked for, but %s has %d",
                         o->top, pos[0], p.net.classes);
        top = p.net.classes;
    }
    for (int i = 2; i < n_pos && st == ST_OK; i++)
        st = predict_one(&p, o, pos[i], top, err);
    if (st == ST_OK && fflush(stdout) != 0)
        st = st_fail(err, ST_EIO, "standard output: write failed: %s", strerror(errno));
    predictor_free(&p);
    return st;
}

int st_cmd_predict(int argc, char **argv)
{
    predict_cli o = {.backend = "dnnl"};
    st_error err = {0};
    const char **pos = st_calloc((size_t)argc + 1, sizeof *pos, "arguments", &err);
    int n_pos = 0;
    st_status st = pos ? ST_OK : ST_ENOMEM;
    if (st == ST_OK)
        st = st_options_parse(options, N_OPTIONS, &o, argc, argv, pos, argc, &n_pos, &err);
    if (st == ST_OK && o.help) {
        st_options_help(stdout, "usage: singletrain predict NET.cfg WEIGHTS IMAGE... "
                        "[options]\n\nClassifies each IMAGE with the network of NET.cfg and "
                        "WEIGHTS (a singletrain snapshot, a Darknet .weights file or an ONNX "
                        "model's initializers; for an ONNX model NET, NET itself) and "
                        "prints its most likely classes, one line each: \"IMAGE: 87.50% "
                        "name\". Images are decoded and scaled as in testing: stretched to "
                        "the [net] input size (or image_size=, then centre-cropped with "
                        "crop=1), input_mean= subtracted, times input_scale= (default "
                        "1/255).\n", options, N_OPTIONS, groups);
        free(pos);
        return 0;
    }
    if (st == ST_OK && n_pos < 3)
        st = st_fail(&err, ST_EUSAGE, "expected NET.cfg, WEIGHTS and at least one image, got "
                     "%d argument%s (usage: singletrain predict NET.cfg WEIGHTS IMAGE... "
                     "[options])", n_pos, n_pos == 1 ? "" : "s");
    st_netpath net;
    if (st == ST_OK && (st = st_netpath_find_for(&net, "predict", pos[0], 0, &err)) == ST_OK)
        pos[0] = net.path;
    if (st == ST_OK)
        st = run_predict(&o, pos, n_pos, &err);
    free(pos);
    return st_cmd_exit_code("predict", st, &err);
}
