/* The emulated core group's cluster: a context per CPE of the machine's
 * mesh (64 on the SW26010), the launch, its deadlock reports and the
 * counters a launch returns. The scheduler that runs a launch's CPEs, and
 * the blocks and faults that stop a program, are cpe_sched.c's; what a
 * program asks of its CPE otherwise (its place, the barrier, declared
 * work) is cpe_program.c's.
 *
 * Why user-space contexts. A CPE program blocks in the middle of its code
 * (a receive from an empty FIFO, a send to a full one, a barrier), so each
 * of the 64 programs needs a stack to be suspended on. The candidates:
 *   - 64 threads: every block is a futex wait and a kernel context switch
 *     (microseconds), 64 threads share 2 cores, and the interleaving - hence
 *     the order in which messages of different senders enter a FIFO and the
 *     modelled times - changes from run to run.
 *   - supersteps (run every CPE to its next communication point, deliver,
 *     repeat): deterministic, but each kernel must be cut into resumable
 *     pieces, so it no longer has the structure it would have on the CPE.
 *   - user-space contexts on the launching thread (cpe_context.c), chosen:
 *     a kernel is straight-line C as on the CPE; a switch happens only when
 *     a CPE cannot go on; the fixed round-robin order makes every launch
 *     deterministic; one thread per core group leaves the other cores to the
 *     other workers. On x86-64 a switch is a few instructions of assembly
 *     that save the callee-saved registers and swap stack pointers: about
 *     13 ns measured here, scheduler included (64 CPEs passing 20000
 *     barriers: 1.28 M switches), against 0.24 us with glibc's swapcontext,
 *     which also makes a sigprocmask system call each time and remains the
 *     fallback on other machines. Starting a context writes a frame on its
 *     stack, so a launch costs no system call: 5.4 us for an empty kernel,
 *     against 29 us with getcontext/makecontext.
 *
 * Each context gets CPE_STACK_BYTES of host memory above a guard page (an
 * overflow faults instead of corrupting the next stack). On the machine the
 * stack lives in LDM; here host frames and sanitizer redzones are larger, and
 * kernels keep their data in st_cpe_ldm_alloc buffers, so the stack holds only
 * locals. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/strlist.h"
#include "cpe/model.h"
#include "cpe_internal.h"

#ifdef CPE_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* Host stack per CPE context: 256 KB, generous for kernel locals under
 * sanitizers; untouched pages of the mapping cost no memory. */
#define CPE_STACK_BYTES (256 * 1024)

/* ---- creation ---- */

st_status st_cpe_cluster_create(st_cpe_cluster **out, const st_cpe_machine *machine,
                                st_error *err)
{
    *out = NULL;
    st_cpe_cluster *cg = st_calloc(1, sizeof *cg, "CPE cluster", err);
    if (!cg)
        return ST_ENOMEM;
    st_status st = machine ? ST_OK : st_cpe_machine_load(&cg->machine, NULL, err);
    if (st != ST_OK)
        goto done;
    if (machine)
        cg->machine = *machine;
    cg->rows = cg->machine.mesh_rows;
    cg->cols = cg->machine.mesh_cols;
    cg->count = cg->machine.cpes;
    cg->ldm_bytes = (size_t)cg->machine.ldm_bytes;
    assert(cg->rows * cg->cols == cg->count && cg->count <= ST_CPE_MAX); /* checked on reading */
    size_t ldm_bytes = (size_t)cg->count * cg->ldm_bytes;
    cg->ldm_base = aligned_alloc(ST_CPE_LDM_ALIGN, ldm_bytes);
    if (!cg->ldm_base) {
        st = st_fail(err, ST_ENOMEM, "out of memory allocating the CPE LDMs (%zu bytes)",
                     ldm_bytes);
        goto done;
    }
    memset(cg->ldm_base, 0, ldm_bytes);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t slot = CPE_STACK_BYTES + page;
    cg->stack_map_bytes = slot * (size_t)cg->count;
    void *map = mmap(NULL, cg->stack_map_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        cg->stack_map_bytes = 0;
        st = st_fail(err, ST_ENOMEM, "out of memory mapping the CPE context stacks (%zu bytes)",
                     cg->stack_map_bytes);
        goto done;
    }
    cg->stack_map = map;
    int fast = cpe_context_fast_available();
    cpe_context_init(&cg->host, NULL, 0, fast);
    for (int i = 0; i < cg->count; i++) {
        st_cpe *cpe = &cg->cpe[i];
        unsigned char *guard = cg->stack_map + (size_t)i * slot;
        if (mprotect(guard, page, PROT_NONE) != 0) {
            st = st_fail(err, ST_EINTERNAL, "cannot protect the guard page of CPE %d's stack", i);
            goto done;
        }
        cpe->cg = cg;
        cpe->id = i;
        cpe->row = i / cg->cols;
        cpe->col = i % cg->cols;
        cpe_context_init(&cpe->context, guard + page, CPE_STACK_BYTES, fast);
        cpe->ldm = cg->ldm_base + (size_t)i * cg->ldm_bytes;
    }
    cg->params = st_sw26010_cost_params_neutral(&cg->machine);
    st = cpe_mesh_init(&cg->mesh, cg->ldm_bytes, err);
    if (st != ST_OK)
        goto done;
    *out = cg;
done:
    if (st != ST_OK)
        st_cpe_cluster_destroy(cg);
    return st;
}

