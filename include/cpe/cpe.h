/* The emulated SW26010 core group: a cluster of CPEs in a mesh (8x8 on the
 * SW26010: the machine description, cpe/machine.h, gives the mesh and the
 * LDM), each with 64 KB of
 * LDM (local data memory), DMA between main memory and LDM, register
 * communication along rows and columns, and a cost model that turns what a
 * launch did into predicted SW26010 time. Usable on its own, without the
 * network: the `cpe` backend's kernels (GEMM, im2col/col2im, implicit
 * convolution, pooling, elementwise, layout transformation, the gradient
 * sum and the solver update, declared in cpe/kernels.h) are CPE programs
 * written against this API, which needs nothing above base/. Hardware
 * facts and their sources: ../shared/DESIGN.md, "The SW26010 emulation",
 * and the constants in data/sw26010/model.conf (src/cpe/cpe_model.c).
 *
 * A CPE program is `void kernel(st_cpe *cpe, void *args)`, run on all 64
 * CPEs by one st_cpe_launch, as athread_spawn + athread_join run a slave
 * function. It follows the machine's rules, which the emulator enforces:
 *   - it computes on LDM only: buffers come from st_cpe_ldm_alloc (64 KB per
 *     CPE, released when the launch ends);
 *   - main memory is reached through DMA only (st_cpe_dma_*), including the
 *     args block, which kernels fetch into LDM as swCaffe's do;
 *   - register messages are 4 doubles (256 bits), sent to a CPE of the same
 *     row or column or broadcast along the row or column; floats are widened
 *     and narrowed around them (st_cpe_*_values do it);
 *   - it owns nothing outside LDM and its locals, so an illegal operation
 *     (LDM overflow, a message outside the row/column, a DMA whose LDM side
 *     is not in the CPE's allocated LDM or whose main side is LDM or a CPE
 *     stack, a wait that can never complete) stops the launch like a
 *     hardware exception: the call does not return, no CPE runs further, and
 *     st_cpe_launch returns ST_EINTERNAL with a message naming the kernel, the
 *     CPE and the request. Kernels therefore need no error paths.
 * What the emulator cannot see is a plain pointer dereference of main memory
 * from a kernel; kernels are reviewed for that (they touch args only through
 * DMA).
 *
 * Execution: the 64 programs run as user-space contexts on the calling
 * thread, switched only at communication points (a receive with an empty
 * FIFO, a send to a full FIFO, a barrier), in a fixed round-robin order
 * (src/cpe/cpe_cluster.c says why). Results and counters are identical run
 * to run; when every unfinished CPE is blocked the launch fails with a
 * deadlock report naming the kernel and what each CPE waits for.
 *
 * Time: each CPE keeps a clock in cycles. Computation advances it by the
 * cycles of the loops the kernel declares (st_cpe_loop_run: a two-pipeline
 * model of the CPE) and of the mesh GEMM (st_cpe_mesh_gemm_step); a DMA is
 * queued on the CPE's DMA channel and completes at a time from measured
 * DMA curves, paid only when the kernel waits for it (so double buffering
 * overlaps); a message arrives a latency after it is sent; a barrier
 * releases at the latest arrival. The
 * launch's predicted time is the clock of the CPE that finishes last, split
 * into compute / DMA wait / register communication / barrier, plus the
 * launch overhead.
 *
 * Ownership: a cluster is created and destroyed by one thread and launched
 * from that thread only; it owns the LDMs, the context stacks and nothing
 * else. One cluster per worker thread (one core group each). */
#ifndef ST_CPE_H
#define ST_CPE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "cpe/machine.h"

/* The emulator's capacity: meshes of up to 16 x 16 CPEs (the machine
 * description, cpe/machine.h, gives the mesh; the SW26010's is 8 x 8). */
#define ST_CPE_MESH_MAX 16
#define ST_CPE_MAX (ST_CPE_MESH_MAX * ST_CPE_MESH_MAX)

/* LDM allocations are aligned to 32 bytes, the width of a 256-bit vector
 * register, so vector loads and DMA land on aligned addresses. */
#define ST_CPE_LDM_ALIGN 32

/* A register message is 256 bits: 4 doubles (swCaffe: 256-bit messages,
 * doubles only). */
#define ST_CPE_MSG_DOUBLES 4
#define ST_CPE_MSG_BYTES (ST_CPE_MSG_DOUBLES * 8)

