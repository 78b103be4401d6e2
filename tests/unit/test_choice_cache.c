/* The kernel-choice cache (choice_cache.h): what a run measured is read
 * back by the next run of the same context; a damaged entry, an entry or a
 * file of another context are left out with a warning and measured again,
 * and the file rewritten without them; reading nothing (--kernel-choices
 * measure) still updates the file, keeping other keys; a directory that
 * cannot be made is one warning, never a failure; a run finding the lock
 * held waits for it, so that two processes started at once measure once
 * and take the same choice, and one held too long is waited for only so
 * long, the file then merged, not overwritten; the default directory
 * follows XDG_CACHE_HOME, then HOME. Each test in a temporary directory. */
#include "testlib.h"
#include "tmpdir.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/choice_cache.h"

/* A backend's syntax for the tests: three words, the first "nhwc" or
 * "nchw". */
static int syntax(const char *value, char *why, size_t size)
{
    char a[16], b[16], c[16], extra;
    if (sscanf(value, "%15s %15s %15s %c", a, b, c, &extra) == 3 &&
        (strcmp(a, "nhwc") == 0 || strcmp(a, "nchw") == 0))
        return 1;
    snprintf(why, size, "expected LAYOUT A B");
    return 0;
}

static st_choices *table(void)
{
    st_choices *c = NULL;
    st_error err = {0};
    if (st_choices_create(&c, syntax, &err) != ST_OK)
        fail_msg("%s", err.msg);
    return c;
}

/* A log whose lines (info and warnings) go to a temporary file. */
typedef struct captured {
    FILE *f;
    st_log log;
} captured;

static void capture(captured *k)
{
    k->f = tmpfile();
    assert_non_null(k->f);
    k->log = tl_silent_log();
    k->log.level = ST_LOG_INFO;
    k->log.out = k->f;
    k->log.err = k->f;
}