void st_cpe_cluster_destroy(st_cpe_cluster *cg)
{
    if (!cg)
        return;
    if (cg->stack_map)
        munmap(cg->stack_map, cg->stack_map_bytes);
    cpe_mesh_free(&cg->mesh);
    free(cg->ldm_base);
    free(cg);
}

void st_cpe_cluster_set_cost_params(st_cpe_cluster *cg, const st_cpe_cost_params *p)
{
    assert(p->cpes == cg->count); /* the parameters of another machine: a bug */
    cg->params = *p;
}

const st_cpe_machine *st_cpe_cluster_machine(const st_cpe_cluster *cg)
{
    return &cg->machine;
}

const st_cpe_cost_params *st_cpe_cluster_cost_params(const st_cpe_cluster *cg)
{
    return &cg->params;
}

void st_cpe_cluster_set_cost_only(st_cpe_cluster *cg, int on)
{
    cg->cost_only = on != 0;
}

/* ---- deadlock report ---- */

/* The groups a deadlock report lists, in order. */
enum { WAIT_GROUP_RECV_ROW, WAIT_GROUP_RECV_COL, WAIT_GROUP_SEND, WAIT_GROUP_BCAST_ROW,
       WAIT_GROUP_BCAST_COL, WAIT_GROUP_MESH, WAIT_GROUP_BARRIER, WAIT_GROUPS };

static const char *const wait_group_name[WAIT_GROUPS] = {
    "receiving from the row", "receiving from the column", "sending to a full FIFO",
    "broadcasting along the row (a FIFO full)", "broadcasting along the column (a FIFO full)",
    "at the mesh GEMM", "at the barrier",
};

static int wait_group(const cpe_wait *w)
{
    switch (w->kind) {
    case CPE_WAIT_RECV:
        return w->bus == ST_CPE_ROW ? WAIT_GROUP_RECV_ROW : WAIT_GROUP_RECV_COL;
    case CPE_WAIT_SEND:
        return WAIT_GROUP_SEND;
    case CPE_WAIT_BCAST:
        return w->bus == ST_CPE_ROW ? WAIT_GROUP_BCAST_ROW : WAIT_GROUP_BCAST_COL;
    case CPE_WAIT_MESH:
        return WAIT_GROUP_MESH;
    case CPE_WAIT_BARRIER:
    case CPE_WAIT_NONE:
        break;
    }
    return WAIT_GROUP_BARRIER;
}

static void cluster_report_deadlock(st_cpe_cluster *cg)
{
    char text[sizeof cg->fault.msg];
    size_t len = 0;
    text[0] = '\0';
    for (int g = 0; g < WAIT_GROUPS; g++) {
        int listed = 0;
        for (int i = 0; i < cg->count; i++) {
            const st_cpe *cpe = &cg->cpe[i];
            if (cpe->state != CPE_BLOCKED || wait_group(&cpe->wait) != g)
                continue;
            if (!listed)
                st_str_appendf(text, sizeof text, &len, "%s%s:", len ? "; " : "", wait_group_name[g]);
            st_str_appendf(text, sizeof text, &len, " (%d,%d)", cpe->row, cpe->col);
            if (g == WAIT_GROUP_SEND) {
                const st_cpe *peer = &cg->cpe[cpe->wait.peer];
                st_str_appendf(text, sizeof text, &len, "->(%d,%d)", peer->row, peer->col);
            }
            listed++;
        }
    }
    int finished = 0;
    for (int i = 0; i < cg->count; i++)
        finished += cg->cpe[i].state == CPE_DONE;
    st_str_appendf(text, sizeof text, &len, "; %d CPE%s finished", finished, finished == 1 ? "" : "s");
    st_fail(&cg->fault, ST_EINTERNAL,
            "kernel '%s': deadlock: every CPE that has not finished is blocked: %s",
            cg->kernel_name, text);
}

/* ---- the launch ---- */

