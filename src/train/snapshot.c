/* Snapshot files: header + settings + weights + solver state; see
 * snapshot.h.
 *
 * Layout (little-endian): magic "STSNAPSH", u32 version, u32 header bytes
 * (88), u64 network hash, u64 iteration, u64 float count, u64 seed, u32
 * batch, u32 workers, u32 state planes, u32 settings bytes, char
 * solver[16], u32 CRC-32 of the payload, u32 CRC-32 of the header's first
 * 84 bytes followed by the settings; then the settings text (settings
 * bytes: the cfg's settings, then, when the run kept kernel choices or had
 * test phases, a NUL and the choices' text (maybe empty), then, when it
 * had test phases, a NUL and the test record, "test_phases=P
 * best_accuracy=A best_iteration=I since_best=S"), then, when the run had
 * several ranks (mpirun), split its model-parallel layers over groups of
 * ranks (--mp-group) or computed in another precision than fp32, a NUL and
 * the run record, "ranks=R" (R > 1), "mp_group=G" (G > 1, with ranks),
 * "precision=NAME" (not fp32), those present in that order, one space apart
 * (the test record empty when there was none)), count floats of weights
 * and state planes x count floats of solver state. Every byte is under one
 * of the two checksums. Readers that predate the choices see the settings
 * up to the first NUL, readers that predate the test record the choices up
 * to the second, readers that predate the rank count the test record up to
 * the third, and snapshots that predate any of them have none, so they
 * still read each other's files (the version stays 3); only a reader that
 * predates the rank count refuses a multi-rank snapshot without test
 * phases (it reads the empty test record as corrupt), and one that
 * predates the group size or the precision refuses to resume a snapshot
 * that has them (it reads the run record as a corrupt rank count; it loads
 * its weights). A snapshot of
 * one process in fp32 is as it was. */
#include "train/snapshot.h"

#include <assert.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "base/fileio.h"

typedef struct snapshot_header {
    char magic[ST_SNAPSHOT_MAGIC_BYTES];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t net_hash;
    uint64_t iteration;
    uint64_t count;
    uint64_t seed;
    uint32_t batch;
    uint32_t workers;
    uint32_t state_planes;
    uint32_t settings_bytes;
    char solver[16];
    uint32_t crc;        /* of the weights and the state */
    uint32_t header_crc; /* of everything before it, then the settings */
} snapshot_header;

typedef struct snapshot_out {
    const char *path;
    snapshot_header h;
    char *settings; /* the settings text: the cfg's, the choices, the test record */
    const float *weights;
    const float *state;
} snapshot_out;

/* Floats per chunk when reading a payload that is not kept. */
#define CHUNK 4096

static uint32_t crc_add(uint32_t crc, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    while (bytes) {
        uInt chunk = bytes > (1u << 30) ? (1u << 30) : (uInt)bytes;
        crc = (uint32_t)crc32(crc, p, chunk);
        p += chunk;
        bytes -= chunk;
    }
    return crc;
}

static uint32_t header_crc(const snapshot_header *h, const char *settings)
{
    uint32_t crc = crc_add((uint32_t)crc32(0L, Z_NULL, 0), h,
                           offsetof(snapshot_header, header_crc));
    return crc_add(crc, settings, h->settings_bytes);
}

/* Whether the weights and the planes of solver state [planes * count]
 * (state NULL: the weights alone) are finite; if not, where in buf. */
static int arenas_finite(const st_net *net, const float *weights, const float *state,
                         int planes, char *buf, size_t size)
{
    if (!st_net_arena_finite(net, weights, buf, size))
        return 0;
    for (int k = 0; state && k < planes; k++)
        if (!st_net_arena_finite(net, state + (size_t)k * net->params.count, buf, size)) {
            size_t len = strlen(buf);
            snprintf(buf + len, size - len, " in plane %d of the solver state", k);
            return 0;
        }
    return 1;
}

/* Whether every running variance in weights is at least 0 (training
 * keeps it so; its square root divides); if not, where in buf. */
