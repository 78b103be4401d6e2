/* The .cfg reader, the [net] section and the layer builders, through the
 * library API: every error path with its status and its "file:LINE:" message,
 * Darknet's shape semantics (computed by hand in the comments), the anchor
 * networks' shapes, the one-warning-per-ignored-key rule, comments, CRLF and
 * spacing, and the --data key=value files. */
#include "testlib.h"

#include <stdlib.h>
#include <unistd.h>

#include "layers/layer.h"
#include "ops/params.h"

#define ANCHORS "tests/fixtures/anchors/"

/* The 8 x 8 x 1 input every small case starts from: lines 1-4, so the first
 * layer section is on line 5. */
#define NET8 "[net]\nheight=8\nwidth=8\nchannels=1\n"
#define NET8C3 "[net]\nheight=8\nwidth=8\nchannels=3\n"
#define NET8C4 "[net]\nheight=8\nwidth=8\nchannels=4\n"
#define R16 "-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1"

/* ------------------------------------------------------------------ helpers */

/* Like tl_build, with an explicit length (NUL bytes) and logger. On success
 * the caller frees net and cfg; on failure everything is freed. */
static st_status build_len(const char *path, const char *text, size_t len, const st_log *log,
                           st_cfg *cfg, st_hparams *hp, st_net *net, st_error *err)
{
    memset(net, 0, sizeof *net);
    memset(hp, 0, sizeof *hp);
    st_status st = st_cfg_parse(cfg, path, text, len, err);
    if (st != ST_OK)
        return st;
    st = st_hparams_parse(cfg, hp, log, err);
    if (st == ST_OK)
        st = st_net_build(net, cfg, hp->input, log, err);
    if (st != ST_OK)
        st_cfg_free(cfg);
    return st;
}

/* An error message is one line without carriage returns. */
static void assert_one_line(const char *msg)
{
    if (strchr(msg, '\n') || strchr(msg, '\r'))
        fail_msg("message \"%s\" contains a line break", msg);
}

static void assert_shape(const st_layer *l, int c, int h, int w)
{
    if (l->out.c != c || l->out.h != h || l->out.w != w)
        fail_msg("layer %d [%s]: output c x h x w = %d x %d x %d, expected %d x %d x %d",
                 l->index, l->ops->type, l->out.c, l->out.h, l->out.w, c, h, w);
}

static const st_param *find_param(const st_net *net, int layer, const char *role)
{
    char name[64];
    snprintf(name, sizeof name, "%d.%s", layer, role);
    for (int i = 0; i < net->params.n; i++)
        if (strcmp(net->params.p[i].name, name) == 0)
            return &net->params.p[i];
    return NULL;
}

static size_t param_count(const st_net *net, int layer, const char *role)
{
    const st_param *p = find_param(net, layer, role);
    if (!p)
        fail_msg("no parameter %d.%s", layer, role);
    return p->count;
}

static int params_of_layer(const st_net *net, int layer)
{
    int n = 0;
    for (int i = 0; i < net->params.n; i++)
        n += net->params.p[i].layer == layer;
    return n;
}

/* Build text that must succeed. */
static void build_ok(const char *text, st_cfg *cfg, st_hparams *hp, st_net *net)
{
    st_error err = {0};
    st_status st = tl_build("t.cfg", text, cfg, hp, net, &err);
    if (st != ST_OK)
        fail_msg("expected the cfg to build, got status %d: %s\n--- cfg ---\n%s", st, err.msg,
                 text);
}

static void free_all(st_cfg *cfg, st_net *net)
{
    st_net_free(net);
    st_cfg_free(cfg);
}

