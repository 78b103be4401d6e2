/* A cmocka fixture shared by the C tests that write files: each test gets a
 * fresh temporary directory (under $TMPDIR, else /tmp), runs inside it, and
 * the directory is removed with everything in it afterwards; and a helper
 * that writes a file. Include after testlib.h (cmocka). */
#ifndef ST_TEST_TMPDIR_H
#define ST_TEST_TMPDIR_H

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct tl_tmpdir {
    char dir[PATH_MAX]; /* the test's directory, absolute */
    char cwd[PATH_MAX]; /* where the test binary was started */
} tl_tmpdir;

static inline int tl_tmpdir_setup(void **state)
{
    tl_tmpdir *t = calloc(1, sizeof *t);
    if (!t || !getcwd(t->cwd, sizeof t->cwd)) {
        free(t);
        return -1;
    }
    const char *base = getenv("TMPDIR");
    snprintf(t->dir, sizeof t->dir, "%s/st_test_XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(t->dir) || chdir(t->dir) != 0) {
        free(t);
        return -1;
    }
    *state = t;
    return 0;
}

static inline int tl_remove_entry(const char *path, const struct stat *sb, int flag,
                                  struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static inline int tl_tmpdir_teardown(void **state)
{
    tl_tmpdir *t = *state;
    int rc = chdir(t->cwd);
    if (rc == 0)
        rc = nftw(t->dir, tl_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(t);
    return rc;
}

/* Write len bytes to path, failing the test when that does not work. */
static inline void tl_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("cannot create %s", path);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* The whole file at path (malloc'd), *len bytes, failing the test when it
 * cannot be read. */
static inline unsigned char *tl_read_file(const char *path, size_t *len)
{
    FILE *in = fopen(path, "rb");
    if (!in)
        fail_msg("cannot open %s", path);
    fseek(in, 0, SEEK_END);
    *len = (size_t)ftell(in);
    rewind(in);
    unsigned char *bytes = malloc(*len ? *len : 1);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, *len, in), *len);
    fclose(in);
    return bytes;
}

/* A cmocka test that runs in its own temporary directory. */
#define tl_tmpdir_test(f) cmocka_unit_test_setup_teardown(f, tl_tmpdir_setup, tl_tmpdir_teardown)

#endif
