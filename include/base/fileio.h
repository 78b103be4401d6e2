/* Files in and out.
 *
 * Inputs: every file singletrain reads is opened through st_open_regular
 * (or its wrappers), which takes regular files only. A FIFO, a socket or a
 * device would block open() or read() forever (no writer, no end of file)
 * and a directory has no bytes to read; they are refused by name before
 * anything reads them. The descriptor is opened O_NONBLOCK (which never
 * waits for a writer) and checked with fstat before it is set back to
 * blocking, so a file swapped for a FIFO after a check cannot block either.
 *
 * Crash-safe output: files are written under a temporary name in the same
 * directory, flushed and fsynced, then renamed over the final name (and the
 * directory fsynced), so a crash leaves the old file or the new one under
 * the final name, never a partial one; devices, FIFOs and the standard
 * streams are written in place instead (see "outputs"). */
#ifndef ST_FILEIO_H
#define ST_FILEIO_H

#include <stdio.h>
#include <sys/stat.h>

#include "base/status.h"

/* Why PATH cannot be read as a regular file, in why [why_len]: the system's
 * reason ("No such file or directory", "Permission denied") or what it is
 * instead ("a FIFO (named pipe), not a regular file"); "" when it can. */
void st_regular_why(const char *path, char *why, size_t why_len);

/* Open the regular file PATH read-only (close-on-exec): the descriptor, or
 * -1 with the reason in why (as st_regular_why's). */
int st_open_regular(const char *path, char *why, size_t why_len);

/* st_open_regular as a stdio stream (mode "r" or "rb"), failing with
 * ST_EINPUT and "PATH: cannot open WHAT: REASON"; WHAT names the file's
 * role ("network cfg", "snapshot"). */
st_status st_fopen_input(const char *path, const char *mode, const char *what, FILE **f,
                         st_error *err);

/* The whole regular file PATH as text, NUL-ended (malloc'd into *text; its
 * length without the NUL in *len if len is not NULL); WHAT names its role
 * in messages; a file over max_bytes is ST_EINPUT ("larger than ...: not
 * a WHAT"). */
st_status st_read_text(const char *path, const char *what, size_t max_bytes, char **text,
                       size_t *len, st_error *err);

/* st_read_text of a file this program keeps for itself (the kernel-choice
 * cache) in a directory others may write to: a symbolic link at PATH is
 * never followed ("a symbolic link (not followed)", O_NOFOLLOW). */
st_status st_read_own_text(const char *path, const char *what, size_t max_bytes, char **text,
                           size_t *len, st_error *err);

/* Produces the file's content; returns ST_OK or a failure already recorded. */
typedef st_status (*st_writer)(FILE *f, void *ctx, st_error *err);

/* PATH written whole (see "outputs" below: its target replaced, or written
 * in place); also removes the temporaries of its target left by killed
 * processes (see below). */
st_status st_write_atomic(const char *path, st_writer write, void *ctx, st_error *err);

/* PATH itself written whole, as st_write_atomic replaces a regular file,
 * for a file this program keeps for itself (st_read_own_text): whatever
 * is at PATH, a symbolic link included, is replaced, and what a link
 * points to is never written. */
st_status st_write_own(const char *path, st_writer write, void *ctx, st_error *err);

/* Removes the temporaries "STEM.tmp.PID" in DIR whose process no longer
 * exists on this host (a write killed before its rename), where STEM is
 * PREFIX exactly (SUFFIX NULL) or PREFIX, any text, SUFFIX. Returns how
 * many were removed. */
int st_remove_stale_temporaries(const char *dir, const char *prefix, const char *suffix);

/* Checked before long work, so that its result is not lost at the end:
 * ST_EUSAGE, naming WHAT (the option or argument) and DIR, unless DIR is an
 * existing directory this process may create files in. */
st_status st_check_dir_writable(const char *what, const char *dir, st_error *err);

/* DIR and its missing parents created (mkdir -p), then checked as
 * st_check_dir_writable does. *made: 0 when none was created, else the
 * length of the leading part of DIR that names the first (shallowest) one
 * created, for st_unmake_dirs. */
st_status st_make_dirs(const char *what, const char *dir, size_t *made, st_error *err);

/* Undo st_make_dirs when what it was for failed: DIR and its parents up to
 * the first it created (made: its *made; 0 does nothing), each removed only
 * if it is empty, so nothing but the empty directories it made goes. */
void st_unmake_dirs(const char *dir, size_t made);