static char *write_temp(const char *text, size_t len)
{
    char *path = strdup("/tmp/test_cfg_XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal((long)write(fd, text, len), (long)len);
    close(fd);
    return path;
}

/* Count the lines written to a warnings stream. */
static int count_lines(FILE *f, char *copy, size_t size)
{
    fflush(f);
    long n = ftell(f);
    rewind(f);
    size_t got = fread(copy, 1, size - 1, f);
    copy[got] = '\0';
    assert_int_equal((long)got, n);
    int lines = 0;
    for (size_t i = 0; i < got; i++)
        lines += copy[i] == '\n';
    return lines;
}

/* ------------------------------------------------------- error-path table */

typedef struct err_case {
    const char *name;
    const char *text;
    const char *want[3]; /* substrings of the message; NULL-padded */
} err_case;

static const err_case err_cases[] = {
    /* --- reader: sections and lines --- */
    {"unknown section", NET8 "[yolo]\nmask=0\n",
     {"t.cfg:5: unknown section [yolo]", "expected one of convolutional, connected, maxpool"}},
    {"misspelt section", NET8 "[convolution]\nfilters=2\n", {"t.cfg:5: unknown section [convolution]"}},
    {"header without ]", NET8 "[convolutional\nfilters=2\n", {"t.cfg:5: section header without ']'"}},
    {"text after header", NET8 "[convolutional] filters=2\n", {"t.cfg:5: text after section header"}},
    {"empty section name", NET8 "[ ]\n", {"t.cfg:5: empty section name"}},
    {"line without =", NET8 "[convolutional]\nfilters 4\n",
     {"t.cfg:6: expected key=value or [section], got 'filters 4'"}},
    {"missing key", NET8 "[convolutional]\n=4\n", {"t.cfg:6: missing key before '='"}},
    {"key with a space", NET8 "[convolutional]\nfil ters=4\n", {"t.cfg:6: key 'fil ters' contains a space"}},
    {"key without value", NET8 "[convolutional]\nfilters=\n", {"t.cfg:6: key 'filters' has no value"}},
    {"key without value but a comment", NET8 "[convolutional]\nfilters=   # none\n",
     {"t.cfg:6: key 'filters' has no value"}},
    {"option before any section", "batch=1\n[net]\nheight=8\nwidth=8\nchannels=1\n[connected]\n",
     {"t.cfg:1: option before any section"}},
    {"option before any section after comments", "# a comment\n\n; another\nbatch=1\n[net]\n",
     {"t.cfg:4: option before any section"}},
    {"empty file", "", {"t.cfg: no sections"}},
    {"only comments", "# nothing\n; here\n\n", {"t.cfg: no sections"}},
    /* --- [net] --- */
    {"net not first", "[convolutional]\nfilters=1\n[net]\nheight=8\nwidth=8\nchannels=1\n",
     {"t.cfg:1: the first section is [convolutional]: expected [net]"}},
    {"net twice", NET8 "[connected]\noutput=2\n[net]\nbatch=2\n",
     {"t.cfg:7: [net] may only be the first section"}},
    {"network after net", NET8 "[network]\nbatch=2\n", {"t.cfg:5: [network] may only be the first section"}},
    {"missing height", "[net]\nwidth=8\nchannels=1\n[connected]\noutput=2\n",
     {"t.cfg:1: [net] needs height=, width= and channels="}},
    {"missing width", "[net]\nheight=8\nchannels=1\n[connected]\noutput=2\n",
     {"t.cfg:1: [net] needs height=, width= and channels="}},
    {"missing channels", "\n[network]\nheight=8\nwidth=8\n[connected]\noutput=2\n",
     {"t.cfg:2: [network] needs height=, width= and channels="}},
    {"height=0", "[net]\nheight=0\nwidth=8\nchannels=1\n[connected]\n",
     {"t.cfg:2: [net] height=0: expected an integer in 1..65536"}},
    {"input too large", "[net]\nheight=65536\nwidth=65536\nchannels=1\n[connected]\n",
     {"t.cfg:1: input 65536 x 65536 x 1 is larger than"}},
    {"unknown key in net", NET8 "learningrate=0.1\n[connected]\noutput=2\n",
     {"t.cfg:5: unknown key 'learningrate' in [net]"}},
    {"duplicate key in net", "[net]\nheight=8\nwidth=8\nheight=9\nchannels=1\n[connected]\n",
     {"t.cfg:4: duplicate key 'height' in [net]", "first set at line 2"}},
    {"batch=0", "[net]\nbatch=0\nheight=8\nwidth=8\nchannels=1\n[connected]\n",
     {"t.cfg:2: [net] batch=0: expected an integer in 1..1048576"}},
    {"bad float", NET8 "learning_rate=fast\n[connected]\n",
     {"t.cfg:5: [net] learning_rate=fast: expected a number in 0..1000"}},
    {"float overflow", NET8 "momentum=1e40\n[connected]\n",
     {"t.cfg:5: [net] momentum=1e40: expected a number in 0..1"}},
    {"float nan", NET8 "decay=nan\n[connected]\n", {"t.cfg:5: [net] decay=nan: expected a number"}},
    {"float inf", NET8 "learning_rate=inf\n[connected]\n", {"t.cfg:5: [net] learning_rate=inf: expected a number"}},
    {"momentum out of range", NET8 "momentum=1.5\n[connected]\n",
     {"t.cfg:5: [net] momentum=1.5: expected a number in 0..1"}},
    {"negative learning rate", NET8 "learning_rate=-0.1\n[connected]\n",
     {"t.cfg:5: [net] learning_rate=-0.1: expected a number in 0..1000"}},
    {"max_batches not an integer", NET8 "max_batches=1e4\n[connected]\n",
     {"t.cfg:5: [net] max_batches=1e4: expected an integer"}},
    {"unknown policy", NET8 "policy=sigmoid\n[connected]\n",
     {"t.cfg:5: [net] policy=sigmoid: expected one of constant, step, steps, exp, poly, inv"}},
    {"steps/scales lengths differ", NET8 "policy=steps\nsteps=100,200\nscales=.1\n[connected]\n",
     {"t.cfg:6: policy=steps needs steps= and scales= lists of the same length",
      "got 2 steps, 1 scales"}},
    {"scales longer than steps", NET8 "policy=steps\nscales=.1,.1\nsteps=100\n[connected]\n",
     {"t.cfg:7: policy=steps needs steps= and scales=", "got 1 steps, 2 scales"}},
    {"steps policy without steps", NET8 "policy=steps\n[connected]\n",
     {"t.cfg:1: policy=steps needs steps= and scales=", "got 0 steps, 0 scales"}},
    {"steps decreasing", NET8 "policy=steps\nsteps=200,100\nscales=.1,.1\n[connected]\n",
     {"t.cfg:6: steps= must not decrease"}},
    {"steps not numbers", NET8 "policy=steps\nsteps=100,x\nscales=.1,.1\n[connected]\n",
     {"t.cfg:6: [net] steps=100,x: expected a comma-separated list"}},
    {"scales empty entry", NET8 "policy=steps\nsteps=100,200\nscales=.1,\n[connected]\n",
     {"t.cfg:7: [net] scales=.1,: expected a comma-separated list"}},
    {"step=0", NET8 "policy=step\nstep=0\n[connected]\n", {"t.cfg:6: [net] step=0: expected an integer in 1.."}},
    {"ignored net key in a layer", NET8 "[convolutional]\nfilters=2\nangle=7\n",
     {"t.cfg:7: unknown key 'angle' in [convolutional]"}},
    /* --- keys and numbers in layers --- */
    {"unknown key in conv", NET8 "[convolutional]\nfilters=2\nsize=3\nfliters=4\n",
     {"t.cfg:8: unknown key 'fliters' in [convolutional]"}},
    {"unknown key in maxpool", NET8 "[maxpool]\nsize=2\nstrid=2\n", {"t.cfg:7: unknown key 'strid' in [maxpool]"}},
    {"unknown key in a later layer", NET8 "[connected]\noutput=4\n\n# c\n[softmax]\ngroups=1\ntemp=2\n",
     {"t.cfg:11: unknown key 'temp' in [softmax]"}},
    {"duplicate key in conv", NET8 "[convolutional]\nfilters=2\nsize=3\nfilters=4\n",
     {"t.cfg:8: duplicate key 'filters' in [convolutional]", "first set at line 6"}},
    {"duplicate key with spaces", NET8 "[convolutional]\n filters = 2\nsize=3\n\nfilters=2\n",
     {"t.cfg:9: duplicate key 'filters'", "first set at line 6"}},
    {"bad integer", NET8 "[convolutional]\nfilters=two\n",
     {"t.cfg:6: [convolutional] filters=two: expected an integer in 1..65536"}},
    {"fractional integer", NET8 "[convolutional]\nsize=3.5\n",
     {"t.cfg:6: [convolutional] size=3.5: expected an integer"}},
    {"integer with garbage", NET8 "[convolutional]\nstride=2x\n",
     {"t.cfg:6: [convolutional] stride=2x: expected an integer"}},
    {"integer overflow", NET8 "[convolutional]\nfilters=99999999999999999999\n",
     {"t.cfg:6: [convolutional] filters=99999999999999999999: expected an integer in 1..65536"}},
    {"integer above int", NET8 "[convolutional]\nfilters=2147483648\n",
     {"t.cfg:6: [convolutional] filters=2147483648: expected an integer in 1..65536"}},
    {"hex integer", NET8 "[convolutional]\nfilters=0x10\n", {"t.cfg:6: [convolutional] filters=0x10: expected an integer"}},
    {"filters=0", NET8 "[convolutional]\nfilters=0\n", {"t.cfg:6: [convolutional] filters=0: expected an integer in 1..65536"}},
    {"stride=-1", NET8 "[convolutional]\nstride=-1\n", {"t.cfg:6: [convolutional] stride=-1: expected an integer in 1.."}},
    {"pad=2", NET8 "[convolutional]\npad=2\n", {"t.cfg:6: [convolutional] pad=2: expected an integer in 0..1"}},
    {"batch_normalize=2", NET8 "[convolutional]\nbatch_normalize=2\n",
     {"t.cfg:6: [convolutional] batch_normalize=2: expected an integer in 0..1"}},
    {"maxpool stride=0", NET8 "[maxpool]\nstride=0\n", {"t.cfg:6: [maxpool] stride=0: expected an integer in 1.."}},
    {"connected output=0", NET8 "[connected]\noutput=0\n", {"t.cfg:6: [connected] output=0: expected an integer in 1.."}},
    {"dropout probability=1", NET8 "[dropout]\nprobability=1\n",
     {"t.cfg:6: [dropout] probability=1: expected a number in 0..0.99"}},
    {"shortcut alpha not a number", NET8 "[convolutional]\nfilters=1\n[shortcut]\nfrom=-1\nalpha=one\n",
     {"t.cfg:9: [shortcut] alpha=one: expected a number"}},
    {"lrn beta not a number", NET8 "[lrn]\nbeta=.7.5\n", {"t.cfg:6: [lrn] beta=.7.5: expected a number"}},
    {"lrn even size", NET8 "[lrn]\nsize=4\n", {"t.cfg:6: [lrn] size=4: expected an odd number"}},
    {"lrn k=0", NET8 "[lrn]\nk=0\n", {"t.cfg:6: [lrn] k=0: expected a number in"}},
    /* --- activations and unsupported values --- */
    {"unknown activation", NET8 "[convolutional]\nfilters=2\nactivation=swish\n",
     {"t.cfg:7: [convolutional] activation=swish: expected one of linear, relu, leaky, logistic, tanh"}},
    {"activation is case-sensitive", NET8 "[connected]\noutput=2\nactivation=ReLU\n",
     {"t.cfg:7: [connected] activation=ReLU: expected one of linear, relu, leaky, logistic, tanh"}},
    {"comment glued to a value", NET8 "[connected]\noutput=2\nactivation=relu#x\n",
     {"t.cfg:7: [connected] activation=relu#x: expected one of"}},
    {"shortcut activation", NET8 "[convolutional]\nfilters=1\n[shortcut]\nfrom=-1\nactivation=mish\n",
     {"t.cfg:9: [shortcut] activation=mish: expected one of linear, relu, leaky, logistic, tanh"}},
    {"xnor=1", NET8 "[convolutional]\nfilters=2\nxnor=1\n",
     {"t.cfg:7: [convolutional] xnor=1 is not supported by singletrain (only 0)"}},
    {"binary=1", NET8 "[convolutional]\nfilters=2\n\nbinary=1\n",
     {"t.cfg:8: [convolutional] binary=1 is not supported by singletrain (only 0)"}},
    {"dilation=2", NET8 "[convolutional]\nfilters=2\ndilation=2\n",
     {"t.cfg:7: [convolutional] dilation=2 is not supported by singletrain (only 1)"}},
    {"cost type=masked", NET8 "[connected]\noutput=2\n[cost]\ntype=masked\n",
     {"t.cfg:8: [cost] type=masked is not supported by singletrain (only sse)"}},
    /* --- shapes --- */
    {"kernel larger than input", NET8 "[convolutional]\nfilters=2\nsize=9\n",
     {"t.cfg:5: [convolutional] (layer 0, input 8 x 8 x 1): kernel 9x9 is larger than the padded input 8x8"}},
    {"kernel larger than padded input", NET8 "[convolutional]\nfilters=2\nsize=11\npadding=1\n",
     {"t.cfg:5: [convolutional]", "kernel 11x11 is larger than the padded input 10x10"}},
    {"kernel larger in a later layer", NET8 "[convolutional]\nfilters=2\nsize=3\n[convolutional]\nfilters=2\nsize=7\n",
     {"t.cfg:8: [convolutional] (layer 1, input 6 x 6 x 2): kernel 7x7 is larger than the padded input 6x6"}},
    {"groups do not divide channels", NET8C3 "[convolutional]\nfilters=4\ngroups=2\n",
     {"t.cfg:5: [convolutional] (layer 0, input 8 x 8 x 3): groups=2 must divide the input channels (3) and filters (4)"}},
    {"groups do not divide filters", NET8C4 "[convolutional]\nfilters=3\ngroups=2\n",
     {"t.cfg:5: [convolutional]", "groups=2 must divide the input channels (4) and filters (3)"}},
    {"maxpool window larger than input", NET8 "[maxpool]\nsize=10\nstride=1\npadding=0\n",
     {"t.cfg:5: [maxpool] (layer 0, input 8 x 8 x 1): window 10x10 is larger than the padded input 8x8"}},
    {"maxpool window larger than padded input", NET8 "[maxpool]\nsize=10\npadding=1\n",
     {"t.cfg:5: [maxpool]", "window 10x10 is larger than the padded input 9x9"}},
    {"maxpool padding beyond the windows", NET8 "[maxpool]\nsize=2\nstride=2\npadding=4\n",
     {"t.cfg:5: [maxpool]", "padding=4 puts whole windows outside the input"}},
    {"layer output too large", "[net]\nheight=1024\nwidth=1024\nchannels=1\n[convolutional]\nfilters=512\nsize=1\n",
     {"t.cfg:5: [convolutional] (layer 0, input 1024 x 1024 x 1): output 1024 x 1024 x 512 is empty or larger than"}},
    {"connected too many weights", "[net]\nheight=256\nwidth=256\nchannels=3\n[connected]\noutput=16384\n",
     {"t.cfg:5: [connected] (layer 0, input 256 x 256 x 3): 196608 inputs x 16384 outputs is too many weights"}},
    {"softmax groups do not divide", NET8 "[connected]\noutput=10\n[softmax]\ngroups=3\n",
     {"t.cfg:7: [softmax] (layer 1, input 1 x 1 x 10): groups=3 does not divide the 10 inputs"}},
    {"loss layer sees the wrong size", NET8 "[connected]\noutput=10\n[softmax]\n[connected]\noutput=5\n",
     {"t.cfg:7: [softmax] has 10 outputs but the network has 5 classes"}},
    {"cost in the middle", NET8 "[connected]\noutput=4\n[cost]\n[connected]\noutput=3\n[softmax]\n",
     {"t.cfg:7: [cost] has 4 outputs but the network has 3 classes"}},
    {"no layers", NET8 "\n# nothing else\n", {"t.cfg: no layers after [net]"}},
    /* --- route and shortcut references --- */
    {"route to a later layer", NET8 "[convolutional]\nfilters=2\nsize=1\n[route]\nlayers=1\n",
     {"t.cfg:9: [route] layers=1: 1 refers to layer 1; expected an earlier layer (0..0"}},
    {"route out of range", NET8 "[convolutional]\nfilters=2\nsize=1\n[route]\nlayers=7\n",
     {"t.cfg:9: [route] layers=7: 7 refers to layer 7; expected an earlier layer"}},
    {"route before the first layer", NET8 "[convolutional]\nfilters=2\nsize=1\n[route]\nlayers=-2\n",
     {"t.cfg:9: [route] layers=-2: -2 refers to layer -1; expected an earlier layer"}},
    {"route as the first layer", NET8 "[route]\nlayers=-1\n", {"t.cfg:6: [route] layers=: the first layer has no earlier layer"}},
    {"route second entry later", NET8 "[convolutional]\nfilters=2\nsize=1\n[route]\nlayers=-1, 3\n",
     {"t.cfg:9: [route] layers=-1, 3: 3 refers to layer 3"}},
    {"route without layers", NET8 "[convolutional]\nfilters=2\nsize=1\n[route]\n", {"t.cfg:8: [route] needs layers="}},
    {"route malformed list", NET8 "[convolutional]\nfilters=2\nsize=1\n[route]\nlayers=-1,,0\n",
     {"t.cfg:9: [route] layers=-1,,0: expected a comma-separated list of at most 16 integers"}},
    {"route too many layers", NET8 "[convolutional]\nfilters=2\nsize=1\n[route]\nlayers=" R16 ",-1\n",
     {"t.cfg:9: [route] layers=", "expected a comma-separated list of at most 16 integers"}},
    {"route mismatched sizes",
     NET8 "[convolutional]\nfilters=2\nsize=1\n[maxpool]\nsize=2\nstride=2\n[route]\nlayers=-1,-2\n",
     {"t.cfg:11: [route] (layer 2, input 4 x 4 x 2):", "layer 0 is 8 x 8 but layer 1 is 4 x 4",
      "routed layers need the same width and height"}},
    {"shortcut to a later layer", NET8 "[convolutional]\nfilters=2\nsize=1\n[shortcut]\nfrom=1\n",
     {"t.cfg:9: [shortcut] from=1: 1 refers to layer 1; expected an earlier layer"}},
    {"shortcut out of range", NET8 "[convolutional]\nfilters=2\nsize=1\n[shortcut]\nfrom=-3\n",
     {"t.cfg:9: [shortcut] from=-3: -3 refers to layer -2"}},
    {"shortcut without from", NET8 "[convolutional]\nfilters=2\nsize=1\n[shortcut]\nactivation=linear\n",
     {"t.cfg:8: [shortcut] needs from=LAYER"}},
    {"shortcut without an integer stride",
     "[net]\nheight=8\nwidth=4\nchannels=1\n[convolutional]\nfilters=1\nsize=1\n[convolutional]\nfilters=1\nsize=3\n[shortcut]\nfrom=-2\n",
     {"t.cfg:11: [shortcut]", "does not map onto"}},
    /* --- line endings --- */
    {"CRLF error line", "[net]\r\nheight=8\r\nwidth=8\r\nchannels=1\r\n[convolutional]\r\nfoo=1\r\n",
     {"t.cfg:6: unknown key 'foo' in [convolutional]"}},
    {"CRLF bad value", "[net]\r\nheight=8\r\nwidth=8\r\nchannels=1\r\n[convolutional]\r\nsize=x\r\n",
     {"t.cfg:6: [convolutional] size=x: expected an integer"}},
};

static void test_error_table(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof err_cases / sizeof err_cases[0]; i++) {
        const err_case *c = &err_cases[i];
        st_cfg cfg;
        st_hparams hp;
        st_net net;
        st_error err = {0};
        st_status st = tl_build("t.cfg", c->text, &cfg, &hp, &net, &err);
        const char *problem = NULL;
        const char *missing = NULL;
        if (st != ST_EINPUT)
            problem = "status is not ST_EINPUT";
        else if (err.code != ST_EINPUT)
            problem = "err.code is not ST_EINPUT";
        else if (strchr(err.msg, '\n') || strchr(err.msg, '\r'))
            problem = "the message has a line break";
        for (int k = 0; !problem && k < 3 && c->want[k]; k++)
            if (!strstr(err.msg, c->want[k])) {
                problem = "the message lacks";
                missing = c->want[k];
            }
        if (problem) {
            failures++;
            print_error("FAIL [%s]: %s%s%s%s\n  status %d, message: %s\n", c->name, problem,
                        missing ? " \"" : "", missing ? missing : "", missing ? "\"" : "", st,
                        err.msg);
        }
        if (st == ST_OK)
            free_all(&cfg, &net);
    }
    if (failures)
        fail_msg("%d of %zu error cases failed", failures, sizeof err_cases / sizeof err_cases[0]);
}

