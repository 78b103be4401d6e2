/* singletrain export NET.cfg WEIGHTS OUT.weights: write a network's weights
 * as a Darknet .weights file (darknet_weights.h), so that Darknet runs or
 * goes on training a model trained here with the same .cfg. WEIGHTS is a
 * singletrain snapshot or a .weights file (re-written: the round trip
 * check). The header's seen (images trained on, which Darknet's learning
 * rate schedule counts from) is the snapshot's iteration times batch= of
 * [net], or the .weights file's own.
 *
 * singletrain export --onnx NET WEIGHTS OUT.onnx: the network (a cfg, or an
 * ONNX model) and those weights as an ONNX model instead (net/onnx.h's
 * st_onnx_save), which singletrain reads back into the same network. */
#include "commands.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/darknet_weights.h"
#include "base/fileio.h"
#include "net/hparams.h"
#include "base/log.h"
#include "net/net.h"
#include "net/onnx.h"
#include "netpath.h"
#include "options.h"
#include "base/status.h"

typedef struct export_cli {
    int quiet, help, onnx;
} export_cli;

#define OPT(field) offsetof(export_cli, field)

static const st_option options[] = {
    {"onnx", 0, NULL, "Format", "write an ONNX model (opset 13: batch norm in inference form; "
     "singletrain reads it back into the same network) instead of Darknet's .weights; NET "
     "may itself be an ONNX model", ST_OPT_FLAG, OPT(onnx), 0, 0},
    {"quiet", 'q', NULL, "Other", "print nothing on success", ST_OPT_FLAG, OPT(quiet), 0, 0},
    {"help", 'h', NULL, "Other", "this help", ST_OPT_FLAG, OPT(help), 0, 0},
};

#define N_OPTIONS ((int)(sizeof options / sizeof options[0]))

static const char *const groups[] = {"Format", "Other", NULL};

/* Whether path names a network rather than weights: a .cfg or an ONNX
 * model (the arguments given in another order). */
static int looks_like_network(const char *path)
{
    size_t n = strlen(path);
    return st_onnx_is_model(path) || (n > 4 && strcmp(path + n - 4, ".cfg") == 0);
}

static void append_order_hint(const char *in_path, st_error *err)
{
    size_t len = strlen(err->msg);
    snprintf(err->msg + len, sizeof err->msg - len, " (WEIGHTS, %s, looks like the network: "
             "the order is NET WEIGHTS OUT)", in_path);
}

static st_status run_export(const export_cli *o, const char *cfg_path, const char *in_path,
                            const char *out_path, st_error *err)
{
    st_log log = st_log_default(ST_LOG_QUIET);
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    const char *out_name = o->onnx ? "OUT.onnx" : "OUT.weights";
    const st_named_path out[] = {{out_name, out_path}};
    const st_named_path in[] = {{"NET.cfg", cfg_path}, {"WEIGHTS", in_path}};
    st_status st = st_check_output_path(out_name, out_path, err);
    if (st == ST_OK)
        st = st_check_distinct(out, 1, in, 2, err);
    if (st == ST_OK) {
        st = st_net_load(cfg_path, NULL, &cfg, &hp, &net, &log, err);
        if (st == ST_EINPUT && looks_like_network(in_path))
            append_order_hint(in_path, err);
    }
    if (st != ST_OK)
        return st;
    uint64_t seen = 0;
    size_t floats = 0;
    float *weights = st_calloc(net.params.count ? net.params.count : 1, sizeof *weights,
                               "weights", err);
    if (!weights)
        st = ST_ENOMEM;
    if (st == ST_OK && !o->onnx)
        st = st_darknet_weights_floats(&net, &floats, err);
    if (st == ST_OK)
        st = st_weights_load_seen(in_path, &net, hp.batch, weights, &seen, err);
    if (st == ST_OK && o->onnx) {
        st = st_onnx_save(out_path, &net, &cfg, weights, err);
        if (st == ST_OK && !o->quiet)
            printf("wrote %s: %d layers as an ONNX model (opset 13) with the weights of %s\n",
                   out_path, net.n_layers, in_path);
    } else if (st == ST_OK)
        st = st_darknet_weights_save(out_path, &net, weights, seen, err);
    if (st == ST_OK && !o->quiet && !o->onnx)
        printf("wrote %s: %zu floats of %d layers in Darknet's .weights format (%d bytes "
               "of header, seen %llu) from %s\n", out_path, floats, net.n_layers,
               ST_DARKNET_HEADER_BYTES, (unsigned long long)seen, in_path);
    free(weights);
    st_net_free(&net);
    st_cfg_free(&cfg);
    return st;
}

int st_cmd_export(int argc, char **argv)
{
    export_cli o = {0};
    const char *pos[3];
    int n_pos = 0;
    st_error err = {0};
    st_status st = st_options_parse(options, N_OPTIONS, &o, argc, argv, pos, 3, &n_pos, &err);
    if (st == ST_OK && o.help) {
        st_options_help(stdout, "usage: singletrain export NET.cfg WEIGHTS OUT.weights "
                        "[options]\n       singletrain export --onnx NET WEIGHTS OUT.onnx "
                        "[options]\n\nWrites the weights of the network of NET.cfg, read from "
                        "WEIGHTS (a singletrain snapshot or a Darknet .weights file), to "
                        "OUT.weights in Darknet's format, for `darknet classifier predict "
                        "DATA NET.cfg OUT.weights` and the like; with --onnx, the network and "
                        "its weights as an ONNX model (NET a cfg or an ONNX model).\n",
                        options, N_OPTIONS, groups);
        return 0;
    }
    if (st == ST_OK && n_pos != 3)
        st = st_fail(&err, ST_EUSAGE, "expected NET.cfg, WEIGHTS and OUT.weights, got %d "
                     "argument%s (usage: singletrain export NET.cfg WEIGHTS OUT.weights)",
                     n_pos, n_pos == 1 ? "" : "s");
    st_netpath net;
    if (st == ST_OK && (st = st_netpath_find_for(&net, "export", pos[0], o.quiet, &err)) == ST_OK)
        pos[0] = net.path;
    if (st == ST_OK)
        st = run_export(&o, pos[0], pos[1], pos[2], &err);
    return st_cmd_exit_code("export", st, &err);
}
