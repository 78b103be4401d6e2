/* Atomic file replacement; see fileio.h. */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

st_status st_check_output_path(const char *what, const char *path, st_error *err)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return st_fail(err, ST_EUSAGE, "%s %s: is a directory, expected a file name", what,
                       path);
    char *copy = strdup(path);
    if (!copy)
        return st_fail(err, ST_ENOMEM, "out of memory checking %s", path);
    const char *dir = dirname(copy);
    st_status st = ST_OK;
    if (stat(dir, &sb) != 0)
        st = st_fail(err, ST_EUSAGE, "%s %s: directory %s: %s", what, path, dir,
                     strerror(errno));
    else if (!S_ISDIR(sb.st_mode))
        st = st_fail(err, ST_EUSAGE, "%s %s: %s is not a directory", what, path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        st = st_fail(err, ST_EUSAGE, "%s %s: directory %s is not writable: %s", what, path, dir,
                     strerror(errno));
    free(copy);
    return st;
}

st_status st_fwrite(FILE *f, const void *data, size_t bytes, const char *path, st_error *err)
{
    if (bytes && fwrite(data, 1, bytes, f) != bytes)
        return st_fail(err, ST_EIO, "%s: write failed: %s", path, strerror(errno));
    return ST_OK;
}

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

st_status st_write_atomic(const char *path, st_writer write, void *ctx, st_error *err)
{
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    if (!tmp)
        return st_fail(err, ST_ENOMEM, "out of memory writing %s", path);
    snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
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
    if (st == ST_OK && rename(tmp, path) != 0)
        st = st_fail(err, ST_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (st != ST_OK)
        unlink(tmp);
    else
        sync_directory_of(path);
    free(tmp);
    return st;
}