/* A NUL byte inside the text: an input error naming the file and the line
 * where it is (line 3 here). */
static void test_nul_byte(void **state)
{
    (void)state;
    static const char text[] = "[net]\nheight=8\nwid\0th=8\nchannels=1\n[connected]\n";
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    st_log log = tl_silent_log();
    st_status st = build_len("t.cfg", text, sizeof text - 1, &log, &cfg, &hp, &net, &err);
    assert_int_equal(st, ST_EINPUT);
    tl_assert_contains(err.msg, "t.cfg");
    tl_assert_contains(err.msg, "NUL byte");
    tl_assert_contains(err.msg, "t.cfg:3:");
}

/* The NUL byte check must not depend on where the byte is: at the very end. */
static void test_nul_byte_at_end(void **state)
{
    (void)state;
    static const char text[] = NET8 "[connected]\noutput=2\n";
    char buf[sizeof text + 1];
    memcpy(buf, text, sizeof text); /* includes the terminating NUL */
    st_cfg cfg;
    st_error err = {0};
    st_status st = st_cfg_parse(&cfg, "t.cfg", buf, sizeof text, &err);
    assert_int_equal(st, ST_EINPUT);
    tl_assert_contains(err.msg, "NUL byte");
    assert_int_equal(cfg.n_secs, 0); /* left empty, safe to free */
    st_cfg_free(&cfg);
}

/* A cfg file that cannot be opened or read. */
static void test_load_errors(void **state)
{
    (void)state;
    st_cfg cfg;
    st_error err = {0};
    assert_int_equal(st_cfg_load(&cfg, "/nonexistent/dir/x.cfg", &err), ST_EINPUT);
    tl_assert_contains(err.msg, "/nonexistent/dir/x.cfg: cannot open network cfg");
    st_cfg_free(&cfg);
    st_error err2 = {0};
    assert_int_equal(st_cfg_load(&cfg, "/tmp", &err2), ST_EINPUT);
    tl_assert_contains(err2.msg, "/tmp: ");
    st_cfg_free(&cfg);
}

/* Layer builders must reject a convolution whose weight count does not fit
 * in the parameter table instead of registering a wrapped-around count.
 * [connected] output=16777216 on a 1x1x1 input, a route of 16 copies of it
 * gives 1 x 1 x 2^28; a convolution of 65536 filters of 4096 x 4096 over
 * those channels has 2^16 * 2^28 * 2^24 = 2^68 weights, which wraps to 0 in
 * a size_t. Expected: ST_EINPUT with t.cfg:LINE of the [convolutional]. */