/* Under AddressSanitizer, a program stopped by a fault (or a deadlock)
 * leaves its frames' redzones poisoned on its stack; clear them before the
 * stack is reused. */
static void stack_unpoison(void *stack, size_t bytes)
{
#ifdef CPE_ASAN
    __asan_unpoison_memory_region(stack, bytes);
#else
    (void)stack;
    (void)bytes;
#endif
}

static void cpe_entry(void *arg)
{
    st_cpe *cpe = arg;
    st_cpe_cluster *cg = cpe->cg;
    cg->kernel(cpe, cg->args);
    /* A program must wait for its DMA; if it did not, the launch still ends
     * only when the transfers have. */
    cpe_clock *c = &cpe->clock;
    if (c->dma_last_done > c->now) {
        c->dma += c->dma_last_done - c->now;
        c->now = c->dma_last_done;
    }
    cpe->state = CPE_DONE;
    st_cpe *next = cpe_sched_next(cg, cpe->id);
    cpe_context_exit(&cpe->context, next ? &next->context : &cg->host);
}

static void cpe_prepare(st_cpe *cpe)
{
    stack_unpoison(cpe->context.stack, CPE_STACK_BYTES);
    cpe->state = CPE_READY;
    cpe->wait.kind = CPE_WAIT_NONE;
    cpe->ldm_used = 0;
    memset(cpe->in, 0, sizeof cpe->in);
    memset(&cpe->clock, 0, sizeof cpe->clock);
    memset(&cpe->counts, 0, sizeof cpe->counts);
    cpe_context_start(&cpe->context, cpe_entry, cpe);
}

/* Run every CPE to completion, a fault or a deadlock (recorded in
 * cg->fault). CPEs switch to one another directly (cpe_block, cpe_entry);
 * control comes back here only on a fault or when no CPE can run: either
 * all have finished or the rest are blocked for good. */
static void cluster_run(st_cpe_cluster *cg)
{
    st_cpe *first = cpe_sched_next(cg, cg->count - 1);
    if (first)
        cpe_context_switch(&cg->host, &first->context);
    if (cg->fault.code != ST_OK)
        return;
    for (int i = 0; i < cg->count; i++)
        if (cg->cpe[i].state != CPE_DONE) {
            cluster_report_deadlock(cg);
            return;
        }
}

/* Sum the CPEs' counts; the predicted time is the clock of the CPE that
 * finished last (the lowest id among equals). */
static void cluster_collect(const st_cpe_cluster *cg, st_cpe_counters *out)
{
    memset(out, 0, sizeof *out);
    int critical = 0;
    for (int i = 0; i < cg->count; i++) {
        st_cpe_counters_add(out, &cg->cpe[i].counts);
        if (cg->cpe[i].clock.now > cg->cpe[critical].clock.now)
            critical = i;
    }
    out->launches = 1;
    out->barriers = cg->barriers;
    out->mesh_gemms = cg->mesh.collectives;
    out->critical_cpe = critical;
    const cpe_clock *c = &cg->cpe[critical].clock;
    double hz = cg->params.clock_hz;
    st_cpe_time *t = &out->time;
    t->compute_s = c->compute / hz;
    t->dma_s = c->dma / hz;
    t->regcomm_s = c->regcomm / hz;
    t->sync_s = c->sync / hz;
    t->launch_s = cg->params.launch_seconds;
    t->total_s = t->compute_s + t->dma_s + t->regcomm_s + t->sync_s + t->launch_s;
}

st_status st_cpe_launch(st_cpe_cluster *cg, const char *name, st_cpe_kernel fn, void *args,
                        st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!cg || !fn || !name)
        return st_fail(err, ST_EINPUT, "st_cpe_launch: no %s given",
                       !cg ? "cluster" : !fn ? "kernel function" : "kernel name");
    if (cg->launching)
        return st_fail(err, ST_EINTERNAL,
                       "kernel '%s' launched on a cluster that is running kernel '%s'", name,
                       cg->kernel_name);
    cg->launching = 1;
    cg->kernel_name = name;
    cg->kernel = fn;
    cg->args = args;
    st_error_clear(&cg->fault);
    memset(&cg->barrier, 0, sizeof cg->barrier);
    cg->barriers = 0;
    cg->mesh.arrived = 0;
    cg->mesh.collectives = 0;
    for (int i = 0; i < cg->count; i++)
        cpe_prepare(&cg->cpe[i]);
    cluster_run(cg);
    st_status st = cg->fault.code;
    if (st == ST_OK) {
        if (out)
            cluster_collect(cg, out);
    } else {
        st_fail(err, st, "%s", cg->fault.msg);
    }
    cg->launching = 0;
    return st;
}
