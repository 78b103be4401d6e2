/* The SW26010 model file (include/cpe/model.h): a table of every constant,
 * its unit, where it goes and its range, the parser that fills an
 * st_sw26010_model from a file's lines, and the cost model's defaults (the
 * built-in file with its fitted constants neutral). */
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "cpe/model.h"

/* The largest model file read: a few kilobytes in practice. */
#define MODEL_MAX_BYTES (1 << 20)

typedef enum model_kind {
    MODEL_SCALAR,
    MODEL_CURVE_BYTES,
    MODEL_CURVE_GET,
    MODEL_CURVE_PUT
} model_kind;

/* One constant: its name and unit in the file, its place in
 * st_sw26010_model (scalars), and its range [lo, hi] (lo excluded when
 * open_lo). */
typedef struct model_entry {
    const char *name, *unit;
    model_kind kind;
    size_t offset;
    double lo, hi;
    int open_lo;
} model_entry;

#define CG(field) MODEL_SCALAR, offsetof(st_sw26010_model, cg.field)
#define NET(field) MODEL_SCALAR, offsetof(st_sw26010_model, cluster.field)
#define FIT(field) MODEL_SCALAR, offsetof(st_sw26010_model, uncertainty.field)

static const model_entry model_entries[] = {
    {"clock_hz", "Hz", CG(clock_hz), 0, 1e12, 1},
    {"flops_per_cycle", "flop/cycle", CG(flops_per_cycle), 0, 1e3, 1},
    {"fma_latency_cycles", "cycles", CG(fma_latency_cycles), 0, 1e3, 0},
    {"loop_overhead_ops", "instructions", CG(loop_overhead_ops), 0, 1e3, 0},
    {"loop_entry_cycles", "cycles", CG(loop_entry_cycles), 0, 1e6, 0},
    {"gemm_block_cycles", "cycles", CG(gemm_block_cycles), 0, 1e6, 0},
    {"dma_curve_bytes", "B", MODEL_CURVE_BYTES, 0, 1, 1e9, 1},
    {"dma_curve_get_cycles", "cycles", MODEL_CURVE_GET, 0, 0, 1e9, 0},
    {"dma_curve_put_cycles", "cycles", MODEL_CURVE_PUT, 0, 0, 1e9, 0},
    {"dma_get_latency_cycles", "cycles", CG(dma_get_latency_cycles), 0, 1e9, 0},
    {"dma_put_latency_cycles", "cycles", CG(dma_put_latency_cycles), 0, 1e9, 0},
    {"dma_interleaved_share", "1", CG(dma_interleaved_share), 0, 1, 1},
    {"regcomm_p2p_bandwidth", "B/s", CG(regcomm_p2p_bandwidth), 0, 1e15, 1},
    {"regcomm_bcast_bandwidth", "B/s", CG(regcomm_bcast_bandwidth), 0, 1e15, 1},
    {"regcomm_latency_cycles", "cycles", CG(regcomm_latency_cycles), 0, 1e6, 0},
    {"regcomm_recv_cycles", "cycles", CG(regcomm_recv_cycles), 0, 1e6, 0},
    {"float_msg_cycles", "cycles", CG(float_msg_cycles), 0, 1e3, 0},
    {"barrier_cycles", "cycles", CG(barrier_cycles), 0, 1e9, 0},
    {"launch_seconds", "s", CG(launch_seconds), 0, 1, 0},
    {"mpe_flops", "flop/s", CG(mpe_flops), 0, 1e15, 1},
    {"mpe_bandwidth", "B/s", CG(mpe_bandwidth), 0, 1e15, 1},
    {"net_latency_s", "s", NET(net_latency_s), 0, 1, 0},
    {"net_bandwidth", "B/s", NET(net_bandwidth), 0, 1e15, 1},
    {"supernode_nodes", "nodes", NET(supernode_nodes), 1, 1e9, 0},
    {"cross_supernode_factor", "1", NET(cross_supernode_factor), 1, 1e6, 0},
    {"io_bandwidth", "B/s", NET(io_bandwidth), 0, 1e18, 1},
    {"allreduce_contention", "1", NET(allreduce_contention), 0, 1e6, 0},
    {"node_time_spread", "1", NET(node_time_spread), 0, 10, 0},
    {"uncertainty_pass", "1", FIT(pass), 0, 100, 0},
    {"uncertainty_speedup", "1", FIT(speedup), 0, 100, 0},
    {"uncertainty_share", "1", FIT(share), 0, 1, 0},
};