/* ---- outputs: where a named output goes ----
 *
 * A new name or a regular file is replaced whole: written under a
 * temporary name beside it and renamed over it (st_write_atomic, and
 * st_output_open's FILE.partial). A symbolic link to a regular file is
 * written through: its target is replaced so, and the link stays. An
 * existing character device or FIFO (/dev/null, a named pipe, /dev/stdout
 * on a terminal or a pipe), and the file this process's stdout or stderr
 * writes to (/dev/stdout with stdout redirected to a file), are written in
 * place and never replaced: renaming over them put a regular file in their
 * place (as root, over /dev/null; and a link /dev/stdout became a file),
 * and as another user it was refused for want of writing /dev. Anything
 * else (a block device, a socket, a dangling link, a directory) is refused
 * (ST_EUSAGE) naming WHAT (the option) and PATH. */
typedef struct st_output_target {
    char *path;    /* the file written: PATH, or the target of the link PATH (malloc'd) */
    int in_place;  /* written where it is, never replaced */
    int stream_fd; /* in place on this process's stdout (1) or stderr (2), written through
                      a duplicate of it (sharing its offset); -1 otherwise */
} st_output_target;

st_status st_output_target_find(const char *what, const char *path, st_output_target *t,
                                st_error *err);
void st_output_target_free(st_output_target *t);

/* Checked before long work: PATH's target (above) can be written: for one
 * that is replaced, its directory takes new files and the name with the
 * suffix of its temporary fits; for one written in place, it is writable. */
st_status st_check_output_path(const char *what, const char *path, st_error *err);

/* An output written over time (--metrics, --cpe-trace): as FILE.partial
 * (FILE: PATH's target), created exclusively and renamed to FILE when
 * closed with keep, removed when closed without; an in-place target is
 * written directly (partial NULL). */
typedef struct st_output {
    FILE *f;          /* write here */
    const char *what; /* the option, for messages */
    char *path;       /* the file it becomes (malloc'd) */
    char *partial;    /* what f is until then, or NULL (in place) */
} st_output;

/* Errors name WHAT and PATH (ST_EUSAGE: at set-up). */
st_status st_output_open(st_output *o, const char *what, const char *path, st_error *err);

/* Close o (nothing when it is not open): flushed; with keep FILE.partial
 * is fsynced and renamed to FILE, without it is removed. A failed write is
 * ST_EIO, and FILE.partial is then kept as it is. */
st_status st_output_close(st_output *o, int keep, st_error *err);

/* The FILE.partial st_output_open would write PATH as, or NULL (written
 * in place, or PATH cannot be an output); malloc'd. */
char *st_output_partial_name(const char *path);

/* Bytes a temporary's name adds to its file's (".tmp." and a PID). */
#define ST_TEMP_SUFFIX_MAX 15

/* The longest file name DIR takes (pathconf's NAME_MAX; 255 if unknown). */
long st_name_max(const char *dir);

/* Create path for writing, exclusively (O_CREAT | O_EXCL | O_NOFOLLOW):
 * whatever stands under that name first (a temporary of a killed process,
 * a planted symbolic link) is unlinked, never followed or truncated. For
 * temporaries whose names are predictable. NULL with errno on failure. */
FILE *st_create_exclusive(const char *path);

/* Whether paths a and b name the same file: the same device and inode
 * when both exist (links and other spellings included); when neither
 * exists yet, the same name in the same directory. */
int st_same_file(const char *a, const char *b);

/* A path as the user gave it: what ("--metrics", "the network cfg") and
 * the path (NULL or empty: not given). */
typedef struct st_named_path {
    const char *what;
    const char *path;
} st_named_path;

/* Checked before work starts: ST_EUSAGE naming both when one of outputs
 * [n_out] is the same file (st_same_file) as one of inputs [n_in] or as
 * another output. */
st_status st_check_distinct(const st_named_path *outputs, int n_out,
                            const st_named_path *inputs, int n_in, st_error *err);

/* The files of a run's outputs (and their temporaries) that exist, by
 * device and inode: a source that reads many files through a list or a
 * store (an image list's entries, a store's stripes) looks each one up as
 * it opens it, instead of comparing it with every output by name
 * (st_check_distinct), which would be a stat per output per entry. A hash
 * table, so a look-up costs the same however many outputs there are. */
typedef struct st_output_id {
    unsigned long long dev, ino;
    const char *what, *path; /* as given to st_output_ids_add (not copied) */
} st_output_id;

typedef struct st_output_ids {
    int n, cap;          /* entries, slots (a power of two, or 0) */
    st_output_id *slot;  /* [cap]; what NULL: empty */
} st_output_ids;

/* Add p's file if it exists (a link: the file it names); a path not given
 * or absent is left out. ST_ENOMEM only. */
st_status st_output_ids_add(st_output_ids *ids, const st_named_path *p, st_error *err);

/* The output that is the file of sb (stat's), or NULL. */
const st_output_id *st_output_ids_find(const st_output_ids *ids, const struct stat *sb);

void st_output_ids_free(st_output_ids *ids);

/* fwrite that records "path: write failed: reason" on a short write. */
st_status st_fwrite(FILE *f, const void *data, size_t bytes, const char *path, st_error *err);

#endif
