/* MPI test of the all-reduce algorithms (include/dist/allreduce.h), run as
 * `mpirun -np P test_allreduce` for several P. Rank 0 prints one ok/FAIL
 * line per check (ranks that fail a check print the details on stderr
 * first); the exit code is 1 when any check failed on any rank.
 *
 * For every algorithm and n in {1, 7, 4096, 1000003} floats, with
 * supernodes of 2 ranks, on two inputs made from a hash of (seed, rank,
 * index) so every rank can recompute every other rank's values:
 * - exact: multiples of 1/16 in [-64, 64]. Every partial sum of up to 2^14
 *   of them is a float, so any summation order gives the exact sum; the
 *   result must equal the sum each rank computes in integers from all ranks'
 *   inputs.
 * - random: uniform in [-1, 1) times 2^-4..2^4. The result must be within
 *   2 gamma(P-1) sum_r |x_r[i]| of MPI_Allreduce(MPI_SUM) on the same input,
 *   gamma(k) = k u / (1 - k u), u = FLT_EPSILON / 2: any order of summing P
 *   floats is within gamma(P-1) sum |x| of the exact sum (Higham, Accuracy
 *   and Stability of Numerical Algorithms, 2002, 4.2), so two such sums are
 *   within twice that of each other. sum |x| is computed in double.
 * Each case also runs a second time and must give the same bits, and every
 * rank must end with the same bits as rank 0.
 *
 * Then: the ranks' parts (st_allreduce_part); every algorithm's
 * reduce-scatter and all-gather halves (check_halves: exact sums in this
 * rank's part, the parts gathered everywhere, the two in a row giving the
 * all-reduce's bits); the name lookup and its error, st_comm_init's
 * argument errors, the caller's scratch and sum hook (the hook must add
 * (P-1) n floats over all ranks: every element needs P-1 additions and
 * none is done twice; butterfly adds the whole buffer on every rank at
 * every step, see hook_floats), paced
 * crossing messages (F = 0.25), waiting by polling and sleeping
 * (idle_sleep_us), and, when P is a power of two, the bytes
 * sent and sent across supernodes for Q = 2 and Q = 4 against formulas
 * computed here (see check_crossing). Then onesided's windows: many calls
 * of several sizes in a row on one window (0, odd sizes, more segments
 * than a ring holds) giving binomial's bits, and a rank that misses a
 * call failing the others after the timeout (check_onesided_sequence,
 * check_onesided_timeout). */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/allreduce.h"

#define SEED_EXACT 11u
#define SEED_RANDOM 23u
/* n for the crossing-byte checks: a multiple of every P tested. */
#define CROSSING_N 8192

typedef struct tally {
    MPI_Comm comm;
    int rank, size;
    int passed, failed;
} tally;

/* The test's own collectives (the reports, the expected sums, rank 0's
 * results), nonblocking and polled with sched_yield: with more ranks than
 * cores a blocking MPI call spins for a whole time slice while the ranks
 * it waits for cannot run (8 ranks on 2 cores: 26 ms per MPI_Allreduce of
 * one int, 0.7 ms polled so). The algorithms under test run as they are. */
