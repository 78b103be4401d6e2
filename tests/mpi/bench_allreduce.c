/* Benchmark driver for the all-reduce algorithms: times each algorithm on
 * each message size and prints, on rank 0, one line per pair: the median
 * and fastest of the repetitions' times (a repetition's time is the slowest
 * rank's), the bandwidth that median gives (message bytes / time), and the
 * bytes all ranks sent and sent across supernodes in one all-reduce.
 * scripts/bench-allreduce.sh runs it for several P.
 *
 * usage: mpirun -np P bench_allreduce [--allreduce NAME[,NAME...]] [--sizes SIZE[,SIZE...]]
 *            [--reps N] [--supernode-size Q] [--sim-cross-bandwidth F] [--idle-sleep-us US]
 * SIZE is in bytes with an optional K, M or G (powers of 1024), rounded
 * down to whole floats. Exit codes: 0 ok, 2 bad usage, 1 run-time failure. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/allreduce.h"

#define MAX_SIZES 32
#define MAX_ALGOS 16
/* Messages under SMALL_BYTES are cheap and noisy: SMALL_REPS_FACTOR times
 * the repetitions. */
#define SMALL_BYTES (1u << 20)
#define SMALL_REPS_FACTOR 5

typedef struct bench_options {
    const st_allreduce_algo *algos[MAX_ALGOS];
    size_t n_algos;
    size_t sizes[MAX_SIZES]; /* message sizes in bytes */
    size_t n_sizes;
    int reps;
    int supernode_size;
    double sim_cross_bandwidth;
    int idle_sleep_us;
    int help; /* -h or --help: print the usage and do nothing else */
} bench_options;

static const char usage[] =
    "usage: mpirun -np P bench_allreduce [--allreduce NAME[,NAME...]] [--sizes SIZE[,SIZE...]]\n"
    "           [--reps N] [--supernode-size Q] [--sim-cross-bandwidth F] [--idle-sleep-us US]\n"
    "  --allreduce             algorithms to time (default: all)\n"
    "  --sizes                 message sizes in bytes, K/M/G = 2^10/2^20/2^30\n"
    "                          (default: 4K,64K,1M,16M,64M)\n"
    "  --reps                  timed repetitions of messages of 1 MB and more, after one\n"
    "                          warm-up (default 5); smaller ones get 5 times as many\n"
    "  --supernode-size        Q consecutive ranks per supernode (default 0: none)\n"
    "  --sim-cross-bandwidth   F in (0,1): pace crossing messages to F of the bandwidth\n"
    "  --idle-sleep-us         US > 0: ranks waiting for messages poll and sleep US\n"
    "                          microseconds (for more ranks than cores; default 0: spin)\n";

/* "64M" -> 67108864; 0 when text is not a size. */
static size_t parse_size(const char *text)
{
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || text[0] == '-')
        return 0;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (*end != '\0' || value > (SIZE_MAX >> shift))
        return 0;
    return (size_t)value << shift;
}

static st_status parse_sizes(bench_options *o, const char *list, st_error *err)
{
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", list);
    o->n_sizes = 0;
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        size_t bytes = parse_size(item);
        if (bytes < sizeof(float))
            return st_fail(err, ST_EUSAGE, "--sizes: expected sizes of at least 4 bytes like "
                           "4K or 64M, got '%s'", item);
        if (o->n_sizes == MAX_SIZES)
            return st_fail(err, ST_EUSAGE, "--sizes: at most %d sizes", MAX_SIZES);
        o->sizes[o->n_sizes++] = bytes;
    }
    if (o->n_sizes == 0)
        return st_fail(err, ST_EUSAGE, "--sizes: expected a list like 4K,64M, got '%s'", list);
    return ST_OK;
}

static st_status parse_algos(bench_options *o, const char *list, st_error *err)
{
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", list);
    o->n_algos = 0;
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        if (o->n_algos == MAX_ALGOS)
            return st_fail(err, ST_EUSAGE, "--allreduce: at most %d algorithms", MAX_ALGOS);
        st_status st = st_allreduce_find(item, &o->algos[o->n_algos], err);
        if (st != ST_OK)
            return st;
        o->n_algos++;
    }
    if (o->n_algos == 0)
        return st_fail(err, ST_EUSAGE, "--allreduce: expected a list of names, got '%s'", list);
    return ST_OK;
}

