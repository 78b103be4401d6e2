/* What only the oneDNN backend does, beyond what every backend promises
 * (that is test_conformance.c, which runs it against the reference
 * backend): once set up, an inner product's forward allocates nothing.
 *
 * oneDNN builds some code at its first call and does not check those
 * allocations (a failure is a segmentation fault): with AVX-512, the
 * "small-n" GEMM kernels of the inner product's forward (fewer than 16
 * outputs), under a once-flag of their own. Under ulimit -v, a run whose
 * readers held the memory at the first iteration crashed so (dnnl_sgemm,
 * pthread_once). The context's creation makes those products, so that,
 * once a context and its kernels exist, a forward allocates nothing: it is
 * run here with the address space limited to what the process has. In a
 * fresh process (one that ran an inner product before has them already);
 * not under the sanitizers, whose allocators need terabytes. On a CPU
 * without AVX-512 the inner product takes the common GEMM, which the
 * first product already set up: there this passes without the fix too. */
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#include "backends/backend.h"

#define NO_LAZY_CHILD "--forward-after-set-up"

static int forward_after_set_up(void)
{
    const st_backend *be;
    st_error err = {0};
    st_bctx *ctx = NULL;
    st_kernel *k = NULL;
    const st_backend_opts bo = {.intra_threads = 1};
    int sizes[1] = {8};
    st_fc_desc d = {.base = {.kind = ST_K_FC, .name = "0.connected", .backward = 1,
                             .src_grad = 1, .n = 8, .batch_sizes = sizes,
                             .n_batch_sizes = 1, .dst_plain = 1},
                    .in = 768, .out = 2, .bias = 1, .act = ST_ACT_LINEAR};
    if (st_backend_find("dnnl", &be, &err) != ST_OK ||
        be->ctx_create(&bo, &ctx, &err) != ST_OK ||
        be->kernel_create(ctx, &d.base, &k, &err) != ST_OK) {
        fprintf(stderr, "set-up: %s\n", err.msg);
        return 2;
    }
    float *src = calloc(8 * 768, sizeof *src), *dst = calloc(8 * 2, sizeof *dst);
    float *w = calloc(2 * 768, sizeof *w), *b = calloc(2, sizeof *b);
    void *ws = calloc(k->workspace_bytes + 64, 1), *scratch = calloc(k->scratch_bytes + 64, 1);
    if (!src || !dst || !w || !b || !ws || !scratch)
        return 3;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t vm = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0)
            vm = (size_t)strtoull(line + 7, NULL, 10) * 1024;
    if (f)
        fclose(f);
    struct rlimit r = {vm + ((size_t)1 << 20), RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &r) != 0)
        return 4;
    st_kargs a = {.n = 8, .src = src, .dst = dst, .weights = w, .bias = b, .training = 1,
                  .workspace = ws, .scratch = scratch};
    if (k->ops->forward(k, &a, &err) != ST_OK) {
        fprintf(stderr, "forward: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static void forward_allocates_nothing(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    print_message("SKIP a forward under an address-space limit: not under a sanitizer\n");
    skip();
#else
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_dnnl", NO_LAZY_CHILD, (char *)NULL);
        _exit(8);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("an inner product's forward, once set up, under an address-space limit of "
                 "what the process had: %s %d", WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
#endif
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], NO_LAZY_CHILD) == 0)
        return forward_after_set_up();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_allocates_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
