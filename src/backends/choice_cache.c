/* The kernel-choice cache on disk: its directory, lock, file format and
 * merge; see choice_cache.h. */
#include "backends/choice_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fileio.h"
#include "base/hash.h"
#include "base/strlist.h"

/* A cache file larger than this is not one we wrote: ignored, rewritten. */
#define CACHE_MAX_BYTES ((size_t)16 << 20)

static const char cache_header[] =
    "# singletrain kernel-choice cache: choices measured on this machine, one context per "
    "file\n# (see 'context'); each entry is CHECKSUM KEY = VALUE. A cache: safe to delete.\n";

struct st_choice_cache {
    char *dir, *path, *lock_path;
    char *context;
    const st_log *log;
    int lock_fd;  /* the lock file, or -1 */
    int locked;   /* the lock is held */
    int writable; /* the directory and lock could be made: the file may be written */
    int said;     /* the file's being unreadable warned of (once a cache: open and store
                     both read it) */
    double lock_wait;
};

/* One entry of a cache file, for the merge. */
typedef struct cache_entry {
    char key[ST_CHOICE_MAX];
    char value[ST_CHOICE_MAX];
    int rank; /* 0: this run's, 1: the file's (the lower wins a key) */
    int seq;  /* the order it was read in: the first of a key wins among equals */
} cache_entry;

typedef struct entry_list {
    cache_entry *e;
    int n, cap;
} entry_list;

/* A malloc'd string as printf makes it; NULL when out of memory. */
static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return s;
}

int st_choice_cache_default_dir(char *buf, size_t size, char *why, size_t why_size)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    const char *var = "XDG_CACHE_HOME", *base = xdg, *below = "singletrain";
    if (!(xdg && xdg[0] == '/')) {
        var = "HOME";
        base = home;
        below = ".cache/singletrain";
    }
    if (!base || !base[0]) {
        snprintf(why, why_size, "neither XDG_CACHE_HOME (an absolute path) nor HOME is set");
        return 0;
    }
    int n = snprintf(buf, size, "%s/%s", base, below);
    if (n < 0 || (size_t)n >= size) {
        snprintf(why, why_size, "%s is too long: %s/%s takes %d bytes, over the limit of %zu",
                 var, var, below, n, size - 1);
        return 0;
    }
    /* made below the directory the user has, never that one itself: a
     * missing HOME (a service account's, a typo) is not created */
    struct stat sb;
    int e = stat(base, &sb) != 0 ? errno : 0;
    if (e || !S_ISDIR(sb.st_mode)) {
        snprintf(why, why_size, "%s=%.*s: %s: the cache is made only under an existing "
                 "directory", var, 200, base, e ? strerror(e) : "not a directory");
        return 0;
    }
    return 1;
}

/* The checksum of an entry: the context and the choice, so that an entry
 * copied from another context's file does not check either. */
static uint64_t entry_sum(const char *context, const char *key, const char *value)
{
    uint64_t h = st_hash_string(ST_HASH_START, context);
    h = st_hash_string(h, key);
    return st_hash_string(h, value);
}

static int add_entry(entry_list *l, const char *key, const char *value, int rank)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        cache_entry *e = realloc(l->e, (size_t)cap * sizeof *e);
        if (!e)
            return 0;
        l->e = e;
        l->cap = cap;
    }
    cache_entry *e = &l->e[l->n];
    snprintf(e->key, sizeof e->key, "%s", key);
    snprintf(e->value, sizeof e->value, "%s", value);
    e->rank = rank;
    e->seq = l->n++;
    return 1;
}

/* What reading a cache file found wrong. */
typedef struct read_report {
    int foreign;      /* the file is another context's (or has none): all ignored */
    int bad;          /* entries left out */
    int first_line;   /* the first of them */
    char first[sizeof(st_error){0}.msg]; /* and why */
} read_report;

static void bad_entry(read_report *r, int line, const char *why)
{
    if (!r->bad++) {
        r->first_line = line;
        snprintf(r->first, sizeof r->first, "%s", why);
    }
}

