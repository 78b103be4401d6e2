/* singletrain read SRC: read random mini-batches of any source the way
 * training does (the prefetcher's readers, positional reads on a store,
 * stb_image decoding for image lists) and report the throughput: records
 * per second, megabytes per second and microseconds per record. The
 * benchmark of the input pipeline, and a quick check of a dataset. Its
 * source options and their rules are pack's (source_opts.h). */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "data/batchq.h"
#include "base/clock.h"
#include "commands.h"
#include "data/data.h"
#include "options.h"
#include "data/prefetch.h"
#include "source_opts.h"

typedef struct read_opts {
    st_source_cli src;
    int io_threads, batch, no_verify, help;
    long batches;
    uint64_t seed;
} read_opts;

#define OPT(field) offsetof(read_opts, field)

static const st_option read_options[] = {
    ST_SOURCE_OPTIONS(read_opts, src),
    {"no-verify", 0, NULL, "Source", "stores: skip the block checksums at open", ST_OPT_FLAG,
     OPT(no_verify), 0, 0},
    {"io-threads", 0, "N", "Reading", "reader threads (default 1)", ST_OPT_INT, OPT(io_threads),
     1, 256},
    {"batch", 'b', "N", "Reading", "records per batch (default 64)", ST_OPT_INT, OPT(batch), 1,
     1 << 20},
    {"batches", 0, "N", "Reading", "batches to read (default 100)", ST_OPT_LONG, OPT(batches),
     1, 1L << 40},
    {"seed", 0, "N", "Reading", "seed of the random order (default 1)", ST_OPT_U64, OPT(seed),
     0, 0},
    {"help", 'h', NULL, "Other", "this help", ST_OPT_FLAG, OPT(help), 0, 0},
};

#define N_READ_OPTIONS ((int)(sizeof read_options / sizeof read_options[0]))

static const char *const read_groups[] = {"Source", "Image lists", "Reading", "Other", NULL};

static st_status run_read(const read_opts *o, const char *path, st_error *err)
{
    st_source_spec spec = {.path = path, .labels = o->src.labels, .names = o->src.names,
                           .verify = !o->no_verify};
    long skipped = 0;
    int w, h;
    st_log log = st_log_default(ST_LOG_INFO);
    st_status st = st_source_cli_check(&o->src, &w, &h, err);
    if (st == ST_OK)
        st = st_source_cli_spec(&o->src, w, h, 0, &skipped, &spec, &log, err);
    st_source *src = NULL;
    double t_open = st_now();
    if (st == ST_OK)
        st = st_source_open(&src, &spec, err);
    if (st != ST_OK)
        return st;
    t_open = st_now() - t_open;
    st_transform t = {.input = src->shape, .scale = 1.0f / 255.0f, .seed = o->seed};
    st_batchq q = {0};
    st_prefetch *p = NULL;
    int batch = o->batch < src->count ? o->batch : (int)src->count;
    st_prefetch_opts po = {.source = src, .transform = &t, .batch = batch, .seed = o->seed,
                           .io_threads = o->io_threads, .q = &q};
    st = st_batchq_init(&q, 1, batch, st_shape_count(src->shape), err);
    if (st == ST_OK)
        st = st_prefetch_create(&p, &po, err);
    double t0 = st_now();
    long records = 0;
    for (long i = 0; i < o->batches && st == ST_OK; i++) {
        st = st_prefetch_fill(p, i, &q.slot[0], err);
        records += q.slot[0].n;
    }
    double dt = st_now() - t0;
    if (st == ST_OK) {
        double mb = (double)records * (double)st_record_bytes(src) / 1e6;
        printf("%s: %ld records of %d x %d x %d, opened in %.3f s\n", src->name, src->count,
               src->shape.w, src->shape.h, src->shape.c, t_open);
        printf("read %ld records in %ld random batches of %d with %d reader%s: %.0f records/s, "
               "%.1f MB/s, %.1f us per record\n", records, o->batches, batch, o->io_threads,
               o->io_threads > 1 ? "s" : "", (double)records / dt, mb / dt,
               1e6 * dt / (double)records);
        if (skipped)
            printf("%ld unreadable images skipped\n", skipped);
    }
    st_error ignored = {0};
    st_prefetch_stop(p, &ignored);
    st_batchq_free(&q);
    st_source_close(src);
    return st;
}

int st_cmd_read(int argc, char **argv)
{
    read_opts o = {.io_threads = 1, .batch = 64, .batches = 100, .seed = 1};
    const char *pos[4];
    int n_pos = 0;
    st_error err = {0};
    st_status st = st_options_parse(read_options, N_READ_OPTIONS, &o, argc, argv, pos, 4,
                                    &n_pos, &err);
    if (st == ST_OK && o.help) {
        st_options_help(stdout, "usage: singletrain read SRC [options]\n\nReads random batches "
                        "of SRC (a packed store, IDX images with --labels, CIFAR-10 .bin "
                        "batches, or an image list with --image-size) as training does and "
                        "reports the throughput.\n", read_options, N_READ_OPTIONS, read_groups);
        return 0;
    }
    if (st == ST_OK && n_pos != 1)
        st = st_fail(&err, ST_EUSAGE, "expected one source, got %d arguments (usage: "
                     "singletrain read SRC [options])", n_pos);
    if (st == ST_OK)
        st = run_read(&o, pos[0], &err);
    return st_cmd_exit_code("read", st, &err);
}