static int variances_valid(const st_net *net, const float *weights, char *buf, size_t size)
{
    static const char role[] = ".rolling_variance";
    for (int i = 0; i < net->params.n; i++) {
        const st_param *p = &net->params.p[i];
        size_t len = strlen(p->name);
        if (p->kind != ST_PARAM_STAT || len < sizeof role - 1 ||
            strcmp(p->name + len - (sizeof role - 1), role) != 0)
            continue;
        for (size_t k = 0; k < p->count; k++)
            if (weights[p->offset + k] < 0) {
                const st_layer *l = net->layers[p->layer];
                snprintf(buf, size, "layer %d [%s] (cfg line %d): %s[%zu] is %g", p->layer,
                         l->ops->type, l->line, p->name, k, (double)weights[p->offset + k]);
                return 0;
            }
    }
    return 1;
}

static st_status write_snapshot(FILE *f, void *ctx, st_error *err)
{
    snapshot_out *o = ctx;
    size_t count = (size_t)o->h.count;
    st_status st = st_fwrite(f, &o->h, sizeof o->h, o->path, err);
    if (st == ST_OK)
        st = st_fwrite(f, o->settings, o->h.settings_bytes, o->path, err);
    if (st == ST_OK)
        st = st_fwrite(f, o->weights, count * sizeof(float), o->path, err);
    if (st == ST_OK && o->h.state_planes)
        st = st_fwrite(f, o->state, count * o->h.state_planes * sizeof(float), o->path, err);
    return st;
}

/* The test record's text (see the layout above) into buf; its length. */
static size_t test_record_text(const st_test_record *r, char *buf, size_t size)
{
    int n = snprintf(buf, size, "test_phases=%ld best_accuracy=%.17g best_iteration=%ld "
                     "since_best=%ld", r->phases, r->best_accuracy, r->best_iteration,
                     r->since_best);
    return n > 0 ? (size_t)n : 0;
}

/* The test record's text back into r, checked (it is under the header's
 * checksum, so a bad one was written so). */
static st_status test_record_parse(const char *text, long iteration, const char *path,
                                   st_test_record *r, st_error *err)
{
    int used = -1;
    if (sscanf(text, "test_phases=%ld best_accuracy=%lf best_iteration=%ld since_best=%ld%n",
               &r->phases, &r->best_accuracy, &r->best_iteration, &r->since_best,
               &used) != 4 || used < 0 || text[used] != '\0' || r->phases < 1 ||
        !(r->best_accuracy >= 0.0 && r->best_accuracy <= 1.0) || r->best_iteration < 0 ||
        r->best_iteration > iteration || r->since_best < 0 || r->since_best >= r->phases)
        return st_fail(err, ST_EINPUT, "%s: corrupt snapshot header (test record '%.80s')",
                       path, text);
    return ST_OK;
}

/* The run record of meta into buf [size] (see the layout); its length, 0
 * when there is none (one process, fp32). */
static size_t run_record_text(const st_snapshot_meta *meta, char *buf, size_t size)
{
    int len = 0;
    buf[0] = '\0';
    assert(meta->mp_group <= 1 || meta->ranks > 1); /* groups of ranks need ranks */
    if (meta->ranks > 1)
        len = snprintf(buf, size, "ranks=%d", meta->ranks);
    if (meta->mp_group > 1)
        len += snprintf(buf + len, size - (size_t)len, " mp_group=%d", meta->mp_group);
    if (meta->precision != ST_PRECISION_FP32)
        len += snprintf(buf + len, size - (size_t)len, "%sprecision=%s", len ? " " : "",
                        st_precision_names[meta->precision]);
    assert(len >= 0 && (size_t)len < size);
    return (size_t)len;
}

/* The run record's text (NUL-ended) into *ranks, *mp_group and *precision;
 * 0 if it is not one (an unknown key, a rank count below 2, a group size
 * below 2 or not dividing the ranks or without them, a precision unknown or
 * fp32, a key out of order or twice, an empty record). */
