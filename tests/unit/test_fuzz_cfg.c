/* Deterministic mutation fuzzing of the cfg reader, the [net] parser and the
 * layer builders (run under AddressSanitizer + UBSan through SAN_TESTS).
 *
 * Several valid cfgs (LeNet, a net using every layer type, the three anchor
 * cfgs) are mutated with a seeded generator of our own: byte flips, inserts
 * and deletes, line deletion / duplication / swap, numbers replaced by
 * extremes, emptied values, huge sizes, swapped section names, inserted
 * key=value lines. Every variant goes through st_cfg_parse,
 * st_hparams_parse and st_net_build; the status must be ST_OK, ST_EINPUT or
 * ST_ENOMEM, and an error message must be non-empty and start with the file
 * name. Variants that build and are small enough also get a reference-backend
 * replica (n = 1) and one forward pass on zeros. Any crash or sanitizer
 * report aborts the test; the variant being run is printed first. */
#include "testlib.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "backends/backend.h"
#include "layers/layer.h"

#define ANCHORS "tests/fixtures/anchors/"
#define VARIANTS_PER_BASE 1600
#define MAX_TEXT (64 * 1024)

/* Replicas are only made for nets below these sizes (floats per sample,
 * floats of parameters, forward flops per sample): memory and time stay
 * small under the sanitizers. Convolution scratch is at most flops / 2. */
#define MAX_ACT_FLOATS (4L << 20)
#define MAX_PARAM_FLOATS (4L << 20)
#define MAX_FLOPS 1.2e7

/* ------------------------------------------------------------------ RNG */

typedef struct fz_rng {
    uint64_t s;
} fz_rng;

static uint64_t fz_next(fz_rng *r)
{
    /* xorshift64* */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}

static size_t fz_below(fz_rng *r, size_t n)
{
    return n ? (size_t)(fz_next(r) % n) : 0;
}

#define PICK(r, arr) (arr)[fz_below((r), sizeof(arr) / sizeof((arr)[0]))]

/* ------------------------------------------------------------ text buffer */

typedef struct fz_text {
    char *p;
    size_t len;
} fz_text;

/* Replace [at, at + del) by ins[0 .. ins_len); refuse to grow past MAX_TEXT. */
static void fz_splice(fz_text *t, size_t at, size_t del, const char *ins, size_t ins_len)
{
    if (at > t->len)
        at = t->len;
    if (del > t->len - at)
        del = t->len - at;
    if (t->len - del + ins_len > MAX_TEXT)
        return;
    memmove(t->p + at + ins_len, t->p + at + del, t->len - at - del);
    memcpy(t->p + at, ins, ins_len);
    t->len = t->len - del + ins_len;
}

/* Start offsets of the lines; returns how many (at most max). */
static size_t fz_lines(const fz_text *t, size_t *starts, size_t max)
{
    size_t n = 0;
    if (t->len == 0)
        return 0;
    starts[n++] = 0;
    for (size_t i = 0; i + 1 < t->len && n < max; i++)
        if (t->p[i] == '\n')
            starts[n++] = i + 1;
    return n;
}

static size_t fz_line_end(const fz_text *t, size_t start)
{
    const char *nl = memchr(t->p + start, '\n', t->len - start);
    return nl ? (size_t)(nl - t->p) + 1 : t->len;
}

/* ------------------------------------------------------------- mutations */

static const char *const extremes[] = {
    "0", "-1", "1", "2", "2147483647", "-2147483648", "2147483648", "99999999999",
    "1e40", "-1e40", "nan", "inf", "", "4096", "4097", "65536", "65535", "1e-45",
    "0x7fffffff", "1.5", "-0", "3e9", "16777216", "268435456", "1000000000", "1,2,3",
    "-1,-2", " ", "-99999999999", "1e308", "00000000000000000000000000001", "+7",
};

static const char *const huge_keys[] = {
    "size", "filters", "output", "stride", "padding", "groups", "height", "width",
    "channels", "batch", "layers", "from", "steps", "max_batches", "subdivisions",
};

static const char *const huge_values[] = {
    "4096", "4095", "65536", "2147483647", "99999999999", "1000000", "16777216", "1073741824",
    "0", "-2147483648", "8193", "-1000000",
};

