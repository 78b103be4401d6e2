/* Image-list reader: a text file naming one image per line, decoded on
 * demand with stb_image (JPEG, PNG, BMP, ...), resized with
 * stb_image_resize to the requested shape and laid out planar (CHW): the
 * decode of one file is image_decode.c's.
 *
 * Labels come from a names file (Darknet's labels=: the one class name that
 * occurs in the path) or from the line itself ("path label"). Every listed
 * file is checked for readability at open. The paths are kept in one
 * NUL-separated blob with an offset per entry. Reads only decode; the one
 * thing they write is the per-entry "bad" flag under skip_bad (atomic), so
 * they are safe from several threads. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_decode.h"
#include "base/fileio.h"

#define HEADS_READ_MAX 20000 /* lists this long have every header read at open */

/* One entry of the list. */
typedef struct image_entry {
    size_t offset;        /* of its path in the paths */
    int label;
    int line;             /* of the list, for messages */
    unsigned char bad;    /* (skip_bad) set once it fails to decode */
} image_entry;

typedef struct images_source {
    st_source base;
    char *paths;          /* NUL-terminated paths, back to back */
    image_entry *entry;   /* [count] */
    int skip_bad;
    long *skipped;        /* shared counter, may be NULL */
    const st_output_ids *outputs; /* at open only: the caller's outputs, or NULL */
    pthread_rwlock_t decode_lock; /* decodes hold it shared; a failed one retries
                                     holding it alone (see st_image_decode_locked) */
    int lock_made;
} images_source;

/* ---- reading ---- */

static void count_skipped(const images_source *s)
{
    if (s->skipped)
        __atomic_fetch_add(s->skipped, 1, __ATOMIC_RELAXED);
}

/* Decode entry i into pixels (planar, the source's shape). On failure the
 * message goes to err and the status is returned. */
static st_status decode(const images_source *s, long i, unsigned char *pixels, st_error *err)
{
    st_status st = st_image_decode_locked(s->paths + s->entry[i].offset, s->base.shape,
                                          pixels, (pthread_rwlock_t *)&s->decode_lock, err);
    if (st != ST_OK)
        st_error_prefix(err, "%s:%d: ", s->base.name, s->entry[i].line);
    return st;
}

static st_status images_read(const st_source *src, long index, unsigned char *pixels,
                             int *label, st_error *err)
{
    const images_source *s = (const images_source *)src;
    if (!s->skip_bad) {
        st_status st = decode(s, index, pixels, err);
        if (st == ST_OK)
            *label = s->entry[index].label;
        return st;
    }
    /* skip_bad: the first entry from index on (wrapping) that decodes. A
     * failure is counted once per entry and the entry is not tried again. */
    long n = s->base.count;
    for (long k = 0; k < n; k++) {
        long i = (index + k) % n;
        if (__atomic_load_n(&s->entry[i].bad, __ATOMIC_RELAXED))
            continue;
        st_error local = {0};
        st_status st = decode(s, i, pixels, &local);
        if (st == ST_OK) {
            *label = s->entry[i].label;
            return ST_OK;
        }
        if (st == ST_ENOMEM)
            return st_fail(err, st, "%s", local.msg);
        if (!__atomic_exchange_n(&s->entry[i].bad, 1, __ATOMIC_RELAXED))
            count_skipped(s);
    }
    return st_fail(err, ST_EINPUT, "%s: none of the %ld listed images can be decoded",
                   s->base.name, n);
}

static void images_close(st_source *src)
{
    images_source *s = (images_source *)src;
    if (s->lock_made)
        pthread_rwlock_destroy(&s->decode_lock);
    free(s->paths);
    free(s->entry);
    free(s);
}

static const st_source_ops images_ops = {images_read, images_close};

/* ---- opening ---- */

/* The class names of a names file: one per line, trimmed, blank lines
 * skipped. */
typedef struct names_list {
    char **name;
    int *line;
    int n, cap;
} names_list;