static void test_conv_weight_count_overflow(void **state)
{
    (void)state;
    static const char text[] = "[net]\nheight=1\nwidth=1\nchannels=1\n"
                               "[connected]\noutput=16777216\n"
                               "[route]\nlayers=" R16 "\n"
                               "[convolutional]\nfilters=65536\nsize=4096\nstride=4096\npad=1\n";
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    st_status st = tl_build("t.cfg", text, &cfg, &hp, &net, &err);
    if (st == ST_OK) {
        size_t w = param_count(&net, 2, "weights");
        free_all(&cfg, &net);
        fail_msg("a convolution with 2^68 weights built; its weights parameter has %zu floats", w);
    }
    assert_int_equal(st, ST_EINPUT);
    tl_assert_contains(err.msg, "t.cfg:9: [convolutional]");
}

/* [connected] refuses more than 2e9 weights as a bad shape (file:line, exit
 * 2); a convolution with 2^56 weights must be refused the same way instead
 * of building and then failing at run time with "out of memory". */
static void test_conv_too_many_weights(void **state)
{
    (void)state;
    static const char text[] = "[net]\nheight=1\nwidth=1\nchannels=65536\n"
                               "[convolutional]\nfilters=65536\nsize=4096\nstride=4096\npad=1\n";
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    st_status st = tl_build("t.cfg", text, &cfg, &hp, &net, &err);
    if (st == ST_OK) {
        size_t n = net.params.count;
        free_all(&cfg, &net);
        fail_msg("a convolution with 2^56 weights built (params.count %zu)", n);
    }
    assert_int_equal(st, ST_EINPUT);
    tl_assert_contains(err.msg, "t.cfg:5: [convolutional]");
}

/* ----------------------------------------------------------- shape checks */

typedef struct shape_case {
    const char *name;
    const char *text;
    int layer;   /* -1: the last layer */
    int c, h, w; /* expected output */
} shape_case;

static const shape_case shape_cases[] = {
    /* [convolutional]: out = (in + 2 padding - size) / stride + 1; pad=1
     * means padding = size / 2 (integer division) whatever padding= says. */
    {"size 3 pad=1: padding 1, (8+2-3)/1+1 = 8", NET8 "[convolutional]\nfilters=2\nsize=3\npad=1\n", -1, 2, 8, 8},
    {"size 5 pad=1: padding 2, (8+4-5)+1 = 8", NET8 "[convolutional]\nfilters=2\nsize=5\npad=1\n", -1, 2, 8, 8},
    {"size 4 pad=1: padding 2, (8+4-4)+1 = 9", NET8 "[convolutional]\nfilters=2\nsize=4\npad=1\n", -1, 2, 9, 9},
    {"size 1 pad=1: padding 0, 8", NET8 "[convolutional]\nfilters=2\nsize=1\npad=1\n", -1, 2, 8, 8},
    {"size 3 pad=0: (8-3)+1 = 6", NET8 "[convolutional]\nfilters=2\nsize=3\npad=0\n", -1, 2, 6, 6},
    {"size 3, no pad key: 6", NET8 "[convolutional]\nfilters=2\nsize=3\n", -1, 2, 6, 6},
    {"size 3 padding=2: (8+4-3)+1 = 10", NET8 "[convolutional]\nfilters=2\nsize=3\npadding=2\n", -1, 2, 10, 10},
    {"size 1 padding=1: (8+2-1)+1 = 10", NET8 "[convolutional]\nfilters=2\nsize=1\npadding=1\n", -1, 2, 10, 10},
    {"padding=2 overridden by pad=1 (after): padding 1, 8",
     NET8 "[convolutional]\nfilters=2\nsize=3\npadding=2\npad=1\n", -1, 2, 8, 8},
    {"padding=3 overridden by pad=1 (before): padding 1, 8",
     NET8 "[convolutional]\nfilters=2\nsize=3\npad=1\npadding=3\n", -1, 2, 8, 8},
    {"size 3 stride 2 pad=1 on 8: (8+2-3)/2+1 = 4", NET8 "[convolutional]\nfilters=2\nsize=3\nstride=2\npad=1\n", -1, 2, 4, 4},
    {"size 3 stride 2 pad=1 on 7: (7+2-3)/2+1 = 4",
     "[net]\nheight=7\nwidth=7\nchannels=1\n[convolutional]\nfilters=2\nsize=3\nstride=2\npad=1\n", -1, 2, 4, 4},
    {"size 2 stride 2 on 7: (7-2)/2+1 = 3",
     "[net]\nheight=7\nwidth=7\nchannels=1\n[convolutional]\nfilters=2\nsize=2\nstride=2\n", -1, 2, 3, 3},
    {"non-square 8h x 6w, size 3: 6h x 4w",
     "[net]\nheight=8\nwidth=6\nchannels=1\n[convolutional]\nfilters=2\nsize=3\n", -1, 2, 6, 4},
    {"AlexNet conv1: 11/4 pad 0 on 227: (227-11)/4+1 = 55",
     "[net]\nheight=227\nwidth=227\nchannels=3\n[convolutional]\nfilters=96\nsize=11\nstride=4\n", -1, 96, 55, 55},
    {"kernel equal to the padded input: 1x1",
     NET8 "[convolutional]\nfilters=3\nsize=10\npadding=1\n", -1, 3, 1, 1},
    /* [maxpool]: padding is the TOTAL padding, default size - 1;
     * out = (in + padding - size) / stride + 1. */
    {"maxpool 2/2 default padding 1 on 8: (8+1-2)/2+1 = 4", NET8 "[maxpool]\nsize=2\nstride=2\n", -1, 1, 4, 4},
    {"maxpool 2/2 default padding 1 on 7: (7+1-2)/2+1 = 4",
     "[net]\nheight=7\nwidth=7\nchannels=1\n[maxpool]\nsize=2\nstride=2\n", -1, 1, 4, 4},
    {"maxpool 3/2 default padding 2 on 8: (8+2-3)/2+1 = 4", NET8 "[maxpool]\nsize=3\nstride=2\n", -1, 1, 4, 4},
    {"maxpool 3/2 default padding 2 on 7: (7+2-3)/2+1 = 4",
     "[net]\nheight=7\nwidth=7\nchannels=1\n[maxpool]\nsize=3\nstride=2\n", -1, 1, 4, 4},
    {"maxpool 3/2 default padding 2 on 6: (6+2-3)/2+1 = 3",
     "[net]\nheight=6\nwidth=6\nchannels=1\n[maxpool]\nsize=3\nstride=2\n", -1, 1, 3, 3},
    {"maxpool 2/1 default padding 1 on 13 (yolov3-tiny): 13",
     "[net]\nheight=13\nwidth=13\nchannels=1\n[maxpool]\nsize=2\nstride=1\n", -1, 1, 13, 13},
    {"maxpool 2/2 padding=0 on 7: (7-2)/2+1 = 3",
     "[net]\nheight=7\nwidth=7\nchannels=1\n[maxpool]\nsize=2\nstride=2\npadding=0\n", -1, 1, 3, 3},
    {"maxpool 2/2 padding=0 on 8: 4", NET8 "[maxpool]\nsize=2\nstride=2\npadding=0\n", -1, 1, 4, 4},
    {"maxpool 3/2 padding=0 on 8: (8-3)/2+1 = 3", NET8 "[maxpool]\nsize=3\nstride=2\npadding=0\n", -1, 1, 3, 3},
    {"maxpool stride=2 only: size 2, padding 1, on 7: 4",
     "[net]\nheight=7\nwidth=7\nchannels=1\n[maxpool]\nstride=2\n", -1, 1, 4, 4},
    {"maxpool without keys: size 1 stride 1 padding 0: identity", NET8C3 "[maxpool]\n", -1, 3, 8, 8},
    {"maxpool keeps channels", NET8C3 "[maxpool]\nsize=2\nstride=2\npadding=0\n", -1, 3, 4, 4},
    /* [avgpool] is global whatever keys Darknet cfgs leave out. */
    {"avgpool global 5x5x7 -> 7x1x1", "[net]\nheight=5\nwidth=5\nchannels=7\n[avgpool]\n", -1, 7, 1, 1},
    {"avgpool global 6h x 4w x 3 -> 3x1x1", "[net]\nheight=6\nwidth=4\nchannels=3\n[avgpool]\n", -1, 3, 1, 1},
    /* Shape-preserving layers. */
    {"batchnorm keeps the shape", NET8C3 "[batchnorm]\n", -1, 3, 8, 8},
    {"lrn keeps the shape", NET8C3 "[lrn]\nsize=3\nalpha=0.0001\nbeta=0.75\nk=2\n", -1, 3, 8, 8},
    {"dropout keeps the shape", NET8C3 "[dropout]\nprobability=.25\n", -1, 3, 8, 8},
    {"softmax keeps the shape", NET8C3 "[softmax]\n", -1, 3, 8, 8},
    {"connected: output x 1 x 1", NET8C3 "[connected]\noutput=7\n", -1, 7, 1, 1},
    /* Aliases Darknet accepts. */
    {"[conv] [max] [avg] [conn] [soft]",
     NET8 "[conv]\nfilters=4\nsize=3\npad=1\n[max]\nsize=2\nstride=2\n[avg]\n[conn]\noutput=5\n[soft]\n", 3, 5, 1, 1},
};