static const char *const section_names[] = {
    "convolutional", "maxpool", "avgpool", "connected", "dropout", "softmax", "cost",
    "batchnorm", "lrn", "shortcut", "route", "net", "network", "conv", "max", "avg",
    "conn", "soft", "yolo", "crop", "", "convolutional ", "[route]",
};

static const char *const insert_keys[] = {
    "size", "stride", "pad", "padding", "filters", "groups", "output", "activation",
    "batch_normalize", "from", "layers", "probability", "alpha", "beta", "k", "type", "scale",
    "temperature", "policy", "steps", "scales", "xnor", "binary", "dilation", "flipped",
    "angle", "hue", "train", "height", "width", "channels", "max_batches", "learning_rate",
    "momentum", "gamma", "power", "step", "burn_in", "decay", "batch", "bogus", "",
    "warmup", "warmup_factor", "learning_rate_min", "pct_start", "div_factor",
    "final_div_factor", "decay_mode", "crop", "crop_pad", "mirror",
};

static const char *const insert_values[] = {
    "1", "0", "-1", "2", "3", "-2", "-3", "7", "relu", "swish", "leaky", "linear", "sse",
    "masked", "-1,-2", "0,1", "-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1", "steps",
    "poly", "cosine", "onecycle", "torch", "1e40", "nan", "", "4096", "65536", "2147483647", "0.5", "0.99", "1000000",
    "/nonexistent/file", "# comment", "=",
};

static const char interesting_bytes[] = "\n\r\t =[]#;,-.0123456789ex\0\xff";

static void mut_flip(fz_text *t, fz_rng *r)
{
    if (!t->len)
        return;
    size_t at = fz_below(r, t->len);
    if (fz_next(r) & 1)
        t->p[at] ^= (char)(1u << fz_below(r, 8));
    else
        t->p[at] = (char)fz_next(r);
}

static void mut_insert_byte(fz_text *t, fz_rng *r)
{
    char c = (fz_next(r) & 3) ? interesting_bytes[fz_below(r, sizeof interesting_bytes - 1)]
                              : (char)fz_next(r);
    fz_splice(t, fz_below(r, t->len + 1), 0, &c, 1);
}

static void mut_delete_bytes(fz_text *t, fz_rng *r)
{
    if (!t->len)
        return;
    fz_splice(t, fz_below(r, t->len), 1 + fz_below(r, 4), "", 0);
}

static void mut_lines(fz_text *t, fz_rng *r, int op)
{
    static size_t starts[4096];
    size_t n = fz_lines(t, starts, 4096);
    if (n == 0)
        return;
    size_t a = fz_below(r, n), ae = fz_line_end(t, starts[a]);
    char line[512];
    size_t alen = ae - starts[a] < sizeof line ? ae - starts[a] : sizeof line;
    memcpy(line, t->p + starts[a], alen);
    switch (op) {
    case 0: /* delete */
        fz_splice(t, starts[a], ae - starts[a], "", 0);
        break;
    case 1: /* duplicate */
        fz_splice(t, ae, 0, line, alen);
        break;
    default: { /* swap with another line: move line a before line b */
        size_t b = fz_below(r, n);
        if (b == a)
            return;
        size_t at = starts[b];
        fz_splice(t, starts[a], ae - starts[a], "", 0);
        if (at > starts[a])
            at -= ae - starts[a];
        fz_splice(t, at, 0, line, alen);
        break;
    }
    }
}

static int is_num_char(char c)
{
    return (c >= '0' && c <= '9') || c == '.' || c == '-';
}

/* Replace a number by an extreme (small: by a small integer, which keeps
 * more variants buildable and varies the shapes the kernels see). */
static void mut_number(fz_text *t, fz_rng *r, int small)
{
    /* Find the number runs, pick one, replace it. */
    size_t count = 0;
    for (size_t i = 0; i < t->len; i++)
        if (is_num_char(t->p[i]) && (i == 0 || !is_num_char(t->p[i - 1])))
            count++;
    if (!count)
        return;
    size_t want = fz_below(r, count), k = 0;
    for (size_t i = 0; i < t->len; i++) {
        if (!(is_num_char(t->p[i]) && (i == 0 || !is_num_char(t->p[i - 1]))))
            continue;
        if (k++ != want)
            continue;
        size_t e = i;
        while (e < t->len && is_num_char(t->p[e]))
            e++;
        char num[16];
        const char *v = num;
        if (small)
            snprintf(num, sizeof num, "%d", (int)fz_below(r, 14) - 1);
        else
            v = PICK(r, extremes);
        fz_splice(t, i, e - i, v, strlen(v));
        return;
    }
}