static void names_free(names_list *nl)
{
    for (int i = 0; i < nl->n; i++)
        free(nl->name[i]);
    free(nl->name);
    free(nl->line);
    memset(nl, 0, sizeof *nl);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Trim s in place; returns the start, *len the trimmed length. */
static char *trim(char *s, size_t *len)
{
    size_t n = strlen(s);
    while (n > 0 && is_space(s[n - 1]))
        n--;
    s[n] = '\0';
    while (*s && is_space(*s)) {
        s++;
        n--;
    }
    *len = n;
    return s;
}

static st_status names_read(names_list *nl, const char *path, int classes, st_error *err)
{
    FILE *f;
    st_status st = st_fopen_input(path, "r", "class names", &f, err);
    if (st != ST_OK)
        return st;
    char *buf = NULL;
    size_t cap = 0;
    int line = 0;
    while (st == ST_OK && getline(&buf, &cap, f) >= 0) {
        line++;
        size_t len;
        char *name = trim(buf, &len);
        if (len == 0)
            continue;
        for (int i = 0; st == ST_OK && i < nl->n; i++)
            if (strcmp(nl->name[i], name) == 0)
                st = st_fail(err, ST_EINPUT, "%s:%d: class name \"%s\" repeats line %d: "
                             "expected distinct names", path, line, name, nl->line[i]);
        if (st != ST_OK)
            break;
        if (nl->n == nl->cap) {
            int cap2 = nl->cap ? 2 * nl->cap : 64;
            char **n2 = realloc(nl->name, (size_t)cap2 * sizeof *n2);
            if (n2)
                nl->name = n2;
            int *l2 = n2 ? realloc(nl->line, (size_t)cap2 * sizeof *l2) : NULL;
            if (l2)
                nl->line = l2;
            if (!n2 || !l2) {
                st = st_fail(err, ST_ENOMEM, "%s: out of memory reading class names", path);
                break;
            }
            nl->cap = cap2;
        }
        nl->name[nl->n] = strdup(name);
        if (!nl->name[nl->n]) {
            st = st_fail(err, ST_ENOMEM, "%s: out of memory reading class names", path);
            break;
        }
        nl->line[nl->n++] = line;
    }
    if (st == ST_OK && ferror(f))
        st = st_fail(err, ST_EINPUT, "%s: read failed: %s", path, strerror(errno));
    if (st == ST_OK && nl->n != classes)
        st = st_fail(err, ST_EINPUT, "%s: %d class name%s, but the network has %d classes: "
                     "expected one name per class", path, nl->n, nl->n == 1 ? "" : "s",
                     classes);
    free(buf);
    fclose(f);
    return st;
}

/* The label of path from the class names found in it. */
static st_status label_from_names(const names_list *nl, const char *list, int line,
                                  const char *path, const char *names, int *label,
                                  st_error *err)
{
    int found = -1;
    for (int i = 0; i < nl->n; i++) {
        if (!strstr(path, nl->name[i]))
            continue;
        if (found >= 0)
            return st_fail(err, ST_EINPUT, "%s:%d: %s: contains both class \"%s\" and class "
                           "\"%s\" from %s: expected exactly one class name in the path",
                           list, line, path, nl->name[found], nl->name[i], names);
        found = i;
    }
    if (found < 0)
        return st_fail(err, ST_EINPUT, "%s:%d: %s: contains none of the %d class names from "
                       "%s: expected exactly one", list, line, path, nl->n, names);
    *label = found;
    return ST_OK;
}

/* Split a trimmed "path label" line: the label is the last whitespace-
 * separated token (a non-negative integer); the path, everything before. */
static st_status label_from_line(char *text, const char *list, int line, int classes,
                                 int *label, st_error *err)
{
    size_t n = strlen(text);
    size_t start = n;
    while (start > 0 && !is_space(text[start - 1]))
        start--;
    const char *tok = text + start;
    size_t end = start;
    while (end > 0 && is_space(text[end - 1]))
        end--;
    if (start == 0 || end == 0)
        return st_fail(err, ST_EINPUT, "%s:%d: \"%s\": expected \"PATH LABEL\" (a path, then "
                       "an integer label; or give class names to label by path)", list, line,
                       text);
    long v = 0;
    int ok = *tok != '\0';
    for (const char *p = tok; ok && *p; p++) {
        if (*p < '0' || *p > '9')
            ok = 0;
        else if ((v = v * 10 + (*p - '0')) > 0x7fffffff)
            ok = 0;
    }
    if (!ok)
        return st_fail(err, ST_EINPUT, "%s:%d: %.*s: label \"%s\": expected a non-negative "
                       "integer after the path", list, line, (int)end, text, tok);
    if (v >= classes)
        return st_fail(err, ST_EINPUT, "%s:%d: %.*s: label %ld: expected a label below the "
                       "network's %d classes", list, line, (int)end, text, v, classes);
    text[end] = '\0';
    *label = (int)v;
    return ST_OK;
}

/* Append one entry to s (capacity *cap), from line of the list, and its
 * path to the blob (used bytes *blob_len, capacity *blob_cap). */
static st_status add_entry(images_source *s, long *cap, size_t *blob_len, size_t *blob_cap,
                           const char *path, size_t len, int label, int line, st_error *err)
{
    long n = s->base.count;
    if (n == *cap) {
        long cap2 = *cap ? 2 * *cap : 1024;
        image_entry *e2 = realloc(s->entry, (size_t)cap2 * sizeof *e2);
        if (!e2)
            return st_fail(err, ST_ENOMEM, "%s: out of memory holding %ld entries",
                           s->base.name, n);
        s->entry = e2;
        *cap = cap2;
    }
    if (*blob_len + len + 1 > *blob_cap) {
        size_t cap2 = *blob_cap ? 2 * *blob_cap : 65536;
        while (cap2 < *blob_len + len + 1)
            cap2 *= 2;
        char *b2 = realloc(s->paths, cap2);
        if (!b2)
            return st_fail(err, ST_ENOMEM, "%s: out of memory holding %ld paths",
                           s->base.name, n);
        s->paths = b2;
        *blob_cap = cap2;
    }
    memcpy(s->paths + *blob_len, path, len + 1);
    s->entry[n] = (image_entry){.offset = *blob_len, .label = label, .line = line};
    *blob_len += len + 1;
    s->base.count = n + 1;
    return ST_OK;
}

/* Parse the list into s: labels, readability, limit. */
static st_status parse_list(images_source *s, FILE *f, const char *list, const names_list *nl,
                            const char *names, long limit, int classes, st_error *err)
{
    st_status st = ST_OK;
    char *buf = NULL;
    size_t bufcap = 0, blob_len = 0, blob_cap = 0;
    long cap = 0, listed = 0;
    int line = 0;
    while (st == ST_OK && (limit <= 0 || s->base.count < limit) &&
           getline(&buf, &bufcap, f) >= 0) {
        line++;
        size_t len;
        char *text = trim(buf, &len);
        if (len == 0 || text[0] == '#')
            continue;
        int label = 0;
        if (nl)
            st = label_from_names(nl, list, line, text, names, &label, err);
        else
            st = label_from_line(text, list, line, classes, &label, err);
        if (st != ST_OK)
            break;
        const char *path = trim(text, &len);
        listed++;
        struct stat sb;
        const st_output_id *o = s->outputs && s->outputs->n && stat(path, &sb) == 0
                                    ? st_output_ids_find(s->outputs, &sb) : NULL;
        if (o) {
            st = st_fail(err, ST_EUSAGE, "%s %s is %s:%d's image %s: writing it would destroy "
                         "that input; give another file", o->what, o->path, list, line, path);
            break;
        }
        char why[160];
        st_regular_why(path, why, sizeof why);
        if (why[0]) {
            if (!s->skip_bad) {
                st = st_fail(err, ST_EINPUT, "%s:%d: %s: cannot read: %s", list, line, path,
                             why);
                break;
            }
            count_skipped(s);
            continue;
        }
        st = add_entry(s, &cap, &blob_len, &blob_cap, path, len, label, line, err);
    }
    if (st == ST_OK && ferror(f))
        st = st_fail(err, ST_EINPUT, "%s: read failed: %s", list, strerror(errno));
    if (st == ST_OK && listed == 0)
        st = st_fail(err, ST_EINPUT, "%s: no images listed: expected one path per line",
                     list);
    if (st == ST_OK && s->base.count == 0)
        st = st_fail(err, ST_EINPUT, "%s: none of the %ld listed images can be read", list,
                     listed);
    free(buf);
    return st;
}

/* The decodes' lock (see st_image_decode_locked), preferring the one that waits to
 * hold it alone over new shared holders, which would otherwise starve it
 * while the other readers decode. */
static st_status make_decode_lock(images_source *s, st_error *err)
{
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int e = pthread_rwlock_init(&s->decode_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (e != 0)
        return st_fail(err, ST_EINTERNAL, "%s: cannot create a lock: %s", s->base.name,
                       strerror(e));
    s->lock_made = 1;
    return ST_OK;
}

/* What one read may take while it decodes (st_source's read_bytes): the
 * largest decode of the list's images, from their headers (stbi_info reads
 * the size without decoding) when the list has at most HEADS_READ_MAX
 * entries, else the decode of the largest image a read accepts (32
 * megapixels of 4 channels). */
static void size_decodes(images_source *s)
{
    st_shape sh = s->base.shape;
    size_t largest = 0;
    int lw = 0, lh = 0;
    if (s->base.count > HEADS_READ_MAX) {
        int side = 1 << 12; /* 4096 x 8192: ST_MAX_IMAGE_PIXELS */
        largest =
            st_image_decode_bytes(side, (int)(ST_MAX_IMAGE_PIXELS / side), 4, 0, 0, sh.c);
        snprintf(s->base.read_bytes_why, sizeof s->base.read_bytes_why, "a bound: an image of "
                 "32 megapixels, the most a read takes; the %ld entries' headers are not read "
                 "at set-up (over %d)", s->base.count, HEADS_READ_MAX);
        s->base.read_bytes = largest;
        return;
    }
    for (long i = 0; i < s->base.count; i++) {
        char why[160];
        int fd = st_open_regular(s->paths + s->entry[i].offset, why, sizeof why);
        FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
        if (!f) {
            if (fd >= 0)
                close(fd);
            continue; /* its read will say why */
        }
        st_image_head head;
        st_image_read_head(f, &head);
        fclose(f);
        if (!head.w || (long)head.w * head.h > ST_MAX_IMAGE_PIXELS)
            continue; /* refused by its read, before decoding */
        size_t bytes = st_image_decode_bytes(head.w, head.h, head.channels, head.bits16,
                                             head.file_bytes, sh.c);
        if (bytes > largest) {
            largest = bytes;
            lw = head.w;
            lh = head.h;
        }
    }
    s->base.read_bytes = largest;
    if (largest)
        snprintf(s->base.read_bytes_why, sizeof s->base.read_bytes_why, "the largest image, "
                 "%d x %d, of the headers read at set-up", lw, lh);
}

st_status st_images_open(st_source **out, const char *list, const char *names, long limit,
                         int classes, const st_image_opts *o, st_error *err)
{
    if (!o)
        return st_fail(err, ST_EINTERNAL, "%s: image list opened without decode options",
                       list);
    st_shape sh = o->shape;
    if (sh.c != 1 && sh.c != 3)
        return st_fail(err, ST_EINPUT, "%s: images decode to %d channels: expected 1 (grey) "
                       "or 3 (RGB)", list, sh.c);
    if (sh.h <= 0 || sh.w <= 0 || sh.h > ST_MAX_SIDE || sh.w > ST_MAX_SIDE)
        return st_fail(err, ST_EINPUT, "%s: images resize to %d x %d: expected sides from 1 "
                       "to %d", list, sh.w, sh.h, ST_MAX_SIDE);
    if (classes <= 0)
        return st_fail(err, ST_EINPUT, "%s: the network has %d classes: expected at least "
                       "one", list, classes);

    names_list nl = {0};
    int have_names = names && names[0];
    FILE *f = NULL;
    images_source *s = st_calloc(1, sizeof *s, "image-list source", err);
    st_status st = s ? ST_OK : ST_ENOMEM;
    if (st == ST_OK) {
        s->base.ops = &images_ops;
        s->base.shape = sh;
        s->base.classes = classes;
        s->skip_bad = o->skip_bad;
        s->skipped = o->skipped;
        s->outputs = o->outputs;
        snprintf(s->base.name, sizeof s->base.name, "%s", list);
    }
    if (st == ST_OK && have_names)
        st = names_read(&nl, names, classes, err);
    if (st == ST_OK)
        st = st_fopen_input(list, "r", "image list", &f, err);
    if (st == ST_OK)
        st = parse_list(s, f, list, have_names ? &nl : NULL, names, limit, classes, err);
    if (st == ST_OK)
        st = make_decode_lock(s, err);
    if (st == ST_OK)
        size_decodes(s);
    if (f)
        fclose(f);
    names_free(&nl);
    if (s)
        s->outputs = NULL; /* the caller's, for the open only */
    if (st != ST_OK) {
        if (s)
            images_close(&s->base);
        return st;
    }
    *out = &s->base;
    return ST_OK;
}

/* ---- class names for other commands ---- */

st_status st_class_names_read(const char *path, int classes, char ***names, st_error *err)
{
    names_list nl = {0};
    *names = NULL;
    st_status st = names_read(&nl, path, classes, err);
    if (st != ST_OK) {
        names_free(&nl);
        return st;
    }
    *names = nl.name;
    free(nl.line);
    return ST_OK;
}

void st_class_names_free(char **names, int classes)
{
    for (int i = 0; names && i < classes; i++)
        free(names[i]);
    free(names);
}
