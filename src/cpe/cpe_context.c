/* Execution contexts for CPE programs: a function started on its own stack,
 * suspended and resumed at blocking points, on the launching thread
 * (cpe_cluster.c says why contexts, cpe_sched.c how they are scheduled).
 *
 * Two mechanisms behind one interface, chosen per cluster:
 *   - fast (x86-64): a switch in a few instructions of assembly pushes the
 *     callee-saved registers (rbx, rbp, r12-r15) and the SSE / x87 control
 *     words on the current stack, stores the stack pointer, loads the other
 *     context's and pops. No system call: glibc's swapcontext also saves and
 *     restores the signal mask with a sigprocmask call, which was most of
 *     the cost of a switch. A fresh context is a stack holding such a frame
 *     whose return address is a trampoline that calls the entry function.
 *     Not used when the process runs with a CET shadow stack (the `ret` to
 *     another stack would fault), which rdsspq detects.
 *   - ucontext (getcontext / makecontext / swapcontext): every other
 *     architecture, and the shadow-stack case.
 * Under AddressSanitizer, with either mechanism, every switch is announced
 * with __sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber, so
 * ASan knows which stack is current (its fake stacks for use-after-return
 * checks included). The bounds of the launching thread's stack are not
 * known in advance: a context just entered records the bounds of the stack
 * it came from, as __sanitizer_finish_switch_fiber reports them, in the
 * context it came from. */
#include <stdlib.h>

#include "cpe_internal.h"

#ifdef ST_CPE_PORTABLE
#define ST_CPE_PORTABLE_BUILD 1
#else
#define ST_CPE_PORTABLE_BUILD 0
#endif

#ifdef CPE_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

/* ---- the x86-64 switch ---- */

#if defined(__x86_64__)
/* cpe_switch_x86_64(save_sp, load_sp): rdi = where to store this stack
 * pointer, rsi = the stack pointer to resume. The frame, from the stack
 * pointer up: MXCSR (4 bytes) and the x87 control word (2, then 2 unused),
 * r15, r14, r13, r12, rbx, rbp, the return address.
 * cpe_start_x86_64 is the return address of a fresh context's frame: it
 * calls r13(r12) on a 16-byte aligned stack; that call never returns. Its
 * unwind information marks it as the outermost frame (for debuggers). */
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".type cpe_switch_x86_64, @function\n"
        "cpe_switch_x86_64:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size cpe_switch_x86_64, .-cpe_switch_x86_64\n"
        ".p2align 4\n"
        ".type cpe_start_x86_64, @function\n"
        "cpe_start_x86_64:\n"
        "    .cfi_startproc\n"
        "    .cfi_undefined rip\n"
        "    movq %r12, %rdi\n"
        "    callq *%r13\n"
        "    ud2\n"
        "    .cfi_endproc\n"
        ".size cpe_start_x86_64, .-cpe_start_x86_64\n"
        ".popsection\n");

__attribute__((visibility("hidden"))) void cpe_switch_x86_64(void **save_sp, void *load_sp);
__attribute__((visibility("hidden"))) extern const char cpe_start_x86_64[];

/* Words of a fresh context's frame below the 16-byte aligned stack top: the
 * control words, 6 registers, the return address and 2 words of padding that
 * leave the trampoline's stack 16-byte aligned. */
enum { START_FRAME_WORDS = 10, START_R13 = 3, START_R12 = 4, START_RET = 7 };

/* Whether a CET shadow stack is active: rdsspq leaves 0 in its operand when
 * it is not (and is a no-op on processors without CET). */
static int shadow_stack_active(void)
{
    unsigned long long ssp = 0;
    __asm__ volatile("rdsspq %0" : "+r"(ssp));
    return ssp != 0;
}
#endif

int cpe_context_fast_available(void)
{
#if defined(__x86_64__)
    /* the portable build (make PORTABLE=1) tests the ucontext mechanism */
    return !shadow_stack_active() && !ST_CPE_PORTABLE_BUILD;
#else
    return 0;
#endif
}

/* ---- AddressSanitizer's view of the switches ---- */