/* Find "\nkey=" (or at the start); returns the value's offset or -1. */
static long find_key(const fz_text *t, const char *key, fz_rng *r)
{
    size_t klen = strlen(key);
    long hits[64];
    int n = 0;
    for (size_t i = 0; i + klen < t->len && n < 64; i++)
        if ((i == 0 || t->p[i - 1] == '\n') && memcmp(t->p + i, key, klen) == 0 &&
            t->p[i + klen] == '=')
            hits[n++] = (long)(i + klen + 1);
    return n ? hits[fz_below(r, (size_t)n)] : -1;
}

static void mut_value(fz_text *t, fz_rng *r, int empty)
{
    const char *key = PICK(r, huge_keys);
    long at = find_key(t, key, r);
    if (at < 0)
        return;
    size_t e = (size_t)at;
    while (e < t->len && t->p[e] != '\n' && t->p[e] != '\r')
        e++;
    const char *v = empty ? "" : PICK(r, huge_values);
    fz_splice(t, (size_t)at, e - (size_t)at, v, strlen(v));
}

/* Rename one section header (or exchange two). */
static void mut_section(fz_text *t, fz_rng *r)
{
    long hdr[256];
    int n = 0;
    for (size_t i = 0; i < t->len && n < 256; i++)
        if (t->p[i] == '[' && (i == 0 || t->p[i - 1] == '\n'))
            hdr[n++] = (long)i;
    if (!n)
        return;
    size_t a = (size_t)hdr[fz_below(r, (size_t)n)] + 1;
    const char *close = memchr(t->p + a, ']', t->len - a);
    if (!close)
        return;
    size_t alen = (size_t)(close - (t->p + a));
    if (fz_next(r) & 1) {
        const char *v = PICK(r, section_names);
        fz_splice(t, a, alen, v, strlen(v));
        return;
    }
    size_t b = (size_t)hdr[fz_below(r, (size_t)n)] + 1;
    const char *bclose = memchr(t->p + b, ']', t->len - b);
    if (!bclose || b == a || alen >= 64)
        return;
    size_t blen = (size_t)(bclose - (t->p + b));
    if (blen >= 64)
        return;
    char an[64], bn[64];
    memcpy(an, t->p + a, alen);
    memcpy(bn, t->p + b, blen);
    /* Replace the later one first so the earlier offset stays valid. */
    if (a < b) {
        fz_splice(t, b, blen, an, alen);
        fz_splice(t, a, alen, bn, blen);
    } else {
        fz_splice(t, a, alen, bn, blen);
        fz_splice(t, b, blen, an, alen);
    }
}

static void mut_insert_line(fz_text *t, fz_rng *r)
{
    static size_t starts[4096];
    size_t n = fz_lines(t, starts, 4096);
    char line[256];
    int len;
    if (fz_below(r, 5) == 0)
        len = snprintf(line, sizeof line, "[%s]\n", PICK(r, section_names));
    else
        len = snprintf(line, sizeof line, "%s=%s\n", PICK(r, insert_keys), PICK(r, insert_values));
    size_t at = n ? starts[fz_below(r, n)] : 0;
    fz_splice(t, at, 0, line, (size_t)len);
}

static void mut_line_ending(fz_text *t, fz_rng *r)
{
    static size_t starts[4096];
    size_t n = fz_lines(t, starts, 4096);
    if (!n)
        return;
    size_t at = starts[fz_below(r, n)];
    static const char *const bits[] = {"\r", "#", ";", "  ", "\t", "\r\n", "\n\n"};
    const char *v = PICK(r, bits);
    if (fz_next(r) & 1) {
        size_t e = fz_line_end(t, at);
        if (e > at && t->p[e - 1] == '\n')
            fz_splice(t, e - 1, 0, v, strlen(v));
    } else {
        fz_splice(t, at, 0, v, strlen(v));
    }
}

