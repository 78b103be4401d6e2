/* The SW26010 model file (include/cpe/model.h, src/cpe/cpe_model.c) and
 * machine description (include/cpe/machine.h, src/cpe/cpe_machine.c): the
 * built-in ones are data/sw26010/model.conf and sw26010.machine byte for
 * byte and parse; the cost model's defaults are them with the fitted
 * constants neutral; on the SW26010 the machine changes no constant, on
 * another it scales the DMA curve; the parsers' refusals that the
 * bad-input catalogue (tests/e2e/catalogue.tsv, cpe-model-*,
 * cpe-machine-*) does not reach through the command line. Run from the
 * repository root (scripts/run-tests.sh does). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "base/fileio.h"
#include "cpe/model.h"

#define MODEL_FILE "data/sw26010/model.conf"
#define MACHINE_FILE "data/sw26010/sw26010.machine"
#define PRO_FILE "data/sw26010/sw26010-pro.machine"

/* The built-in model with line `name ...` replaced by `line` (NULL:
 * removed), malloc'd. */
static char *model_with(const char *name, const char *line)
{
    const char *src = st_sw26010_model_builtin;
    size_t cap = strlen(src) + (line ? strlen(line) : 0) + 2;
    char *out = malloc(cap), *w = out;
    assert_non_null(out);
    size_t name_len = strlen(name);
    while (*src) {
        const char *nl = strchr(src, '\n');
        size_t len = nl ? (size_t)(nl - src) + 1 : strlen(src);
        int match = strncmp(src, name, name_len) == 0 && (src[name_len] == ' ');
        if (match && line)
            w += sprintf(w, "%s\n", line);
        else if (!match) {
            memcpy(w, src, len);
            w += len;
        }
        src += len;
    }
    *w = '\0';
    return out;
}

static void expect_refused(const char *name, const char *line, const char *message)
{
    char *text = model_with(name, line);
    st_sw26010_model m;
    st_error err = {0};
    assert_int_equal(st_sw26010_model_parse(&m, text, "m.conf", &err), ST_EINPUT);
    tl_assert_contains(err.msg, message);
    free(text);
}

static void test_builtin_is_the_file(void **state)
{
    (void)state;
    char *text = NULL;
    st_error err = {0};
    assert_int_equal(st_read_text(MODEL_FILE, "model", 1 << 20, &text, NULL, &err), ST_OK);
    if (strcmp(text, st_sw26010_model_builtin) != 0)
        fail_msg("the built-in model differs from %s: rebuild (make)", MODEL_FILE);
    free(text);
    st_sw26010_model from_file, built_in;
    assert_int_equal(st_sw26010_model_load(&from_file, MODEL_FILE, &err), ST_OK);
    assert_int_equal(st_sw26010_model_load(&built_in, NULL, &err), ST_OK);
    assert_memory_equal(&from_file, &built_in, sizeof from_file);
    text = NULL;
    assert_int_equal(st_read_text(MACHINE_FILE, "machine", 1 << 20, &text, NULL, &err), ST_OK);
    if (strcmp(text, st_cpe_machine_builtin) != 0)
        fail_msg("the built-in machine differs from %s: rebuild (make)", MACHINE_FILE);
    free(text);
}

/* The built-in model and the machine description at path (NULL: the
 * built-in SW26010's), failing the test when either does not load. */
static void load_both(st_sw26010_model *m, st_cpe_machine *machine, const char *path)
{
    st_error err = {0};
    if (st_sw26010_model_load(m, NULL, &err) != ST_OK ||
        st_cpe_machine_load(machine, path, &err) != ST_OK)
        fail_msg("%s", err.msg);
}

/* The values land where they belong: the 11-point DMA curve (swCandle's),
 * the machine's clock, mesh, LDM and supernodes; on the SW26010 the model
 * and the machine together change no constant (every scale exactly 1). */