static void asan_leave(void **fake_stack, const cpe_context *to)
{
#ifdef CPE_ASAN
    __sanitizer_start_switch_fiber(fake_stack, to->asan_stack, to->asan_stack_bytes);
#else
    (void)fake_stack;
    (void)to;
#endif
}

/* In self, just resumed or started: record the bounds of the stack left. */
static void asan_arrive(void *fake_stack, cpe_context *self)
{
#ifdef CPE_ASAN
    const void *bottom;
    size_t bytes;
    __sanitizer_finish_switch_fiber(fake_stack, &bottom, &bytes);
    self->resumed_by->asan_stack = bottom;
    self->resumed_by->asan_stack_bytes = bytes;
#else
    (void)fake_stack;
    (void)self;
#endif
}

/* ---- starting, switching, leaving ---- */

void cpe_context_init(cpe_context *ctx, void *stack, size_t stack_bytes, int fast)
{
    ctx->sp = NULL;
    ctx->fast = fast;
    ctx->stack = stack;
    ctx->stack_bytes = stack_bytes;
    ctx->asan_stack = stack;
    ctx->asan_stack_bytes = stack_bytes;
    ctx->entry = NULL;
    ctx->arg = NULL;
    ctx->resumed_by = NULL;
}

static _Noreturn void context_begin(cpe_context *ctx)
{
    asan_arrive(NULL, ctx);
    ctx->entry(ctx->arg);
    abort(); /* an entry function leaves with cpe_context_exit */
}

/* makecontext passes ints only: the context pointer travels in two halves. */
static void context_begin_ucontext(unsigned int hi, unsigned int lo)
{
    context_begin((cpe_context *)(uintptr_t)(((uint64_t)hi << 32) | lo));
}

void cpe_context_start(cpe_context *ctx, void (*entry)(void *), void *arg)
{
    ctx->entry = entry;
    ctx->arg = arg;
#if defined(__x86_64__)
    if (ctx->fast) {
        uintptr_t top = ((uintptr_t)ctx->stack + ctx->stack_bytes) & ~(uintptr_t)15;
        uint64_t *frame = (uint64_t *)top - START_FRAME_WORDS;
        uint32_t mxcsr;
        uint16_t fpu_cw;
        __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fpu_cw));
        for (int i = 0; i < START_FRAME_WORDS; i++)
            frame[i] = 0; /* rbp = 0 ends frame-pointer walks at the trampoline */
        frame[0] = (uint64_t)mxcsr | (uint64_t)fpu_cw << 32;
        frame[START_R13] = (uint64_t)(uintptr_t)context_begin;
        frame[START_R12] = (uint64_t)(uintptr_t)ctx;
        frame[START_RET] = (uint64_t)(uintptr_t)cpe_start_x86_64;
        ctx->sp = frame;
        return;
    }
#endif
    getcontext(&ctx->uc);
    ctx->uc.uc_stack.ss_sp = ctx->stack;
    ctx->uc.uc_stack.ss_size = ctx->stack_bytes;
    ctx->uc.uc_link = NULL;
    uint64_t p = (uint64_t)(uintptr_t)ctx;
    makecontext(&ctx->uc, (void (*)(void))context_begin_ucontext, 2, (unsigned int)(p >> 32),
                (unsigned int)(p & 0xffffffffu));
}

void cpe_context_switch(cpe_context *from, cpe_context *to)
{
    void *fake_stack = NULL;
    to->resumed_by = from;
    asan_leave(&fake_stack, to);
#if defined(__x86_64__)
    if (from->fast)
        cpe_switch_x86_64(&from->sp, to->sp);
    else
#endif
        swapcontext(&from->uc, &to->uc);
    asan_arrive(fake_stack, from);
}

_Noreturn void cpe_context_exit(cpe_context *from, cpe_context *to)
{
    to->resumed_by = from;
    asan_leave(NULL, to);
#if defined(__x86_64__)
    if (from->fast)
        cpe_switch_x86_64(&from->sp, to->sp); /* not a local: ASan has just freed them */
    else
#endif
        setcontext(&to->uc);
    abort(); /* nothing resumes a context that left for good */
}
