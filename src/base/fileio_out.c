/* Files out; see fileio.h: where a named output goes (a regular file
 * replaced, a device, a FIFO or a standard stream written in place), the
 * outputs checked before a run (writable, distinct from each other and
 * from the inputs), streamed outputs completed or left as .partial, and
 * whole files written crash-safe under a temporary name and renamed. */
#include "base/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio_internal.h"

void st_output_target_free(st_output_target *t)
{
    free(t->path);
    t->path = NULL;
}

/* Whether sb is the file this process's stdout or stderr writes to: its
 * descriptor, or -1. */
static int stream_of(const struct stat *sb)
{
    for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++) {
        struct stat fs;
        if (fstat(fd, &fs) == 0 && fs.st_dev == sb->st_dev && fs.st_ino == sb->st_ino)
            return fd;
    }
    return -1;
}

st_status st_output_target_find(const char *what, const char *path, st_output_target *t,
                                st_error *err)
{
    memset(t, 0, sizeof *t);
    t->stream_fd = -1;
    struct stat ls, sb;
    char *real = NULL;
    if (lstat(path, &ls) != 0) {
        if (errno != ENOENT)
            return st_fail(err, ST_EUSAGE, "%s %s: %s", what, path, strerror(errno));
    } else if (stat(path, &sb) != 0) {
        char to[256] = "?";
        ssize_t n = readlink(path, to, sizeof to - 1);
        to[n > 0 ? n : 1] = '\0';
        return st_fail(err, ST_EUSAGE, "%s %s: a symbolic link to %s, which cannot be written "
                       "through: %s; give the file itself", what, path, to, strerror(errno));
    } else if (S_ISDIR(sb.st_mode)) {
        return st_fail(err, ST_EUSAGE, "%s %s: is a directory, expected a file name", what,
                       path);
    } else if ((t->stream_fd = stream_of(&sb)) >= 0 || S_ISCHR(sb.st_mode) ||
               S_ISFIFO(sb.st_mode)) {
        t->in_place = 1;
    } else if (!S_ISREG(sb.st_mode)) {
        return st_fail(err, ST_EUSAGE, "%s %s: %s: expected a regular file (replaced), a "
                       "character device or a FIFO (written in place)", what, path,
                       base_file_kind(sb.st_mode));
    } else if (S_ISLNK(ls.st_mode)) { /* its target is replaced, the link stays */
        struct stat rs;
        real = realpath(path, NULL);
        if (!real || stat(real, &rs) != 0 || rs.st_dev != sb.st_dev || rs.st_ino != sb.st_ino) {
            free(real);
            return st_fail(err, ST_EUSAGE, "%s %s: a symbolic link whose target cannot be "
                           "named (a file already removed?): give the file itself", what, path);
        }
    }
    t->path = real ? real : strdup(path);
    if (!t->path)
        return st_fail(err, ST_ENOMEM, "out of memory naming %s", path);
    return ST_OK;
}