/* The entries of a cache file's text [len] whose checksum and syntax hold
 * (the syntax checked by c's backend), each to list (rank 1) or, when
 * into is not NULL, added to into as the cache's. ENOMEM only. */
static st_status read_entries(const st_choice_cache *cache, const char *text, size_t len,
                              const st_choices *c, st_choices *into, entry_list *list,
                              read_report *r, st_error *err)
{
    const char *end = text + len, *p = text, *q;
    size_t n;
    int lineno = 0, have_context = 0;
    memset(r, 0, sizeof *r);
    while ((q = st_next_line(&p, end, &n))) {
        lineno++;
        if (memchr(q, '\0', n)) {
            if (!have_context) {
                r->foreign = 1;
                return ST_OK;
            }
            bad_entry(r, lineno, "a NUL byte");
            continue;
        }
        if (n == 0 || *q == '#')
            continue;
        if (!have_context) { /* the first other line: the context */
            size_t clen = strlen(cache->context);
            if (n != clen + 10 || memcmp(q, "context = ", 10) != 0 ||
                memcmp(q + 10, cache->context, clen) != 0) {
                r->foreign = 1;
                return ST_OK;
            }
            have_context = 1;
            continue;
        }
        char key[ST_CHOICE_MAX], value[ST_CHOICE_MAX], origin[ST_CHOICE_MAX];
        char *digits_end = NULL;
        st_error why = {0};
        uint64_t sum = n > 17 && q[16] == ' ' ? strtoull(q, &digits_end, 16) : 0;
        if (!digits_end || digits_end != q + 16) {
            bad_entry(r, lineno, "expected CHECKSUM KEY = VALUE");
            continue;
        }
        if (st_choices_split(c, q + 17, n - 17, key, value, &why) != ST_OK) {
            bad_entry(r, lineno, why.msg);
            continue;
        }
        if (sum != entry_sum(cache->context, key, value)) {
            bad_entry(r, lineno, "its checksum does not match it: damaged, or copied from "
                      "another context's file");
            continue;
        }
        snprintf(origin, sizeof origin, "%s:%d", cache->path, lineno);
        if (into) {
            st_status st = st_choices_add(into, key, value, origin, ST_CHOICE_CACHE, err);
            if (st != ST_OK)
                return st;
        } else if (!add_entry(list, key, value, 1)) {
            return st_fail(err, ST_ENOMEM, "out of memory reading %s", cache->path);
        }
    }
    if (!have_context)
        r->foreign = lineno > 0;
    return ST_OK;
}

/* What read_file found at the cache file's path. */
typedef enum cache_file {
    CACHE_NONE,       /* no file */
    CACHE_TEXT,       /* its text */
    CACHE_UNREADABLE, /* a file that cannot be read (warned of): measured anew, rewritten */
    CACHE_LINK,       /* a symbolic link: never followed, neither read nor written */
} cache_file;

/* The cache file's text (NULL and *len 0 unless CACHE_TEXT). Whoever can
 * write the directory could plant a link there to a file of the user's
 * (a snapshot, a cfg), which a write through it would overwrite with
 * cache text: the file is read with O_NOFOLLOW and written by renaming
 * over the name itself (fileio.h's st_read_own_text, st_write_own). */
static cache_file read_file(st_choice_cache *cache, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    struct stat sb;
    if (lstat(cache->path, &sb) != 0 && errno == ENOENT)
        return CACHE_NONE;
    st_error err = {0};
    if (st_read_own_text(cache->path, "kernel-choice cache", CACHE_MAX_BYTES, text, len,
                         &err) == ST_OK)
        return CACHE_TEXT;
    if (lstat(cache->path, &sb) == 0 && S_ISLNK(sb.st_mode))
        return CACHE_LINK;
    if (!cache->said++)
        st_warn(cache->log, "kernel-choice cache: %s: its choices are measured anew", err.msg);
    return CACHE_UNREADABLE;
}

/* The warning for a link at the cache file's path; what the run does then. */
static void warn_link(const st_choice_cache *cache, const char *then)
{
    char to[256] = "?";
    ssize_t n = readlink(cache->path, to, sizeof to - 1);
    to[n > 0 ? n : 1] = '\0';
    st_warn(cache->log, "kernel-choice cache %s: a symbolic link (to %s), not followed: %s "
            "(remove the link to have the cache again)", cache->path, to, then);
}