/* Depth, in messages, of each CPE's receive FIFO per bus (one for its row,
 * one for its column). An assumption: no published figure was found, and 4
 * is this emulator's working value (a compile-time constant: the FIFOs are
 * fixed arrays). A sender blocks while the destination's FIFO is full, so a
 * program that relies on deeper buffering deadlocks here, as it would on a
 * machine with 4-deep buffers. */
#define ST_CPE_FIFO_DEPTH 4

/* DMA size classes: class b counts transfers of [2^b, 2^(b+1)) bytes
 * (contiguous: the transfer's size; strided: its block size); the last
 * class is open-ended (8 MB and more). */
#define ST_CPE_DMA_SIZE_CLASSES 24

typedef struct st_cpe st_cpe;
typedef struct st_cpe_cluster st_cpe_cluster;

/* A CPE program; args is the pointer given to st_cpe_launch (main memory). */
typedef void (*st_cpe_kernel)(st_cpe *cpe, void *args);

typedef enum st_cpe_dtype { ST_CPE_F32, ST_CPE_F64 } st_cpe_dtype;

/* The register-communication buses of a CPE: its row and its column. */
typedef enum st_cpe_bus { ST_CPE_ROW, ST_CPE_COL } st_cpe_bus;

/* A transfer's pattern: one contiguous block; strided blocks of the CPE's
 * own; or interleaved, strided blocks that the 8 CPEs of a row (or
 * column) fetch or store side by side in the same launch, so that together
 * they cover whole rows of memory (pitch = 8 blocks: swDNN's and swCaffe's
 * input, weight and output blocks). */
typedef enum st_cpe_dma_mode {
    ST_CPE_DMA_CONTIGUOUS,
    ST_CPE_DMA_STRIDED,
    ST_CPE_DMA_INTERLEAVED,
    ST_CPE_DMA_MODES
} st_cpe_dma_mode;

/* ---- cost model (src/cpe/cpe_cost.c) ---- */

/* Measured DMA cost by block size: for each of `points` block sizes
 * (increasing), the cycles one CPE's transfer of one block occupies its
 * share of the memory system while all 64 CPEs transfer at once, getting
 * (main memory to LDM) and putting. Between points the cost is linear in
 * the size; beyond the last point it grows with the last segment's slope;
 * below the first it is the first point's. */
#define ST_CPE_DMA_CURVE_POINTS 16
typedef struct st_cpe_dma_curve {
    int points;
    double bytes[ST_CPE_DMA_CURVE_POINTS];
    double get_cycles[ST_CPE_DMA_CURVE_POINTS];
    double put_cycles[ST_CPE_DMA_CURVE_POINTS];
} st_cpe_dma_curve;

/* Every constant of the cost model; data/sw26010/model.conf gives each
 * one's value, source and whether it was calibrated (on what), fitted or
 * assumed, and the machine description (cpe/machine.h,
 * data/sw26010/sw26010.machine) the processor's: the clock, the vectors,
 * the CPE count and the register communication's rates
 * (st_sw26010_cost_params, cpe/model.h, puts them together). Bandwidths are
 * per core group (all its CPEs). */
typedef struct st_cpe_cost_params {
    double clock_hz;               /* CPE clock */
    double flops_per_cycle;        /* peak per CPE: one vector fused multiply-add */
    int cpes;                      /* CPEs sharing the core group's aggregate bandwidths */
    /* The pipeline model of a CPE (st_cpe_loop): two in-order pipelines,
     * P0 for floating point, P1 for LDM loads and stores and register
     * communication, both for integer and branch instructions. */
    double fma_latency_cycles;     /* vector multiply-add issue to result */
    double loop_overhead_ops;      /* integer and branch instructions per loop iteration */
    double loop_entry_cycles;      /* entering a loop: address set-up and pipeline fill */
    double gemm_block_cycles;      /* a register block of the mesh GEMM beyond its C loads
                                      and stores (st_cpe_mesh_gemm) */
    /* DMA: the occupancy of each transfer's blocks (dma), during which the
     * CPE's share of the memory system serves nothing else, then the
     * latency until the reply counter sees it; a CPE's further transfers
     * overlap that latency. */
    st_cpe_dma_curve dma;
    double dma_get_latency_cycles;
    double dma_put_latency_cycles;
    /* The share of a block's measured occupancy an interleaved transfer
     * (ST_CPE_DMA_INTERLEAVED) pays: its row of memory is fetched by 8 CPEs
     * together, which swCandle's per-CPE strided figures do not measure
     * (1: no saving). */
    double dma_interleaved_share;
    /* Register communication outside the mesh GEMM (st_cpe_send and its
     * kin): each message occupies the sender for its share of the aggregate
     * bandwidth and arrives a latency later; a receive is one instruction. */
    double regcomm_p2p_bandwidth;   /* bytes/s, aggregate */
    double regcomm_bcast_bandwidth; /* bytes/s, aggregate */
    double regcomm_latency_cycles;  /* send to arrival */
    double regcomm_recv_cycles;     /* one receive instruction */
    /* The mesh GEMM on floats: extra P1 cycles per register message (put or
     * get) of its loop, for floats travelling as doubles (0 in double). */
    double float_msg_cycles;
    double barrier_cycles;          /* one cluster-wide synchronisation */
    double launch_seconds;          /* athread_spawn + athread_join */
    double mpe_flops;               /* flop/s the MPE sustains on scalar loops */
    double mpe_bandwidth;           /* bytes/s the MPE moves through its cache */
} st_cpe_cost_params;