static void mutate(fz_text *t, fz_rng *r)
{
    int rounds = (fz_next(r) & 1) ? 1 : 2 + (int)fz_below(r, 3);
    for (int i = 0; i < rounds; i++) {
        switch (fz_below(r, 15)) {
        case 0: mut_flip(t, r); break;
        case 1: mut_insert_byte(t, r); break;
        case 2: mut_delete_bytes(t, r); break;
        case 3: mut_lines(t, r, 0); break;
        case 4: mut_lines(t, r, 1); break;
        case 5: mut_lines(t, r, 2); break;
        case 6: mut_number(t, r, 0); break;
        case 7: mut_number(t, r, 0); break;
        case 13: mut_number(t, r, 1); break;
        case 14: mut_number(t, r, 1); break;
        case 8: mut_value(t, r, 0); break;
        case 9: mut_value(t, r, 1); break;
        case 10: mut_section(t, r); break;
        case 11: mut_insert_line(t, r); break;
        default: mut_line_ending(t, r); break;
        }
    }
}

/* ------------------------------------------------- crash reporting hooks */

static const char *cur_name;
static const char *cur_text;
static size_t cur_len;
static long cur_index = -1;

static void write_str(const char *s)
{
    ssize_t w = write(2, s, strlen(s));
    (void)w;
}

static void print_current(void)
{
    if (!cur_text)
        return;
    char head[160];
    snprintf(head, sizeof head, "\n=== test_fuzz_cfg: crashed on variant %ld of %s (%zu bytes):\n",
             cur_index, cur_name, cur_len);
    write_str(head);
    ssize_t w = write(2, cur_text, cur_len);
    (void)w;
    write_str("\n=== end of variant\n");
}

static void on_signal(int sig)
{
    print_current();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Present in sanitizer runtimes only: ASan calls the death callback before
 * it exits; UBSan calls __ubsan_on_report (ours overrides the runtime's
 * empty one) when it reports. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));
void __ubsan_on_report(void);
void __ubsan_on_report(void)
{
    print_current();
}

static void install_hooks(void)
{
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(print_current);
    signal(SIGSEGV, on_signal);
    signal(SIGBUS, on_signal);
    signal(SIGFPE, on_signal);
    signal(SIGABRT, on_signal);
}

/* ---------------------------------------------------------- base texts */

static const char lenet_text[] =
    "# LeNet\n"
    "[net]\nbatch=64\nsubdivisions=1\nheight=28\nwidth=28\nchannels=1\n"
    "learning_rate=0.01\nmomentum=0.9\ndecay=0.0005\npolicy=steps\nsteps=1876\nscales=0.1\n"
    "max_batches=2814\n\n"
    "[convolutional]\nfilters=20\nsize=5\nstride=1\npad=0\nactivation=linear\n\n"
    "[maxpool]\nsize=2\nstride=2\npadding=0\n\n"
    "[convolutional]\nfilters=50\nsize=5\nstride=1\npad=0\nactivation=linear\n\n"
    "[maxpool]\nsize=2\nstride=2\npadding=0\n\n"
    "[connected]\noutput=500\nactivation=relu\n\n"
    "[connected]\noutput=10\nactivation=linear\n\n"
    "[softmax]\ngroups=1\n";

/* Every layer type: 12x12x3 -> conv bn 12x12x8 -> max 6x6x8 -> grouped conv
 * 6x6x8 -> lrn -> shortcut -> route 6x6x16 -> batchnorm -> conv 6x6x10 ->
 * dropout -> avgpool 10 -> connected 10 -> softmax -> cost. */