static st_status parse_int(const char *option, const char *text, int least, int *out,
                           st_error *err)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || value < least || value > 1000000)
        return st_fail(err, ST_EUSAGE, "%s: expected an integer from %d to 1000000, got '%s'",
                       option, least, text);
    *out = (int)value;
    return ST_OK;
}

static st_status parse_options(bench_options *o, int argc, char **argv, st_error *err)
{
    memset(o, 0, sizeof *o);
    o->reps = 5;
    for (size_t a = 0; a < st_allreduce_count; a++)
        o->algos[o->n_algos++] = &st_allreduce_algos[a];
    st_status st = parse_sizes(o, "4K,64K,1M,16M,64M", err);
    for (int i = 1; i < argc && st == ST_OK; i += 2) {
        const char *option = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(option, "-h") == 0 || strcmp(option, "--help") == 0) {
            o->help = 1;
            return ST_OK;
        }
        if (!value)
            return st_fail(err, ST_EUSAGE, "option %s: expected a value after it", option);
        if (strcmp(option, "--allreduce") == 0) {
            st = parse_algos(o, value, err);
        } else if (strcmp(option, "--sizes") == 0) {
            st = parse_sizes(o, value, err);
        } else if (strcmp(option, "--reps") == 0) {
            st = parse_int("--reps", value, 1, &o->reps, err);
        } else if (strcmp(option, "--supernode-size") == 0) {
            st = parse_int("--supernode-size", value, 0, &o->supernode_size, err);
        } else if (strcmp(option, "--idle-sleep-us") == 0) {
            st = parse_int("--idle-sleep-us", value, 0, &o->idle_sleep_us, err);
        } else if (strcmp(option, "--sim-cross-bandwidth") == 0) {
            char *end = NULL;
            o->sim_cross_bandwidth = strtod(value, &end);
            if (end == value || *end != '\0')
                st = st_fail(err, ST_EUSAGE, "--sim-cross-bandwidth: expected a fraction in "
                             "(0, 1], or 0 for off, got '%s'", value);
        } else {
            st = st_fail(err, ST_EUSAGE, "unknown option '%s'\n%s", option, usage);
        }
    }
    return st;
}

static void barrier(const st_comm *c)
{
    MPI_Request request;
    MPI_Ibarrier(c->comm, &request);
    st_comm_wait(c, 1, &request, 0); /* polled like the algorithms */
}

