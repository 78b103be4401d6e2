/* The kernel-choice table (choices.h): the text form read and written
 * back in layer order, malformed files refused naming the line, a key
 * measured by exactly one of the workers asking for it at once while the
 * others wait for its value, abandoned and rejected keys measured again,
 * and the counts and origins the trainer reports (src/train/setup.c).
 *
 * Also run under ThreadSanitizer (@tsan): it starts threads. */
#include "testlib.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "backends/choices.h"

static st_choices *make_table(void)
{
    st_choices *c = NULL;
    st_error err = {0};
    if (st_choices_create(&c, &err) != ST_OK)
        fail_msg("%s", err.msg);
    return c;
}

static void test_text_round_trip(void **state)
{
    (void)state;
    st_choices *c = make_table();
    st_error err = {0};
    const char *text = "# a comment\r\n"
                       "10.conv n4 x = nhwc a b c\n"
                       "\n"
                       "   2.conv n4 y   =   blocked - - -   \r\n"
                       "2.conv n2 y = nchw - - -";
    assert_int_equal(st_choices_parse(c, text, "f.txt", &err), ST_OK);
    int count = -1;
    char *out = st_choices_text(c, ST_CHOICES_VALUES, &count);
    assert_non_null(out);
    assert_int_equal(count, 3);
    /* layer 2 before layer 10, then by text; trimmed, CR gone */
    assert_string_equal(out, "2.conv n2 y = nchw - - -\n"
                             "2.conv n4 y = blocked - - -\n"
                             "10.conv n4 x = nhwc a b c\n");
    /* read back: the same table */
    st_choices *d = make_table();
    assert_int_equal(st_choices_parse(d, out, "again", &err), ST_OK);
    char *again = st_choices_text(d, ST_CHOICES_VALUES, NULL);
    assert_string_equal(again, out);
    char origin[64];
    st_choices_origin(c, "10.conv n4 x", origin, sizeof origin);
    assert_string_equal(origin, "f.txt:2");
    st_choices_origin(c, "none", origin, sizeof origin);
    assert_string_equal(origin, "");
    free(out);
    free(again);
    st_choices_free(c);
    st_choices_free(d);
}

static void test_malformed_refused(void **state)
{
    (void)state;
    static const struct {
        const char *text, *message;
    } cases[] = {
        {"# ok\n\nkey without equals\n", "bad.txt:3: expected 'KEY = VALUE'"},
        {"k = v\nk = w\n", "bad.txt:2: a second choice for 'k' ('v', then 'w')"},
        {"k =v\n", "bad.txt:1: expected 'KEY = VALUE'"},
        {" = v\n", "bad.txt:1: expected 'KEY = VALUE'"},
        {"k =    \n", "bad.txt:1: expected 'KEY = VALUE'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_choices *c = make_table();
        st_error err = {0};
        assert_int_equal(st_choices_parse(c, cases[i].text, "bad.txt", &err), ST_EINPUT);
        tl_assert_contains(err.msg, cases[i].message);
        st_choices_free(c);
    }
    /* the same choice twice is no conflict */
    st_choices *c = make_table();
    st_error err = {0};
    assert_int_equal(st_choices_parse(c, "k = v\nk = v\n", "same.txt", &err), ST_OK);
    st_choices_free(c);
}

typedef struct asker {
    st_choices *c;
    pthread_barrier_t *start;
    int claimed;
    char value[ST_CHOICE_MAX];
} asker;

/* Ask for one key at once with the others; the one that claims it
 * "measures" a while, then records its value. */
static void *ask(void *arg)
{
    asker *a = arg;
    pthread_barrier_wait(a->start);
    if (st_choices_get(a->c, "3.conv n8", a->value, sizeof a->value) == ST_CHOICE_CLAIMED) {
        a->claimed = 1;
        usleep(50000);
        st_choices_record(a->c, "3.conv n8", "nhwc measured - -", "nhwc 1.0 ms <- chosen");
        snprintf(a->value, sizeof a->value, "nhwc measured - -");
    }
    return NULL;
}

static void test_one_measures_the_others_wait(void **state)
{
    (void)state;
    enum { ASKERS = 6 };
    st_choices *c = make_table();
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, ASKERS);
    asker a[ASKERS];
    pthread_t th[ASKERS];
    for (int i = 0; i < ASKERS; i++) {
        a[i] = (asker){.c = c, .start = &start};
        assert_int_equal(pthread_create(&th[i], NULL, ask, &a[i]), 0);
    }
    int claims = 0;
    for (int i = 0; i < ASKERS; i++) {
        pthread_join(th[i], NULL);
        claims += a[i].claimed;
        assert_string_equal(a[i].value, "nhwc measured - -");
    }
    assert_int_equal(claims, 1);
    pthread_barrier_destroy(&start);
    int measured, given, unused;
    st_choices_counts(c, &measured, &given, &unused);
    assert_int_equal(measured, 1);
    assert_int_equal(given, 0);
    char *text = st_choices_text(c, ST_CHOICES_VALUES | ST_CHOICES_TRIALS, NULL);
    assert_string_equal(text, "3.conv n8 = nhwc measured - -\n# nhwc 1.0 ms <- chosen\n");
    free(text);
    st_choices_free(c);
}

static void test_abandon_reject_counts(void **state)
{
    (void)state;
    st_choices *c = make_table();
    st_error err = {0};
    char value[ST_CHOICE_MAX];
    assert_int_equal(st_choices_parse(c, "a = x\nb = y\nc = z\n", "given.txt", &err), ST_OK);
    /* a failed measurement leaves the key to the next asker */
    assert_int_equal(st_choices_get(c, "new", value, sizeof value), ST_CHOICE_CLAIMED);
    st_choices_abandon(c, "new");
    assert_int_equal(st_choices_get(c, "new", value, sizeof value), ST_CHOICE_CLAIMED);
    st_choices_record(c, "new", "w", NULL);
    /* a given choice this machine cannot run: dropped with a note, measured */
    assert_int_equal(st_choices_get(c, "a", value, sizeof value), ST_CHOICE_FOUND);
    assert_string_equal(value, "x");
    st_choices_reject(c, "a", "x", "no such implementation");
    assert_int_equal(st_choices_get(c, "a", value, sizeof value), ST_CHOICE_CLAIMED);
    st_choices_record(c, "a", "x2", NULL);
    assert_int_equal(st_choices_get(c, "b", value, sizeof value), ST_CHOICE_FOUND);
    int measured, given, unused;
    st_choices_counts(c, &measured, &given, &unused);
    assert_int_equal(measured, 2); /* new, a */
    assert_int_equal(given, 1);    /* b */
    assert_int_equal(unused, 1);   /* c */
    char *notes = st_choices_text(c, ST_CHOICES_NOTES, NULL);
    assert_string_equal(notes, "# a: the given choice 'x' was not usable here: no such "
                               "implementation\n");
    free(notes);
    st_choices_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_round_trip),
        cmocka_unit_test(test_malformed_refused),
        cmocka_unit_test(test_one_measures_the_others_wait),
        cmocka_unit_test(test_abandon_reject_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
