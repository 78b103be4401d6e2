/* Internals of the CPE emulator shared by its files (cpe_cluster.c: the
 * cluster and the launch; cpe_sched.c: scheduling, blocks and faults;
 * cpe_program.c: identity, the barrier, declared work; cpe_context.c:
 * execution contexts; cpe_ldm.c; cpe_dma.c; cpe_regcomm.c; cpe_mesh.c;
 * cpe_cost.c; cpe_counters.c): the CPE and cluster structs, the contexts,
 * the mesh's lines, the blocking and fault primitives, the per-event
 * costs. */
#ifndef ST_CPE_INTERNAL_H
#define ST_CPE_INTERNAL_H

#include <ucontext.h>

#include "cpe/cpe.h"

/* CPE_ASAN: built with AddressSanitizer (gcc's or clang's way of saying
 * so), whose stack and poisoning interfaces the contexts and the LDM use. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CPE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CPE_ASAN 1
#endif

/* An execution context (cpe_context.c): a CPE program on its own stack, or
 * the launching thread (stack NULL). fast selects the hand-written x86-64
 * switch (sp) over ucontext (uc); all contexts of a cluster agree. */
typedef struct cpe_context {
    void *sp;          /* fast: the stack pointer while suspended */
    int fast;
    void *stack;       /* the context's stack, stack_bytes long */
    size_t stack_bytes;
    void (*entry)(void *); /* what a started context runs, with arg */
    void *arg;
    /* AddressSanitizer bookkeeping: the stack's bounds as ASan knows them
     * (learnt at the first switch for the launching thread), and the
     * context that last switched to this one. */
    const void *asan_stack;
    size_t asan_stack_bytes;
    struct cpe_context *resumed_by;
    ucontext_t uc;     /* not fast */
} cpe_context;

/* Whether the fast switch works in this process (x86-64, no CET shadow
 * stack). */
int cpe_context_fast_available(void);

/* Set up ctx once: its stack (NULL, 0 for the launching thread's). */
void cpe_context_init(cpe_context *ctx, void *stack, size_t stack_bytes, int fast);

/* Make ctx a fresh context that runs entry(arg) from the top of its stack
 * when first switched to. entry must leave with cpe_context_exit. */
void cpe_context_start(cpe_context *ctx, void (*entry)(void *), void *arg);

/* Suspend from (the running context) and resume to; returns when another
 * context switches back to from. */
void cpe_context_switch(cpe_context *from, cpe_context *to);

/* Leave from for good and resume to; from can only be started again. */
_Noreturn void cpe_context_exit(cpe_context *from, cpe_context *to);

typedef enum cpe_state { CPE_READY, CPE_BLOCKED, CPE_DONE } cpe_state;

/* What a blocked CPE waits for; the scheduler resumes it when it holds. */
typedef enum cpe_wait_kind {
    CPE_WAIT_NONE,
    CPE_WAIT_RECV,    /* a message in its FIFO for bus */
    CPE_WAIT_SEND,    /* room in peer's FIFO for bus */
    CPE_WAIT_BCAST,   /* room in the FIFO for bus of every other CPE of its line */
    CPE_WAIT_BARRIER, /* the barrier generation to move past generation */
    CPE_WAIT_MESH,    /* the mesh GEMM's generation to move past generation */
} cpe_wait_kind;

typedef struct cpe_wait {
    cpe_wait_kind kind;
    st_cpe_bus bus;
    int peer;            /* CPE id, for CPE_WAIT_SEND */
    unsigned generation; /* for CPE_WAIT_BARRIER and CPE_WAIT_MESH */
} cpe_wait;

typedef struct cpe_msg {
    double v[ST_CPE_MSG_DOUBLES];
    double arrival_cycle; /* on the receiver's clock */
} cpe_msg;

/* A receive FIFO: a ring of ST_CPE_FIFO_DEPTH slots. free_cycle[s] is when
 * the receiver last emptied slot s: a sender filling it cannot have done
 * so earlier. */
typedef struct cpe_fifo {
    cpe_msg slot[ST_CPE_FIFO_DEPTH];
    double free_cycle[ST_CPE_FIFO_DEPTH];
    int head;
    int count;
} cpe_fifo;

/* A CPE's clock in cycles since the launch began, and where it went:
 * now == compute + dma + regcomm + sync. */
typedef struct cpe_clock {
    double now;
    double compute;
    double dma;
    double regcomm;
    double sync;
    double dma_channel_free; /* when the CPE's DMA channel has served its queue */
    double dma_last_done;    /* when the last transfer issued completes */
} cpe_clock;

