/* Darknet .weights files; see darknet_weights.h for the format and how
 * singletrain's tensors map onto it.
 *
 * A network's file is described once by a plan: the tensors in file order,
 * each with its form (as it is, the converted running variance, or absent
 * from the file: a [batchnorm] layer's biases), as each layer lists them
 * (st_layer_ops.darknet). Saving and loading walk the plan, so the two
 * cannot disagree on the order. */
#include "train/darknet_weights.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "layers/layer.h"
#include "net/onnx.h"
#include "train/snapshot.h"

#define DW_MAJOR 0
#define DW_MINOR 2
#define DW_REVISION 0
#define DW_OLD_HEADER_BYTES 16 /* when seen is an int32 */
#define DW_DARKNET_BN_EPS 1e-6 /* Darknet: (x - mean) / (sqrt(var) + .000001f) */

typedef struct dw_chunk {
    const st_param *p;
    const st_layer *l;
    st_darknet_form form;
    int rows, cols; /* ST_DARKNET_TRANSPOSE: outputs, inputs */
} dw_chunk;

typedef struct dw_plan {
    dw_chunk *c;
    int n, cap;
    size_t floats;  /* in the file */
    size_t largest; /* floats of the largest chunk */
} dw_plan;

/* ---- the plan ---- */

static const st_param *find_param(const st_net *net, int layer, const char *role)
{
    char name[sizeof net->params.p[0].name];
    snprintf(name, sizeof name, "%d.%s", layer, role);
    for (int i = 0; i < net->params.n; i++)
        if (net->params.p[i].layer == layer && strcmp(net->params.p[i].name, name) == 0)
            return &net->params.p[i];
    return NULL;
}

static st_status plan_add(dw_plan *pl, const st_net *net, const st_layer *l, const char *role,
                          st_darknet_form form, st_error *err)
{
    const st_param *p = find_param(net, l->index, role);
    if (!p)
        return st_fail(err, ST_EINTERNAL, "layer %d [%s] (cfg line %d) has no tensor %d.%s, "
                       "which its Darknet .weights record needs", l->index, l->ops->type,
                       l->line, l->index, role);
    assert(pl->n < pl->cap && "a layer lists one of its tensors twice");
    dw_chunk *c = &pl->c[pl->n++];
    *c = (dw_chunk){.p = p, .l = l, .form = form};
    if (form == ST_DARKNET_TRANSPOSE) {
        c->rows = (int)st_shape_count(l->out);
        c->cols = (int)st_shape_count(l->in);
    }
    if (form != ST_DARKNET_ABSENT) {
        pl->floats += p->count;
        if (p->count > pl->largest)
            pl->largest = p->count;
    }
    return ST_OK;
}

static void plan_free(dw_plan *pl)
{
    free(pl->c);
    memset(pl, 0, sizeof *pl);
}

/* Every tensor of net in Darknet's file order; any tensor left over is a
 * layer Darknet cannot hold. */
static st_status plan_build(dw_plan *pl, const st_net *net, st_error *err)
{
    memset(pl, 0, sizeof *pl);
    pl->c = st_calloc((size_t)net->params.n + 1, sizeof *pl->c, "the .weights plan", err);
    if (!pl->c)
        return ST_ENOMEM;
    pl->cap = net->params.n + 1;
    st_status st = ST_OK;
    for (int i = 0; i < net->n_layers && st == ST_OK; i++) {
        const st_layer *l = net->layers[i];
        st_darknet_tensor t[ST_DARKNET_MAX_TENSORS];
        int n = l->ops->darknet ? l->ops->darknet(l, t) : 0;
        for (int k = 0; k < n && st == ST_OK; k++)
            st = plan_add(pl, net, l, t[k].role, t[k].form, err);
    }
    for (int i = 0; i < net->params.n && st == ST_OK; i++) {
        const st_param *p = &net->params.p[i];
        int covered = 0;
        for (int k = 0; k < pl->n && !covered; k++)
            covered = pl->c[k].p == p;
        if (!covered) {
            const st_layer *l = net->layers[p->layer];
            st = st_fail(err, ST_EINPUT, "layer %d [%s] (cfg line %d) has the learnable tensor "
                         "%s, which Darknet's .weights format has no place for: expected "
                         "tensors only in [convolutional], [connected] and [batchnorm] layers",
                         l->index, l->ops->type, l->line, p->name);
        }
    }
    if (st != ST_OK)
        plan_free(pl);
    return st;
}