/* The slowest rank's time. */
static double slowest_of(const st_comm *c, double here)
{
    double slowest = 0;
    MPI_Request request;
    MPI_Iallreduce(&here, &slowest, 1, MPI_DOUBLE, MPI_MAX, c->comm, &request);
    st_comm_wait(c, 1, &request, 0); /* polled like the algorithms */
    return slowest;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times one algorithm on n floats; prints its line on rank 0. */
static st_status bench_one(const st_comm *c, const st_allreduce_algo *algo, float *buf,
                           const float *input, size_t n, int reps, double *times,
                           st_error *err)
{
    st_allreduce_stats stats, first;
    memset(&stats, 0, sizeof stats);
    memset(&first, 0, sizeof first);
    for (int rep = -1; rep < reps; rep++) {
        memcpy(buf, input, n * sizeof *buf);
        barrier(c);
        st_allreduce_stats *counted = rep == 0 ? &first : &stats;
        double t0 = MPI_Wtime();
        st_status st = algo->run(buf, n, c, counted, err);
        double here = MPI_Wtime() - t0;
        if (st != ST_OK)
            return st;
        double slowest = slowest_of(c, here);
        if (rep >= 0)
            times[rep] = slowest;
    }
    uint64_t mine[3] = {first.bytes_sent, first.bytes_crossing, first.messages}, all[3];
    double paced = 0;
    MPI_Reduce(mine, all, 3, MPI_UINT64_T, MPI_SUM, 0, c->comm);
    MPI_Reduce(&first.paced_seconds, &paced, 1, MPI_DOUBLE, MPI_MAX, 0, c->comm);
    if (c->rank != 0)
        return ST_OK;
    qsort(times, (size_t)reps, sizeof *times, compare_doubles);
    double median = reps % 2 ? times[reps / 2] : (times[reps / 2 - 1] + times[reps / 2]) / 2;
    size_t bytes = n * sizeof(float);
    printf("%-3d %-3d %-5.2f %-14s %10zu %11.3f %11.3f %9.3f", c->size, c->supernode_size,
           c->sim_cross_bandwidth, algo->name, bytes, median * 1e3, times[0] * 1e3,
           (double)bytes / median / 1e9);
    if (algo->run == st_allreduce_mpi)
        printf(" %12s %12s %8s %9s\n", "-", "-", "-", "-");
    else
        printf(" %12" PRIu64 " %12" PRIu64 " %8" PRIu64 " %9.3f\n", all[0], all[1], all[2],
               paced * 1e3);
    fflush(stdout);
    return ST_OK;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    st_error err = {ST_OK, ""};
    bench_options o;
    st_comm c;
    float *input = NULL, *buf = NULL, *scratch = NULL;
    double *times = NULL;
    memset(&c, 0, sizeof c);
    st_status st = parse_options(&o, argc, argv, &err);
    if (st == ST_OK && o.help) {
        if (rank == 0)
            fputs(usage, stdout);
        goto done;
    }
    if (st == ST_OK)
        st = st_comm_init(&c, MPI_COMM_WORLD, o.supernode_size, o.sim_cross_bandwidth, &err);
    if (st != ST_OK)
        goto done;
    c.idle_sleep_us = o.idle_sleep_us;
    size_t most = 0;
    for (size_t s = 0; s < o.n_sizes; s++)
        most = o.sizes[s] / sizeof(float) > most ? o.sizes[s] / sizeof(float) : most;
    input = malloc(most * sizeof *input);
    buf = malloc(most * sizeof *buf);
    scratch = malloc(st_allreduce_scratch_count(most) * sizeof *scratch);
    times = malloc((size_t)(SMALL_REPS_FACTOR * o.reps) * sizeof *times);
    if (!input || !buf || !scratch || !times) {
        st = st_fail(&err, ST_ENOMEM, "out of memory for messages of %zu floats", most);
        goto done;
    }
    for (size_t i = 0; i < most; i++)
        input[i] = (float)((i * 7 + (size_t)rank * 13) % 1000) / 1000.0f;
    c.scratch = scratch;
    c.scratch_count = st_allreduce_scratch_count(most);
    if (rank == 0) {
        printf("# P=%d, supernodes of %d ranks, crossing bandwidth %s", c.size,
               c.supernode_size, c.sim_cross_bandwidth > 0 && c.sim_cross_bandwidth < 1
               ? "paced" : "not paced");
        if (c.sim_cross_bandwidth > 0 && c.sim_cross_bandwidth < 1)
            printf(" to F=%.2f (beta inside %.3f ns/B)", c.sim_cross_bandwidth,
                   c.inside_seconds_per_byte * 1e9);
        printf("; %s; %d repetitions (%d under %u KB), times of the slowest rank\n",
               c.idle_sleep_us > 0 ? "waiting ranks sleep" : "waiting ranks spin", o.reps,
               SMALL_REPS_FACTOR * o.reps, SMALL_BYTES >> 10);
        printf("%-3s %-3s %-5s %-14s %10s %11s %11s %9s %12s %12s %8s %9s\n", "P", "Q", "F",
               "algorithm", "bytes", "median_ms", "min_ms", "GB/s", "sent_all", "crossing_all",
               "messages", "paced_ms");
    }
    for (size_t a = 0; a < o.n_algos && st == ST_OK; a++)
        for (size_t s = 0; s < o.n_sizes && st == ST_OK; s++) {
            int reps = o.sizes[s] < SMALL_BYTES ? SMALL_REPS_FACTOR * o.reps : o.reps;
            st = bench_one(&c, o.algos[a], buf, input, o.sizes[s] / sizeof(float), reps, times,
                           &err);
        }
done:
    if (st != ST_OK && (rank == 0 || st != ST_EUSAGE))
        fprintf(stderr, "bench_allreduce: %s\n", err.msg);
    free(input);
    free(buf);
    free(scratch);
    free(times);
    if (st != ST_OK && st != ST_EUSAGE)
        MPI_Abort(MPI_COMM_WORLD, st_exit_code(st));
    st_comm_free(&c);
    MPI_Finalize();
    return st_exit_code(st);
}
