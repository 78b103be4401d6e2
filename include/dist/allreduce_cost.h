/* The alpha-beta-gamma cost of every all-reduce algorithm (the formulas of
 * the headers of src/dist/allreduce/<name>.c, in one place), free of MPI:
 * `singletrain plan` predicts a cluster's iteration with them, in every
 * build. A row added to ST_ALLREDUCE_ALGOS (allreduce_algos.h) needs its
 * case in st_allreduce_cost; a missing one is a broken invariant. */
#ifndef ST_ALLREDUCE_COST_H
#define ST_ALLREDUCE_COST_H

/* The network between the nodes, as the cost formulas see it: a message of
 * b bytes takes alpha + beta b inside a supernode and alpha + cross_beta b
 * between supernodes; adding b bytes takes gamma b. */
typedef struct st_net_params {
    double alpha;      /* latency per message, seconds */
    double beta;       /* seconds per byte inside a supernode */
    double gamma;      /* seconds per byte reduced (one add of two buffers) */
    int supernode;     /* Q consecutive ranks per supernode; 0: one supernode */
    double cross_beta; /* seconds per byte between supernodes */
} st_net_params;

/* MPICH's MPI_Allreduce takes recursive doubling (the butterfly) below
 * this many bytes, Rabenseifner's algorithm (rhd) from it on
 * (MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE's default). */
#define ST_ALLREDUCE_MPI_SHORT_BYTES 2048.0

/* The one-sided algorithm (src/dist/allreduce/onesided.c) moves a buffer
 * through its trees in segments of this many floats (128 KB), pipelined. */
#define ST_ALLREDUCE_ONESIDED_SEGMENT_FLOATS 32768

/* Seconds one all-reduce of `bytes` bytes over p ranks takes with
 * algorithm (an index of ST_ALLREDUCE_ALGOS), by its header's formula; 0
 * for p <= 1. Non-powers of two add rhd's and the butterfly's fold and
 * unfold; with supernodes (0 < Q < p) the bytes that cross go at
 * cross_beta (the formulas' crossing terms, Q taken to divide p). */
double st_allreduce_cost(int algorithm, int p, double bytes, const st_net_params *np);

/* Whether algorithm's formula is its own (1), or a guess at what another
 * library chooses (0: mpi, MPICH's MPI_Allreduce). */
int st_allreduce_cost_known(int algorithm);

/* The algorithms worth timing (--allreduce auto's probe) for an
 * all-reduce of `bytes` over p ranks: those whose formula is unknown
 * (st_allreduce_cost_known) and those within `within` times the cheapest
 * known one, in the table's order, into candidates [ST_ALLREDUCE_ALGOS'
 * count]; each one's st_allreduce_cost into seconds [the same]. Returns
 * how many. */
int st_allreduce_candidates(int p, double bytes, const st_net_params *np, double within,
                            int *candidates, double *seconds);

/* The algorithm with the smallest st_allreduce_cost, its cost into
 * *seconds: the first of equal ones in the table's order, except that
 * mpi comes last (its formula is a guess at the library's choice, the
 * cost of one of the others). */
int st_allreduce_cheapest(int p, double bytes, const st_net_params *np, double *seconds);

/* Seconds one model-parallel layer's exchange within a group of g ranks
 * takes per iteration (--mp-group; layers/connected.c), each rank's
 * samples holding in_bytes of the layer's input and out_bytes of its
 * output: MPICH's ring all-gather of the input, (g - 1)(alpha + beta in),
 * and reduce-scatter of its gradient, (g - 1)(alpha + (beta + gamma) in),
 * and the pairwise all-to-alls of the output and its gradient, each
 * (g - 1)(alpha + beta out / g); the group taken inside one supernode.
 * 0 for g <= 1. */
double st_mp_exchange_cost(int g, double in_bytes, double out_bytes, const st_net_params *np);

#endif