/* Take the lock, waiting up to lock_wait seconds; 0 if not had. */
static int take_lock(st_choice_cache *cache)
{
    if (cache->locked)
        return 1;
    double start = st_now();
    int said = 0;
    for (;;) {
        if (flock(cache->lock_fd, LOCK_EX | LOCK_NB) == 0)
            return cache->locked = 1;
        if (errno != EWOULDBLOCK && errno != EINTR) {
            st_warn(cache->log, "kernel-choice cache %s: cannot lock it: %s: going on without "
                    "the lock", cache->lock_path, strerror(errno));
            return 0;
        }
        if (st_now() - start >= cache->lock_wait) {
            st_warn(cache->log, "kernel-choice cache %s: another run has held it for %.0f s: "
                    "going on without waiting for it", cache->path, cache->lock_wait);
            return 0;
        }
        if (!said++)
            st_info(cache->log, "kernel-choice cache %s: waiting for another run measuring "
                    "the same kernels (at most %.0f s)", cache->path, cache->lock_wait);
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

/* The directory made and the lock file opened, or why not (a warning);
 * the directory may still be read when it exists. */
static void prepare_dir(st_choice_cache *cache)
{
    size_t created;
    st_error err = {0};
    if (st_make_dirs("kernel-choice cache", cache->dir, &created, &err) != ST_OK) {
        struct stat sb;
        int readable = stat(cache->dir, &sb) == 0 && S_ISDIR(sb.st_mode);
        st_warn(cache->log, "%s: %s (--no-choice-cache leaves the cache alone)", err.msg,
                readable ? "what this run measures is not kept"
                         : "this run measures its kernels without the cache");
        return;
    }
    cache->lock_fd = open(cache->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (cache->lock_fd < 0) {
        st_warn(cache->log, "kernel-choice cache %s: cannot create its lock %s: %s: what this "
                "run measures is not kept (--no-choice-cache leaves the cache alone)",
                cache->dir, cache->lock_path, strerror(errno));
        return;
    }
    cache->writable = 1;
}

st_status st_choice_cache_open(st_choice_cache **out, const st_choice_cache_opts *o,
                               st_choices *c, const st_log *log, st_error *err)
{
    *out = NULL;
    st_choice_cache *cache = st_calloc(1, sizeof *cache, "kernel-choice cache", err);
    if (!cache)
        return ST_ENOMEM;
    cache->log = log;
    cache->lock_fd = -1;
    cache->lock_wait = o->lock_wait;
    uint64_t h = st_hash_string(ST_HASH_START, o->context);
    cache->dir = strdup(o->dir);
    cache->context = strdup(o->context);
    cache->path = format("%s/choices-%016" PRIx64 ".txt", o->dir, h);
    cache->lock_path = format("%s/choices-%016" PRIx64 ".lock", o->dir, h);
    if (!cache->dir || !cache->context || !cache->path || !cache->lock_path) {
        st_choice_cache_close(cache);
        return st_fail(err, ST_ENOMEM, "out of memory opening the kernel-choice cache");
    }
    for (char *p = cache->context; *p; p++) /* one line */
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    prepare_dir(cache);
    if (cache->writable)
        take_lock(cache);
    struct stat sb;
    if (!cache->writable && !(stat(cache->dir, &sb) == 0 && S_ISDIR(sb.st_mode))) {
        st_choice_cache_close(cache);
        return ST_OK;
    }
    st_status st = ST_OK;
    char *text = NULL;
    size_t len = 0;
    if (o->read && read_file(cache, &text, &len) == CACHE_LINK) {
        warn_link(cache, "this run measures its kernels without the cache");
        st_choice_cache_close(cache);
        return ST_OK;
    }
    read_report r;
    if (text)
        st = read_entries(cache, text, len, c, c, NULL, &r, err);
    if (st == ST_OK && text && r.foreign)
        st_warn(log, "kernel-choice cache %s: not a cache file of this context (%s): ignored, "
                "its choices measured anew%s", cache->path, o->context,
                cache->writable ? " and the file rewritten" : "");
    else if (st == ST_OK && text && r.bad)
        st_warn(log, "kernel-choice cache %s: %d damaged or foreign entr%s ignored (the first "
                "at line %d: %s): %s kernels are measured anew", cache->path, r.bad,
                r.bad == 1 ? "y" : "ies", r.first_line, r.first, r.bad == 1 ? "its" : "their");
    free(text);
    if (st != ST_OK) {
        st_choice_cache_close(cache);
        return st;
    }
    *out = cache;
    return ST_OK;
}

/* Keys in order, this run's before the file's, then as read. */
static int entry_order(const void *a, const void *b)
{
    const cache_entry *x = a, *y = b;
    int k = strcmp(x->key, y->key);
    if (k)
        return k;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    return x->seq - y->seq;
}

static st_status write_entries(FILE *f, void *ctx, st_error *err)
{
    const st_choice_cache *cache = ((void **)ctx)[0];
    const entry_list *l = ((void **)ctx)[1];
    fprintf(f, "%scontext = %s\n", cache_header, cache->context);
    for (int i = 0; i < l->n; i++)
        if (i == 0 || strcmp(l->e[i].key, l->e[i - 1].key) != 0)
            fprintf(f, "%016" PRIx64 " %s = %s\n",
                    entry_sum(cache->context, l->e[i].key, l->e[i].value), l->e[i].key,
                    l->e[i].value);
    return ferror(f) ? st_fail(err, ST_EIO, "%s: write failed", cache->path) : ST_OK;
}

/* This run's measured choices (the text of st_choices_text) added to l. */
static st_status add_measured(const char *text, const st_choices *c, entry_list *l,
                              st_error *err)
{
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        char key[ST_CHOICE_MAX], value[ST_CHOICE_MAX];
        st_status st = st_choices_split(c, p, n, key, value, err);
        if (st == ST_OK && !add_entry(l, key, value, 0))
            st = st_fail(err, ST_ENOMEM, "out of memory");
        if (st != ST_OK)
            return st;
        p = eol ? eol + 1 : p + n;
    }
    return ST_OK;
}

void st_choice_cache_store(st_choice_cache *cache, const st_choices *c, int *stored)
{
    *stored = 0;
    int count = 0;
    char *measured = st_choices_text(c, ST_CHOICES_VALUES | ST_CHOICES_MEASURED, &count);
    if (!cache->writable || (measured && count == 0)) {
        free(measured);
        return;
    }
    entry_list l = {0};
    char *text = NULL;
    size_t len = 0;
    st_error err = {0};
    st_status st = measured ? add_measured(measured, c, &l, &err)
                            : st_fail(&err, ST_ENOMEM, "out of memory");
    cache_file got = CACHE_NONE;
    if (st == ST_OK) { /* the file as it is now: a run that had the lock may have changed it */
        take_lock(cache);
        got = read_file(cache, &text, &len);
    }
    read_report r;
    if (st == ST_OK && text)
        st = read_entries(cache, text, len, c, NULL, &l, &r, &err);
    if (st == ST_OK && got != CACHE_LINK) {
        qsort(l.e, (size_t)l.n, sizeof *l.e, entry_order);
        void *ctx[2] = {cache, &l};
        st = st_write_own(cache->path, write_entries, ctx, &err);
    }
    if (got == CACHE_LINK)
        warn_link(cache, "what this run measured is not kept");
    else if (st == ST_OK)
        *stored = count;
    else
        st_warn(cache->log, "kernel-choice cache: not updated: %s", err.msg);
    free(text);
    free(measured);
    free(l.e);
}

void st_choice_cache_close(st_choice_cache *cache)
{
    if (!cache)
        return;
    if (cache->lock_fd >= 0)
        close(cache->lock_fd); /* releases the lock */
    free(cache->dir);
    free(cache->path);
    free(cache->lock_path);
    free(cache->context);
    free(cache);
}

const char *st_choice_cache_file(const st_choice_cache *cache)
{
    return cache->path;
}