static int run_record_parse(const char *text, int *ranks, int *mp_group,
                            st_precision *precision)
{
    const char *p = text;
    int used = -1, have_ranks = 0;
    if (sscanf(p, "ranks=%d%n", ranks, &used) == 1 && used > 0) {
        if (*ranks < 2)
            return 0;
        have_ranks = 1;
        p += used;
        if (*p && (*p != ' ' || !p[1]))
            return 0;
        p += *p == ' ';
    }
    used = -1;
    if (sscanf(p, "mp_group=%d%n", mp_group, &used) == 1 && used > 0) {
        if (!have_ranks || *mp_group < 2 || *ranks % *mp_group != 0)
            return 0;
        p += used;
        if (*p && (*p != ' ' || !p[1]))
            return 0;
        p += *p == ' ';
    }
    if (*p && strncmp(p, "precision=", 10) == 0) {
        p += 10;
        for (int k = ST_PRECISION_FP32 + 1; st_precision_names[k]; k++)
            if (strcmp(p, st_precision_names[k]) == 0) {
                *precision = (st_precision)k;
                return 1;
            }
        return 0;
    }
    return !*p && p != text;
}

st_status st_snapshot_save(const char *path, const st_net *net, const float *weights,
                           const float *state, const st_snapshot_meta *meta, st_error *err)
{
    size_t count = net->params.count;
    char tests[160];
    size_t tests_len = meta->tests.phases > 0 ? test_record_text(&meta->tests, tests,
                                                                 sizeof tests) : 0;
    char ranks[96]; /* the run record */
    size_t ranks_len = run_record_text(meta, ranks, sizeof ranks);
    size_t cfg_settings = meta->settings ? strlen(meta->settings) : 0;
    size_t choices = meta->choices ? strlen(meta->choices) : 0;
    size_t settings = cfg_settings + (meta->choices || tests_len || ranks_len ? 1 + choices : 0) +
                      (tests_len || ranks_len ? 1 + tests_len : 0) +
                      (ranks_len ? 1 + ranks_len : 0);
    if (settings > ST_SNAPSHOT_SETTINGS_MAX)
        return st_fail(err, ST_EINPUT, "%s: not saved: the cfg's settings and the kernel choices take %zu bytes, "
                       "more than a snapshot holds (%u)", path, settings,
                       ST_SNAPSHOT_SETTINGS_MAX);
    char where[256];
    if (!arenas_finite(net, weights, state, meta->state_planes, where, sizeof where))
        return st_fail(err, ST_EDIVERGED, "%s: not saved: %s: expected finite weights and "
                       "solver state", path, where);
    snapshot_out o = {.path = path, .weights = weights, .state = state};
    o.settings = st_calloc(settings + 1, 1, "a snapshot's settings", err);
    if (!o.settings)
        return ST_ENOMEM;
    if (cfg_settings)
        memcpy(o.settings, meta->settings, cfg_settings);
    if (choices)
        memcpy(o.settings + cfg_settings + 1, meta->choices, choices);
    if (tests_len) /* the NULs before it are calloc's */
        memcpy(o.settings + cfg_settings + 1 + choices + 1, tests, tests_len);
    if (ranks_len)
        memcpy(o.settings + cfg_settings + 1 + choices + 1 + tests_len + 1, ranks, ranks_len);
    memcpy(o.h.magic, ST_SNAPSHOT_MAGIC, ST_SNAPSHOT_MAGIC_BYTES);
    o.h.version = ST_SNAPSHOT_VERSION;
    o.h.header_bytes = sizeof o.h;
    o.h.net_hash = st_net_hash(net);
    o.h.iteration = (uint64_t)meta->iteration;
    o.h.count = count;
    o.h.seed = meta->seed;
    o.h.batch = (uint32_t)meta->batch;
    o.h.workers = (uint32_t)meta->workers;
    o.h.state_planes = (uint32_t)meta->state_planes;
    o.h.settings_bytes = (uint32_t)settings;
    memcpy(o.h.solver, meta->solver, sizeof o.h.solver);
    o.h.solver[sizeof o.h.solver - 1] = '\0';
    uint32_t crc = crc_add((uint32_t)crc32(0L, Z_NULL, 0), weights, count * sizeof(float));
    o.h.crc = crc_add(crc, state, count * (size_t)meta->state_planes * sizeof(float));
    o.h.header_crc = header_crc(&o.h, o.settings);
    st_status st = st_write_atomic(path, write_snapshot, &o, err);
    free(o.settings);
    return st;
}

/* Read n floats into dst (or, dst NULL, through a scratch chunk), adding
 * them to *crc. */