static void test_shape_table(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof shape_cases / sizeof shape_cases[0]; i++) {
        const shape_case *c = &shape_cases[i];
        st_cfg cfg;
        st_hparams hp;
        st_net net;
        st_error err = {0};
        st_status st = tl_build("t.cfg", c->text, &cfg, &hp, &net, &err);
        if (st != ST_OK) {
            failures++;
            print_error("FAIL [%s]: status %d: %s\n", c->name, st, err.msg);
            continue;
        }
        const st_layer *l = net.layers[c->layer < 0 ? net.n_layers - 1 : c->layer];
        if (l->out.c != c->c || l->out.h != c->h || l->out.w != c->w) {
            failures++;
            print_error("FAIL [%s]: c x h x w = %d x %d x %d, expected %d x %d x %d\n", c->name,
                        l->out.c, l->out.h, l->out.w, c->c, c->h, c->w);
        }
        free_all(&cfg, &net);
    }
    if (failures)
        fail_msg("%d shape cases failed", failures);
}

/* [connected] after a convolution flattens C x H x W: conv 3 filters 3x3
 * pad=1 on 8x8x1 gives 3 x 8 x 8 = 192 inputs, times 10 outputs = 1920
 * weights and 10 biases. The convolution itself has 3 x 1 x 3 x 3 = 27
 * weights. */
static void test_connected_flattens(void **state)
{
    (void)state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    build_ok(NET8 "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=relu\n"
                  "[connected]\noutput=10\nactivation=linear\n[softmax]\n",
             &cfg, &hp, &net);
    assert_int_equal(net.n_layers, 3);
    assert_shape(net.layers[0], 3, 8, 8);
    assert_shape(net.layers[1], 10, 1, 1);
    assert_int_equal(net.layers[1]->in.c, 3);
    assert_int_equal(net.layers[1]->in.h, 8);
    assert_int_equal(param_count(&net, 0, "weights"), 27);
    assert_int_equal(param_count(&net, 0, "biases"), 3);
    assert_int_equal(param_count(&net, 1, "weights"), 1920);
    assert_int_equal(param_count(&net, 1, "biases"), 10);
    assert_int_equal(net.classes, 10);
    assert_int_equal(net.output_layer, 2);
    free_all(&cfg, &net);
}

/* groups: 6 filters over 4 channels in 2 groups: 6 x (4/2) x 3 x 3 = 108
 * weights. batch_normalize=1 replaces the biases with scales, biases and
 * the two running statistics, one per filter. */
static void test_groups_and_batchnorm_params(void **state)
{
    (void)state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    build_ok(NET8C4 "[convolutional]\nfilters=6\nsize=3\ngroups=2\npad=1\n"
                    "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=1\nactivation=leaky\n"
                    "[batchnorm]\n",
             &cfg, &hp, &net);
    assert_shape(net.layers[0], 6, 8, 8);
    assert_int_equal(param_count(&net, 0, "weights"), 108);
    assert_int_equal(params_of_layer(&net, 0), 2);
    assert_int_equal(param_count(&net, 1, "weights"), 24);
    assert_int_equal(params_of_layer(&net, 1), 5);
    assert_int_equal(param_count(&net, 1, "scales"), 4);
    assert_int_equal(param_count(&net, 1, "biases"), 4);
    assert_int_equal(param_count(&net, 1, "rolling_mean"), 4);
    assert_int_equal(param_count(&net, 1, "rolling_variance"), 4);
    assert_int_equal(find_param(&net, 1, "rolling_mean")->kind, ST_PARAM_STAT);
    assert_int_equal(params_of_layer(&net, 2), 4);
    assert_int_equal(param_count(&net, 2, "scales"), 4);
    free_all(&cfg, &net);
}

/* [shortcut] adds an earlier output to the previous one: the output has the
 * previous layer's shape, its sources are (previous, from). */
static void test_shortcut(void **state)
{
    (void)state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    build_ok(NET8 "[convolutional]\nfilters=4\nsize=1\n"             /* 0: 4x8x8 */
                  "[convolutional]\nfilters=4\nsize=3\npad=1\n"      /* 1: 4x8x8 */
                  "[shortcut]\nfrom=-2\nactivation=leaky\n"          /* 2: 1 + 0 */
                  "[shortcut]\nfrom=0\nalpha=0.5\nbeta=2\n"          /* 3: 2 + 0 */
                  "[maxpool]\nsize=2\nstride=2\n"                    /* 4: 4x4x4 */
                  "[shortcut]\nfrom=1\n",                             /* 5: 4 + 1 (8x8 onto 4x4) */
             &cfg, &hp, &net);
    assert_int_equal(net.n_layers, 6);
    assert_shape(net.layers[2], 4, 8, 8);
    assert_int_equal(net.layers[2]->n_src, 2);
    assert_int_equal(net.layers[2]->src[0], 1);
    assert_int_equal(net.layers[2]->src[1], 0);
    assert_int_equal(net.layers[3]->src[0], 2);
    assert_int_equal(net.layers[3]->src[1], 0);
    assert_shape(net.layers[5], 4, 4, 4);
    assert_int_equal(net.layers[5]->src[0], 4);
    assert_int_equal(net.layers[5]->src[1], 1);
    assert_int_equal(params_of_layer(&net, 2), 0);
    free_all(&cfg, &net);
}

/* [route] concatenates channels in the order listed; the next layer sees the
 * concatenation. */
static void test_route(void **state)
{
    (void)state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    build_ok(NET8 "[convolutional]\nfilters=2\nsize=1\n"     /* 0: 2x8x8 */
                  "[convolutional]\nfilters=3\nsize=3\npad=1\n" /* 1: 3x8x8 */
                  "[route]\nlayers=-1,-2\n"                   /* 2: 5x8x8, src 1, 0 */
                  "[route]\nlayers = 0\n"                     /* 3: 2x8x8 */
                  "[route]\nlayers=1, 0, 2\n"                 /* 4: 3+2+5 = 10x8x8 */
                  "[convolutional]\nfilters=1\nsize=3\n",     /* 5: 10 -> 1x6x6 */
             &cfg, &hp, &net);
    assert_shape(net.layers[2], 5, 8, 8);
    assert_int_equal(net.layers[2]->n_src, 2);
    assert_int_equal(net.layers[2]->src[0], 1);
    assert_int_equal(net.layers[2]->src[1], 0);
    assert_shape(net.layers[3], 2, 8, 8);
    assert_int_equal(net.layers[3]->n_src, 1);
    assert_int_equal(net.layers[3]->src[0], 0);
    assert_shape(net.layers[4], 10, 8, 8);
    assert_int_equal(net.layers[4]->n_src, 3);
    assert_int_equal(net.layers[5]->in.c, 10);
    assert_shape(net.layers[5], 1, 6, 6);
    assert_int_equal(param_count(&net, 5, "weights"), 90);
    free_all(&cfg, &net);
}

/* The layer that gives the classes is the last one that is not [cost]. */
static void test_cost_and_classes(void **state)
{
    (void)state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    build_ok(NET8 "[connected]\noutput=6\n[softmax]\ngroups=2\n[cost]\ntype=sse\nscale=2\n",
             &cfg, &hp, &net);
    assert_int_equal(net.n_layers, 3);
    assert_int_equal(net.output_layer, 1);
    assert_int_equal(net.classes, 6);
    assert_true(net.layers[1]->is_loss);
    assert_true(net.layers[2]->is_loss);
    assert_shape(net.layers[2], 6, 1, 1);
    free_all(&cfg, &net);
}

/* ------------------------------------------------------- anchor networks */

static void load_ok(const char *path, st_cfg *cfg, st_hparams *hp, st_net *net)
{
    st_error err = {0};
    st_log log = tl_silent_log();
    memset(net, 0, sizeof *net);
    st_status st = st_cfg_load(cfg, path, &err);
    if (st == ST_OK)
        st = st_hparams_parse(cfg, hp, &log, &err);
    if (st == ST_OK)
        st = st_net_build(net, cfg, hp->input, &log, &err);
    if (st != ST_OK) {
        st_cfg_free(cfg);
        fail_msg("%s: status %d: %s", path, st, err.msg);
    }
}

typedef struct want_layer {
    const char *type;
    int c, h, w;
} want_layer;

static void check_layers(const char *path, const st_net *net, const want_layer *want, int n)
{
    if (net->n_layers != n)
        fail_msg("%s: %d layers, expected %d", path, net->n_layers, n);
    for (int i = 0; i < n; i++) {
        const st_layer *l = net->layers[i];
        if (strcmp(l->ops->type, want[i].type) != 0)
            fail_msg("%s: layer %d is [%s], expected [%s]", path, i, l->ops->type, want[i].type);
        assert_shape(l, want[i].c, want[i].h, want[i].w);
    }
}

/* LeNet-5 (Caffe's lenet) on 28x28x1: conv 20 5x5 -> 24; pool 2/2 padding 0
 * -> 12; conv 50 5x5 -> 8; pool -> 4; fc 500; fc 10; softmax 10. As in
 * PyTorch: Conv2d(1,20,5) 20x24x24, MaxPool2d(2) 20x12x12, Conv2d(20,50,5)
 * 50x8x8, MaxPool2d(2) 50x4x4, Linear(800,500), Linear(500,10). */
