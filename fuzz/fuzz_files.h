/* Shared by the libFuzzer targets in fuzz/: every reader takes a path, so
 * an input is written to a file in the target's own directory (under
 * /dev/shm, memory, when it exists) and the real entry point reads it. An
 * input can also hold several files (IDX images and labels, a store's
 * index and stripes) separated by FZ_SEPARATOR; fuzz/make-seeds.sh joins
 * its seed files the same way. fz_check turns a reader's failure that is
 * not an ordinary "bad input" (an internal error, an empty message, a
 * message that does not name the file) into a crash the fuzzer reports.
 *
 * The directory is the one piece of process state: made once, emptied
 * before each input, removed at exit. */
#ifndef ST_FUZZ_FILES_H
#define ST_FUZZ_FILES_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/status.h"

#define FZ_SEPARATOR "\n==fuzz-next-file==\n"
#define FZ_MAX_PARTS 16

typedef struct fz_part {
    const uint8_t *data;
    size_t len;
} fz_part;

static char fz_dir_path[64];

/* Remove every file of the directory (targets make no subdirectories). */
static inline void fz_clear(void)
{
    DIR *d = opendir(fz_dir_path);
    if (!d)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", fz_dir_path, e->d_name);
        unlink(path);
    }
    closedir(d);
}

static inline void fz_remove_dir(void)
{
    fz_clear();
    rmdir(fz_dir_path);
}

/* The target's directory, made on first use. */
static inline const char *fz_dir(void)
{
    if (fz_dir_path[0])
        return fz_dir_path;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fz_dir_path, sizeof fz_dir_path, "%s/st_fuzz_XXXXXX", base);
    if (!mkdtemp(fz_dir_path)) {
        perror("fuzz: cannot make a temporary directory");
        abort();
    }
    atexit(fz_remove_dir);
    return fz_dir_path;
}

/* path = <dir>/<name>. */
static inline void fz_path(char *path, size_t size, const char *name)
{
    snprintf(path, size, "%s/%s", fz_dir(), name);
}

/* Write len bytes to <dir>/<name>, its full path into path. */
static inline void fz_write(char *path, size_t size, const char *name, const uint8_t *data,
                            size_t len)
{
    fz_path(path, size, name);
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* Cut the input at each FZ_SEPARATOR; the last part takes the rest once
 * max parts are found. Returns the number of parts (at least 1). */
static inline size_t fz_split(const uint8_t *data, size_t len, fz_part *parts,
                              size_t max)
{
    static const char sep[] = FZ_SEPARATOR;
    const size_t sep_len = sizeof sep - 1;
    size_t n = 0;
    while (n + 1 < max) {
        const uint8_t *hit = len >= sep_len ? memmem(data, len, sep, sep_len) : NULL;
        if (!hit)
            break;
        parts[n++] = (fz_part){data, (size_t)(hit - data)};
        len -= (size_t)(hit - data) + sep_len;
        data = hit + sep_len;
    }
    parts[n++] = (fz_part){data, len};
    return n;
}

/* A logger that writes to /dev/null (opened once): the network's log
 * lines go through their formatting without filling the fuzzer's output. */
static inline st_log fz_quiet_log(void)
{
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w")))
        abort();
    return (st_log){.level = ST_LOG_INFO, .out = sink, .err = sink};
}

/* A reader's answer: ST_OK, or an input / memory / I/O error whose message
 * names the file (name: its base name). Anything else aborts. */
static inline void fz_check(st_status st, const st_error *err, const char *call,
                            const char *name)
{
    if (st == ST_OK)
        return;
    const char *why = NULL;
    if (st != ST_EINPUT && st != ST_ENOMEM && st != ST_EIO)
        why = "an unexpected status";
    else if (err->code != st)
        why = "a status other than the recorded one";
    else if (!err->msg[0])
        why = "an empty message";
    else if (!strstr(err->msg, name))
        why = "a message that does not name the file";
    if (!why)
        return;
    fprintf(stderr, "fuzz: %s returned %d (%s) with %s: \"%s\" (recorded %d)\n", call, st,
            st_strerror(st), why, err->msg, err->code);
    abort();
}

#endif