static int read_floats(FILE *f, float *dst, size_t n, uint32_t *crc)
{
    float scratch[CHUNK];
    while (n) {
        size_t k = dst ? n : (n < CHUNK ? n : CHUNK);
        float *to = dst ? dst : scratch;
        if (fread(to, sizeof(float), k, f) != k)
            return -1;
        *crc = crc_add(*crc, to, k * sizeof(float));
        n -= k;
        if (dst)
            dst += k;
    }
    return 0;
}

/* The fixed header and the settings (malloc'd into *settings, NUL-ended),
 * both checked against the header's checksum. Fields are looked at only
 * after that, but the version and the settings length, which say what to
 * read; the length must fit the file. */
static st_status read_header(FILE *f, const char *path, snapshot_header *h, char **settings,
                             st_error *err)
{
    struct stat sb;
    *settings = NULL;
    if (fread(h, sizeof *h, 1, f) != 1)
        return st_fail(err, ST_EINPUT, "%s: truncated snapshot header", path);
    if (memcmp(h->magic, ST_SNAPSHOT_MAGIC, ST_SNAPSHOT_MAGIC_BYTES) != 0)
        return st_fail(err, ST_EINPUT, "%s: not a singletrain snapshot (bad magic)", path);
    if (h->version != ST_SNAPSHOT_VERSION || h->header_bytes != sizeof *h)
        return st_fail(err, ST_EINPUT, "%s: snapshot format version %u, expected %u%s", path,
                       h->version, ST_SNAPSHOT_VERSION,
                       h->version < ST_SNAPSHOT_VERSION ? " (written by an older singletrain)"
                                                        : "");
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
        return st_fail(err, ST_EINPUT, "%s: not a regular file: expected a snapshot", path);
    if (h->settings_bytes > ST_SNAPSHOT_SETTINGS_MAX)
        return st_fail(err, ST_EINPUT, "%s: corrupt snapshot header (settings of %u bytes)",
                       path, h->settings_bytes);
    if ((unsigned long long)h->settings_bytes > (unsigned long long)sb.st_size - sizeof *h)
        return st_fail(err, ST_EINPUT, "%s: truncated snapshot (or a corrupt header): its "
                       "settings of %u bytes go past the end of the file", path,
                       h->settings_bytes);
    *settings = st_calloc((size_t)h->settings_bytes + 1, 1, "a snapshot's settings", err);
    if (!*settings)
        return ST_ENOMEM;
    if (fread(*settings, 1, h->settings_bytes, f) != h->settings_bytes)
        return st_fail(err, ST_EINPUT, "%s: truncated snapshot header", path);
    if (header_crc(h, *settings) != h->header_crc)
        return st_fail(err, ST_EINPUT, "%s: snapshot header checksum mismatch: the file is "
                       "corrupt", path);
    return ST_OK;
}

/* The header's fields against net and this run's planes (state NULL: the
 * weights alone are read). */
static st_status check_header(const snapshot_header *h, const st_net *net, const float *state,
                              int planes, const char *path, st_error *err)
{
    if (h->net_hash != st_net_hash(net) || h->count != net->params.count)
        return st_fail(err, ST_EINPUT, "%s: snapshot of a different network (hash %016llx, "
                       "this network %016llx)", path, (unsigned long long)h->net_hash,
                       (unsigned long long)st_net_hash(net));
    if (h->solver[sizeof h->solver - 1] != '\0' || h->state_planes > 16 ||
        h->iteration > (uint64_t)LONG_MAX || h->batch == 0 || h->workers == 0)
        return st_fail(err, ST_EINPUT, "%s: corrupt snapshot header", path);
    if (state && (int)h->state_planes != planes)
        return st_fail(err, ST_EINPUT, "%s: the snapshot holds %u plane%s of %s solver state; "
                       "this run's solver keeps %d: resume with the snapshot's solver", path,
                       h->state_planes, h->state_planes == 1 ? "" : "s", h->solver, planes);
    return ST_OK;
}

/* Open, check the header against net, read the weights and the state (into
 * state, or only through the checksum when state is NULL). *settings (NULL
 * when not wanted) gets the settings, malloc'd. */