static void test_anchor_lenet5(void **state)
{
    (void)state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    load_ok(ANCHORS "lenet5.cfg", &cfg, &hp, &net);
    static const want_layer want[] = {
        {"convolutional", 20, 24, 24}, {"maxpool", 20, 12, 12}, {"convolutional", 50, 8, 8},
        {"maxpool", 50, 4, 4},         {"connected", 500, 1, 1}, {"connected", 10, 1, 1},
        {"softmax", 10, 1, 1},
    };
    check_layers("lenet5.cfg", &net, want, 7);
    assert_int_equal(hp.input.c, 1);
    assert_int_equal(hp.input.h, 28);
    assert_int_equal(hp.batch, 64);
    assert_int_equal(hp.max_batches, 100);
    assert_int_equal(net.classes, 10);
    assert_int_equal(param_count(&net, 0, "weights"), 20 * 1 * 25);
    assert_int_equal(param_count(&net, 2, "weights"), 50 * 20 * 25);
    assert_int_equal(param_count(&net, 4, "weights"), 800 * 500);
    assert_int_equal(param_count(&net, 5, "weights"), 500 * 10);
    /* 500 + 20 + 25000 + 50 + 400000 + 500 + 5000 + 10 */
    assert_int_equal(st_params_learned(&net.params), 431080);
    free_all(&cfg, &net);
}

/* The header: conv 64 5x5 p2 relu -> maxpool 3/2 (32->15) -> conv 192 5x5
 * p2 -> maxpool 3/2 (15->7) -> conv 384 3x3 p1 -> conv 256 3x3 p1 -> conv
 * 256 3x3 p1 -> maxpool 3/2 (7->3) -> fc 1024 -> fc 1024 -> fc 10 ->
 * softmax. fc1 sees 256 x 3 x 3 = 2304 inputs. */
static void test_anchor_cifar_alexnet(void **state)
{
    (void)state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    load_ok(ANCHORS "cifar_alexnet.cfg", &cfg, &hp, &net);
    static const want_layer want[] = {
        {"convolutional", 64, 32, 32}, {"maxpool", 64, 15, 15},       {"convolutional", 192, 15, 15},
        {"maxpool", 192, 7, 7},        {"convolutional", 384, 7, 7},  {"convolutional", 256, 7, 7},
        {"convolutional", 256, 7, 7},  {"maxpool", 256, 3, 3},        {"connected", 1024, 1, 1},
        {"connected", 1024, 1, 1},     {"connected", 10, 1, 1},       {"softmax", 10, 1, 1},
    };
    check_layers("cifar_alexnet.cfg", &net, want, 12);
    assert_int_equal(param_count(&net, 0, "weights"), 64 * 3 * 25);
    assert_int_equal(param_count(&net, 2, "weights"), 192 * 64 * 25);
    assert_int_equal(param_count(&net, 8, "weights"), 2304 * 1024);
    assert_int_equal(hp.batch, 64);
    free_all(&cfg, &net);
}

/* AlexNet on 227x227x3: conv1 11/4 -> 55x55x96; pool 3/2 -> 27; conv2 5x5
 * p2 -> 27x27x256; pool -> 13; conv3-5 3x3 p1 -> 13x13x384/384/256; pool ->
 * 6x6x256 = 9216 inputs to fc 4096, fc 4096, fc 1000, softmax. */
static void test_anchor_alexnet227(void **state)
{
    (void)state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    load_ok(ANCHORS "alexnet227.cfg", &cfg, &hp, &net);
    static const want_layer want[] = {
        {"convolutional", 96, 55, 55},  {"maxpool", 96, 27, 27},       {"convolutional", 256, 27, 27},
        {"maxpool", 256, 13, 13},       {"convolutional", 384, 13, 13}, {"convolutional", 384, 13, 13},
        {"convolutional", 256, 13, 13}, {"maxpool", 256, 6, 6},        {"connected", 4096, 1, 1},
        {"dropout", 4096, 1, 1},        {"connected", 4096, 1, 1},     {"dropout", 4096, 1, 1},
        {"connected", 1000, 1, 1},      {"softmax", 1000, 1, 1},
    };
    check_layers("alexnet227.cfg", &net, want, 14);
    assert_int_equal(param_count(&net, 0, "weights"), 96 * 3 * 121);
    assert_int_equal(param_count(&net, 8, "weights"), 9216 * 4096);
    assert_int_equal(net.classes, 1000);
    assert_int_equal(hp.batch, 32);
    assert_true(hp.solver.lr.learning_rate > 0.0099f && hp.solver.lr.learning_rate < 0.0101f);
    free_all(&cfg, &net);
}

/* A classifier written the way Darknet's own classifier cfgs are (commented
 * train/test batch lines, indented keys, augmentation keys, residual blocks
 * with [shortcut] from=-3, 1x1 convolutions with pad=1, [avgpool], a final
 * [cost]) loads, with one warning per augmentation key. 64x64x3 input:
 *  0 conv 16 7x7/2 pad=1 (padding 3): (64+6-7)/2+1 = 32     16 x 32 x 32
 *  1 maxpool 2/2 (padding 1): (32+1-2)/2+1 = 16             16 x 16 x 16
 *  2 conv 16 3x3/1 pad=1                                    16 x 16 x 16
 *  3 conv 16 3x3/1 pad=1 linear                             16 x 16 x 16
 *  4 shortcut from=-3 (layer 1)                             16 x 16 x 16
 *  5 conv 32 3x3/2 pad=1: (16+2-3)/2+1 = 8                  32 x  8 x  8
 *  6 conv 32 3x3/1 pad=1 linear                             32 x  8 x  8
 *  7 shortcut from=-3 (layer 4, 16x16x16 onto 32x8x8)       32 x  8 x  8
 *  8 conv 32 1x1 pad=1 (padding 0)                          32 x  8 x  8
 *  9 maxpool 2/1 (padding 1): (8+1-2)/1+1 = 8               32 x  8 x  8
 * 10 avgpool                                                32 x  1 x  1
 * 11 conv 10 1x1 pad=1 linear                               10 x  1 x  1
 * 12 softmax, 13 cost                                       10 x  1 x  1 */
static void test_darknet_style_classifier(void **state)
{
    (void)state;
    static const char text[] =
        "[net]\n# Training\n#batch=128\n#subdivisions=2\n\n# Testing\n batch=1\n subdivisions=1\n\n"
        "height=64\nwidth=64\nmin_crop=32\nmax_crop=96\nchannels=3\nmomentum=0.9\ndecay=0.0005\n\n"
        "burn_in=100\nlearning_rate=0.1\npolicy=poly\npower=4\nmax_batches=1000\n\n"
        "angle=7\nhue=.1\nsaturation=.75\nexposure=.75\naspect=.75\n\n"
        "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=7\nstride=2\npad=1\nactivation=leaky\n\n"
        "[maxpool]\nsize=2\nstride=2\n\n\n# Residual Block\n"
        "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n\n"
        "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=linear\n\n"
        "[shortcut]\nactivation=leaky\nfrom=-3\n\n# Strided Residual Block\n"
        "[convolutional]\nbatch_normalize=1\nfilters=32\nsize=3\nstride=2\npad=1\nactivation=leaky\n\n"
        "[convolutional]\nbatch_normalize=1\nfilters=32\nsize=3\nstride=1\npad=1\nactivation=linear\n\n"
        "[shortcut]\nactivation=leaky\nfrom=-3\n\n"
        "[convolutional]\nbatch_normalize=1\nfilters=32\nsize=1\nstride=1\npad=1\nactivation=leaky\n\n"
        "[maxpool]\nsize=2\nstride=1\n\n"
        "[avgpool]\n\n"
        "[convolutional]\nfilters=10\nsize=1\nstride=1\npad=1\nactivation=linear\n\n"
        "[softmax]\ngroups=1\n\n[cost]\ntype=sse\n\n";
    FILE *f = tmpfile();
    assert_non_null(f);
    st_log log = {ST_LOG_QUIET, NULL, f, NULL};
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    st_status st = build_len("darknet.cfg", text, sizeof text - 1, &log, &cfg, &hp, &net, &err);
    if (st != ST_OK) {
        fclose(f);
        fail_msg("status %d: %s", st, err.msg);
    }
    static const want_layer want[] = {
        {"convolutional", 16, 32, 32}, {"maxpool", 16, 16, 16},      {"convolutional", 16, 16, 16},
        {"convolutional", 16, 16, 16}, {"shortcut", 16, 16, 16},     {"convolutional", 32, 8, 8},
        {"convolutional", 32, 8, 8},   {"shortcut", 32, 8, 8},       {"convolutional", 32, 8, 8},
        {"maxpool", 32, 8, 8},         {"avgpool", 32, 1, 1},        {"convolutional", 10, 1, 1},
        {"softmax", 10, 1, 1},         {"cost", 10, 1, 1},
    };
    check_layers("darknet.cfg", &net, want, 14);
    assert_int_equal(net.layers[4]->src[1], 1);
    assert_int_equal(net.layers[7]->src[1], 4);
    assert_int_equal(net.classes, 10);
    assert_int_equal(net.output_layer, 12);
    assert_int_equal(hp.batch, 1);
    assert_int_equal(hp.solver.lr.policy, ST_LR_POLY);
    assert_int_equal(hp.solver.lr.burn_in, 100);
    free_all(&cfg, &net);
    char out[8192];
    int n = count_lines(f, out, sizeof out);
    fclose(f);
    if (n != 7)
        fail_msg("expected 7 warnings (min_crop, max_crop, angle, hue, saturation, exposure, "
                 "aspect), got %d:\n%s", n, out);
}