static void wait_yielding(MPI_Request *request)
{
    int done = 0;
    while (MPI_Test(request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
        sched_yield();
}

static void allreduce_yielding(const void *send, void *recv, int count, MPI_Datatype type,
                               MPI_Comm comm)
{
    MPI_Request request;
    MPI_Iallreduce(send, recv, count, type, MPI_SUM, comm, &request);
    wait_yielding(&request);
}

static void bcast_yielding(void *buf, int count, MPI_Datatype type, MPI_Comm comm)
{
    MPI_Request request;
    MPI_Ibcast(buf, count, type, 0, comm, &request);
    wait_yielding(&request);
}

typedef enum input_kind { INPUT_EXACT, INPUT_RANDOM } input_kind;

/* Collective. Every rank says whether the check held here; rank 0 prints
 * "ok NAME" when it held everywhere, else "FAIL NAME (on K ranks)". Returns
 * whether it held everywhere. */
static int report(tally *t, int held_here, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int report(tally *t, int held_here, const char *fmt, ...)
{
    int failing_here = !held_here, failing = 0;
    allreduce_yielding(&failing_here, &failing, 1, MPI_INT, t->comm);
    if (t->rank == 0) {
        char name[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(name, sizeof name, fmt, ap);
        va_end(ap);
        if (failing)
            printf("FAIL %s (on %d of %d ranks)\n", name, failing, t->size);
        else
            printf("ok   %s\n", name);
        fflush(stdout);
    }
    if (failing)
        t->failed++;
    else
        t->passed++;
    return !failing;
}

/* A detail of a failure on this rank, on stderr. */
static void detail(const tally *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void detail(const tally *t, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "     rank %d: %s\n", t->rank, line);
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

static uint64_t input_hash(unsigned seed, int rank, size_t i)
{
    return mix64(mix64(((uint64_t)seed << 32) ^ (uint64_t)rank) ^ (uint64_t)i);
}

/* The exact input in sixteenths: an integer in [-1024, 1024]. */
static int exact_sixteenths(int rank, size_t i)
{
    return (int)(input_hash(SEED_EXACT, rank, i) % 2049) - 1024;
}

static float input_value(input_kind kind, int rank, size_t i)
{
    if (kind == INPUT_EXACT)
        return (float)exact_sixteenths(rank, i) / 16.0f;
    uint64_t h = input_hash(SEED_RANDOM, rank, i);
    float unit = (float)(h >> 40) / (float)(1u << 24) * 2.0f - 1.0f;
    return ldexpf(unit, (int)(h % 9) - 4);
}

static void fill_input(input_kind kind, int rank, float *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = input_value(kind, rank, i);
}

/* Everything one n needs: this rank's inputs and the expected results. */
typedef struct expected {
    size_t n;
    float *exact_input, *random_input; /* [n] this rank's */
    float *exact_sum;                  /* [n] computed in integers from every rank's input */
    float *mpi_sum;                    /* [n] MPI_Allreduce of random_input */
    float *tolerance;                  /* [n] allowed |result - mpi_sum| */
} expected;

static void expected_free(expected *e)
{
    free(e->exact_input);
    free(e->random_input);
    free(e->exact_sum);
    free(e->mpi_sum);
    free(e->tolerance);
    memset(e, 0, sizeof *e);
}

static void expected_init(expected *e, const tally *t, size_t n)
{
    memset(e, 0, sizeof *e);
    e->n = n;
    e->exact_input = malloc(n * sizeof(float));
    e->random_input = malloc(n * sizeof(float));
    e->exact_sum = malloc(n * sizeof(float));
    e->mpi_sum = malloc(n * sizeof(float));
    e->tolerance = malloc(n * sizeof(float));
    double *abs_in = malloc(n * sizeof(double)), *abs_sum = malloc(n * sizeof(double));
    if (!e->exact_input || !e->random_input || !e->exact_sum || !e->mpi_sum || !e->tolerance ||
        !abs_in || !abs_sum) {
        fprintf(stderr, "test_allreduce: rank %d: out of memory for n = %zu\n", t->rank, n);
        MPI_Abort(t->comm, 1);
    }
    fill_input(INPUT_EXACT, t->rank, e->exact_input, n);
    fill_input(INPUT_RANDOM, t->rank, e->random_input, n);
    for (size_t i = 0; i < n; i++) {
        long sixteenths = 0;
        for (int r = 0; r < t->size; r++)
            sixteenths += exact_sixteenths(r, i);
        e->exact_sum[i] = (float)sixteenths / 16.0f;
        abs_in[i] = fabs((double)e->random_input[i]);
    }
    MPI_Allreduce(e->random_input, e->mpi_sum, (int)n, MPI_FLOAT, MPI_SUM, t->comm);
    allreduce_yielding(abs_in, abs_sum, (int)n, MPI_DOUBLE, t->comm);
    double u = FLT_EPSILON / 2, k = t->size - 1;
    double gamma = k * u / (1 - k * u);
    for (size_t i = 0; i < n; i++)
        e->tolerance[i] = (float)(2 * gamma * abs_sum[i] * (1 + 1e-6));
    free(abs_in);
    free(abs_sum);
}

/* st_comm_init on t's communicator, aborting the job on failure; the
 * caller st_comm_free's it. */
static void init_comm(const tally *t, st_comm *c, int supernode_size, double f)
{
    st_error err = {ST_OK, ""};
    if (st_comm_init(c, t->comm, supernode_size, f, &err) != ST_OK) {
        fprintf(stderr, "test_allreduce: %s\n", err.msg);
        MPI_Abort(t->comm, 1);
    }
}

/* Run algo on a copy of input into out; abort the job on failure, since
 * the other ranks may be waiting for this one. */
static void run_algo(const tally *t, const st_allreduce_algo *algo, const st_comm *c,
                     const float *input, float *out, size_t n, st_allreduce_stats *stats)
{
    st_error err = {ST_OK, ""};
    memcpy(out, input, n * sizeof *out);
    if (algo->run(out, n, c, stats, &err) != ST_OK) {
        fprintf(stderr, "test_allreduce: rank %d: %s on %zu floats: %s\n", t->rank, algo->name,
                n, err.msg);
        MPI_Abort(t->comm, 1);
    }
}

/* Buffers one case runs in. */
typedef struct work {
    float *first, *second, *from_rank0; /* [n] */
} work;

/* One algorithm on one input kind: value, repeatability, same everywhere. */
static void check_case(tally *t, const st_allreduce_algo *algo, const st_comm *c,
                       const expected *e, input_kind kind, work *w)
{
    size_t n = e->n;
    const float *input = kind == INPUT_EXACT ? e->exact_input : e->random_input;
    run_algo(t, algo, c, input, w->first, n, NULL);
    run_algo(t, algo, c, input, w->second, n, NULL);
    memcpy(w->from_rank0, w->first, n * sizeof(float));
    bcast_yielding(w->from_rank0, (int)n, MPI_FLOAT, t->comm);

    size_t wrong = 0, first_wrong = 0;
    for (size_t i = 0; i < n; i++) {
        int good = kind == INPUT_EXACT
            ? w->first[i] == e->exact_sum[i]
            : fabsf(w->first[i] - e->mpi_sum[i]) <= e->tolerance[i];
        if (!good && wrong++ == 0)
            first_wrong = i;
    }
    int repeatable = memcmp(w->first, w->second, n * sizeof(float)) == 0;
    int same_as_rank0 = memcmp(w->first, w->from_rank0, n * sizeof(float)) == 0;
    const char *input_name = kind == INPUT_EXACT ? "exact" : "random";
    if (wrong && kind == INPUT_EXACT)
        detail(t, "%s n=%zu exact: %zu of %zu sums wrong; first [%zu] = %.9g, expected "
               "exactly %.9g", algo->name, n, wrong, n, first_wrong, w->first[first_wrong],
               e->exact_sum[first_wrong]);
    if (wrong && kind == INPUT_RANDOM)
        detail(t, "%s n=%zu random: %zu of %zu sums outside the bound; first [%zu] = %.9g, "
               "MPI_Allreduce %.9g, |difference| %.3g > %.3g", algo->name, n, wrong, n,
               first_wrong, w->first[first_wrong], e->mpi_sum[first_wrong],
               fabsf(w->first[first_wrong] - e->mpi_sum[first_wrong]),
               e->tolerance[first_wrong]);
    if (!repeatable)
        detail(t, "%s n=%zu %s: a second run gave different bits", algo->name, n, input_name);
    if (!same_as_rank0)
        detail(t, "%s n=%zu %s: the result differs from rank 0's", algo->name, n, input_name);
    report(t, !wrong && repeatable && same_as_rank0,
           "%-13s n=%-7zu %s: %s, repeatable, same on all ranks", algo->name, n,
           kind == INPUT_EXACT ? "exact " : "random",
           kind == INPUT_EXACT ? "equals the exact sum" : "within 2 gamma(P-1) sum|x| of MPI");
}

static void check_values(tally *t, size_t n)
{
    st_comm c;
    init_comm(t, &c, 2, 0);
    expected e;
    expected_init(&e, t, n);
    work w = {malloc(n * sizeof(float)), malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    if (!w.first || !w.second || !w.from_rank0) {
        fprintf(stderr, "test_allreduce: rank %d: out of memory for n = %zu\n", t->rank, n);
        MPI_Abort(t->comm, 1);
    }
    for (size_t a = 0; a < st_allreduce_count; a++) {
        check_case(t, &st_allreduce_algos[a], &c, &e, INPUT_EXACT, &w);
        check_case(t, &st_allreduce_algos[a], &c, &e, INPUT_RANDOM, &w);
    }
    free(w.first);
    free(w.second);
    free(w.from_rank0);
    expected_free(&e);
    st_comm_free(&c);
}

/* This rank's part of n floats (st_allreduce_part). */
static void own_part(const tally *t, size_t n, size_t *start, size_t *count)
{
    st_allreduce_part(n, t->size, t->rank, start, count);
}

/* Run fn (a half) on buf in place, aborting the job on failure. */
static void run_half(const tally *t, const char *algo, const char *half, st_allreduce_fn fn,
                     const st_comm *c, float *buf, size_t n, st_allreduce_stats *stats)
{
    st_error err = {ST_OK, ""};
    if (fn(buf, n, c, stats, &err) != ST_OK) {
        fprintf(stderr, "test_allreduce: rank %d: %s's %s on %zu floats: %s\n", t->rank, algo,
                half, n, err.msg);
        MPI_Abort(t->comm, 1);
    }
}

/* Every algorithm's reduce-scatter and all-gather halves on n floats:
 * - the reduce-scatter of the exact input leaves the exact sum in this
 *   rank's part (whatever it leaves elsewhere);
 * - the all-gather of the parts, every other float set to NaN first, gives
 *   the whole exact sum on every rank;
 * - on the random input, reduce-scatter then all-gather gives the bits of
 *   the algorithm's all-reduce (mpi: the library's reduce-scatter may add
 *   in another order, so it is held to the random input's bound), twice
 *   the same, on every rank the same;
 * - ring (any P) and rhd (P a power of two) send as many bytes in the two
 *   halves as in the all-reduce. */
static void check_halves(tally *t, size_t n)
{
    st_comm c;
    init_comm(t, &c, 2, 0);
    expected e;
    expected_init(&e, t, n);
    float *whole = malloc(n * sizeof(float)), *halves = malloc(n * sizeof(float));
    float *again = malloc(n * sizeof(float)), *from_rank0 = malloc(n * sizeof(float));
    if (!whole || !halves || !again || !from_rank0) {
        fprintf(stderr, "test_allreduce: rank %d: out of memory for n = %zu\n", t->rank, n);
        MPI_Abort(t->comm, 1);
    }
    size_t start, count;
    own_part(t, n, &start, &count);
    int power_of_two = (t->size & (t->size - 1)) == 0;
    for (size_t a = 0; a < st_allreduce_count; a++) {
        const st_allreduce_algo *algo = &st_allreduce_algos[a];
        int is_mpi = algo->run == st_allreduce_mpi;
        memcpy(halves, e.exact_input, n * sizeof(float));
        run_half(t, algo->name, "reduce-scatter", algo->reduce_scatter, &c, halves, n, NULL);
        size_t wrong_part = 0;
        for (size_t i = start; i < start + count; i++)
            wrong_part += halves[i] != e.exact_sum[i];
        for (size_t i = 0; i < n; i++)
            if (i < start || i >= start + count)
                halves[i] = NAN;
        run_half(t, algo->name, "all-gather", algo->allgather, &c, halves, n, NULL);
        size_t wrong_all = 0;
        for (size_t i = 0; i < n; i++)
            wrong_all += halves[i] != e.exact_sum[i];
        if (wrong_part || wrong_all)
            detail(t, "%s n=%zu exact: %zu of %zu sums of the part [%zu, %zu) wrong after the "
                   "reduce-scatter, %zu of %zu after the all-gather", algo->name, n, wrong_part,
                   count, start, start + count, wrong_all, n);
        report(t, !wrong_part && !wrong_all, "%-13s n=%-7zu exact: reduce-scatter sums this "
               "rank's part, all-gather fills in the others", algo->name, n);

        st_allreduce_stats whole_stats, half_stats;
        memset(&whole_stats, 0, sizeof whole_stats);
        memset(&half_stats, 0, sizeof half_stats);
        run_algo(t, algo, &c, e.random_input, whole, n, &whole_stats);
        for (int k = 0; k < 2; k++) {
            float *out = k ? again : halves;
            memcpy(out, e.random_input, n * sizeof(float));
            run_half(t, algo->name, "reduce-scatter", algo->reduce_scatter, &c, out, n,
                     k ? NULL : &half_stats);
            run_half(t, algo->name, "all-gather", algo->allgather, &c, out, n,
                     k ? NULL : &half_stats);
        }
        memcpy(from_rank0, halves, n * sizeof(float));
        bcast_yielding(from_rank0, (int)n, MPI_FLOAT, t->comm);
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++)
            wrong += is_mpi ? !(fabsf(halves[i] - e.mpi_sum[i]) <= e.tolerance[i])
                            : memcmp(&halves[i], &whole[i], sizeof(float)) != 0;
        int repeatable = memcmp(halves, again, n * sizeof(float)) == 0;
        int same_as_rank0 = memcmp(halves, from_rank0, n * sizeof(float)) == 0;
        int bytes_checked = strcmp(algo->name, "ring") == 0 ||
                            (strcmp(algo->name, "rhd") == 0 && power_of_two);
        int bytes_good = !bytes_checked || half_stats.bytes_sent == whole_stats.bytes_sent;
        if (wrong)
            detail(t, "%s n=%zu random: reduce-scatter + all-gather differs from the %s in %zu "
                   "of %zu floats", algo->name, n, is_mpi ? "bound around MPI_Allreduce"
                                                          : "all-reduce's bits", wrong, n);
        if (!repeatable || !same_as_rank0)
            detail(t, "%s n=%zu random: reduce-scatter + all-gather %s", algo->name, n,
                   !repeatable ? "gave other bits the second time" : "differs from rank 0's");
        if (!bytes_good)
            detail(t, "%s n=%zu: the halves sent %" PRIu64 " bytes, the all-reduce %" PRIu64,
                   algo->name, n, half_stats.bytes_sent, whole_stats.bytes_sent);
        report(t, !wrong && repeatable && same_as_rank0 && bytes_good,
               "%-13s n=%-7zu random: reduce-scatter + all-gather %s, repeatable, same on all "
               "ranks%s", algo->name, n,
               is_mpi ? "within 2 gamma(P-1) sum|x| of MPI" : "= the all-reduce's bits",
               bytes_checked ? ", the all-reduce's bytes" : "");
    }
    free(whole);
    free(halves);
    free(again);
    free(from_rank0);
    expected_free(&e);
    st_comm_free(&c);
}

/* st_allreduce_part: the parts tile [0, n) in rank order, sizes within one. */
static void check_parts(tally *t)
{
    const size_t sizes[] = {0, 1, 7, 4096, 1000003};
    int good = 1;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int p = 1; p <= 9; p++) {
            size_t next = 0, least = (size_t)-1, most = 0;
            for (int q = 0; q < p; q++) {
                size_t start, count;
                st_allreduce_part(sizes[s], p, q, &start, &count);
                good &= start == next;
                next = start + count;
                least = count < least ? count : least;
                most = count > most ? count : most;
            }
            good &= next == sizes[s] && most - least <= 1;
        }
    report(t, good, "st_allreduce_part: the parts of n floats tile [0, n) in rank order, "
           "their sizes within one");
}

static void check_lookup(tally *t)
{
    st_error err = {ST_OK, ""};
    const st_allreduce_algo *found = NULL;
    int all_found = 1;
    for (size_t a = 0; a < st_allreduce_count; a++) {
        const char *name = st_allreduce_algos[a].name;
        if (st_allreduce_find(name, &found, &err) != ST_OK || found != &st_allreduce_algos[a]) {
            detail(t, "st_allreduce_find(\"%s\") did not find it: %s", name, err.msg);
            all_found = 0;
        }
    }
    report(t, all_found, "st_allreduce_find finds each of the %zu algorithms",
           st_allreduce_count);

    const char *want = "--allreduce nope: unknown algorithm (expected mpi, ring, rhd, "
                       "rhd-supernode, binomial, ps, butterfly or onesided)";
    st_status st = st_allreduce_find("nope", &found, &err);
    int good = st == ST_EUSAGE && strcmp(err.msg, want) == 0;
    if (!good)
        detail(t, "status %d, message \"%s\"; expected %d, \"%s\"", st, err.msg, ST_EUSAGE, want);
    report(t, good, "an unknown name: ST_EUSAGE listing the valid names");
}

static void check_comm_errors(tally *t)
{
    st_comm c;
    st_error err = {ST_OK, ""};
    st_status st = st_comm_init(&c, t->comm, -1, 0, &err);
    int good = st == ST_EUSAGE && strstr(err.msg, "supernode size: expected a number of ranks");
    if (!good)
        detail(t, "Q = -1: status %d, message \"%s\"", st, err.msg);
    report(t, good, "st_comm_init: Q = -1 is a usage error");

    st_error_clear(&err);
    st = st_comm_init(&c, t->comm, 2, 1.5, &err);
    good = st == ST_EUSAGE && strstr(err.msg, "--sim-cross-bandwidth: expected a fraction") &&
           strstr(err.msg, "got 1.5");
    if (!good)
        detail(t, "F = 1.5: status %d, message \"%s\"", st, err.msg);
    report(t, good, "st_comm_init: F = 1.5 is a usage error");
}

typedef struct counting_sum {
    uint64_t calls, floats;
} counting_sum;

static void sum_counting(void *ctx, float *dst, const float *src, size_t n)
{
    counting_sum *count = ctx;
    count->calls++;
    count->floats += n;
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

/* Floats the sum hook adds over all ranks in one all-reduce of n floats:
 * every element needs P-1 additions, done once each, except in butterfly,
 * where every participant adds the whole buffer at each of its log2 P'
 * steps (P' the largest power of two <= P, after rem = P - P' folded ranks
 * added theirs in). */
static uint64_t hook_floats(const char *name, int p, size_t n)
{
    if (strcmp(name, "butterfly") != 0)
        return (uint64_t)(p - 1) * n;
    uint64_t p2 = 1, steps = 0;
    while (p2 * 2 <= (uint64_t)p) {
        p2 *= 2;
        steps++;
    }
    return ((uint64_t)p - p2 + p2 * steps) * n;
}

/* The caller's scratch (big enough, and too small) and sum hook. */
static void check_scratch_and_hook(tally *t)
{
    const size_t n = 4096;
    st_comm c;
    init_comm(t, &c, 2, 0);
    expected e;
    expected_init(&e, t, n);
    float *out = malloc(n * sizeof *out), *scratch = malloc(n * sizeof *scratch);
    if (!out || !scratch)
        MPI_Abort(t->comm, 1);
    counting_sum count;
    c.sum = sum_counting;
    c.sum_ctx = &count;
    for (int small = 0; small <= 1; small++) {
        c.scratch = scratch;
        c.scratch_count = small ? 1 : st_allreduce_scratch_count(n);
        for (size_t a = 0; a < st_allreduce_count; a++) {
            const st_allreduce_algo *algo = &st_allreduce_algos[a];
            if (algo->run == st_allreduce_mpi)
                continue;
            memset(&count, 0, sizeof count);
            run_algo(t, algo, &c, e.exact_input, out, n, NULL);
            size_t wrong = 0;
            for (size_t i = 0; i < n; i++)
                wrong += out[i] != e.exact_sum[i];
            uint64_t total_floats = 0;
            allreduce_yielding(&count.floats, &total_floats, 1, MPI_UINT64_T, t->comm);
            uint64_t want_floats = hook_floats(algo->name, t->size, n);
            if (wrong)
                detail(t, "%s: %zu of %zu sums wrong", algo->name, wrong, n);
            const char *formula = strcmp(algo->name, "butterfly") == 0
                                      ? "(rem + P' log2 P') n" : "(P-1) n";
            if (total_floats != want_floats && t->rank == 0)
                detail(t, "%s: the hook added %" PRIu64 " floats over all ranks, expected "
                       "%s = %" PRIu64, algo->name, total_floats, formula, want_floats);
            report(t, !wrong && total_floats == want_floats,
                   "%-13s n=%zu with the caller's %s scratch and a sum hook: exact, hook added "
                   "%s = %" PRIu64 " floats", algo->name, n,
                   small ? "too small (1 float)" : "n-float", formula, want_floats);
        }
    }
    free(out);
    free(scratch);
    expected_free(&e);
    st_comm_free(&c);
}

/* With F = 0.25 and Q = 2: still exact, and a rank that sent b bytes across
 * waited at least (1/F - 1) beta b. */
static void check_pacing(tally *t)
{
    const size_t n = 4096;
    const double f = 0.25;
    st_comm c;
    init_comm(t, &c, 2, f);
    int beta_ok = t->size == 1 || (c.inside_seconds_per_byte > 0 &&
                                   c.inside_seconds_per_byte < 1e-6);
    if (!beta_ok)
        detail(t, "measured beta %.3g s/B, expected in (0, 1e-6)", c.inside_seconds_per_byte);
    report(t, beta_ok, "st_comm_init with F = %.2f measures beta (%.3f ns/B)", f,
           c.inside_seconds_per_byte * 1e9);
    expected e;
    expected_init(&e, t, n);
    float *out = malloc(n * sizeof *out);
    if (!out)
        MPI_Abort(t->comm, 1);
    for (size_t a = 0; a < st_allreduce_count; a++) {
        const st_allreduce_algo *algo = &st_allreduce_algos[a];
        st_allreduce_stats stats;
        memset(&stats, 0, sizeof stats);
        run_algo(t, algo, &c, e.exact_input, out, n, &stats);
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++)
            wrong += out[i] != e.exact_sum[i];
        double least = (1 / f - 1) * c.inside_seconds_per_byte * (double)stats.bytes_crossing;
        int paced = stats.paced_seconds >= least * (1 - 1e-9) &&
                    stats.paced_seconds <= stats.seconds;
        if (wrong)
            detail(t, "%s paced: %zu of %zu sums wrong", algo->name, wrong, n);
        if (!paced)
            detail(t, "%s: %" PRIu64 " bytes crossed, paced %.3g s of %.3g s, expected at "
                   "least %.3g s", algo->name, stats.bytes_crossing, stats.paced_seconds,
                   stats.seconds, least);
        report(t, !wrong && paced, "%-13s n=%zu, Q=2, F=%.2f: exact, crossing messages paced",
               algo->name, n, f);
    }
    free(out);
    expected_free(&e);
    st_comm_free(&c);
}

/* With idle_sleep_us (exchanges polled, sleeping in between): the same bits
 * as spinning, on a short and a long buffer. mpi becomes MPI_Iallreduce,
 * whose schedules may differ from MPI_Allreduce's, so it is held to the
 * random input's bound instead. */
static void check_idle_sleep(tally *t)
{
    const size_t sizes[] = {7, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        st_comm spinning, sleeping;
        init_comm(t, &spinning, 2, 0);
        sleeping = spinning;
        sleeping.idle_sleep_us = 20;
        expected e;
        expected_init(&e, t, n);
        float *spun = malloc(n * sizeof *spun), *slept = malloc(n * sizeof *slept);
        if (!spun || !slept)
            MPI_Abort(t->comm, 1);
        for (size_t a = 0; a < st_allreduce_count; a++) {
            const st_allreduce_algo *algo = &st_allreduce_algos[a];
            int is_mpi = algo->run == st_allreduce_mpi;
            run_algo(t, algo, &spinning, e.random_input, spun, n, NULL);
            run_algo(t, algo, &sleeping, e.random_input, slept, n, NULL);
            size_t wrong = 0;
            for (size_t i = 0; i < n; i++)
                wrong += is_mpi ? !(fabsf(slept[i] - e.mpi_sum[i]) <= e.tolerance[i])
                                : memcmp(&slept[i], &spun[i], sizeof(float)) != 0;
            if (wrong)
                detail(t, "%s n=%zu: waiting with sleeps changed %zu of %zu sums", algo->name,
                       n, wrong, n);
            report(t, !wrong, "%-13s n=%-7zu idle_sleep_us=20: %s", algo->name, n,
                   is_mpi ? "within 2 gamma(P-1) sum|x| of MPI_Allreduce"
                          : "same bits as spinning");
        }
        free(spun);
        free(slept);
        expected_free(&e);
        st_comm_free(&spinning); /* and sleeping, its copy */
    }
}

static uint64_t sum_over_ranks(const tally *t, uint64_t here)
{
    uint64_t total = 0;
    allreduce_yielding(&here, &total, 1, MPI_UINT64_T, t->comm);
    return total;
}

/* What rank `rank` of p sends, and sends across supernodes of q ranks, in
 * one all-reduce of `bytes` bytes by algorithm `name`: the formulas of
 * check_crossing. Returns the formula's text, or NULL for other names. */
static const char *crossing_formula(const char *name, int p, int q, int rank, uint64_t bytes,
                                    uint64_t *sent, uint64_t *across)
{
    uint64_t up = (uint64_t)p, uq = (uint64_t)q;
    *sent = 2 * (up - 1) * bytes / up;
    if (strcmp(name, "rhd") == 0) {
        *across = 2 * (up - uq) * bytes / up;
        return "2(P-Q)/P x 4n per rank";
    }
    if (strcmp(name, "rhd-supernode") == 0) {
        *across = 2 * (up / uq - 1) * bytes / up;
        return "2(P/Q-1)/P x 4n per rank";
    }
    if (strcmp(name, "ring") == 0) {
        *across = rank % q == q - 1 && p > q ? *sent : 0;
        return "2(P-1)/P x 4n by each of the P/Q ranks ending a supernode";
    }
    if (strcmp(name, "butterfly") == 0) {
        uint64_t steps = 0, crossing_steps = 0;
        for (uint64_t d = 1; d < up; d *= 2) {
            steps++;
            crossing_steps += d >= uq;
        }
        *sent = steps * bytes;
        *across = crossing_steps * bytes;
        return "log2(P/Q) x 4n per rank";
    }
    if (strcmp(name, "binomial") == 0 || strcmp(name, "onesided") == 0) {
        uint64_t low = rank ? (uint64_t)(rank & -rank) : up; /* rank 0: every mask below P */
        *sent = rank ? bytes : 0; /* up to the parent, rank - low */
        *across = rank && low >= uq ? bytes : 0;
        for (uint64_t mask = 1; mask < low && (uint64_t)rank + mask < up; mask *= 2) {
            *sent += bytes; /* down to the child rank + mask */
            *across += mask >= uq ? bytes : 0;
        }
        return "the tree's edges of mask >= Q, both ways";
    }
    if (strcmp(name, "ps") == 0) {
        *sent = rank == 0 ? (up - 1) * bytes : bytes;
        *across = rank == 0 ? (up - uq) * bytes : rank >= q ? bytes : 0;
        return "2(P-Q) x 4n in all";
    }
    return NULL;
}

/* Bytes sent and sent across supernodes of Q ranks, for P a power of two,
 * Q in {2, 4} dividing P, and n = CROSSING_N floats (B = 4n bytes), against
 * these formulas (crossing_formula), computed from P, Q and the rank alone:
 *   rhd:           every rank sends 2 (P-1)/P B, 2 (P-Q)/P B of it across:
 *                  the halving steps at distance >= Q carry B/2 + B/4 + ...
 *                  + Q B/P = (P-Q)/P B across, and the doubling steps the
 *                  same back;
 *   rhd-supernode: every rank sends 2 (P-1)/P B, 2 (P/Q-1)/P B across: only
 *                  the steps at logical distance < P/Q cross;
 *   ring:          every rank sends 2 (P-1)/P B, all of it across for the
 *                  ranks with r mod Q = Q-1 (when P > Q), none for others;
 *   ps:            rank 0 sends (P-1) B, (P-Q) B of it across; the others
 *                  send B, across when r >= Q;
 *   butterfly:     every rank sends log2(P) B, log2(P/Q) B of it across:
 *                  the steps at distance >= Q;
 *   binomial,      rank r > 0 sends B up to its parent r - m (m the lowest
 *   onesided:      set bit of r) and B down to each child r + 2^j, 2^j < m
 *                  (rank 0: 2^j < P); an edge of mask >= Q crosses.
 * Each rank checks its own figures; the totals over ranks (P times the
 * per-rank figure for rhd and rhd-supernode) are checked and printed. */
static void check_crossing(tally *t)
{
    int p = t->size;
    const size_t n = CROSSING_N;
    const uint64_t bytes = n * sizeof(float);
    if (p < 2 || (p & (p - 1)) != 0)
        return;
    float *input = malloc(n * sizeof *input), *out = malloc(n * sizeof *out);
    if (!input || !out)
        MPI_Abort(t->comm, 1);
    fill_input(INPUT_EXACT, t->rank, input, n);
    for (int q = 2; q <= 4 && q <= p; q *= 2) {
        st_comm c;
        init_comm(t, &c, q, 0);
        for (size_t a = 0; a < st_allreduce_count; a++) {
            const st_allreduce_algo *algo = &st_allreduce_algos[a];
            uint64_t want_sent, want_across;
            const char *formula =
                crossing_formula(algo->name, p, q, t->rank, bytes, &want_sent, &want_across);
            if (!formula)
                continue;
            st_allreduce_stats stats;
            memset(&stats, 0, sizeof stats);
            run_algo(t, algo, &c, input, out, n, &stats);
            int good = stats.bytes_sent == want_sent && stats.bytes_crossing == want_across;
            if (!good)
                detail(t, "%s Q=%d: sent %" PRIu64 " bytes, %" PRIu64 " across; expected %"
                       PRIu64 ", %" PRIu64, algo->name, q, stats.bytes_sent,
                       stats.bytes_crossing, want_sent, want_across);
            uint64_t total = sum_over_ranks(t, stats.bytes_crossing);
            uint64_t want_total = sum_over_ranks(t, want_across);
            report(t, good && total == want_total,
                   "%-13s P=%d Q=%d n=%zu: %" PRIu64 " bytes across supernodes in all "
                   "(%s; rank 0: %" PRIu64 ")", algo->name, p, q, n, want_total, formula,
                   want_across);
        }
        st_comm_free(&c);
    }
    free(input);
    free(out);
}

/* The algorithm called name, aborting the job when there is none. */
static const st_allreduce_algo *find_algo(const tally *t, const char *name)
{
    const st_allreduce_algo *algo = NULL;
    st_error err = {ST_OK, ""};
    if (st_allreduce_find(name, &algo, &err) != ST_OK) {
        fprintf(stderr, "test_allreduce: %s\n", err.msg);
        MPI_Abort(t->comm, 1);
    }
    return algo;
}

/* onesided's notifications count segments over all calls on a window:
 * two rounds of calls of several sizes in a row on one communicator,
 * among them 0, odd sizes, sizes around a segment and one of more
 * segments than a ring holds (9 segments and 3 floats; a ring holds 2 D +
 * 2 <= 8 for P <= 8). Each call must give the exact sum on the exact
 * input and binomial's bits (the same tree and order) on the random one,
 * the same on every rank. */
static void check_onesided_sequence(tally *t)
{
    const size_t segment = ST_ALLREDUCE_ONESIDED_SEGMENT_FLOATS;
    const size_t sizes[] = {0, 1, 7, segment - 1, segment + 1, 9 * segment + 3, 4096};
    enum { SIZES = sizeof sizes / sizeof sizes[0], ROUNDS = 2 };
    const st_allreduce_algo *onesided = find_algo(t, "onesided");
    const st_allreduce_algo *binomial = find_algo(t, "binomial");
    st_comm c;
    init_comm(t, &c, 2, 0);
    expected e[SIZES];
    size_t largest = 1, wrong[SIZES] = {0}, other_bits[SIZES] = {0}, unlike_rank0[SIZES] = {0};
    for (int i = 0; i < SIZES; i++) {
        memset(&e[i], 0, sizeof e[i]);
        if (sizes[i])
            expected_init(&e[i], t, sizes[i]);
        largest = sizes[i] > largest ? sizes[i] : largest;
    }
    float *out = malloc(largest * sizeof *out), *ref = malloc(largest * sizeof *ref);
    float *from_rank0 = malloc(largest * sizeof *from_rank0);
    if (!out || !ref || !from_rank0)
        MPI_Abort(t->comm, 1);
    for (int round = 0; round < ROUNDS; round++)
        for (int i = 0; i < SIZES; i++) {
            size_t n = sizes[i];
            if (n == 0) {
                st_error err = {ST_OK, ""};
                wrong[i] += onesided->run(out, 0, &c, NULL, &err) != ST_OK;
                continue;
            }
            run_algo(t, onesided, &c, e[i].exact_input, out, n, NULL);
            for (size_t k = 0; k < n; k++)
                wrong[i] += out[k] != e[i].exact_sum[k];
            run_algo(t, onesided, &c, e[i].random_input, out, n, NULL);
            run_algo(t, binomial, &c, e[i].random_input, ref, n, NULL);
            other_bits[i] += memcmp(out, ref, n * sizeof *out) != 0;
            memcpy(from_rank0, out, n * sizeof *out);
            bcast_yielding(from_rank0, (int)n, MPI_FLOAT, t->comm);
            unlike_rank0[i] += memcmp(out, from_rank0, n * sizeof *out) != 0;
        }
    for (int i = 0; i < SIZES; i++) {
        if (wrong[i] || other_bits[i] || unlike_rank0[i])
            detail(t, "onesided n=%zu in a sequence: %zu floats wrong on the exact input, %zu of "
                   "%d calls not binomial's bits, %zu not rank 0's", sizes[i], wrong[i],
                   other_bits[i], ROUNDS, unlike_rank0[i]);
        report(t, !wrong[i] && !other_bits[i] && !unlike_rank0[i],
               "onesided      n=%-7zu %d rounds among other sizes on one window: exact, "
               "binomial's bits, same on all ranks", sizes[i], ROUNDS);
        expected_free(&e[i]);
    }
    free(out);
    free(ref);
    free(from_rank0);
    st_comm_free(&c);
}

/* A peer that misses a call: with a timeout of 0.5 s, onesided fails on
 * every other rank (all of them wait for the missing rank's partial sum
 * or for rank 0's broadcast), within seconds, with the message of the
 * other algorithms' timeouts, naming the rank it waited for. The first
 * call, with every rank, made the window. */
static void check_onesided_timeout(tally *t)
{
    if (t->size < 2)
        return;
    const size_t n = 3 * ST_ALLREDUCE_ONESIDED_SEGMENT_FLOATS;
    const st_allreduce_algo *onesided = find_algo(t, "onesided");
    float *input = calloc(n, sizeof *input), *out = malloc(n * sizeof *out);
    if (!input || !out)
        MPI_Abort(t->comm, 1);
    st_comm c;
    init_comm(t, &c, 0, 0);
    c.timeout_seconds = 0.5;
    run_algo(t, onesided, &c, input, out, n, NULL);
    int missing = t->rank == t->size - 1, good = 1;
    if (!missing) {
        st_error err = {ST_OK, ""};
        double start = MPI_Wtime();
        st_status st = onesided->run(out, n, &c, NULL, &err);
        double waited = MPI_Wtime() - start;
        good = st == ST_EIO && waited >= 0.5 && waited < 20 &&
               strstr(err.msg, "all-reduce onesided: rank ") &&
               strstr(err.msg, "waiting for rank ") &&
               strstr(err.msg, ": no answer within 0.5 s (a rank stopped, hung or is lost)");
        if (!good)
            detail(t, "status %d after %.2f s, message \"%s\"", st, waited, err.msg);
    }
    st_comm_free(&c);
    report(t, good, "onesided: a rank missing a call, the others fail after --peer-timeout's "
           "0.5 s, naming the rank they wait for");
    free(input);
    free(out);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tally t = {MPI_COMM_WORLD, 0, 1, 0, 0};
    MPI_Comm_rank(t.comm, &t.rank);
    MPI_Comm_size(t.comm, &t.size);
    const size_t sizes[] = {1, 7, 4096, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        check_values(&t, sizes[s]);
    check_parts(&t);
    const size_t half_sizes[] = {1, 7, 4096, 65537};
    for (size_t s = 0; s < sizeof half_sizes / sizeof half_sizes[0]; s++)
        check_halves(&t, half_sizes[s]);
    check_lookup(&t);
    check_comm_errors(&t);
    check_scratch_and_hook(&t);
    check_pacing(&t);
    check_idle_sleep(&t);
    check_crossing(&t);
    check_onesided_sequence(&t);
    check_onesided_timeout(&t);
    if (t.rank == 0)
        printf("test_allreduce: P=%d: %d passed, %d failed\n", t.size, t.passed, t.failed);
    int failed = t.failed;
    MPI_Finalize();
    return failed ? 1 : 0;
}
