/* What only the oneDNN backend does, beyond what every backend promises
 * (that is test_conformance.c, which runs it against the reference
 * backend): once set up, an inner product's forward allocates nothing; and
 * a named convolution implementation (--conv-impl blocked) does not leave
 * a pass to oneDNN's reference implementation where another layout has a
 * real one.
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

#include <oneapi/dnnl/dnnl.h>

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

/* ---- a named implementation avoids oneDNN's reference one ---- */

/* Whether oneDNN's first implementation of the weight gradient of a
 * convolution (n x ic x hw x hw -> oc, k x k, stride 1, no padding, bias),
 * its activations in the layouts its forward chooses from format any (the
 * blocked family), is its reference one: asked of oneDNN itself. */
static int blocked_weight_gradient_is_ref(int n, int ic, int hw, int oc, int k)
{
    int o = hw - k + 1;
    dnnl_engine_t eng;
    assert_int_equal(dnnl_engine_create(&eng, dnnl_cpu, 0), dnnl_success);
    dnnl_dims_t sd = {n, ic, hw, hw}, wd = {oc, ic, k, k}, bd = {oc}, dd = {n, oc, o, o};
    dnnl_dims_t st = {1, 1}, pad = {0, 0};
    dnnl_memory_desc_t src, wei, bias, dst;
    dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_x);
    dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dnnl_format_tag_any);
    dnnl_convolution_desc_t fd, wgd;
    dnnl_primitive_desc_t fpd, wpd;
    assert_int_equal(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                        dnnl_convolution_direct, &src, &wei,
                                                        &bias, &dst, st, pad, pad),
                     dnnl_success);
    assert_int_equal(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL), dnnl_success);
    src = *dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0);
    dst = *dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0);
    assert_int_equal(dnnl_convolution_backward_weights_desc_init(&wgd, dnnl_convolution_direct,
                                                                 &src, &wei, &bias, &dst, st,
                                                                 pad, pad),
                     dnnl_success);
    assert_int_equal(dnnl_primitive_desc_create(&wpd, &wgd, NULL, eng, fpd), dnnl_success);
    const char *name = NULL;
    assert_int_equal(dnnl_primitive_desc_query(wpd, dnnl_query_impl_info_str, 0, &name),
                     dnnl_success);
    int ref = strncmp(name, "ref", 3) == 0;
    print_message("blocked weight gradient, %d -> %d channels, %dx%d: oneDNN's first is %s\n",
                  ic, oc, k, k, name);
    dnnl_primitive_desc_destroy(wpd);
    dnnl_primitive_desc_destroy(fpd);
    dnnl_engine_destroy(eng);
    return ref;
}

/* Whether the dnnl kernel of that convolution, with conv_impl "blocked"
 * and a weight gradient, lays its output out in channel blocks. */
static int blocked_kernel_keeps_blocks(int n, int ic, int hw, int oc, int k)
{
    const st_backend *be;
    st_error err = {0};
    st_bctx *ctx = NULL;
    st_kernel *kern = NULL;
    const st_backend_opts bo = {.intra_threads = 1, .conv_impl = "blocked"};
    int sizes[1] = {n}, o = hw - k + 1;
    st_conv_desc d = {.base = {.kind = ST_K_CONV, .name = "0.conv", .backward = 1, .n = n,
                               .batch_sizes = sizes, .n_batch_sizes = 1},
                      .ic = ic, .ih = hw, .iw = hw, .oc = oc, .oh = o, .ow = o, .kh = k,
                      .kw = k, .sh = 1, .sw = 1, .groups = 1, .bias = 1,
                      .act = ST_ACT_LINEAR};
    if (st_backend_find("dnnl", &be, &err) != ST_OK ||
        be->ctx_create(&bo, &ctx, &err) != ST_OK ||
        be->kernel_create(ctx, &d.base, &kern, &err) != ST_OK)
        fail_msg("set-up: %s", err.msg);
    const dnnl_memory_desc_t *md = kern->dst_layout;
    int blocks = md && md->format_desc.blocking.inner_nblks > 0;
    kern->ops->destroy(kern);
    be->ctx_destroy(ctx);
    return blocks;
}

/* --conv-impl blocked ran LeNet-5's first convolution (one input channel)
 * with oneDNN's reference weight gradient, 65 times slower than the run
 * in nhwc: such a layer now takes another layout, and one with a real
 * blocked implementation keeps its blocks. Which layers have one depends
 * on the CPU and oneDNN: asked of oneDNN, not assumed. */
static void named_impl_avoids_reference(void **state)
{
    (void)state;
    int shapes[][5] = {{8, 1, 28, 20, 5}, {8, 16, 12, 16, 3}};
    for (int i = 0; i < 2; i++) {
        int *s = shapes[i];
        int ref = blocked_weight_gradient_is_ref(s[0], s[1], s[2], s[3], s[4]);
        int blocks = blocked_kernel_keeps_blocks(s[0], s[1], s[2], s[3], s[4]);
        if (ref && blocks)
            fail_msg("%d -> %d channels: the kernel kept the blocked layout, where oneDNN "
                     "has only its reference weight gradient", s[1], s[3]);
        if (!ref && !blocks)
            fail_msg("%d -> %d channels: the kernel left the blocked layout, where oneDNN "
                     "has a real weight gradient", s[1], s[3]);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], NO_LAZY_CHILD) == 0)
        return forward_after_set_up();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_allocates_nothing),
        cmocka_unit_test(named_impl_avoids_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