static const char rich_text[] =
    "[net]\nbatch=4\nsubdivisions=1\nheight=12\nwidth=12\nchannels=3\n"
    "learning_rate=0.01\nmomentum=0.9\ndecay=0.0005\npolicy=steps\nsteps=10,20\n"
    "scales=.1,.1\nmax_batches=30\nangle=7\nhue=.1 # augmentation\n\n"
    "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n\n"
    "[maxpool]\nsize=2\nstride=2\n\n"
    "[convolutional]\nfilters=8\nsize=3\npad=1\ngroups=2\nactivation=relu\n\n"
    "[lrn]\nsize=5\nalpha=0.0001\nbeta=0.75\nk=2\n\n"
    "[shortcut]\nfrom=-2\nactivation=linear\n\n"
    "[route]\nlayers=-1,-3\n\n"
    "[batchnorm]\n\n"
    "[convolutional]\nfilters=10\nsize=1\nactivation=logistic\n\n"
    "[dropout]\nprobability=.3\n\n"
    "[avgpool]\n\n"
    "[connected]\noutput=10\nactivation=tanh\n\n"
    "[softmax]\ngroups=1\n\n"
    "[cost]\ntype=sse\n";

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = malloc(MAX_TEXT + 1);
    assert_non_null(buf);
    *len = fread(buf, 1, MAX_TEXT, f);
    fclose(f);
    buf[*len] = '\0';
    return buf;
}

/* ------------------------------------------------------------ one case */

typedef struct fz_stats {
    long variants, built, rejected, nomem, replicas, forwards, skipped;
} fz_stats;

static size_t net_activation_floats(const st_net *net)
{
    size_t total = st_shape_count(net->input);
    for (int i = 0; i < net->n_layers; i++)
        total += st_shape_count(net->layers[i]->out);
    return total;
}

static void check_error(const char *name, st_status st, const st_error *err, const char *stage)
{
    if (st != ST_EINPUT && st != ST_ENOMEM)
        fail_msg("%s: %s returned status %d (%s): %s", name, stage, st, st_strerror(st), err->msg);
    if (err->code != st)
        fail_msg("%s: %s returned %d but recorded %d: %s", name, stage, st, err->code, err->msg);
    if (!err->msg[0])
        fail_msg("%s: %s failed (%d) with an empty message", name, stage, st);
    size_t n = strlen(name);
    if (strncmp(err->msg, name, n) != 0 || (err->msg[n] != ':'))
        fail_msg("%s: %s message does not start with \"%s:\": %s", name, stage, name, err->msg);
}

static void run_replica(const char *name, const st_net *net, int training, fz_stats *s)
{
    const st_backend *backend;
    st_error err = {0};
    assert_int_equal(st_backend_find("ref", &backend, &err), ST_OK);
    st_replica r;
    st_replica_opts o = {.n = 1, .training = training, .input_delta = 0, .backend = {1, 0}};
    st_status st = st_replica_init(&r, net, backend, &o, &err);
    if (st == ST_ENOMEM) {
        s->nomem++;
        return;
    }
    if (st != ST_OK)
        fail_msg("%s: st_replica_init: status %d: %s", name, st, err.msg);
    s->replicas++;
    float *weights = calloc(net->params.count ? net->params.count : 1, sizeof *weights);
    float *x = calloc(st_shape_count(net->input), sizeof *x);
    assert_non_null(weights);
    assert_non_null(x);
    st_params_init(&net->params, weights, 7);
    st_shard shard = {.n = 1, .x = x};
    st_step_info info = {training, 1, 0};
    double loss = 0.0;
    st = st_replica_forward(&r, weights, &shard, &info, &loss, &err);
    if (st != ST_OK)
        fail_msg("%s: st_replica_forward: status %d: %s", name, st, err.msg);
    s->forwards++;
    free(x);
    free(weights);
    st_replica_free(&r);
}

static void run_case(const char *name, const char *text, size_t len, long index, FILE *sink,
                     fz_stats *s)
{
    cur_name = name;
    cur_text = text;
    cur_len = len;
    cur_index = index;
    s->variants++;
    st_log log = {ST_LOG_QUIET, sink, sink, NULL};
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    memset(&net, 0, sizeof net);
    st_status st = st_cfg_parse(&cfg, name, text, len, &err);
    if (st != ST_OK) {
        check_error(name, st, &err, "st_cfg_parse");
        st_cfg_free(&cfg); /* left empty: must be safe */
        s->rejected += st == ST_EINPUT;
        s->nomem += st == ST_ENOMEM;
        return;
    }
    st = st_hparams_parse(&cfg, &hp, &log, &err);
    if (st == ST_OK)
        st = st_net_build(&net, &cfg, hp.input, &log, &err);
    if (st != ST_OK) {
        check_error(name, st, &err, "st_hparams_parse/st_net_build");
        st_net_free(&net);
        st_cfg_free(&cfg);
        s->rejected += st == ST_EINPUT;
        s->nomem += st == ST_ENOMEM;
        return;
    }
    s->built++;
    assert_true(net.n_layers > 0);
    assert_true(net.output_layer >= 0 && net.output_layer < net.n_layers);
    assert_true(net.classes > 0);
    st_log out = {ST_LOG_INFO, sink, sink, NULL};
    st_net_print(&net, &out);
    (void)st_net_hash(&net);
    if (net_activation_floats(&net) <= (size_t)MAX_ACT_FLOATS &&
        net.params.count <= (size_t)MAX_PARAM_FLOATS && net.flops <= MAX_FLOPS)
        run_replica(name, &net, (int)(index & 1), s);
    else
        s->skipped++;
    st_net_free(&net);
    st_cfg_free(&cfg);
}

