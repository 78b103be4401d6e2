/* The kernel-choice table shared by a process's workers; see choices.h.
 *
 * An array of entries under one mutex, with an open-addressing index of
 * their keys (FNV-1a, linear probing), so that reading a file of n choices
 * takes O(n), not O(n^2): a network has a few hundred kernels, but a choice
 * file or the cache may hold many networks' and batches' choices. */
#include "backends/choices.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/strlist.h"

typedef enum entry_state { ENTRY_ABSENT, ENTRY_PENDING, ENTRY_READY } entry_state;

typedef struct choice_entry {
    char key[ST_CHOICE_MAX];
    char value[ST_CHOICE_MAX];
    char *trials;     /* measured here: what was tried (malloc'd), or NULL */
    char *note;       /* a given choice rejected here, or NULL */
    char origin[ST_CHOICE_MAX]; /* given: "FILE:LINE" */
    char twin[ST_CHOICE_MAX];   /* measured here: its measurement's twin (st_choices_twin), or "" */
    int of_twin;                /* its choice is a twin's, not measured for it */
    entry_state state;
    st_choice_source source;
    int used;         /* a kernel took it (or measured it) */
} choice_entry;

struct st_choices {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    st_choice_syntax syntax; /* the backend's, or NULL */
    choice_entry *e;
    int n, cap;
    int *index;       /* [slots]: an entry's position + 1, 0 empty */
    size_t slots;     /* a power of two, at least twice cap */
};

/* How a source is named after "from" in the text's origin comments. */
static const char *const source_words[ST_CHOICE_SOURCES] = {
    [ST_CHOICE_MEASURED] = "measurement here", [ST_CHOICE_FILE] = "the file",
    [ST_CHOICE_SNAPSHOT] = "the snapshot", [ST_CHOICE_RANK0] = "rank 0",
    [ST_CHOICE_CACHE] = "the cache",
};

st_status st_choices_create(st_choices **out, st_choice_syntax syntax, st_error *err)
{
    st_choices *c = st_calloc(1, sizeof *c, "kernel choices", err);
    if (!c)
        return ST_ENOMEM;
    c->syntax = syntax;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return st_fail(err, ST_EINTERNAL, "cannot create the kernel choices' lock");
    }
    if (pthread_cond_init(&c->changed, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return st_fail(err, ST_EINTERNAL, "cannot create the kernel choices' condition");
    }
    *out = c;
    return ST_OK;
}

void st_choices_free(st_choices *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].trials);
        free(c->e[i].note);
    }
    free(c->e);
    free(c->index);
    pthread_cond_destroy(&c->changed);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* The index slot where key is, or the empty one where it would go. */
static size_t slot_of(const st_choices *c, const char *key)
{
    size_t mask = c->slots - 1;
    size_t s = (size_t)st_hash_string(ST_HASH_START, key) & mask;
    while (c->index[s] && strcmp(c->e[c->index[s] - 1].key, key) != 0)
        s = (s + 1) & mask;
    return s;
}

/* Under the lock. */
static choice_entry *find(st_choices *c, const char *key)
{
    if (!c->slots)
        return NULL;
    int at = c->index[slot_of(c, key)];
    return at ? &c->e[at - 1] : NULL;
}

/* Under the lock: room for one more entry, the index rebuilt when the
 * array grows; 0 when out of memory. */
static int reserve(st_choices *c)
{
    if (c->n < c->cap)
        return 1;
    int cap = c->cap ? 2 * c->cap : 32;
    size_t slots = 2 * (size_t)cap;
    choice_entry *e = realloc(c->e, (size_t)cap * sizeof *e);
    if (e)
        c->e = e;
    int *index = calloc(slots, sizeof *index);
    if (!e || !index) {
        free(index);
        return 0;
    }
    free(c->index);
    c->index = index;
    c->slots = slots;
    c->cap = cap;
    for (int i = 0; i < c->n; i++)
        c->index[slot_of(c, c->e[i].key)] = i + 1;
    return 1;
}

