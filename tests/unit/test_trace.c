/* --trace's recorder (base/trace.h): no recorder gives NULL tracks; a
 * track records only the window's iterations; a full track counts what it
 * drops; the JSON: metadata naming the process and threads, each object
 * preceded by a comma, names built from name, index and detail, texts
 * escaped, times in microseconds from the origin with three decimals,
 * rounded so that an event inside another stays inside it; the bytes
 * the memory estimate counts for a track hold its events and their text
 * at their longest. */
#include "testlib.h"

#include <stdlib.h>

#include "base/trace.h"

static void test_no_recorder(void **state)
{
    (void)state;
    st_error err = {0};
    st_trace_track *k = (st_trace_track *)1;
    assert_int_equal(st_trace_track_add(NULL, "worker 0", 10, 10, &k, &err), ST_OK);
    assert_null(k);
    assert_null(st_trace_at(NULL, 0));
    assert_int_equal(st_trace_dropped(NULL), 0);
}

static void test_window_and_full_track(void **state)
{
    (void)state;
    st_error err = {0};
    st_trace *t;
    st_trace_track *k;
    assert_int_equal(st_trace_create(&t, 3, 4, &err), ST_OK);
    assert_int_equal(st_trace_track_add(t, "worker 0", 2, 1, &k, &err), ST_OK);
    assert_null(st_trace_at(k, 2));
    assert_ptr_equal(st_trace_at(k, 3), k);
    assert_ptr_equal(st_trace_at(k, 4), k);
    assert_null(st_trace_at(k, 5));
    for (int i = 0; i < 7; i++) /* room for 2 x 2 + 1 */
        st_trace_span(k, "phase", "compute", 3, 1.0, 2.0);
    assert_int_equal(st_trace_dropped(t), 2);
    st_trace_free(t);
}

static void test_json(void **state)
{
    (void)state;
    st_error err = {0};
    st_trace *t;
    st_trace_track *sched, *worker;
    assert_int_equal(st_trace_create(&t, 0, 9, &err), ST_OK);
    st_trace_set_origin(t, 100.0);
    assert_int_equal(st_trace_track_add(t, "scheduler", 1, 0, &sched, &err), ST_OK);
    assert_int_equal(st_trace_track_add(t, "worker \"0\"", 4, 0, &worker, &err), ST_OK);
    /* an iteration from 1.0004 us to 3.0004 us and a layer inside it that
     * ends with it: rounded each on its own, the layer would end after */
    st_trace_event it = {.name = "iteration", .index = 7, .cat = "iteration", .iteration = 7,
                         .t0 = 100.0 + 1.0004e-6, .t1 = 100.0 + 3.0004e-6};
    st_trace_event layer = {.name = "forward", .index = 3, .detail = "conv", .cat = "layer",
                            .iteration = 7, .text_key = "type", .text = "a \"b\"\\c",
                            .key = {"bytes", "line"}, .value = {1024, 27},
                            .t0 = 100.0 + 1.5006e-6, .t1 = 100.0 + 3.0004e-6};
    st_trace_add(worker, &it);
    st_trace_add(worker, &layer);
    st_trace_span(sched, "report", "report", 7, 100.0 + 4e-6, 100.0 + 5e-6);
    char *text;
    size_t len;
    assert_int_equal(st_trace_json(t, 1, "rank 1", &text, &len, &err), ST_OK);
    assert_int_equal(strlen(text), len);
    assert_true(strncmp(text, ",\n{", 3) == 0); /* every object after a comma */
    tl_assert_contains(text, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
                             "\"args\":{\"name\":\"rank 1\"}}");
    tl_assert_contains(text, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,"
                             "\"args\":{\"name\":\"scheduler\"}}");
    tl_assert_contains(text, "\"args\":{\"name\":\"worker \\\"0\\\"\"}}");
    tl_assert_contains(text, "{\"name\":\"iteration 7\",\"cat\":\"iteration\",\"ph\":\"X\","
                             "\"pid\":1,\"tid\":2,\"ts\":1.000,\"dur\":2.000,"
                             "\"args\":{\"iteration\":7}}");
    /* 1.5006 rounds to 1.501, its end (3.0004) to 3.000: dur 1.499, not
     * round(1.4998) = 1.500, which would end it after the iteration */
    tl_assert_contains(text, "{\"name\":\"forward 3 conv\",\"cat\":\"layer\",\"ph\":\"X\","
                             "\"pid\":1,\"tid\":2,\"ts\":1.501,\"dur\":1.499,"
                             "\"args\":{\"iteration\":7,\"type\":\"a \\\"b\\\"\\\\c\","
                             "\"bytes\":1024,\"line\":27}}");
    tl_assert_contains(text, "{\"name\":\"report\",\"cat\":\"report\",\"ph\":\"X\",\"pid\":1,"
                             "\"tid\":1,\"ts\":4.000,\"dur\":1.000");
    free(text);
    st_trace_free(t);
}

/* A full track of the longest events the recorder makes (a layer's name,
 * index and detail, a text argument, every numeric argument at %.17g's
 * longest, times of a day's run): its events and JSON within
 * st_trace_track_bytes. */
static void test_track_bytes_bound(void **state)
{
    (void)state;
    st_error err = {0};
    st_trace *t;
    st_trace_track *k;
    const long iterations = 2;
    const size_t per_iteration = 3, extra = 1;
    assert_int_equal(st_trace_create(&t, 0, iterations - 1, &err), ST_OK);
    assert_int_equal(st_trace_track_add(t, "worker 4095", per_iteration, extra, &k, &err),
                     ST_OK);
    st_trace_event e = {.name = "backward-weights", .index = 4095,
                        .detail = "a detail of forty bytes, a layer's type", .cat = "iteration",
                        .iteration = 1234567890, .text_key = "algorithm",
                        .text = "rhd-supernode \"quoted\"", .t0 = -86400.123456789,
                        .t1 = 86400.987654321};
    for (int a = 0; a < ST_TRACE_ARGS; a++) {
        e.key[a] = "bytes";
        e.value[a] = -1.2345678901234567e-300;
    }
    size_t events = (size_t)iterations * per_iteration + extra;
    for (size_t i = 0; i < events; i++)
        st_trace_add(k, &e);
    assert_int_equal(st_trace_dropped(t), 0);
    char *text;
    size_t len;
    assert_int_equal(st_trace_json(t, 4095, "rank 4095", &text, &len, &err), ST_OK);
    assert_true(len + events * sizeof(st_trace_event) <=
                st_trace_track_bytes(iterations, per_iteration, extra));
    free(text);
    st_trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_recorder),
        cmocka_unit_test(test_window_and_full_track),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_track_bytes_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