/* -------------------------------------------------------------- [net] keys */

static void test_hparams_values(void **state)
{
    (void)state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    build_ok("[net]\nbatch=32\nsubdivisions=2\nheight=10\nwidth=12\nchannels=3\n"
             "learning_rate=0.05\nmomentum=0.8\ndecay=0.0005\npolicy=steps\n"
             "steps=100, 200,300\nscales=.1,.5,2\nmax_batches=400\nburn_in=10\n"
             "train=/data/a#b.idx\ntrain_labels = /data/l.idx # labels\n"
             "[connected]\noutput=3\n",
             &cfg, &hp, &net);
    assert_int_equal(hp.batch, 32);
    assert_int_equal(hp.subdivisions, 2);
    assert_int_equal(hp.input.h, 10);
    assert_int_equal(hp.input.w, 12);
    assert_int_equal(hp.input.c, 3);
    assert_true(hp.solver.lr.learning_rate > 0.0499f && hp.solver.lr.learning_rate < 0.0501f);
    assert_true(hp.solver.momentum > 0.799f && hp.solver.momentum < 0.801f);
    assert_true(hp.solver.decay > 0.000499f && hp.solver.decay < 0.000501f);
    assert_int_equal(hp.solver.lr.policy, ST_LR_STEPS);
    assert_int_equal(hp.solver.lr.n_steps, 3);
    assert_int_equal(hp.solver.lr.steps[0], 100);
    assert_int_equal(hp.solver.lr.steps[1], 200);
    assert_int_equal(hp.solver.lr.steps[2], 300);
    assert_true(hp.solver.lr.scales[2] > 1.99f && hp.solver.lr.scales[2] < 2.01f);
    assert_int_equal(hp.max_batches, 400);
    assert_int_equal(hp.solver.lr.burn_in, 10);
    assert_string_equal(hp.data.train, "/data/a#b.idx");
    assert_string_equal(hp.data.train_labels, "/data/l.idx");
    assert_string_equal(hp.data.test, "");
    assert_int_equal(hp.data_line, 15);
    assert_int_equal(net.layers[0]->in.c, 3);
    free_all(&cfg, &net);
}

static void test_hparams_policies(void **state)
{
    (void)state;
    static const struct {
        const char *keys;
        st_lr_policy policy;
    } cases[] = {
        {"policy=constant\n", ST_LR_CONSTANT},
        {"policy=step\nstep=100\nscale=.5\n", ST_LR_STEP},
        {"policy=steps\nsteps=10\nscales=.1\n", ST_LR_STEPS},
        {"policy=exp\ngamma=0.99\n", ST_LR_EXP},
        {"policy=poly\npower=4\n", ST_LR_POLY},
        {"policy=inv\ngamma=0.0001\npower=0.75\n", ST_LR_INV},
        {"", ST_LR_CONSTANT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, NET8 "%s[connected]\noutput=2\n", cases[i].keys);
        st_cfg cfg;
        st_hparams hp;
        st_net net;
        build_ok(text, &cfg, &hp, &net);
        assert_int_equal(hp.solver.lr.policy, cases[i].policy);
        free_all(&cfg, &net);
    }
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    build_ok(NET8 "policy=step\nstep=100\nscale=.5\n[connected]\n", &cfg, &hp, &net);
    assert_int_equal(hp.solver.lr.step, 100);
    assert_true(hp.solver.lr.scale > 0.499f && hp.solver.lr.scale < 0.501f);
    free_all(&cfg, &net);
    build_ok(NET8 "policy=inv\ngamma=0.25\npower=0.75\n[connected]\n", &cfg, &hp, &net);
    assert_true(hp.solver.lr.gamma > 0.249f && hp.solver.lr.gamma < 0.251f);
    assert_true(hp.solver.lr.power > 0.749f && hp.solver.lr.power < 0.751f);
    free_all(&cfg, &net);
}

/* -------------------------------------------------- comments and spacing */

static void test_comments_blank_lines_spaces(void **state)
{
    (void)state;
    static const char text[] =
        "# a leading comment\n"
        "; and a semicolon one\n"
        "\n"
        "   [net]   # header comment\n"
        "height = 8\n"
        "\twidth\t=\t8\t\n"
        "  channels=1   ; inline\n"
        "   # indented comment\n"
        "\n\n"
        "[convolutional]\n"
        "filters=4 # four\n"
        "size=3\t; three\n"
        "pad = 1\n"
        ";filters=99\n"
        "#size=1\n"
        "activation=leaky\n"
        "\n"
        "[connected]\n"
        "output=5"; /* no final newline */
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    build_ok(text, &cfg, &hp, &net);
    assert_int_equal(cfg.n_secs, 3);
    assert_int_equal(cfg.secs[0].line, 4);
    assert_int_equal(cfg.secs[1].line, 11);
    assert_int_equal(cfg.secs[2].line, 19);
    assert_string_equal(cfg.secs[1].opts[0].key, "filters");
    assert_string_equal(cfg.secs[1].opts[0].val, "4");
    assert_int_equal(cfg.secs[1].opts[0].line, 12);
    assert_int_equal(cfg.secs[1].n_opts, 4);
    assert_shape(net.layers[0], 4, 8, 8);
    assert_shape(net.layers[1], 5, 1, 1);
    assert_int_equal(param_count(&net, 1, "weights"), 4 * 64 * 5);
    free_all(&cfg, &net);
}

static void test_crlf(void **state)
{
    (void)state;
    static const char text[] = "# CRLF file\r\n[net]\r\nheight=8\r\nwidth=8\r\nchannels=1\r\n"
                               "\r\n[convolutional]\r\nfilters=2\r\nsize=3\r\nactivation=relu\r\n"
                               "[connected]\r\noutput=3 # c\r\n[softmax]\r\n";
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    build_ok(text, &cfg, &hp, &net);
    assert_int_equal(cfg.secs[1].line, 7);
    assert_string_equal(cfg.secs[1].type, "convolutional");
    assert_string_equal(cfg.secs[1].opts[2].val, "relu");
    assert_shape(net.layers[0], 2, 6, 6);
    assert_shape(net.layers[1], 3, 1, 1);
    free_all(&cfg, &net);
}

/* -------------------------------------------------------------- warnings */

/* Build text with warnings going to a temporary stream; return how many
 * lines were written and copy them to out. */
static int build_warnings(const char *text, char *out, size_t size)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    st_log log = {ST_LOG_QUIET, NULL, f, NULL};
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    st_status st = build_len("w.cfg", text, strlen(text), &log, &cfg, &hp, &net, &err);
    if (st != ST_OK) {
        fclose(f);
        fail_msg("status %d: %s", st, err.msg);
    }
    free_all(&cfg, &net);
    int n = count_lines(f, out, size);
    fclose(f);
    return n;
}