/* The built-in model's constants (data/sw26010/model.conf) with the ones
 * fitted on swCaffe's measurements at their neutral values (interleaved
 * share 1, no float penalty, the DMA latency split evenly): the model as
 * independent sources give it, which the emulator's tests compute by hand.
 * The cpe backend runs the fitted model (cpe/model.h). */
st_cpe_cost_params st_cpe_cost_params_default(void);

/* Predicted time of work the MPE does itself (layers not ported to the
 * CPEs): a roofline, the larger of flops / mpe_flops and bytes read and
 * written / mpe_bandwidth, in seconds. */
double st_cpe_mpe_seconds(const st_cpe_cost_params *p, double flops, double bytes);

/* One transfer's charge: the cycles its count blocks of block_bytes (a
 * contiguous transfer is one block), got or put (put 1) in mode's pattern,
 * occupy the CPE's DMA channel, then the cycles until its reply counter
 * sees it. The one place a DMA is costed: the emulator's timed transfers
 * (cpe_dma.c) and the GEMM's planner (kernels/gemm.c) both ask it. */
typedef struct st_cpe_dma_charge {
    double occupancy_cycles;
    double latency_cycles;
} st_cpe_dma_charge;

st_cpe_dma_charge st_cpe_dma_cost(const st_cpe_cost_params *p, int put, st_cpe_dma_mode mode,
                                  size_t block_bytes, size_t count);

/* An inner loop as the pipeline model sees it: per iteration, the vector
 * floating-point instructions (P0), the memory instructions (P1: LDM loads
 * and stores, register puts and gets) and the instructions either
 * pipeline issues (integer arithmetic, branches; loop_overhead_ops is
 * added for the loop's own counter and branch), and chain, the cycles a
 * loop-carried dependency needs per iteration (an accumulator updated
 * each iteration: fma_latency_cycles); flops, the floating-point
 * operations of the whole loop (counted, not timed); unroll, iterations
 * per pass through the loop's counter and branch (0 or 1: none). The loop
 * takes loop_entry_cycles + iterations * max(fp, mem, (fp + mem + any +
 * loop_overhead_ops / unroll) / 2, chain) cycles: the two pipelines issue
 * one instruction each per cycle, in order. */
typedef struct st_cpe_loop {
    double iterations;
    double fp, mem, any;
    double chain;
    uint64_t flops;
    int unroll;
} st_cpe_loop;

double st_cpe_loop_cycles(const st_cpe_cost_params *p, const st_cpe_loop *loop);

/* Cycles of one step of the mesh GEMM (st_cpe_mesh_gemm_step: every CPE
 * waits for the slowest role) with C blocks of ni rows and nj_vec vectors
 * of 4 and nk iterations (unroll and float_msgs as in st_cpe_mesh_gemm);
 * *fp gets the
 * multiply-add issue cycles. Kernels
 * size their blocks with it. */
double st_cpe_mesh_step_cycles(const st_cpe_cost_params *p, int float_msgs, size_t ni,
                               size_t nj_vec, size_t nk, int unroll, double *fp);

/* Predicted SW26010 time of one or more launches, in seconds. */
typedef struct st_cpe_time {
    double compute_s;  /* declared loops and the mesh GEMM's multiply-adds */
    double dma_s;      /* waiting for DMA not hidden behind computation */
    double regcomm_s;  /* sending, receiving and waiting for messages */
    double sync_s;     /* waiting at barriers */
    double launch_s;   /* launch overhead */
    double total_s;    /* the sum */
} st_cpe_time;