static void test_builtin_values(void **state)
{
    (void)state;
    st_sw26010_model m;
    st_cpe_machine sw;
    load_both(&m, &sw, NULL);
    assert_int_equal(m.cg.dma.points, 11);
    assert_true(m.cg.dma.bytes[0] == 8.0 && m.cg.dma.bytes[10] == 8192.0);
    assert_true(m.cg.dma.get_cycles[10] == 27375.5 && m.cg.dma.put_cycles[0] == 1911.2);
    assert_true(m.cg.dma_get_latency_cycles + m.cg.dma_put_latency_cycles == 2398.0);
    assert_true(sw.clock_hz == 1.45e9 && sw.vector_doubles == 4);
    assert_int_equal(sw.core_groups, 4);
    assert_int_equal(sw.mesh_rows * sw.mesh_cols, 64);
    assert_int_equal(sw.ldm_bytes, 65536);
    assert_true(sw.supernode_nodes == 256.0 && sw.cross_supernode_factor == 4.0);
    st_cpe_cost_params p = st_sw26010_cost_params(&m, &sw);
    assert_true(p.clock_hz == 1.45e9 && p.flops_per_cycle == 8.0 && p.cpes == 64);
    assert_memory_equal(&p.dma, &m.cg.dma, sizeof p.dma);
    assert_true(p.dma_get_latency_cycles == m.cg.dma_get_latency_cycles);
}

/* The what-if: the SW26010-Pro's description parses, and its clock,
 * memory bandwidth and CPE count scale the DMA curve's cycles by
 * (2.25 / 1.45) (34.13 / 51.2) (64 / 64). */
static void test_pro_scales_the_curve(void **state)
{
    (void)state;
    st_sw26010_model m;
    st_cpe_machine pro;
    load_both(&m, &pro, PRO_FILE);
    assert_int_equal(pro.core_groups, 6);
    assert_int_equal(pro.ldm_bytes, 256 * 1024);
    st_cpe_cost_params p = st_sw26010_cost_params(&m, &pro);
    double scale = (2.25 / 1.45) * (34.13 / 51.2);
    for (int i = 0; i < p.dma.points; i++)
        assert_true(fabs(p.dma.get_cycles[i] / m.cg.dma.get_cycles[i] - scale) < 1e-9);
    assert_true(fabs(p.dma_put_latency_cycles / m.cg.dma_put_latency_cycles - 2.25 / 1.45) <
                1e-9);
}

/* The defaults: the built-in constants with the fitted ones neutral. */
static void test_defaults_are_neutral(void **state)
{
    (void)state;
    st_sw26010_model m;
    st_cpe_machine sw;
    load_both(&m, &sw, NULL);
    st_cpe_cost_params d = st_cpe_cost_params_default();
    assert_true(d.dma_interleaved_share == 1.0 && d.float_msg_cycles == 0.0);
    assert_true(d.dma_get_latency_cycles == 1199.0 && d.dma_put_latency_cycles == 1199.0);
    st_cpe_cost_params fitted = st_sw26010_cost_params(&m, &sw);
    fitted.dma_interleaved_share = d.dma_interleaved_share;
    fitted.float_msg_cycles = d.float_msg_cycles;
    fitted.dma_get_latency_cycles = d.dma_get_latency_cycles;
    fitted.dma_put_latency_cycles = d.dma_put_latency_cycles;
    assert_memory_equal(&fitted, &d, sizeof d);
}

static void test_refusals(void **state)
{
    (void)state;
    expect_refused("mpe_flops", "mpe_flops inf flop/s x", "mpe_flops: 'inf' is not a number");
    expect_refused("mpe_flops", "mpe_flops nan flop/s x", "mpe_flops: 'nan' is not a number");
    expect_refused("mpe_flops", "mpe_flops 0 flop/s x", "'0' is not a number above 0");
    expect_refused("loop_entry_cycles", "loop_entry_cycles",
                   "m.conf:13: loop_entry_cycles needs a value, a unit (cycles)");
    expect_refused("dma_curve_bytes", "dma_curve_bytes 8,,16 B x",
                   "dma_curve_bytes: point 2, '', is not a number");
    expect_refused("dma_curve_bytes",
                   "dma_curve_bytes 2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18 B x",
                   "dma_curve_bytes has more than 16 points");
    expect_refused("node_time_spread", NULL, "m.conf: node_time_spread (1) is missing");
    char long_line[1200];
    memset(long_line, '#', sizeof long_line - 1);
    long_line[sizeof long_line - 1] = '\0';
    expect_refused("uncertainty_share", long_line, "line longer than 1023 characters");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_is_the_file),
        cmocka_unit_test(test_builtin_values),
        cmocka_unit_test(test_pro_scales_the_curve),
        cmocka_unit_test(test_defaults_are_neutral),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