struct st_cpe {
    st_cpe_cluster *cg;
    int row, col, id;
    cpe_context context; /* its stack: CPE_STACK_BYTES, above a guard page */
    unsigned char *ldm; /* cg->ldm_bytes, a slice of cg->ldm_base */
    size_t ldm_used;
    cpe_state state;
    cpe_wait wait;
    cpe_fifo in[2]; /* indexed by st_cpe_bus */
    cpe_clock clock;
    st_cpe_counters counts; /* this CPE's share of the launch */
};

typedef struct cpe_barrier {
    int arrived;
    unsigned generation;
    double latest_arrival; /* the latest clock among the CPEs that arrived */
    double release_cycle;  /* of the barrier last completed */
} cpe_barrier;

/* The mesh GEMM collective in progress (cpe_mesh.c): what each CPE
 * brought and when it arrived. */
typedef struct cpe_mesh {
    int arrived;
    unsigned generation;
    st_cpe_mesh_gemm op[ST_CPE_MAX];
    double arrival[ST_CPE_MAX];
    uint64_t collectives;   /* completed in this launch */
    double *row_sum;        /* host scratch for one C row's step sum */
    size_t row_sum_count;
} cpe_mesh;

struct st_cpe_cluster {
    st_cpe_machine machine; /* what it emulates */
    int rows, cols, count;  /* its mesh: machine.mesh_rows, mesh_cols, cpes */
    size_t ldm_bytes;       /* per CPE: machine.ldm_bytes */
    st_cpe cpe[ST_CPE_MAX]; /* the first count used */
    cpe_context host; /* the launching thread's, resumed when no CPE can run */
    unsigned char *ldm_base; /* count * ldm_bytes */
    unsigned char *stack_map; /* the stacks and their guard pages */
    size_t stack_map_bytes;
    st_cpe_cost_params params;
    int cost_only;       /* st_cpe_cluster_set_cost_only */
    /* The launch in progress. */
    int launching;
    const char *kernel_name;
    st_cpe_kernel kernel;
    void *args;
    st_error fault; /* the first illegal operation */
    cpe_barrier barrier;
    uint64_t barriers;
    cpe_mesh mesh;
};

/* The mesh's lines, for register communication and the scheduler's
 * broadcast wait: the CPE at index on cpe's row (bus ST_CPE_ROW: index is
 * a column) or column (a row), and the CPEs on a bus: a row's columns or a
 * column's rows. */
static inline st_cpe *cpe_line_peer(st_cpe *cpe, st_cpe_bus bus, int index)
{
    st_cpe_cluster *cg = cpe->cg;
    return bus == ST_CPE_ROW ? &cg->cpe[cpe->row * cg->cols + index]
                             : &cg->cpe[index * cg->cols + cpe->col];
}

static inline int cpe_line_length(const st_cpe *cpe, st_cpe_bus bus)
{
    return bus == ST_CPE_ROW ? cpe->cg->cols : cpe->cg->rows;
}

/* The scheduler (cpe_sched.c): the CPE to run after CPE `after`, the
 * first that can run in the cyclic order after it (made ready), or NULL
 * when none can. */
st_cpe *cpe_sched_next(st_cpe_cluster *cg, int after);

/* Record an illegal operation of cpe's program ("kernel 'k': CPE (r,c):
 * <message>") and stop it: the call never returns and the launch fails. */
_Noreturn void cpe_fault(st_cpe *cpe, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Switch to the scheduler until cpe->wait holds. */
void cpe_block(st_cpe *cpe);

/* Whether every other CPE of cpe's row (bus ST_CPE_ROW) or column has room
 * in its FIFO for that bus: a broadcast can go. */
int cpe_line_has_room(const st_cpe *cpe, st_cpe_bus bus);

/* Whether the LDM range [p, p + bytes) lies in cpe's allocated LDM
 * (cpe_ldm.c). */
int cpe_ldm_owns(const st_cpe *cpe, const void *p, size_t bytes);

/* A message's send in cycles under p (cpe_cost.c): its share of the
 * aggregate bandwidth, split between p->cpes. */
double cpe_cost_send_cycles(const st_cpe_cost_params *p, int broadcast);

/* Advance cpe's clock by cycles of computation, split into compute (the
 * multiply-add issue cycles, fp_cycles of them) and register communication
 * (the rest), and count flops (cpe_program.c). */
void cpe_clock_compute(st_cpe *cpe, double cycles, double fp_cycles, uint64_t flops);

/* The mesh GEMM's state, set up and freed with the cluster (cpe_mesh.c);
 * a C row holds at most ldm_bytes of values. */
st_status cpe_mesh_init(cpe_mesh *m, size_t ldm_bytes, st_error *err);
void cpe_mesh_free(cpe_mesh *m);

#endif