/* ---- counters ---- */

typedef struct st_cpe_dma_class {
    uint64_t transfers;
    uint64_t blocks; /* 1 per contiguous transfer, count per strided one */
    uint64_t bytes;
} st_cpe_dma_class;

/* DMA directions, the first index of st_cpe_counters.dma. */
typedef enum st_cpe_dma_dir { ST_CPE_DMA_GET, ST_CPE_DMA_PUT, ST_CPE_DMA_DIRS } st_cpe_dma_dir;

/* What one or more launches did. Sums over the 64 CPEs, except ldm_peak. */
typedef struct st_cpe_counters {
    uint64_t launches;
    uint64_t flops;          /* of declared loops (st_cpe_loop) and the mesh GEMM */
    double compute_cycles;   /* the cycles those took, summed over the CPEs */
    uint64_t dma_get_bytes;  /* main memory -> LDM */
    uint64_t dma_put_bytes;  /* LDM -> main memory */
    st_cpe_dma_class dma[ST_CPE_DMA_DIRS][ST_CPE_DMA_MODES][ST_CPE_DMA_SIZE_CLASSES];
    uint64_t msgs_p2p;       /* messages sent to one CPE */
    uint64_t msgs_bcast;     /* row or column broadcasts (one per send) */
    uint64_t msgs_received;
    uint64_t mesh_msgs_bcast;    /* of msgs_bcast, those of the mesh GEMM */
    uint64_t mesh_msgs_received; /* of msgs_received, likewise */
    uint64_t mesh_gemms;     /* st_cpe_mesh_gemm collectives (counted once, not per CPE) */
    size_t ldm_peak;         /* bytes, the largest over the CPEs and launches */
    uint64_t barriers;       /* completed cluster-wide barriers */
    /* The predicted time from the CPEs' clocks (overlap included), costed
     * with the cluster's parameters at launch time. */
    st_cpe_time time;
    int critical_cpe;        /* id of the CPE that finished last (last launch) */
} st_cpe_counters;

/* Add src to dst (times and counts add, ldm_peak takes the larger). */
void st_cpe_counters_add(st_cpe_counters *dst, const st_cpe_counters *src);

/* Multiply c's predicted times by factor (its counts stay): one emulated
 * launch standing for factor launches of the same work. */
void st_cpe_counters_scale_time(st_cpe_counters *c, double factor);

/* Whether a and b hold the same counts and times (critical_cpe aside). */
int st_cpe_counters_equal(const st_cpe_counters *a, const st_cpe_counters *b);

uint64_t st_cpe_counters_dma_transfers(const st_cpe_counters *c);

/* The size class of a transfer or block of bytes (bytes >= 1). */
int st_cpe_dma_size_class(size_t bytes);


/* ---- the cluster (host side: the MPE) ---- */

/* Allocate a cluster of machine's core group (NULL: the built-in
 * SW26010's): its CPEs' LDMs and context stacks, once. Its launches are
 * costed with st_cpe_cost_params_default's constants on that machine
 * until st_cpe_cluster_set_cost_params. */
st_status st_cpe_cluster_create(st_cpe_cluster **out, const st_cpe_machine *machine,
                                st_error *err);
void st_cpe_cluster_destroy(st_cpe_cluster *cg);

/* The parameters later launches are costed with (p->cpes must be the
 * cluster's CPE count). */
void st_cpe_cluster_set_cost_params(st_cpe_cluster *cg, const st_cpe_cost_params *p);
const st_cpe_cost_params *st_cpe_cluster_cost_params(const st_cpe_cluster *cg);

/* The machine the cluster emulates: host-side planners size their blocks
 * with its mesh and LDM. */
const st_cpe_machine *st_cpe_cluster_machine(const st_cpe_cluster *cg);

/* Cost-only mode (off by default): later launches run every kernel's
 * control flow, DMA, messages and declared loops for their counters and
 * time, but move no data (DMA and messages copy nothing) and skip the
 * arithmetic; outputs are left as they were. Counters and predicted time
 * are those of the full emulation. */
void st_cpe_cluster_set_cost_only(st_cpe_cluster *cg, int on);

/* Run fn(cpe, args) on all 64 CPEs to completion. name appears in every
 * message. On success *out (if not NULL) holds this launch's counters; on
 * failure it is zeroed and err says what went wrong: ST_EINTERNAL for an
 * illegal program or a deadlock, ST_EINPUT for bad arguments. */