st_status st_darknet_weights_floats(const st_net *net, size_t *floats, st_error *err)
{
    dw_plan pl;
    *floats = 0;
    st_status st = plan_build(&pl, net, err);
    if (st == ST_OK)
        *floats = pl.floats;
    plan_free(&pl);
    return st;
}

/* ---- the running variance ---- */

/* singletrain divides by sqrt(v + eps), Darknet by sqrt(d) + 1e-6: the d
 * that gives the same divisor, and back (0 where no v >= 0 does). */
static float variance_to_darknet(float v)
{
    double s = sqrt((v > 0.0f ? (double)v : 0.0) + (double)ST_BN_EPS) - DW_DARKNET_BN_EPS;
    return (float)(s * s);
}

static float variance_from_darknet(float d)
{
    if (isnan(d))
        return d;
    double s = sqrt(d > 0.0f ? (double)d : 0.0) + DW_DARKNET_BN_EPS;
    double v = s * s - (double)ST_BN_EPS;
    return v > 0.0 ? (float)v : 0.0f;
}

/* ---- saving ---- */

typedef struct dw_out {
    const char *path;
    const dw_plan *pl;
    const float *weights;
    uint64_t seen;
    float *buf; /* [pl->largest] */
} dw_out;

static st_status write_weights(FILE *f, void *ctx, st_error *err)
{
    const dw_out *o = ctx;
    int32_t head[3] = {DW_MAJOR, DW_MINOR, DW_REVISION};
    st_status st = st_fwrite(f, head, sizeof head, o->path, err);
    if (st == ST_OK)
        st = st_fwrite(f, &o->seen, sizeof o->seen, o->path, err);
    for (int k = 0; k < o->pl->n && st == ST_OK; k++) {
        const dw_chunk *c = &o->pl->c[k];
        const float *src = o->weights + c->p->offset;
        if (c->form == ST_DARKNET_ABSENT)
            continue;
        if (c->form == ST_DARKNET_VARIANCE) {
            for (size_t i = 0; i < c->p->count; i++)
                o->buf[i] = variance_to_darknet(src[i]);
            src = o->buf;
        }
        st = st_fwrite(f, src, c->p->count * sizeof *src, o->path, err);
    }
    return st;
}

/* The tensors absent from the file must be zero, or they would be lost. */
static st_status check_absent(const dw_plan *pl, const float *weights, const char *path,
                              st_error *err)
{
    for (int k = 0; k < pl->n; k++) {
        const dw_chunk *c = &pl->c[k];
        if (c->form != ST_DARKNET_ABSENT)
            continue;
        const float *w = weights + c->p->offset;
        for (size_t i = 0; i < c->p->count; i++)
            if (w[i] != 0.0f)
                return st_fail(err, ST_EINPUT, "%s: layer %d [%s] (cfg line %d): %s[%zu] = %g, "
                               "but Darknet's .weights has no place for a [%s] layer's biases "
                               "(Darknet neither trains nor saves them): expected all zero",
                               path, c->l->index, c->l->ops->type, c->l->line, c->p->name, i,
                               (double)w[i], c->l->ops->type);
    }
    return ST_OK;
}

st_status st_darknet_weights_save(const char *path, const st_net *net, const float *weights,
                                  uint64_t seen, st_error *err)
{
    dw_plan pl;
    st_status st = plan_build(&pl, net, err);
    if (st != ST_OK) {
        st_error_prefix(err, "%s: ", path);
        return st;
    }
    dw_out o = {path, &pl, weights, seen, NULL};
    char where[256];
    st = check_absent(&pl, weights, path, err);
    if (st == ST_OK && !st_net_arena_finite(net, weights, where, sizeof where))
        st = st_fail(err, ST_EDIVERGED, "%s: not written: %s: expected finite weights", path,
                     where);
    if (st == ST_OK) {
        o.buf = st_calloc(pl.largest ? pl.largest : 1, sizeof *o.buf, "a .weights tensor", err);
        if (!o.buf)
            st = ST_ENOMEM;
    }
    if (st == ST_OK)
        st = st_write_atomic(path, write_weights, &o, err);
    free(o.buf);
    plan_free(&pl);
    return st;
}