/* ------------------------------------------------------------ the tests */

static void test_mutations(void **state)
{
    (void)state;
    install_hooks();
    FILE *sink = fopen("/dev/null", "w");
    assert_non_null(sink);
    size_t alen[3];
    char *anchor[3] = {read_file(ANCHORS "lenet5.cfg", &alen[0]),
                       read_file(ANCHORS "cifar_alexnet.cfg", &alen[1]),
                       read_file(ANCHORS "alexnet227.cfg", &alen[2])};
    struct {
        const char *name;
        const char *text;
        size_t len;
    } bases[] = {
        {"fuzz/lenet.cfg", lenet_text, sizeof lenet_text - 1},
        {"fuzz/rich.cfg", rich_text, sizeof rich_text - 1},
        {"fuzz/lenet5.cfg", anchor[0], alen[0]},
        {"fuzz/cifar_alexnet.cfg", anchor[1], alen[1]},
        {"fuzz/alexnet227.cfg", anchor[2], alen[2]},
    };
    /* Deterministic by default; FUZZ_SEED and FUZZ_VARIANTS (per base) let
     * a developer search further by hand. */
    const char *env = getenv("FUZZ_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : 0;
    env = getenv("FUZZ_VARIANTS");
    long per_base = env ? strtol(env, NULL, 0) : VARIANTS_PER_BASE;
    if (per_base < 1)
        per_base = VARIANTS_PER_BASE;
    print_message("seed %llu, %ld variants per base cfg\n", (unsigned long long)seed, per_base);
    fz_stats total = {0};
    fz_text t = {malloc(MAX_TEXT + 1), 0};
    assert_non_null(t.p);
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        fz_stats s = {0};
        /* The unmutated base must build. */
        run_case(bases[b].name, bases[b].text, bases[b].len, -1, sink, &s);
        if (s.built != 1)
            fail_msg("base %s does not build", bases[b].name);
        fz_rng r = {(0x9E3779B97F4A7C15ULL + seed) ^ (uint64_t)(b + 1) * 0xD1B54A32D192ED03ULL};
        for (long i = 0; i < per_base; i++) {
            memcpy(t.p, bases[b].text, bases[b].len);
            t.len = bases[b].len;
            mutate(&t, &r);
            run_case(bases[b].name, t.p, t.len, i, sink, &s);
        }
        print_message("%-24s %5ld variants: %5ld built, %5ld rejected, %ld out of memory; "
                      "%ld replicas, %ld forwards, %ld too large for a replica\n",
                      bases[b].name, s.variants, s.built, s.rejected, s.nomem, s.replicas,
                      s.forwards, s.skipped);
        total.variants += s.variants;
        total.built += s.built;
        total.rejected += s.rejected;
        total.nomem += s.nomem;
        total.replicas += s.replicas;
        total.forwards += s.forwards;
        total.skipped += s.skipped;
    }
    cur_text = NULL;
    print_message("total                    %5ld variants: %5ld built, %5ld rejected, %ld out of "
                  "memory; %ld forwards\n",
                  total.variants, total.built, total.rejected, total.nomem, total.forwards);
    free(t.p);
    for (int i = 0; i < 3; i++)
        free(anchor[i]);
    fclose(sink);
    assert_true(total.variants >= 5 * per_base);
    assert_true(total.built > 0);
    assert_true(total.rejected > 0);
    assert_true(total.forwards > 0);
}