st_status st_cpe_launch(st_cpe_cluster *cg, const char *name, st_cpe_kernel fn, void *args,
                        st_cpe_counters *out, st_error *err);

/* ---- inside a CPE program ---- */

int st_cpe_row(const st_cpe *cpe);
int st_cpe_col(const st_cpe *cpe);
int st_cpe_id(const st_cpe *cpe); /* row * mesh columns + col */

/* The machine a program runs on (its cluster's st_cpe_machine): the mesh,
 * the CPE count, the LDM per CPE, the values of a vector register. */
int st_cpe_mesh_rows(const st_cpe *cpe);
int st_cpe_mesh_cols(const st_cpe *cpe);
int st_cpe_count(const st_cpe *cpe);
size_t st_cpe_ldm_bytes(const st_cpe *cpe);
int st_cpe_vector_doubles(const st_cpe *cpe);

/* LDM: a stack allocator per CPE, emptied at each launch. LDM keeps its
 * contents between launches, as the hardware's does; nothing is zeroed.
 * Overflow stops the launch with a message naming what and bytes. */
void *st_cpe_ldm_alloc(st_cpe *cpe, size_t bytes, const char *what);
size_t st_cpe_ldm_mark(const st_cpe *cpe);
void st_cpe_ldm_release(st_cpe *cpe, size_t mark); /* free everything allocated after mark */

/* DMA. A transfer is issued and returns at once; the reply counter counts
 * issued transfers, and st_cpe_dma_wait(cpe, &reply, n) waits until n of
 * them have completed (athread_get/athread_put with a reply word). The data
 * moves at issue (one address space), so only time depends on the wait;
 * still, read an LDM buffer or reuse a main-memory buffer only after its
 * wait, as on the machine. Zero a reply before use (st_cpe_reply r = {0}).
 * Waiting for fewer replies than were issued is charged the completion of
 * the last one: give each buffer its own reply when double-buffering. */
typedef struct st_cpe_reply {
    int count;         /* transfers issued on this counter */
    double done_cycle; /* when the last of them completes */
} st_cpe_reply;

/* Contiguous: bytes from main memory to LDM / from LDM to main memory. */
void st_cpe_dma_get(st_cpe *cpe, void *ldm_dst, const void *main_src, size_t bytes,
                    st_cpe_reply *reply);
void st_cpe_dma_put(st_cpe *cpe, void *main_dst, const void *ldm_src, size_t bytes,
                    st_cpe_reply *reply);

/* A contiguous get of control data (a kernel's argument block, a table of
 * pointers or tensor descriptions), which is copied in cost-only mode too
 * because the kernel's control flow depends on it; timed as any get. */
void st_cpe_dma_get_control(st_cpe *cpe, void *ldm_dst, const void *main_src, size_t bytes,
                            st_cpe_reply *reply);

/* Strided: count blocks of block_bytes, pitch_bytes apart in main memory
 * (pitch >= block), packed one after another in LDM. */
void st_cpe_dma_get_strided(st_cpe *cpe, void *ldm_dst, const void *main_src, size_t block_bytes,
                            size_t pitch_bytes, size_t count, st_cpe_reply *reply);
void st_cpe_dma_put_strided(st_cpe *cpe, void *main_dst, const void *ldm_src, size_t block_bytes,
                            size_t pitch_bytes, size_t count, st_cpe_reply *reply);

/* Interleaved: strided as above, declared by a kernel whose 8 CPEs of a
 * row or column move the blocks between theirs at the same time (pitch 8
 * blocks); costed with dma_interleaved_share. */
void st_cpe_dma_get_interleaved(st_cpe *cpe, void *ldm_dst, const void *main_src,
                                size_t block_bytes, size_t pitch_bytes, size_t count,
                                st_cpe_reply *reply);
void st_cpe_dma_put_interleaved(st_cpe *cpe, void *main_dst, const void *ldm_src,
                                size_t block_bytes, size_t pitch_bytes, size_t count,
                                st_cpe_reply *reply);

void st_cpe_dma_wait(st_cpe *cpe, st_cpe_reply *reply, int n);

/* Register communication. st_cpe_send goes to a CPE of the same row (row
 * bus) or the same column (column bus); any other destination, or the CPE
 * itself, is illegal. A broadcast reaches the 7 other CPEs of the row or
 * column. A receive takes the oldest message in the CPE's FIFO for that bus
 * (messages carry no sender: programs keep senders apart as on the
 * machine). Sends block while a destination FIFO is full; receives block
 * while it is empty. */