#define MODEL_ENTRIES ((int)(sizeof model_entries / sizeof model_entries[0]))

/* A line cut into its fields (pointers into the line, NUL-ended). */
typedef struct model_line {
    char *name, *value, *unit, *source;
} model_line;

static char *skip_space(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    return s;
}

static char *cut_word(char *s)
{
    while (*s && *s != ' ' && *s != '\t' && *s != '\r')
        s++;
    if (*s)
        *s++ = '\0';
    return s;
}

/* Split line (modified) into its fields; name NULL for a blank or comment
 * line. */
static void split_line(char *line, model_line *f)
{
    memset(f, 0, sizeof *f);
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char *s = skip_space(line);
    if (!*s)
        return;
    f->name = s;
    s = skip_space(cut_word(s));
    f->value = *s ? s : NULL;
    s = skip_space(cut_word(s));
    f->unit = *s ? s : NULL;
    s = skip_space(cut_word(s));
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    f->source = *s ? s : NULL;
}

/* A finite decimal number (no hex, no inf or nan) filling all of text. */
static int parse_number(const char *text, double *out)
{
    if (!*text || strpbrk(text, "xXiInN"))
        return 0;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*end || errno != 0 || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

static int in_range(const model_entry *e, double v)
{
    return (e->open_lo ? v > e->lo : v >= e->lo) && v <= e->hi;
}

static void range_text(const model_entry *e, char *buf, size_t size)
{
    snprintf(buf, size, "%s %g and at most %g %s", e->open_lo ? "above" : "at least", e->lo, e->hi,
             e->unit);
}

/* A comma-separated list of numbers into curve (kind's column). */
static st_status parse_curve(st_sw26010_model *m, const model_entry *e, char *value,
                             const char *where, st_error *err)
{
    double v[ST_CPE_DMA_CURVE_POINTS];
    int n = 0;
    char range[96];
    range_text(e, range, sizeof range);
    for (char *tok = value;; n++) {
        char *comma = strchr(tok, ',');
        if (comma)
            *comma = '\0';
        if (n == ST_CPE_DMA_CURVE_POINTS)
            return st_fail(err, ST_EINPUT, "%s: %s has more than %d points", where, e->name,
                           ST_CPE_DMA_CURVE_POINTS);
        if (!parse_number(tok, &v[n]) || !in_range(e, v[n]))
            return st_fail(err, ST_EINPUT, "%s: %s: point %d, '%s', is not a number %s", where,
                           e->name, n + 1, tok, range);
        if (!comma)
            break;
        tok = comma + 1;
    }
    n++;
    if (m->cg.dma.points && m->cg.dma.points != n)
        return st_fail(err, ST_EINPUT, "%s: %s has %d points where an earlier DMA curve row has %d",
                       where, e->name, n, m->cg.dma.points);
    m->cg.dma.points = n;
    double *col = e->kind == MODEL_CURVE_BYTES ? m->cg.dma.bytes
                  : e->kind == MODEL_CURVE_GET ? m->cg.dma.get_cycles
                                               : m->cg.dma.put_cycles;
    for (int i = 0; i < n; i++) {
        if (e->kind == MODEL_CURVE_BYTES && i > 0 && !(v[i] > v[i - 1]))
            return st_fail(err, ST_EINPUT, "%s: %s must increase: point %d (%g) follows %g",
                           where, e->name, i + 1, v[i], v[i - 1]);
        col[i] = v[i];
    }
    return ST_OK;
}

static const model_entry *find_entry(const char *name)
{
    for (int i = 0; i < MODEL_ENTRIES; i++)
        if (strcmp(model_entries[i].name, name) == 0)
            return &model_entries[i];
    return NULL;
}

static st_status parse_line(st_sw26010_model *m, model_line *f, int seen[], const char *where,
                            st_error *err)
{
    const model_entry *e = find_entry(f->name);
    if (!e)
        return st_fail(err, ST_EINPUT, "%s: unknown constant '%s' (expected NAME VALUE UNIT "
                       "SOURCE with a NAME of the model: clock_hz, dma_curve_bytes, ... "
                       "uncertainty_share; see data/sw26010/model.conf)", where, f->name);
    int i = (int)(e - model_entries);
    if (seen[i])
        return st_fail(err, ST_EINPUT, "%s: %s is given again (first on line %d)", where,
                       e->name, seen[i]);
    if (!f->value || !f->unit || !f->source)
        return st_fail(err, ST_EINPUT, "%s: %s needs a value, a unit (%s) and a source",
                       where, e->name, e->unit);
    if (strcmp(f->unit, e->unit) != 0)
        return st_fail(err, ST_EINPUT, "%s: %s is in %s, not '%s'", where, e->name, e->unit,
                       f->unit);
    if (e->kind != MODEL_SCALAR)
        return parse_curve(m, e, f->value, where, err);
    double v;
    char range[96];
    range_text(e, range, sizeof range);
    if (!parse_number(f->value, &v) || !in_range(e, v))
        return st_fail(err, ST_EINPUT, "%s: %s: '%s' is not a number %s", where, e->name,
                       f->value, range);
    *(double *)((char *)m + e->offset) = v;
    return ST_OK;
}

st_status st_sw26010_model_parse(st_sw26010_model *m, const char *text, const char *origin,
                                 st_error *err)
{
    memset(m, 0, sizeof *m);
    int seen[MODEL_ENTRIES] = {0};
    st_status st = ST_OK;
    const char *at = text;
    for (int lineno = 1; st == ST_OK && *at; lineno++) {
        const char *nl = strchr(at, '\n');
        size_t len = nl ? (size_t)(nl - at) : strlen(at);
        char line[1024], where[512];
        snprintf(where, sizeof where, "%s:%d", origin, lineno);
        if (len >= sizeof line)
            return st_fail(err, ST_EINPUT, "%s: line longer than %zu characters", where,
                           sizeof line - 1);
        memcpy(line, at, len);
        line[len] = '\0';
        model_line f;
        split_line(line, &f);
        if (f.name) {
            st = parse_line(m, &f, seen, where, err);
            if (st == ST_OK)
                seen[find_entry(f.name) - model_entries] = lineno;
        }
        at = nl ? nl + 1 : at + len;
    }
    for (int i = 0; st == ST_OK && i < MODEL_ENTRIES; i++)
        if (!seen[i])
            st = st_fail(err, ST_EINPUT, "%s: %s (%s) is missing: a model gives every constant",
                         origin, model_entries[i].name, model_entries[i].unit);
    if (st == ST_OK && m->cg.dma.points < 2)
        st = st_fail(err, ST_EINPUT, "%s: the DMA curve needs at least 2 points", origin);
    return st;
}

st_status st_sw26010_model_load(st_sw26010_model *m, const char *path, st_error *err)
{
    if (!path)
        return st_sw26010_model_parse(m, st_sw26010_model_builtin, "the built-in SW26010 model",
                                      err);
    char *text = NULL;
    size_t len = 0;
    st_status st = st_read_text(path, "SW26010 model file", MODEL_MAX_BYTES, &text, &len, err);
    if (st == ST_OK && strlen(text) != len)
        st = st_fail(err, ST_EINPUT, "%s: a NUL byte after %zu bytes: not a model file (text)",
                     path, strlen(text));
    if (st == ST_OK)
        st = st_sw26010_model_parse(m, text, path, err);
    free(text);
    return st;
}

st_cpe_cost_params st_cpe_cost_params_default(void)
{
    st_sw26010_model m;
    st_error err = {0};
    if (st_sw26010_model_parse(&m, st_sw26010_model_builtin, "the built-in SW26010 model",
                               &err) != ST_OK) {
        fprintf(stderr, "singletrain: %s\n", err.msg);
        abort(); /* the build embeds a checked file: a broken invariant */
    }
    /* Neutral where the fit on swCaffe's measurements decides: no saving
     * for interleaved transfers, no float penalty, swCandle's latency sum
     * split evenly. */
    m.cg.dma_interleaved_share = 1.0;
    m.cg.float_msg_cycles = 0.0;
    double latency = (m.cg.dma_get_latency_cycles + m.cg.dma_put_latency_cycles) / 2.0;
    m.cg.dma_get_latency_cycles = m.cg.dma_put_latency_cycles = latency;
    return m.cg;
}