/* Under the lock; NULL when out of memory. */
static choice_entry *add(st_choices *c, const char *key)
{
    if (!reserve(c))
        return NULL;
    choice_entry *e = &c->e[c->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    c->index[slot_of(c, key)] = c->n;
    return e;
}

st_choice_get st_choices_get(st_choices *c, const char *key, char *value, size_t size)
{
    pthread_mutex_lock(&c->lock);
    choice_entry *e = find(c, key);
    while (e && e->state == ENTRY_PENDING) {
        pthread_cond_wait(&c->changed, &c->lock);
        e = find(c, key); /* the array may have moved */
    }
    st_choice_get r = ST_CHOICE_CLAIMED;
    if (e && e->state == ENTRY_READY) {
        snprintf(value, size, "%s", e->value);
        e->used = 1;
        r = ST_CHOICE_FOUND;
    } else if (!e) {
        e = add(c, key);
    }
    if (r == ST_CHOICE_CLAIMED && e)
        e->state = ENTRY_PENDING;
    /* out of memory: measured without a record, as if claimed */
    pthread_mutex_unlock(&c->lock);
    return r;
}

void st_choices_record(st_choices *c, const char *key, const char *value, const char *trials)
{
    pthread_mutex_lock(&c->lock);
    choice_entry *e = find(c, key);
    if (e) {
        snprintf(e->value, sizeof e->value, "%s", value);
        free(e->trials);
        e->trials = trials ? strdup(trials) : NULL;
        e->state = ENTRY_READY;
        e->source = ST_CHOICE_MEASURED;
        e->origin[0] = '\0';
        e->used = 1;
        e->of_twin = 0;
    }
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

/* The entry of another key than key measured here (or being measured)
 * for twin, or NULL. */
static choice_entry *find_twin(st_choices *c, const char *twin, const char *key)
{
    for (int i = 0; i < c->n; i++) {
        choice_entry *e = &c->e[i];
        if (e->state != ENTRY_ABSENT && !e->of_twin && strcmp(e->twin, twin) == 0 &&
            strcmp(e->key, key) != 0)
            return e;
    }
    return NULL;
}

int st_choices_twin(st_choices *c, const char *key, const char *twin, char *value, size_t size)
{
    if (!twin[0] || strlen(twin) >= ST_CHOICE_MAX)
        return 0;
    pthread_mutex_lock(&c->lock);
    choice_entry *t = find_twin(c, twin, key);
    while (t && t->state == ENTRY_PENDING) {
        pthread_cond_wait(&c->changed, &c->lock);
        t = find_twin(c, twin, key); /* the array may have moved, the measurement failed */
    }
    choice_entry *e = find(c, key);
    int found = 0;
    if (e && t) {
        snprintf(value, size, "%s", t->value);
        snprintf(e->value, sizeof e->value, "%s", t->value);
        free(e->trials);
        size_t len = strlen(t->key) + 64;
        e->trials = malloc(len);
        if (e->trials)
            snprintf(e->trials, len, "as %s (the same measurement)", t->key);
        e->state = ENTRY_READY;
        e->source = ST_CHOICE_MEASURED;
        e->origin[0] = '\0';
        e->used = 1;
        e->of_twin = 1;
        found = 1;
        pthread_cond_broadcast(&c->changed);
    } else if (e) {
        snprintf(e->twin, sizeof e->twin, "%s", twin);
    }
    pthread_mutex_unlock(&c->lock);
    return found;
}

void st_choices_abandon(st_choices *c, const char *key)
{
    pthread_mutex_lock(&c->lock);
    choice_entry *e = find(c, key);
    if (e && e->state == ENTRY_PENDING)
        e->state = ENTRY_ABSENT;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

void st_choices_reject(st_choices *c, const char *key, const char *value, const char *why)
{
    pthread_mutex_lock(&c->lock);
    choice_entry *e = find(c, key);
    if (e && e->state == ENTRY_READY && strcmp(e->value, value) == 0) {
        e->state = ENTRY_ABSENT;
        free(e->note);
        size_t len = strlen(value) + strlen(e->origin) + strlen(why) + 64;
        e->note = malloc(len);
        if (e->note && e->source == ST_CHOICE_CACHE)
            snprintf(e->note, len, "the cached choice '%s' (%s) was not usable here: %s", value,
                     e->origin, why);
        else if (e->note)
            snprintf(e->note, len, "the given choice '%s' was not usable here: %s", value, why);
    }
    pthread_mutex_unlock(&c->lock);
}

/* s [*len] without the spaces and tabs at either end. */
static const char *trim(const char *s, size_t *len)
{
    while (*len && (*s == ' ' || *s == '\t')) {
        s++;
        (*len)--;
    }
    while (*len && (s[*len - 1] == ' ' || s[*len - 1] == '\t'))
        (*len)--;
    return s;
}

st_status st_choices_split(const st_choices *c, const char *line, size_t len, char *key,
                           char *value, st_error *err)
{
    const char *sep = NULL;
    for (size_t i = 0; i + 3 <= len && !sep; i++)
        if (memcmp(line + i, " = ", 3) == 0)
            sep = line + i;
    if (!sep)
        return st_fail(err, ST_EINPUT, "expected 'KEY = VALUE' (a kernel choice, as "
                       "--save-kernel-choices writes them)");
    size_t klen = (size_t)(sep - line), vlen = len - klen - 3;
    const char *k = trim(line, &klen), *v = trim(sep + 3, &vlen);
    if (!klen || !vlen)
        return st_fail(err, ST_EINPUT, "expected 'KEY = VALUE' (a kernel choice, as "
                       "--save-kernel-choices writes them), got an empty %s",
                       klen ? "value" : "key");
    if (klen >= ST_CHOICE_MAX || vlen >= ST_CHOICE_MAX)
        return st_fail(err, ST_EINPUT, "a %s of %zu bytes: expected 'KEY = VALUE' of at most "
                       "%d bytes each", klen >= ST_CHOICE_MAX ? "key" : "value",
                       klen >= ST_CHOICE_MAX ? klen : vlen, ST_CHOICE_MAX - 1);
    memcpy(key, k, klen);
    key[klen] = '\0';
    memcpy(value, v, vlen);
    value[vlen] = '\0';
    char why[ST_CHOICE_MAX];
    if (c->syntax && !c->syntax(value, why, sizeof why))
        return st_fail(err, ST_EINPUT, "the choice '%s' for %s: %s", value, key, why);
    return ST_OK;
}

st_status st_choices_add(st_choices *c, const char *key, const char *value, const char *origin,
                         st_choice_source source, st_error *err)
{
    st_status st = ST_OK;
    pthread_mutex_lock(&c->lock);
    choice_entry *e = find(c, key);
    int taken = e && e->state == ENTRY_READY;
    if (taken && source == ST_CHOICE_CACHE) {
        pthread_mutex_unlock(&c->lock); /* the cache gives way to every other source */
        return ST_OK;
    }
    if (taken && e->source != ST_CHOICE_CACHE && strcmp(e->value, value) != 0)
        st = st_fail(err, ST_EINPUT, "%s: a second choice for '%s' ('%s', then '%s')", origin,
                     key, e->value, value);
    else if (!e && !(e = add(c, key)))
        st = st_fail(err, ST_ENOMEM, "out of memory reading the kernel choices of %s", origin);
    if (st == ST_OK) {
        snprintf(e->value, sizeof e->value, "%s", value);
        snprintf(e->origin, sizeof e->origin, "%s", origin);
        e->state = ENTRY_READY;
        e->source = source;
        e->used = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

st_status st_choices_parse(st_choices *c, const char *text, size_t len, const char *origin,
                           st_choice_source source, st_error *err)
{
    st_status st = ST_OK;
    const char *end = text + len, *p = text, *q;
    size_t n;
    int lineno = 0;
    while (st == ST_OK && (q = st_next_line(&p, end, &n))) {
        lineno++;
        if (memchr(q, '\0', n)) {
            st = st_fail(err, ST_EINPUT, "%s:%d: contains a NUL byte: expected text, "
                         "'KEY = VALUE' lines", origin, lineno);
            break;
        }
        if (n && q[n - 1] == '\r')
            n--;
        q = trim(q, &n);
        if (n == 0 || *q == '#')
            continue;
        char key[ST_CHOICE_MAX], value[ST_CHOICE_MAX], where[ST_CHOICE_MAX];
        st = st_choices_split(c, q, n, key, value, err);
        if (st != ST_OK) {
            st_error_prefix(err, "%s:%d: ", origin, lineno);
            break;
        }
        snprintf(where, sizeof where, "%s:%d", origin, lineno);
        st = st_choices_add(c, key, value, where, source, err);
    }
    return st;
}

/* Whether entry e's "KEY = VALUE" line is listed for what. */
static int value_listed(const choice_entry *e, int what)
{
    if (!(what & ST_CHOICES_VALUES) || e->state != ENTRY_READY)
        return 0;
    if (what & ST_CHOICES_MEASURED)
        return e->source == ST_CHOICE_MEASURED;
    return e->source != ST_CHOICE_CACHE || e->used;
}

/* Keys in layer order: the leading number, then the text. */
static int key_order(const void *a, const void *b)
{
    const choice_entry *x = *(choice_entry *const *)a, *y = *(choice_entry *const *)b;
    long lx = strtol(x->key, NULL, 10), ly = strtol(y->key, NULL, 10);
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return strcmp(x->key, y->key);
}

char *st_choices_text(const st_choices *cc, int what, int *count)
{
    st_choices *c = (st_choices *)cc;
    pthread_mutex_lock(&c->lock);
    choice_entry **order = malloc(((size_t)c->n + 1) * sizeof *order);
    size_t bytes = 1;
    int n = 0, listed = 0;
    int trials = what & ST_CHOICES_TRIALS, notes = what & ST_CHOICES_NOTES;
    int origins = what & ST_CHOICES_ORIGINS;
    for (int i = 0; order && i < c->n; i++) {
        choice_entry *e = &c->e[i];
        int value = value_listed(e, what), note = notes && e->note;
        if (!value && !note)
            continue;
        order[n++] = e;
        if (value) {
            listed++;
            bytes += strlen(e->key) + strlen(e->value) + 8;
            if (trials && e->trials)
                bytes += strlen(e->trials) + 4;
            if (origins)
                bytes += strlen(e->origin) + 48;
        }
        if (note)
            bytes += strlen(e->key) + strlen(e->note) + 8;
    }
    char *text = order ? malloc(bytes) : NULL;
    if (text) {
        qsort(order, (size_t)n, sizeof *order, key_order);
        size_t at = 0;
        text[0] = '\0';
        for (int i = 0; i < n; i++) {
            const choice_entry *e = order[i];
            if (notes && e->note)
                at += (size_t)snprintf(text + at, bytes - at, "# %s: %s\n", e->key, e->note);
            if (!value_listed(e, what))
                continue;
            at += (size_t)snprintf(text + at, bytes - at, "%s = %s\n", e->key, e->value);
            if (trials && e->trials)
                at += (size_t)snprintf(text + at, bytes - at, "# %s\n", e->trials);
            if (origins)
                at += (size_t)snprintf(text + at, bytes - at, "# from %s%s%s%s\n",
                                       source_words[e->source], e->origin[0] ? " (" : "",
                                       e->origin, e->origin[0] ? ")" : "");
        }
    }
    if (count)
        *count = listed;
    free(order);
    pthread_mutex_unlock(&c->lock);
    return text;
}

void st_choices_counts(const st_choices *cc, st_choice_counts *n)
{
    st_choices *c = (st_choices *)cc;
    pthread_mutex_lock(&c->lock);
    memset(n, 0, sizeof *n);
    for (int i = 0; i < c->n; i++) {
        const choice_entry *e = &c->e[i];
        if (e->state != ENTRY_READY)
            continue;
        if (e->used && e->of_twin)
            n->twins++;
        if (e->used)
            n->taken[e->source]++;
        else if (e->source != ST_CHOICE_CACHE)
            n->unused++;
    }
    pthread_mutex_unlock(&c->lock);
}

void st_choices_origin(st_choices *c, const char *key, char *buf, size_t size)
{
    pthread_mutex_lock(&c->lock);
    const choice_entry *e = find(c, key);
    snprintf(buf, size, "%s", e && e->source != ST_CHOICE_MEASURED ? e->origin : "");
    pthread_mutex_unlock(&c->lock);
}