/* What was logged since the last call (malloc'd). */
static char *logged(captured *k)
{
    fflush(k->f);
    long end = ftell(k->f);
    char *text = calloc(1, (size_t)end + 1);
    assert_non_null(text);
    rewind(k->f);
    assert_int_equal(fread(text, 1, (size_t)end, k->f), (size_t)end);
    rewind(k->f);
    assert_int_equal(ftruncate(fileno(k->f), 0), 0);
    return text;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static st_choice_cache *open_cache(const char *dir, const char *context, int read,
                                   st_choices *c, const st_log *log)
{
    st_choice_cache_opts o = {.dir = dir, .context = context, .read = read, .lock_wait = 10.0};
    st_choice_cache *cache = NULL;
    st_error err = {0};
    if (st_choice_cache_open(&cache, &o, c, log, &err) != ST_OK)
        fail_msg("%s", err.msg);
    return cache;
}

/* A run of context: opens the cache, takes what it has for keys[n] and
 * "measures" the others (records their values[]), stores, closes; how
 * many it measured. */
static int run(const char *context, int read, const char *const *keys,
               const char *const *values, int n, const st_log *log)
{
    st_choices *c = table();
    st_choice_cache *cache = open_cache("cache", context, read, c, log);
    assert_non_null(cache);
    int measured = 0;
    char value[ST_CHOICE_MAX];
    for (int i = 0; i < n; i++)
        if (st_choices_get(c, keys[i], value, sizeof value) == ST_CHOICE_CLAIMED) {
            st_choices_record(c, keys[i], values[i], NULL);
            measured++;
        }
    int stored = -1;
    st_choice_cache_store(cache, c, &stored);
    assert_int_equal(stored, measured);
    st_choice_cache_close(cache);
    st_choices_free(c);
    return measured;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *text = calloc(1, 1 << 16);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static char *cache_path(const char *context)
{
    captured k;
    capture(&k);
    st_choices *c = table();
    st_choice_cache *cache = open_cache("cache", context, 0, c, &k.log);
    char *path = strdup(st_choice_cache_file(cache));
    st_choice_cache_close(cache);
    st_choices_free(c);
    fclose(k.f);
    return path;
}

static const char *const keys[] = {"0.conv n8 a", "2.conv n8 b"};
static const char *const values[] = {"nhwc x y", "nchw z w"};

static void test_measured_then_read(void **state)
{
    (void)state;
    captured k;
    capture(&k);
    /* the directory and its parents are made */
    assert_int_equal(run("machine A; 2 workers", 1, keys, values, 2, &k.log), 2);
    assert_int_equal(run("machine A; 2 workers", 1, keys, values, 2, &k.log), 0);
    /* another context measures its own, in a file of its own */
    assert_int_equal(run("machine B; 2 workers", 1, keys, values, 2, &k.log), 2);
    char *log = logged(&k);
    assert_string_equal(log, "");
    free(log);
    char *path = cache_path("machine A; 2 workers");
    char *text = read_all(path);
    tl_assert_contains(text, "\ncontext = machine A; 2 workers\n");
    tl_assert_contains(text, " 0.conv n8 a = nhwc x y\n");
    tl_assert_contains(text, " 2.conv n8 b = nchw z w\n");
    free(text);
    free(path);
    /* the table says where they came from */
    st_choices *c = table();
    st_choice_cache *cache = open_cache("cache", "machine A; 2 workers", 1, c, &k.log);
    char value[ST_CHOICE_MAX], origin[ST_CHOICE_MAX];
    assert_int_equal(st_choices_get(c, keys[1], value, sizeof value), ST_CHOICE_FOUND);
    st_choices_origin(c, keys[1], origin, sizeof origin);
    tl_assert_contains(origin, "cache/choices-");
    st_choice_counts n;
    st_choices_counts(c, &n);
    assert_int_equal(n.taken[ST_CHOICE_CACHE], 1);
    assert_int_equal(n.unused, 0); /* the cache's untaken one is no "unused given" */
    st_choice_cache_close(cache);
    st_choices_free(c);
    fclose(k.f);
}

/* Replace the first occurrence of from in the file by to (same length). */
static void poke(const char *path, const char *from, const char *to)
{
    char *text = read_all(path);
    char *at = strstr(text, from);
    assert_non_null(at);
    memcpy(at, to, strlen(to));
    tl_write_file(path, text, strlen(text));
    free(text);
}

static void test_damaged_entries_measured_again(void **state)
{
    (void)state;
    captured k;
    capture(&k);
    const char *ctx = "machine A";
    run(ctx, 1, keys, values, 2, &k.log);
    char *path = cache_path(ctx);
    /* a flipped byte in a value (its checksum kept), a line that is no
     * entry and a NUL byte */
    poke(path, "nhwc x y", "nhwc x z");
    FILE *f = fopen(path, "ab");
    fputs("not an entry\n", f);
    fwrite("0123456789abcdef 5.conv = nhwc\0 x\n", 1, 34, f);
    fclose(f);
    assert_int_equal(run(ctx, 1, keys, values, 2, &k.log), 1);
    char *log = logged(&k);
    tl_assert_contains(log, "3 damaged or foreign entries ignored (the first at line 4: its "
                            "checksum does not match it");
    assert_int_equal(count_of(log, "\n"), 1); /* one warning for the file */
    free(log);
    /* rewritten without them: the next run takes both, silently */
    assert_int_equal(run(ctx, 1, keys, values, 2, &k.log), 0);
    log = logged(&k);
    assert_string_equal(log, "");
    free(log);
    char *text = read_all(path);
    assert_null(strstr(text, "not an entry"));
    assert_null(strstr(text, "nhwc x z"));
    free(text);
    free(path);
    fclose(k.f);
}

static void test_foreign_file_and_entry(void **state)
{
    (void)state;
    captured k;
    capture(&k);
    run("machine A", 1, keys, values, 2, &k.log);
    char *a = cache_path("machine A"), *b = cache_path("machine B");
    /* another context's file under this context's name: ignored whole */
    assert_int_equal(rename(a, b), 0);
    assert_int_equal(run("machine B", 1, keys, values, 2, &k.log), 2);
    char *log = logged(&k);
    tl_assert_contains(log, "not a cache file of this context (machine B): ignored");
    free(log);
    /* an entry of A's copied into B's file: its checksum is A's */
    run("machine A", 1, keys, values + 1, 1, &k.log); /* 0.conv n8 a = nchw z w */
    char *text_a = read_all(a);
    char *line = strstr(text_a, "\ncontext = ");
    assert_non_null(line);
    line = strchr(line + 1, '\n') + 1; /* its first entry */
    FILE *f = fopen(b, "ab");
    fputs(line, f);
    fclose(f);
    assert_int_equal(run("machine B", 1, keys, values, 2, &k.log), 0);
    log = logged(&k);
    tl_assert_contains(log, "1 damaged or foreign entry ignored");
    free(log);
    free(text_a);
    free(a);
    free(b);
    fclose(k.f);
}

/* Nothing read (--kernel-choices measure): every key measured, the file's
 * choices for them replaced, its other keys kept. */
static void test_measure_replaces(void **state)
{
    (void)state;
    captured k;
    capture(&k);
    run("m", 1, keys, values, 2, &k.log);
    static const char *const again[] = {"nchw new one"};
    assert_int_equal(run("m", 0, keys, again, 1, &k.log), 1);
    char *path = cache_path("m");
    char *text = read_all(path);
    tl_assert_contains(text, " 0.conv n8 a = nchw new one\n");
    tl_assert_contains(text, " 2.conv n8 b = nchw z w\n");
    assert_null(strstr(text, "nhwc x y"));
    free(text);
    free(path);
    fclose(k.f);
}

/* A directory that cannot be made: one warning, no cache, no failure. */
static void test_unusable_directory(void **state)
{
    (void)state;
    captured k;
    capture(&k);
    tl_write_file("file", "x", 1);
    st_choices *c = table();
    st_choice_cache_opts o = {.dir = "file/cache", .context = "m", .read = 1, .lock_wait = 1};
    st_choice_cache *cache = (st_choice_cache *)&o;
    st_error err = {0};
    assert_int_equal(st_choice_cache_open(&cache, &o, c, &k.log, &err), ST_OK);
    assert_null(cache);
    char *log = logged(&k);
    tl_assert_contains(log, "kernel-choice cache file/cache: cannot create file/cache");
    tl_assert_contains(log, "this run measures its kernels without the cache");
    assert_int_equal(count_of(log, "\n"), 1);
    free(log);
    st_choices_free(c);
    fclose(k.f);
}

/* A lock held longer than the wait: the run goes on, then merges its
 * choices into the file rather than overwriting the holder's. */
static void test_lock_held_too_long(void **state)
{
    (void)state;
    captured k;
    capture(&k);
    st_choices *a = table(), *b = table();
    st_choice_cache *ca = open_cache("cache", "m", 1, a, &k.log);
    st_choice_cache_opts o = {.dir = "cache", .context = "m", .read = 1, .lock_wait = 0.2};
    st_choice_cache *cb = NULL;
    st_error err = {0};
    assert_int_equal(st_choice_cache_open(&cb, &o, b, &k.log, &err), ST_OK);
    char *log = logged(&k);
    tl_assert_contains(log, "waiting for another run measuring the same kernels");
    tl_assert_contains(log, "another run has held it for 0 s: going on without waiting");
    free(log);
    int stored;
    char value[ST_CHOICE_MAX];
    assert_int_equal(st_choices_get(a, keys[0], value, sizeof value), ST_CHOICE_CLAIMED);
    st_choices_record(a, keys[0], values[0], NULL);
    assert_int_equal(st_choices_get(b, keys[1], value, sizeof value), ST_CHOICE_CLAIMED);
    st_choices_record(b, keys[1], values[1], NULL);
    st_choice_cache_store(ca, a, &stored);
    st_choice_cache_close(ca);
    st_choice_cache_store(cb, b, &stored);
    st_choice_cache_close(cb);
    char *path = cache_path("m");
    char *text = read_all(path);
    tl_assert_contains(text, " 0.conv n8 a = nhwc x y\n");
    tl_assert_contains(text, " 2.conv n8 b = nchw z w\n");
    free(text);
    free(path);
    st_choices_free(a);
    st_choices_free(b);
    fclose(k.f);
}

/* Two processes started at once: the second waits while the first
 * measures (a while, with its own value), then takes the first's choice. */
static void test_two_processes_share(void **state)
{
    (void)state;
    enum { PROCS = 2 };
    int fds[PROCS][2];
    pid_t pid[PROCS];
    for (int i = 0; i < PROCS; i++) {
        assert_int_equal(pipe(fds[i]), 0);
        pid[i] = fork();
        assert_true(pid[i] >= 0);
        if (pid[i] == 0) {
            st_log quiet = tl_silent_log();
            st_choices *c = table();
            st_choice_cache *cache = open_cache("cache", "m", 1, c, &quiet);
            char value[ST_CHOICE_MAX];
            if (st_choices_get(c, keys[0], value, sizeof value) == ST_CHOICE_CLAIMED) {
                usleep(200000); /* measuring */
                snprintf(value, sizeof value, "nhwc by %d", (int)getpid());
                st_choices_record(c, keys[0], value, NULL);
            }
            int stored;
            st_choice_cache_store(cache, c, &stored);
            st_choice_cache_close(cache);
            ssize_t n = write(fds[i][1], value, strlen(value) + 1);
            _exit(n > 0 ? 0 : 1);
        }
        close(fds[i][1]);
    }
    char got[PROCS][ST_CHOICE_MAX];
    for (int i = 0; i < PROCS; i++) {
        ssize_t n = read(fds[i][0], got[i], sizeof got[i] - 1);
        assert_true(n > 0);
        got[i][n] = '\0';
        close(fds[i][0]);
        int status;
        assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_string_equal(got[0], got[1]);
}

static void test_default_directory(void **state)
{
    (void)state;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char *saved_xdg = xdg ? strdup(xdg) : NULL, *saved_home = home ? strdup(home) : NULL;
    char dir[1024], why[320], cwd[512], xdg_dir[600], home_dir[600], want[700];
    /* in the test's own directory: the variables must name existing ones */
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(xdg_dir, sizeof xdg_dir, "%s/x-cache", cwd);
    snprintf(home_dir, sizeof home_dir, "%s/home-u", cwd);
    assert_int_equal(mkdir(xdg_dir, 0700), 0);
    assert_int_equal(mkdir(home_dir, 0700), 0);
    setenv("XDG_CACHE_HOME", xdg_dir, 1);
    setenv("HOME", home_dir, 1);
    assert_true(st_choice_cache_default_dir(dir, sizeof dir, why, sizeof why));
    snprintf(want, sizeof want, "%s/singletrain", xdg_dir);
    assert_string_equal(dir, want);
    setenv("XDG_CACHE_HOME", "relative", 1); /* ignored, as the specification says */
    assert_true(st_choice_cache_default_dir(dir, sizeof dir, why, sizeof why));
    snprintf(want, sizeof want, "%s/.cache/singletrain", home_dir);
    assert_string_equal(dir, want);
    /* a HOME that does not exist is not created: no directory */
    snprintf(want, sizeof want, "%s/no-home", cwd);
    setenv("HOME", want, 1);
    assert_false(st_choice_cache_default_dir(dir, sizeof dir, why, sizeof why));
    tl_assert_contains(why, "HOME=");
    tl_assert_contains(why, "No such file or directory");
    /* an XDG_CACHE_HOME too long for the path: said so, naming it */
    char long_dir[2048];
    memset(long_dir, 'x', sizeof long_dir - 1);
    long_dir[0] = '/';
    long_dir[sizeof long_dir - 1] = '\0';
    setenv("XDG_CACHE_HOME", long_dir, 1);
    assert_false(st_choice_cache_default_dir(dir, sizeof dir, why, sizeof why));
    tl_assert_contains(why, "XDG_CACHE_HOME is too long");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    assert_false(st_choice_cache_default_dir(dir, sizeof dir, why, sizeof why));
    tl_assert_contains(why, "neither XDG_CACHE_HOME");
    if (saved_xdg)
        setenv("XDG_CACHE_HOME", saved_xdg, 1);
    if (saved_home)
        setenv("HOME", saved_home, 1);
    free(saved_xdg);
    free(saved_home);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        tl_tmpdir_test(test_measured_then_read),
        tl_tmpdir_test(test_damaged_entries_measured_again),
        tl_tmpdir_test(test_foreign_file_and_entry),
        tl_tmpdir_test(test_measure_replaces),
        tl_tmpdir_test(test_unusable_directory),
        tl_tmpdir_test(test_lock_held_too_long),
        tl_tmpdir_test(test_two_processes_share),
        tl_tmpdir_test(test_default_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