void st_cpe_send(st_cpe *cpe, int dst_row, int dst_col, const double msg[ST_CPE_MSG_DOUBLES]);
void st_cpe_bcast(st_cpe *cpe, st_cpe_bus bus, const double msg[ST_CPE_MSG_DOUBLES]);
void st_cpe_recv(st_cpe *cpe, st_cpe_bus bus, double msg[ST_CPE_MSG_DOUBLES]);

/* n values of type (LDM) as ceil(n / 4) messages, floats widened to doubles
 * on the way out and narrowed on the way in, the last message padded. */
void st_cpe_send_values(st_cpe *cpe, int dst_row, int dst_col, st_cpe_dtype type,
                        const void *src, size_t n);
void st_cpe_bcast_values(st_cpe *cpe, st_cpe_bus bus, st_cpe_dtype type, const void *src,
                         size_t n);
void st_cpe_recv_values(st_cpe *cpe, st_cpe_bus bus, st_cpe_dtype type, void *dst, size_t n);

/* Barrier over all 64 CPEs (athread_syn(ARRAY_SCOPE)). */
void st_cpe_sync(st_cpe *cpe);

/* Declare computation for the cost model: a loop's instruction mix (see
 * st_cpe_loop); the CPE's clock advances by st_cpe_loop_cycles. */
void st_cpe_loop_run(st_cpe *cpe, const st_cpe_loop *loop);

/* Whether the cluster runs in cost-only mode (st_cpe_cluster_set_cost_only):
 * a kernel then skips its arithmetic and data movement in LDM, keeping its
 * control flow, DMA, messages and declared loops. */
int st_cpe_cost_only(const st_cpe *cpe);

/* The mesh GEMM: one step of swDNN's register-communication matrix product
 * over the 8x8 mesh, a collective every CPE of the launch calls the same
 * number of times (the launch fails with a message otherwise). CPE (r, c)
 * adds to its C block
 *     C[i][j] += sum over s = 0..7, k of colop(s, c)[i][k] * rowop(r, s)[k][j]
 * where colop(s, c) is the col_op block CPE (s, c) owns (ni x nk_s; it
 * travels down column c, one scalar per message, loaded with ldse and put
 * with putc) and rowop(r, s) the row_op block CPE (r, s) owns (nk_s x nj;
 * it travels along row r, 4 values per message, vld and putr). j is the
 * SIMD dimension: C and rowop are rows of nj contiguous values; colop is
 * read one scalar at a time, so it may be stored either way: rows of nk
 * scalars, or (col_trans) nk rows of ni. Every CPE of column c has C's ni rows, every CPE
 * of row r C's nj columns, and the owners of slice s agree on nk_s; a CPE
 * may have empty blocks (a dimension 0). Pointers are LDM of this CPE;
 * values are summed in double per step s and added to C in its own type.
 *
 * Time (cpe_mesh.c): the collective starts when every CPE has arrived; at
 * step s the CPEs run swDNN's loop over register blocks of 4 C rows x 4
 * vectors (16 accumulators), each block iterating over nk_s with its
 * multiply-adds on P0 and its gets (or, for the owners of step s, loads
 * and puts) on P1, plus the C block's loads and stores; all dimensions are
 * padded to the largest in the mesh and to whole blocks, as the lockstep
 * register communication requires; a step takes as long as its slowest
 * CPE (the one owning both operands). */
typedef struct st_cpe_mesh_gemm {
    st_cpe_dtype type;
    void *c;            /* [ni][ldc], the first nj of each row used */
    size_t ni, nj, ldc;
    const void *col_op; /* [ni][ld_col]: the first nk of each row; col_trans: [nk][ld_col] */
    size_t col_nk, ld_col;
    int col_trans;
    const void *row_op; /* [nk][ld_row]: the first nj of each row */
    size_t row_nk, ld_row;
    int unroll;         /* k iterations per loop branch: swDNN's 1, a tuned BLAS's 4 */
    int float_msgs;     /* swCaffe's float loop (gemm_float.S): floats travel as doubles,
                           each message costed float_msg_cycles more on P1 */
} st_cpe_mesh_gemm;

void st_cpe_mesh_gemm_step(st_cpe *cpe, const st_cpe_mesh_gemm *g);

size_t st_cpe_dtype_size(st_cpe_dtype type);

#endif