/* ---- loading ---- */

typedef struct dw_in {
    const char *path;
    FILE *f;
    unsigned long long pos;   /* bytes read so far */
    unsigned long long total; /* bytes a complete file has */
} dw_in;

/* Read up to bytes into buf, counting them in in->pos; returns how many. */
static size_t read_some(dw_in *in, void *buf, size_t bytes)
{
    size_t got = fread(buf, 1, bytes, in->f);
    in->pos += got;
    return got;
}

static st_status short_file(const dw_in *in, const dw_chunk *c, st_error *err)
{
    if (ferror(in->f))
        return st_fail(err, ST_EIO, "%s: read failed: %s", in->path, strerror(errno));
    if (!c)
        return st_fail(err, ST_EINPUT, "%s: truncated .weights file: %llu bytes, shorter than "
                       "Darknet's header (expected %llu bytes for this network)", in->path,
                       in->pos, in->total);
    return st_fail(err, ST_EINPUT, "%s: truncated .weights file: %llu bytes, but this network "
                   "needs %llu; it ends in layer %d [%s] (cfg line %d), in %s (weights of "
                   "another network?)", in->path, in->pos, in->total, c->l->index,
                   c->l->ops->type, c->l->line, c->p->name);
}

/* Bytes after the last tensor: an error saying how many. */
static st_status check_end(dw_in *in, const dw_plan *pl, st_error *err)
{
    unsigned char buf[4096];
    unsigned long long extra = 0;
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, in->f)) > 0)
        extra += got;
    if (ferror(in->f))
        return st_fail(err, ST_EIO, "%s: read failed: %s", in->path, strerror(errno));
    if (extra == 0)
        return ST_OK;
    const dw_chunk *last = pl->n ? &pl->c[pl->n - 1] : NULL;
    char where[160] = "";
    if (last)
        snprintf(where, sizeof where, " after the last layer with weights, layer %d [%s] "
                 "(cfg line %d),", last->l->index, last->l->ops->type, last->l->line);
    return st_fail(err, ST_EINPUT, "%s: .weights file of %llu bytes, but this network's take "
                   "%llu:%s %llu bytes are left over (weights of another network?)", in->path,
                   in->total + extra, in->total, where, extra);
}

static st_status read_chunk(dw_in *in, const dw_chunk *c, float *weights, int transposed,
                            float *buf, st_error *err)
{
    float *dst = weights + c->p->offset;
    if (c->form == ST_DARKNET_ABSENT) {
        memset(dst, 0, c->p->count * sizeof *dst);
        return ST_OK;
    }
    int via_buf = c->form == ST_DARKNET_TRANSPOSE && transposed;
    float *to = via_buf ? buf : dst;
    size_t bytes = c->p->count * sizeof *to;
    if (read_some(in, to, bytes) != bytes)
        return short_file(in, c, err);
    if (c->form == ST_DARKNET_VARIANCE)
        for (size_t i = 0; i < c->p->count; i++)
            dst[i] = variance_from_darknet(dst[i]);
    if (via_buf) /* the file holds [inputs][outputs] */
        for (size_t r = 0; r < (size_t)c->rows; r++)
            for (size_t k = 0; k < (size_t)c->cols; k++)
                dst[r * (size_t)c->cols + k] = buf[k * (size_t)c->rows + r];
    return ST_OK;
}