st_status st_check_output_path(const char *what, const char *path, st_error *err)
{
    st_output_target t;
    st_status st = st_output_target_find(what, path, &t, err);
    if (st != ST_OK)
        return st;
    if (t.in_place) {
        if (t.stream_fd < 0 && access(t.path, W_OK) != 0)
            st = st_fail(err, ST_EUSAGE, "%s %s: not writable: %s", what, path,
                         strerror(errno));
        st_output_target_free(&t);
        return st;
    }
    char *copy = strdup(t.path);
    if (!copy) {
        st_output_target_free(&t);
        return st_fail(err, ST_ENOMEM, "out of memory checking %s", path);
    }
    /* the target's directory: where its temporary is created */
    const char *dir = dirname(copy);
    const char *shown = strcmp(t.path, path) == 0 ? "" : " (the link's target)";
    struct stat sb;
    if (stat(dir, &sb) != 0)
        st = st_fail(err, ST_EUSAGE, "%s %s: directory %s%s: %s", what, path, dir, shown,
                     strerror(errno));
    else if (!S_ISDIR(sb.st_mode))
        st = st_fail(err, ST_EUSAGE, "%s %s: %s is not a directory", what, path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        st = st_fail(err, ST_EUSAGE, "%s %s: directory %s%s is not writable: %s", what, path,
                     dir, shown, strerror(errno));
    const char *base = strrchr(t.path, '/') ? strrchr(t.path, '/') + 1 : t.path;
    size_t len = strlen(base) + ST_TEMP_SUFFIX_MAX;
    if (st == ST_OK && (long)len > st_name_max(dir))
        st = st_fail(err, ST_EUSAGE, "%s %s: the file name is too long: with the suffix of its "
                     "temporary (.tmp.PID) it takes up to %zu bytes, over the limit of %ld of "
                     "%s", what, path, len, st_name_max(dir), dir);
    free(copy);
    st_output_target_free(&t);
    return st;
}

char *st_output_partial_name(const char *path)
{
    st_output_target t;
    st_error ignored = {0};
    if (st_output_target_find("", path, &t, &ignored) != ST_OK)
        return NULL;
    char *partial = NULL;
    if (!t.in_place && (partial = malloc(strlen(t.path) + sizeof ".partial")))
        sprintf(partial, "%s.partial", t.path);
    st_output_target_free(&t);
    return partial;
}

/* An in-place target opened for writing: a duplicate of the standard
 * stream it is (sharing its offset, so that the lines interleave), or the
 * device or FIFO opened (a FIFO waits for a reader); NULL with errno. */
static FILE *open_in_place(const st_output_target *t)
{
    int fd = t->stream_fd >= 0 ? fcntl(t->stream_fd, F_DUPFD_CLOEXEC, 3)
                               : open(t->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat sb;
    if (t->stream_fd < 0 && (fstat(fd, &sb) != 0 || S_ISREG(sb.st_mode))) {
        close(fd); /* swapped for a regular file since: it would be truncated in place */
        errno = EEXIST;
        return NULL;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

st_status st_output_open(st_output *o, const char *what, const char *path, st_error *err)
{
    memset(o, 0, sizeof *o);
    o->what = what;
    st_output_target t;
    st_status st = st_output_target_find(what, path, &t, err);
    if (st != ST_OK)
        return st;
    o->path = t.path;
    if (t.in_place) {
        if (!(o->f = open_in_place(&t)))
            st = st_fail(err, ST_EUSAGE, "%s %s: cannot open it for writing: %s", what, path,
                         strerror(errno));
    } else if (!(o->partial = malloc(strlen(t.path) + sizeof ".partial"))) {
        st = st_fail(err, ST_ENOMEM, "out of memory for %s %s", what, path);
    } else {
        sprintf(o->partial, "%s.partial", t.path);
        if (!(o->f = st_create_exclusive(o->partial)))
            st = st_fail(err, ST_EUSAGE, "%s %s: cannot create %s: %s", what, path, o->partial,
                         strerror(errno));
    }
    if (st != ST_OK) {
        free(o->path);
        free(o->partial);
        memset(o, 0, sizeof *o);
    }
    return st;
}

/* Flush the directory entry of PATH (a rename into it) to the disk. */
static void sync_directory_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

st_status st_output_close(st_output *o, int keep, st_error *err)
{
    if (!o->f)
        return ST_OK;
    int failed = fflush(o->f) != 0 || ferror(o->f);
    if (!failed && keep && o->partial)
        failed = fsync(fileno(o->f)) != 0;
    int e = errno;
    failed |= fclose(o->f) != 0;
    o->f = NULL;
    st_status st = ST_OK;
    if (failed && o->partial)
        st = st_fail(err, ST_EIO, "%s %s: writing %s failed: %s (what was written so far is in "
                     "it)", o->what, o->path, o->partial, strerror(e));
    else if (failed)
        st = st_fail(err, ST_EIO, "%s %s: a write failed: %s", o->what, o->path, strerror(e));
    else if (o->partial && !keep)
        unlink(o->partial);
    else if (o->partial && rename(o->partial, o->path) != 0)
        st = st_fail(err, ST_EIO, "%s %s: cannot rename %s to it: %s", o->what, o->path,
                     o->partial, strerror(errno));
    else if (o->partial)
        sync_directory_of(o->path);
    free(o->path);
    free(o->partial);
    o->path = o->partial = NULL;
    return st;
}

/* Whether a and b, two paths of files that do not exist, are the same name
 * in the same directory. */
static int same_name_same_dir(const char *a, const char *b)
{
    char *a_dir = strdup(a), *b_dir = strdup(b), *a_base = strdup(a), *b_base = strdup(b);
    struct stat sa, sb;
    int same = a_dir && b_dir && a_base && b_base &&
               strcmp(basename(a_base), basename(b_base)) == 0 &&
               stat(dirname(a_dir), &sa) == 0 && stat(dirname(b_dir), &sb) == 0 &&
               sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    free(a_dir);
    free(b_dir);
    free(a_base);
    free(b_base);
    return same;
}

int st_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    int a_exists = stat(a, &sa) == 0, b_exists = stat(b, &sb) == 0;
    if (a_exists && b_exists)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return !a_exists && !b_exists && same_name_same_dir(a, b);
}

/* Outputs written in place into one device, FIFO or stream (both
 * --metrics and --save-kernel-choices /dev/null or /dev/stdout) do not
 * destroy each other. */
static int written_in_place(const char *path)
{
    st_output_target t;
    st_error ignored = {0};
    if (st_output_target_find("", path, &t, &ignored) != ST_OK)
        return 0;
    int in_place = t.in_place;
    st_output_target_free(&t);
    return in_place;
}

static int given(const st_named_path *p)
{
    return p->path && p->path[0];
}

st_status st_check_distinct(const st_named_path *outputs, int n_out,
                            const st_named_path *inputs, int n_in, st_error *err)
{
    for (int i = 0; i < n_out; i++) {
        const st_named_path *o = &outputs[i];
        for (int j = 0; given(o) && j < n_in; j++)
            if (given(&inputs[j]) && st_same_file(o->path, inputs[j].path))
                return st_fail(err, ST_EUSAGE, "%s %s is %s %s: writing it would destroy that "
                               "input; give another file", o->what, o->path, inputs[j].what,
                               inputs[j].path);
        for (int j = 0; given(o) && j < i; j++)
            if (given(&outputs[j]) && st_same_file(o->path, outputs[j].path) &&
                !written_in_place(o->path))
                return st_fail(err, ST_EUSAGE, "%s %s is %s %s: two outputs cannot be one "
                               "file; give another", o->what, o->path, outputs[j].what,
                               outputs[j].path);
    }
    return ST_OK;
}

static size_t id_hash(unsigned long long dev, unsigned long long ino)
{
    unsigned long long h = (ino ^ (dev << 32 | dev >> 32)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ h >> 29);
}

/* The slot of (dev, ino) in ids: its entry, or the empty slot it goes in. */
static st_output_id *id_slot(const st_output_ids *ids, unsigned long long dev,
                             unsigned long long ino)
{
    size_t mask = (size_t)ids->cap - 1;
    for (size_t i = id_hash(dev, ino) & mask;; i = (i + 1) & mask) {
        st_output_id *e = &ids->slot[i];
        if (!e->what || (e->dev == dev && e->ino == ino))
            return e;
    }
}

st_status st_output_ids_add(st_output_ids *ids, const st_named_path *p, st_error *err)
{
    struct stat sb;
    if (!given(p) || stat(p->path, &sb) != 0)
        return ST_OK;
    if (2 * (ids->n + 1) > ids->cap) { /* at most half full */
        st_output_ids bigger = {ids->n, ids->cap ? 2 * ids->cap : 16, NULL};
        bigger.slot = calloc((size_t)bigger.cap, sizeof *bigger.slot);
        if (!bigger.slot)
            return st_fail(err, ST_ENOMEM, "out of memory listing the outputs");
        for (int i = 0; i < ids->cap; i++)
            if (ids->slot[i].what)
                *id_slot(&bigger, ids->slot[i].dev, ids->slot[i].ino) = ids->slot[i];
        free(ids->slot);
        *ids = bigger;
    }
    st_output_id *e = id_slot(ids, (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino);
    if (!e->what) {
        *e = (st_output_id){(unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino,
                            p->what, p->path};
        ids->n++;
    }
    return ST_OK;
}

const st_output_id *st_output_ids_find(const st_output_ids *ids, const struct stat *sb)
{
    if (!ids || ids->n == 0)
        return NULL;
    const st_output_id *e = id_slot(ids, (unsigned long long)sb->st_dev,
                                    (unsigned long long)sb->st_ino);
    return e->what ? e : NULL;
}

void st_output_ids_free(st_output_ids *ids)
{
    free(ids->slot);
    memset(ids, 0, sizeof *ids);
}

st_status st_fwrite(FILE *f, const void *data, size_t bytes, const char *path, st_error *err)
{
    if (bytes && fwrite(data, 1, bytes, f) != bytes)
        return st_fail(err, ST_EIO, "%s: write failed: %s", path, strerror(errno));
    return ST_OK;
}

/* The length of NAME's stem if NAME is "STEM.tmp.PID" and process PID no
 * longer exists, else 0. */
static size_t stale_stem(const char *name)
{
    const char *mark = NULL;
    for (const char *p = strstr(name, ".tmp."); p; p = strstr(p + 1, ".tmp."))
        mark = p;
    if (!mark || mark == name)
        return 0;
    const char *digits = mark + 5;
    if (!*digits || digits[strspn(digits, "0123456789")] != '\0' || strlen(digits) > 9)
        return 0;
    long pid = strtol(digits, NULL, 10);
    if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
        return 0;
    return (size_t)(mark - name);
}

int st_remove_stale_temporaries(const char *dir, const char *prefix, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t prefix_len = strlen(prefix), suffix_len = suffix ? strlen(suffix) : 0;
    int removed = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        size_t stem = stale_stem(e->d_name);
        if (stem < prefix_len + suffix_len || memcmp(e->d_name, prefix, prefix_len) != 0)
            continue;
        if (suffix ? memcmp(e->d_name + stem - suffix_len, suffix, suffix_len) != 0
                   : stem != prefix_len)
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

/* PATH's own leftovers: its directory and base name split off a copy. */
static void remove_stale_temporaries_of(const char *path)
{
    char *dir_copy = strdup(path), *base_copy = strdup(path);
    if (dir_copy && base_copy)
        st_remove_stale_temporaries(dirname(dir_copy), basename(base_copy), NULL);
    free(dir_copy);
    free(base_copy);
}

FILE *st_create_exclusive(const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT)
        return NULL;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(path);
        errno = e;
    }
    return f;
}

/* TARGET written whole under a temporary name beside it (created
 * exclusively, never through a link) and renamed over it: rename replaces
 * whatever is at TARGET itself, a symbolic link included, never what a
 * link points to. PATH names it in messages. */
static st_status replace_file(const char *path, const char *target, st_writer write, void *ctx,
                              st_error *err)
{
    size_t len = strlen(target) + 32;
    char *tmp = malloc(len);
    if (!tmp)
        return st_fail(err, ST_ENOMEM, "out of memory writing %s", path);
    snprintf(tmp, len, "%s.tmp.%ld", target, (long)getpid());
    remove_stale_temporaries_of(target);
    FILE *f = st_create_exclusive(tmp);
    if (!f) {
        st_status st = st_fail(err, ST_EIO, "%s: cannot create (as %s): %s", path, tmp,
                               strerror(errno));
        free(tmp);
        return st;
    }
    st_status st = write(f, ctx, err);
    if (st == ST_OK && fflush(f) != 0)
        st = st_fail(err, ST_EIO, "%s: write failed (as %s): %s", path, tmp, strerror(errno));
    if (st == ST_OK && fsync(fileno(f)) != 0)
        st = st_fail(err, ST_EIO, "%s: fsync failed (as %s): %s", path, tmp, strerror(errno));
    if (fclose(f) != 0 && st == ST_OK)
        st = st_fail(err, ST_EIO, "%s: close failed (as %s): %s", path, tmp, strerror(errno));
    if (st == ST_OK && rename(tmp, target) != 0)
        st = st_fail(err, ST_EIO, "cannot rename %s to %s: %s", tmp, target, strerror(errno));
    if (st != ST_OK)
        unlink(tmp);
    else
        sync_directory_of(target);
    free(tmp);
    return st;
}

/* st_write_atomic on an in-place target: written where it is, flushed. */
static st_status write_in_place(const char *path, const st_output_target *t, st_writer write,
                                void *ctx, st_error *err)
{
    FILE *f = open_in_place(t);
    if (!f)
        return st_fail(err, ST_EIO, "%s: cannot open it for writing: %s", path,
                       strerror(errno));
    st_status st = write(f, ctx, err);
    if (st == ST_OK && fflush(f) != 0)
        st = st_fail(err, ST_EIO, "%s: write failed: %s", path, strerror(errno));
    if (fclose(f) != 0 && st == ST_OK)
        st = st_fail(err, ST_EIO, "%s: close failed: %s", path, strerror(errno));
    return st;
}

st_status st_write_atomic(const char *path, st_writer write, void *ctx, st_error *err)
{
    st_output_target t;
    st_status st = st_output_target_find("cannot write", path, &t, err);
    if (st != ST_OK) { /* changed since the set-up checked it (st_check_output_path) */
        if (st != ST_ENOMEM && err)
            err->code = ST_EIO; /* a run-time failure now, not a usage error */
        return st == ST_ENOMEM ? st : ST_EIO;
    }
    if (t.in_place) {
        st = write_in_place(path, &t, write, ctx, err);
        st_output_target_free(&t);
        return st;
    }
    st = replace_file(path, t.path, write, ctx, err); /* PATH, or the target of the link */
    st_output_target_free(&t);
    return st;
}

st_status st_write_own(const char *path, st_writer write, void *ctx, st_error *err)
{
    return replace_file(path, path, write, ctx, err);
}