static st_status load(const char *path, const st_net *net, float *weights, float *state,
                      int planes, snapshot_header *h, char **settings, st_error *err)
{
    FILE *f;
    st_status st = st_fopen_input(path, "rb", "snapshot", &f, err);
    if (st != ST_OK)
        return st;
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    char *text = NULL;
    st = read_header(f, path, h, &text, err);
    if (st == ST_OK)
        st = check_header(h, net, state, planes, path, err);
    if (st == ST_OK && (read_floats(f, weights, (size_t)h->count, &crc) != 0 ||
                        read_floats(f, state, (size_t)h->count * h->state_planes, &crc) != 0))
        st = st_fail(err, ST_EINPUT, "%s: truncated snapshot: expected %llu floats", path,
                     (unsigned long long)(h->count * (1 + h->state_planes)));
    if (st == ST_OK && fgetc(f) != EOF)
        st = st_fail(err, ST_EINPUT, "%s: trailing bytes after the snapshot", path);
    if (st == ST_OK && crc != h->crc)
        st = st_fail(err, ST_EINPUT, "%s: snapshot checksum mismatch: the file is corrupt",
                     path);
    char where[256];
    if (st == ST_OK && !arenas_finite(net, weights, state, planes, where, sizeof where))
        st = st_fail(err, ST_EINPUT, "%s: %s: expected finite weights%s (a snapshot of a run "
                     "that diverged?)", path, where, state ? " and solver state" : "");
    if (st == ST_OK && !variances_valid(net, weights, where, sizeof where))
        st = st_fail(err, ST_EINPUT, "%s: %s: expected a running variance of at least 0",
                     path, where);
    fclose(f);
    if (st == ST_OK && settings)
        *settings = text;
    else
        free(text);
    return st;
}

st_status st_snapshot_load(const char *path, const st_net *net, float *weights,
                           long *iteration, st_error *err)
{
    snapshot_header h;
    st_status st = load(path, net, weights, NULL, 0, &h, NULL, err);
    if (st == ST_OK && iteration)
        *iteration = (long)h.iteration;
    return st;
}

st_status st_snapshot_resume(const char *path, const st_net *net, float *weights, float *state,
                             int planes, st_snapshot_meta *meta, st_error *err)
{
    snapshot_header h;
    char *settings = NULL;
    st_status st = load(path, net, weights, state, planes, &h, &settings, err);
    if (st != ST_OK)
        return st;
    /* the sections after the cfg's settings, each after a NUL (see the layout) */
    size_t cfg_settings = strlen(settings);
    char *choices = cfg_settings < h.settings_bytes ? settings + cfg_settings + 1 : NULL;
    size_t choices_len = choices ? strlen(choices) : 0;
    const char *tests = choices && cfg_settings + 1 + choices_len < h.settings_bytes
                            ? choices + choices_len + 1 : NULL;
    size_t tests_len = tests ? strlen(tests) : 0;
    const char *ranks_text = tests && (size_t)(tests - settings) + tests_len < h.settings_bytes
                                 ? tests + tests_len + 1 : NULL;
    st_test_record record = {0};
    int ranks = 1, mp_group = 1;
    st_precision precision = ST_PRECISION_FP32;
    if (tests && (tests_len || !ranks_text))
        st = test_record_parse(tests, (long)h.iteration, path, &record, err);
    if (st == ST_OK && ranks_text && !run_record_parse(ranks_text, &ranks, &mp_group, &precision))
        st = st_fail(err, ST_EINPUT, "%s: corrupt snapshot header (run record '%.40s': "
                     "expected ranks=R with R > 1, mp_group=G with G > 1 dividing R, "
                     "precision=bf16, those present in that order)", path, ranks_text);
    if (st != ST_OK) {
        free(settings);
        return st;
    }
    meta->iteration = (long)h.iteration;
    meta->seed = h.seed;
    meta->batch = (int)h.batch;
    meta->workers = (int)h.workers;
    meta->state_planes = (int)h.state_planes;
    memcpy(meta->solver, h.solver, sizeof meta->solver);
    meta->settings = settings;
    meta->choices = choices_len ? choices : NULL;
    meta->tests = record;
    meta->ranks = ranks;
    meta->mp_group = mp_group;
    meta->precision = precision;
    return ST_OK;
}