st_status st_darknet_weights_load(const char *path, const st_net *net, float *weights,
                                  uint64_t *seen, st_error *err)
{
    dw_plan pl;
    st_status st = plan_build(&pl, net, err);
    if (st != ST_OK) {
        st_error_prefix(err, "%s: ", path);
        return st;
    }
    dw_in in = {path, NULL, 0, 0};
    float *buf = NULL;
    st = st_fopen_input(path, "rb", "weights", &in.f, err);
    if (st != ST_OK) {
        plan_free(&pl);
        return st;
    }
    int32_t head[3] = {0, 0, 0};
    uint64_t seen64 = 0;
    in.total = ST_DARKNET_HEADER_BYTES + 4ull * pl.floats;
    if (read_some(&in, head, sizeof head) != sizeof head)
        st = short_file(&in, NULL, err);
    /* Darknet's test: the wide seen from version 0.2 on; major or minor
     * above 1000 marks old files with transposed connected weights. */
    int wide = (int64_t)head[0] * 10 + head[1] >= 2 && head[0] < 1000 && head[1] < 1000;
    int transposed = head[0] > 1000 || head[1] > 1000;
    if (st == ST_OK && wide) {
        if (read_some(&in, &seen64, sizeof seen64) != sizeof seen64)
            st = short_file(&in, NULL, err);
    } else if (st == ST_OK) {
        in.total = DW_OLD_HEADER_BYTES + 4ull * pl.floats;
        int32_t seen32;
        if (read_some(&in, &seen32, sizeof seen32) != sizeof seen32)
            st = short_file(&in, NULL, err);
        seen64 = seen32 > 0 ? (uint64_t)seen32 : 0;
    }
    if (st == ST_OK && transposed) {
        buf = st_calloc(pl.largest ? pl.largest : 1, sizeof *buf, "a .weights tensor", err);
        if (!buf)
            st = ST_ENOMEM;
    }
    for (int k = 0; k < pl.n && st == ST_OK; k++)
        st = read_chunk(&in, &pl.c[k], weights, transposed, buf, err);
    if (st == ST_OK)
        st = check_end(&in, &pl, err);
    char where[256];
    if (st == ST_OK && !st_net_arena_finite(net, weights, where, sizeof where))
        st = st_fail(err, ST_EINPUT, "%s: %s: expected finite weights", path, where);
    if (st == ST_OK && seen)
        *seen = seen64;
    fclose(in.f);
    free(buf);
    plan_free(&pl);
    return st;
}

/* ---- either kind ---- */

/* Whether path starts as a singletrain snapshot; its opening is
 * st_fopen_input's (a missing file is ST_EINPUT naming it). */
static st_status is_snapshot(const char *path, int *snapshot, st_error *err)
{
    FILE *f;
    st_status st = st_fopen_input(path, "rb", "weights", &f, err);
    if (st != ST_OK)
        return st;
    char magic[ST_SNAPSHOT_MAGIC_BYTES];
    *snapshot = fread(magic, 1, sizeof magic, f) == sizeof magic &&
                memcmp(magic, ST_SNAPSHOT_MAGIC, sizeof magic) == 0;
    fclose(f);
    return ST_OK;
}

st_status st_weights_load_seen(const char *path, const st_net *net, int batch, float *weights,
                               uint64_t *seen, st_error *err)
{
    if (st_onnx_is_model(path)) { /* its initializers; seen 0 */
        if (seen)
            *seen = 0;
        return st_onnx_load_weights(path, net, weights, err);
    }
    int snapshot;
    st_status st = is_snapshot(path, &snapshot, err);
    if (st != ST_OK)
        return st;
    if (!snapshot)
        return st_darknet_weights_load(path, net, weights, seen, err);
    long iteration = 0;
    st = st_snapshot_load(path, net, weights, &iteration, err);
    if (st == ST_OK && seen)
        *seen = iteration > 0 && batch > 0 ? (uint64_t)iteration * (uint64_t)batch : 0;
    return st;
}

st_status st_weights_load_any(const char *path, const st_net *net, float *weights,
                              st_error *err)
{
    return st_weights_load_seen(path, net, 0, weights, NULL, err);
}

st_status st_weights_load_precision(const char *path, const st_net *net, float *weights,
                                    st_precision *precision, st_error *err)
{
    *precision = ST_PRECISION_FP32;
    int snapshot = 0;
    st_status st = st_onnx_is_model(path) ? ST_OK : is_snapshot(path, &snapshot, err);
    if (st != ST_OK || !snapshot)
        return st == ST_OK ? st_weights_load_any(path, net, weights, err) : st;
    st_snapshot_meta meta;
    st = st_snapshot_resume(path, net, weights, NULL, 0, &meta, err);
    if (st == ST_OK) {
        *precision = meta.precision;
        free(meta.settings);
    }
    return st;
}