/* Hand-made extremes at the limits of the builders' ranges, where sizes
 * multiply: each must be rejected (or built) without undefined behaviour.
 * 16 copies of a 2^24-channel output make 2^28 channels, the largest layer
 * allowed; 16 copies of that overflow an int channel count. */
#define R16 "-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1"
static void test_extremes(void **state)
{
    (void)state;
    install_hooks();
    static const char *const cases[] = {
        /* the largest input, then the largest kernels and strides */
        "[net]\nheight=65536\nwidth=4096\nchannels=1\n[convolutional]\nfilters=1\nsize=4096\n"
        "stride=4096\npadding=4096\n[maxpool]\nsize=4096\nstride=4096\n[softmax]\n",
        "[net]\nheight=1\nwidth=1\nchannels=65536\n[convolutional]\nfilters=65536\nsize=4096\n"
        "stride=4096\npad=1\n[softmax]\n",
        "[net]\nheight=16384\nwidth=16384\nchannels=1\n[maxpool]\nsize=4096\nstride=1\n",
        "[net]\nheight=1\nwidth=1\nchannels=1\n[connected]\noutput=16777216\n[softmax]\ngroups=16777216\n",
        "[net]\nheight=1\nwidth=1\nchannels=1\n[connected]\noutput=16777216\n[route]\nlayers=" R16
        "\n[convolutional]\nfilters=65536\nsize=4096\nstride=4096\npad=1\n",
        "[net]\nheight=1\nwidth=1\nchannels=1\n[connected]\noutput=16777216\n[route]\nlayers=" R16
        "\n[connected]\noutput=7\n",
        "[net]\nheight=1\nwidth=1\nchannels=1\n[connected]\noutput=16777216\n[route]\nlayers=" R16
        "\n[shortcut]\nfrom=0\nalpha=1e6\nbeta=-1e6\n",
        /* small odd shapes that run forward: an even grouped kernel on a
         * non-square input, maxpool 3/2 with the default padding, LRN wider
         * than the channels, a shortcut from a larger layer (stride 2) and a
         * route of the two, dropout 0.99, batch-normalized connected */
        "[net]\nheight=7\nwidth=5\nchannels=2\n[convolutional]\nfilters=4\nsize=4\npad=1\n"
        "groups=2\nactivation=tanh\n[maxpool]\nsize=3\nstride=2\n[lrn]\nsize=9\n[shortcut]\n"
        "from=-3\n[route]\nlayers=-1,-2\n[dropout]\nprobability=0.99\n[avgpool]\n[connected]\n"
        "output=3\nbatch_normalize=1\n[softmax]\ngroups=3\n[cost]\n",
        /* a shortcut from a smaller layer (3x3 onto 9x9) */
        "[net]\nheight=6\nwidth=6\nchannels=1\n[convolutional]\nfilters=3\nsize=2\nstride=2\n"
        "[convolutional]\nfilters=2\nsize=1\npadding=3\n[shortcut]\nfrom=-2\nactivation=logistic\n"
        "[softmax]\ntemperature=0.001\n",
        /* odd total maxpool padding, stride larger than the kernel */
        "[net]\nheight=4\nwidth=4\nchannels=1\n[maxpool]\nsize=3\nstride=1\npadding=3\n"
        "[convolutional]\nfilters=2\nsize=1\nstride=3\n[maxpool]\nsize=2\nstride=5\n[softmax]\n",
        /* the route channel sum past INT_MAX (keep last: UBSan stops here) */
        "[net]\nheight=1\nwidth=1\nchannels=1\n[connected]\noutput=16777216\n[route]\nlayers=" R16
        "\n[route]\nlayers=" R16 "\n",
    };
    FILE *sink = fopen("/dev/null", "w");
    assert_non_null(sink);
    fz_stats s = {0};
    /* Each twice: inference (even index) and training (odd) replicas. */
    for (size_t i = 0; i < 2 * (sizeof cases / sizeof cases[0]); i++)
        run_case("extreme.cfg", cases[i / 2], strlen(cases[i / 2]), (long)i, sink, &s);
    cur_text = NULL;
    fclose(sink);
    print_message("extremes: %ld cases, %ld built, %ld rejected, %ld forwards\n", s.variants,
                  s.built, s.rejected, s.forwards);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_extremes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
