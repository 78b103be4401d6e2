/* Files in: regular input files (opened without blocking on a FIFO or a
 * device, read whole as text) and the directories outputs go in; see
 * fileio.h. Files out are fileio_out.c's. */
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio_internal.h"

const char *base_file_kind(mode_t m)
{
    if (S_ISLNK(m)) /* only where a link is not followed */
        return "a symbolic link (not followed)";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO (named pipe)";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    return "a special file";
}

/* The reason for a file of mode m (stat's), or for errno e when stat failed. */
static void why_not_regular(int e, mode_t m, char *why, size_t why_len)
{
    char buf[128];
    if (e)
        snprintf(why, why_len, "%s", strerror_r(e, buf, sizeof buf));
    else
        snprintf(why, why_len, "%s, not a regular file", base_file_kind(m));
}

/* st_regular_why, a symbolic link at PATH itself refused when nofollow. */
static void regular_why(const char *path, int nofollow, char *why, size_t why_len)
{
    struct stat sb;
    why[0] = '\0';
    if ((nofollow ? lstat(path, &sb) : stat(path, &sb)) != 0)
        why_not_regular(errno, 0, why, why_len);
    else if (!S_ISREG(sb.st_mode))
        why_not_regular(0, sb.st_mode, why, why_len);
    else if (access(path, R_OK) != 0)
        why_not_regular(errno, 0, why, why_len);
}

void st_regular_why(const char *path, char *why, size_t why_len)
{
    regular_why(path, 0, why, why_len);
}

/* st_open_regular; with nofollow a symbolic link at PATH is refused, not
 * followed (O_NOFOLLOW: also one put there after the check). */
static int open_regular(const char *path, int nofollow, char *why, size_t why_len)
{
    /* stat first: opening a socket fails with the unhelpful ENXIO */
    regular_why(path, nofollow, why, why_len);
    if (why[0])
        return -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
                            (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0 && errno == ELOOP && nofollow) {
        why_not_regular(0, S_IFLNK, why, why_len);
        return -1;
    }
    if (fd < 0) {
        why_not_regular(errno, 0, why, why_len);
        return -1;
    }
    struct stat sb;
    int flags;
    if (fstat(fd, &sb) != 0)
        why_not_regular(errno, 0, why, why_len);
    else if (!S_ISREG(sb.st_mode)) /* swapped since the stat */
        why_not_regular(0, sb.st_mode, why, why_len);
    else if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        why_not_regular(errno, 0, why, why_len);
    if (why[0]) {
        close(fd);
        return -1;
    }
    return fd;
}

int st_open_regular(const char *path, char *why, size_t why_len)
{
    return open_regular(path, 0, why, why_len);
}

/* st_fopen_input, not following a symbolic link at PATH when nofollow. */
static st_status fopen_input(const char *path, const char *mode, const char *what,
                             int nofollow, FILE **f, st_error *err)
{
    char why[160];
    *f = NULL;
    int fd = open_regular(path, nofollow, why, sizeof why);
    if (fd >= 0 && !(*f = fdopen(fd, mode))) {
        why_not_regular(errno, 0, why, sizeof why);
        close(fd);
    }
    if (!*f)
        return st_fail(err, ST_EINPUT, "%s: cannot open %s: %s", path, what, why);
    return ST_OK;
}

st_status st_fopen_input(const char *path, const char *mode, const char *what, FILE **f,
                         st_error *err)
{
    return fopen_input(path, mode, what, 0, f, err);
}

/* st_read_text, not following a symbolic link at PATH when nofollow. */
static st_status read_text(const char *path, const char *what, size_t max_bytes, int nofollow,
                           char **text, size_t *len, st_error *err)
{
    FILE *f;
    *text = NULL;
    st_status st = fopen_input(path, "rb", what, nofollow, &f, err);
    if (st != ST_OK)
        return st;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *b = realloc(buf, cap);
            if (!b) {
                st = st_fail(err, ST_ENOMEM, "out of memory reading %s", path);
                break;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n > max_bytes) {
            st = st_fail(err, ST_EINPUT, "%s: larger than %zu bytes: not a %s", path,
                         max_bytes, what);
            break;
        }
        if (got == 0)
            break;
    }
    if (st == ST_OK && ferror(f))
        st = st_fail(err, ST_EINPUT, "%s: read error: %s", path, strerror(errno));
    fclose(f);
    if (st != ST_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *text = buf;
    if (len)
        *len = n;
    return ST_OK;
}

st_status st_read_text(const char *path, const char *what, size_t max_bytes, char **text,
                       size_t *len, st_error *err)
{
    return read_text(path, what, max_bytes, 0, text, len, err);
}

st_status st_read_own_text(const char *path, const char *what, size_t max_bytes, char **text,
                           size_t *len, st_error *err)
{
    return read_text(path, what, max_bytes, 1, text, len, err);
}

st_status st_check_dir_writable(const char *what, const char *dir, st_error *err)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return st_fail(err, ST_EUSAGE, "%s %s: %s", what, dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return st_fail(err, ST_EUSAGE, "%s %s: not a directory", what, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return st_fail(err, ST_EUSAGE, "%s %s: not writable: %s", what, dir, strerror(errno));
    return ST_OK;
}

long st_name_max(const char *dir)
{
    long n = pathconf(dir, _PC_NAME_MAX);
    return n > 0 ? n : 255;
}

st_status st_make_dirs(const char *what, const char *dir, size_t *made, st_error *err)
{
    *made = 0;
    char *path = strdup(dir);
    if (!path)
        return st_fail(err, ST_ENOMEM, "out of memory creating %s", dir);
    st_status st = ST_OK;
    /* each prefix ending before a '/', then the whole: parents first */
    for (char *p = path + 1; st == ST_OK; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        struct stat sb;
        if (stat(path, &sb) != 0) {
            if (mkdir(path, 0777) == 0) {
                if (!*made)
                    *made = (size_t)(p - path);
            } else if (errno != EEXIST) {
                st = st_fail(err, ST_EUSAGE, "%s %s: cannot create %s: %s", what, dir, path,
                             strerror(errno));
            }
        }
        *p = c;
        if (c == '\0')
            break;
    }
    free(path);
    return st == ST_OK ? st_check_dir_writable(what, dir, err) : st;
}

void st_unmake_dirs(const char *dir, size_t made)
{
    char *path = made ? strdup(dir) : NULL;
    if (!path)
        return;
    for (size_t len = strlen(path); len >= made && rmdir(path) == 0;) {
        while (len > 0 && path[len - 1] == '/') /* "a/b/" is "a/b" */
            path[--len] = '\0';
        char *slash = strrchr(path, '/');
        if (!slash)
            break;
        *slash = '\0';
        len = (size_t)(slash - path);
    }
    free(path);
}