static int count_substr(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_warnings_net_keys(void **state)
{
    (void)state;
    char out[8192];
    int n = build_warnings("[net]\nheight=8\nwidth=8\nchannels=1\nangle=7\nhue=.1\n"
                           "min_crop=224\nmax_crop=448\nsaturation=1.5\nexposure=1.5\n"
                           "[connected]\noutput=2\n",
                           out, sizeof out);
    if (n != 6)
        fail_msg("expected 6 warnings, got %d:\n%s", n, out);
    tl_assert_contains(out, "w.cfg:5: [net] angle=7");
    tl_assert_contains(out, "w.cfg:6: [net] hue=.1");
    tl_assert_contains(out, "w.cfg:7: [net] min_crop=224");
    tl_assert_contains(out, "singletrain does not implement");
    assert_int_equal(count_substr(out, "angle"), 1);
}

/* The same ignored key in several sections: one warning in all. */
static void test_warnings_once_per_key(void **state)
{
    (void)state;
    char out[8192];
    int n = build_warnings(NET8 "[convolutional]\nfilters=2\nsize=1\nflipped=1\n"
                                "[convolutional]\nfilters=2\nsize=1\nflipped=1\nstopbackward=1\n"
                                "[convolutional]\nfilters=2\nsize=1\nflipped=1\n"
                                "[connected]\noutput=4\n[cost]\nthresh=.5\n[cost]\nthresh=.5\n",
                           out, sizeof out);
    if (n != 3)
        fail_msg("expected 3 warnings (flipped, stopbackward, thresh), got %d:\n%s", n, out);
    assert_int_equal(count_substr(out, "flipped"), 1);
    assert_int_equal(count_substr(out, "stopbackward"), 1);
    assert_int_equal(count_substr(out, "thresh"), 1);
    tl_assert_contains(out, "w.cfg:8: [convolutional] flipped=1");
}

/* [conv] is the same layer type as [convolutional]: flipped= in both is
 * still one ignored key, so one warning. */
static void test_warnings_once_across_aliases(void **state)
{
    (void)state;
    char out[8192];
    int n = build_warnings(NET8 "[convolutional]\nfilters=2\nsize=1\nflipped=1\n"
                                "[conv]\nfilters=2\nsize=1\nflipped=1\n",
                           out, sizeof out);
    if (n != 1)
        fail_msg("expected 1 warning for flipped= in [convolutional] and [conv], got %d:\n%s",
                 n, out);
}

/* A Darknet cfg without augmentation keys gives no warning at all; the
 * anchor AlexNet's min_crop and max_crop give one each. */
static void test_warnings_none_and_anchor(void **state)
{
    (void)state;
    char out[8192];
    assert_int_equal(build_warnings(NET8 "[convolutional]\nfilters=2\n[softmax]\n", out, sizeof out), 0);
    FILE *f = tmpfile();
    assert_non_null(f);
    st_log log = {ST_LOG_QUIET, NULL, f, NULL};
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    memset(&net, 0, sizeof net);
    assert_int_equal(st_cfg_load(&cfg, ANCHORS "alexnet227.cfg", &err), ST_OK);
    assert_int_equal(st_hparams_parse(&cfg, &hp, &log, &err), ST_OK);
    assert_int_equal(st_net_build(&net, &cfg, hp.input, &log, &err), ST_OK);
    free_all(&cfg, &net);
    int n = count_lines(f, out, sizeof out);
    fclose(f);
    if (n != 2)
        fail_msg("alexnet227.cfg: expected 2 warnings (min_crop, max_crop), got %d:\n%s", n, out);
    tl_assert_contains(out, "min_crop=227");
    tl_assert_contains(out, "max_crop=227");
}

/* ------------------------------------------------------------ data files */

static st_status load_data(const char *text, st_data_paths *d, st_error *err, char **path)
{
    *path = write_temp(text, strlen(text));
    st_log log = tl_silent_log();
    return st_data_paths_load(*path, d, &log, err);
}

static void test_data_file_ok(void **state)
{
    (void)state;
    st_data_paths d;
    memset(&d, 0, sizeof d);
    strcpy(d.test_labels, "keep-me");
    st_error err = {0};
    char *path;
    st_status st = load_data("# Fashion-MNIST\n\ntrain = /d/train.idx\r\n"
                             "train_labels=/d/train-labels.idx ; labels\n"
                             "test=/d/t10k.idx\n",
                             &d, &err, &path);
    unlink(path);
    free(path);
    if (st != ST_OK)
        fail_msg("status %d: %s", st, err.msg);
    assert_string_equal(d.train, "/d/train.idx");
    assert_string_equal(d.train_labels, "/d/train-labels.idx");
    assert_string_equal(d.test, "/d/t10k.idx");
    assert_string_equal(d.test_labels, "keep-me");
}

static void test_data_file_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *want; /* after "PATH" */
    } cases[] = {
        {"train=a\nvalidation=b\n", ":2: unknown key 'validation'"},
        {"train=a\ntrain=b\n", ":2: duplicate key 'train'"},
        {"[data]\ntrain=a\n", ":1: a data file has no sections"},
        {"train=a\n[net]\n", ":2: a data file has no sections"},
        {"train=a\ntest\n", ":2: expected key=value"},
        {"train=\n", ":1: key 'train' has no value"},
        {"train=a\0b\n", ":1: contains a NUL byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_data_paths d;
        memset(&d, 0, sizeof d);
        st_error err = {0};
        size_t len = strlen(cases[i].text);
        if (i == sizeof cases / sizeof cases[0] - 1)
            len = 10; /* the NUL case */
        char *path = write_temp(cases[i].text, len);
        st_log log = tl_silent_log();
        st_status st = st_data_paths_load(path, &d, &log, &err);
        char want[256];
        snprintf(want, sizeof want, "%s%s", path, cases[i].want);
        unlink(path);
        free(path);
        if (st != ST_EINPUT || !strstr(err.msg, want))
            fail_msg("data case %zu: status %d, message \"%s\", expected \"%s\"", i, st, err.msg,
                     want);
        assert_one_line(err.msg);
    }
    /* A path longer than the buffers. */
    size_t n = ST_PATH_MAX + 10;
    char *text = malloc(n + 16);
    assert_non_null(text);
    strcpy(text, "test=");
    memset(text + 5, 'x', n);
    strcpy(text + 5 + n, "\n");
    st_data_paths d;
    memset(&d, 0, sizeof d);
    st_error err = {0};
    char *path;
    st_status st = load_data(text, &d, &err, &path);
    free(text);
    char want[256];
    snprintf(want, sizeof want, "%s:1: test= path is longer than", path);
    unlink(path);
    free(path);
    assert_int_equal(st, ST_EINPUT);
    tl_assert_contains(err.msg, want);
    /* A missing file. */
    st_error err2 = {0};
    st_log log = tl_silent_log();
    assert_int_equal(st_data_paths_load("/nonexistent/x.data", &d, &log, &err2), ST_EINPUT);
    tl_assert_contains(err2.msg, "/nonexistent/x.data: cannot open data file");
}

/* A cfg file on disk gives the same messages with its path. */
static void test_file_path_in_messages(void **state)
{
    (void)state;
    static const char text[] = NET8 "[convolutional]\nfilters=2\nsize=3\nbogus=1\n";
    char *path = write_temp(text, sizeof text - 1);
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    st_log log = tl_silent_log();
    memset(&net, 0, sizeof net);
    st_status st = st_cfg_load(&cfg, path, &err);
    if (st == ST_OK)
        st = st_hparams_parse(&cfg, &hp, &log, &err);
    if (st == ST_OK)
        st = st_net_build(&net, &cfg, hp.input, &log, &err);
    st_cfg_free(&cfg);
    char want[128];
    snprintf(want, sizeof want, "%s:8: unknown key 'bogus'", path);
    unlink(path);
    free(path);
    assert_int_equal(st, ST_EINPUT);
    tl_assert_contains(err.msg, want);
}

/* A cfg built in memory (as net/onnx.c builds one) is the cfg of the same
 * text: the same settings; a duplicate key is the same error, at the line
 * given; an option before any section is refused. */
static void test_built_in_memory(void **state)
{
    (void)state;
    static const char text[] = NET8 "[maxpool]\nsize=2\nstride=2\n";
    st_cfg parsed, built = {0};
    st_error err = {0};
    assert_int_equal(st_cfg_parse(&parsed, "a.cfg", text, sizeof text - 1, &err), ST_OK);
    built.path = strdup("b.onnx");
    assert_non_null(built.path);
    assert_int_equal(st_cfg_add_option(&built, "height", "8", 1, &err), ST_EINTERNAL);
    st_error_clear(&err);
    static const char *const kv[][2] = {{"height", "8"}, {"width", "8"}, {"channels", "1"}};
    assert_int_equal(st_cfg_add_section(&built, "net", 1, &err), ST_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(st_cfg_add_option(&built, kv[i][0], kv[i][1], 2 + i, &err), ST_OK);
    assert_int_equal(st_cfg_add_section(&built, "maxpool", 7, &err), ST_OK);
    assert_int_equal(st_cfg_add_option(&built, "stride", "2", 7, &err), ST_OK);
    assert_int_equal(st_cfg_add_option(&built, "size", "2", 7, &err), ST_OK);
    char *a, *b;
    size_t na, nb;
    assert_int_equal(st_cfg_settings(&parsed, NULL, &a, &na, &err), ST_OK);
    assert_int_equal(st_cfg_settings(&built, NULL, &b, &nb, &err), ST_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a);
    free(b);
    assert_int_equal(st_cfg_add_option(&built, "size", "3", 9, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "b.onnx:9: duplicate key 'size' in [maxpool] (first set at line 7)");
    st_cfg_free(&parsed);
    st_cfg_free(&built);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_built_in_memory),
        cmocka_unit_test(test_error_table),
        cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_nul_byte_at_end),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_conv_weight_count_overflow),
        cmocka_unit_test(test_conv_too_many_weights),
        cmocka_unit_test(test_shape_table),
        cmocka_unit_test(test_connected_flattens),
        cmocka_unit_test(test_groups_and_batchnorm_params),
        cmocka_unit_test(test_shortcut),
        cmocka_unit_test(test_route),
        cmocka_unit_test(test_cost_and_classes),
        cmocka_unit_test(test_anchor_lenet5),
        cmocka_unit_test(test_anchor_cifar_alexnet),
        cmocka_unit_test(test_anchor_alexnet227),
        cmocka_unit_test(test_darknet_style_classifier),
        cmocka_unit_test(test_hparams_values),
        cmocka_unit_test(test_hparams_policies),
        cmocka_unit_test(test_comments_blank_lines_spaces),
        cmocka_unit_test(test_crlf),
        cmocka_unit_test(test_warnings_net_keys),
        cmocka_unit_test(test_warnings_once_per_key),
        cmocka_unit_test(test_warnings_once_across_aliases),
        cmocka_unit_test(test_warnings_none_and_anchor),
        cmocka_unit_test(test_data_file_ok),
        cmocka_unit_test(test_data_file_errors),
        cmocka_unit_test(test_file_path_in_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
