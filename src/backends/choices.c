/* The kernel-choice table shared by a process's workers; see choices.h.
 *
 * A small array of entries under one mutex: a network has at most a few
 * hundred kernels, and the table is only used while kernels are created. */
#include "backends/choices.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum entry_state { ENTRY_ABSENT, ENTRY_PENDING, ENTRY_READY } entry_state;

typedef struct choice_entry {
    char key[ST_CHOICE_MAX];
    char value[ST_CHOICE_MAX];
    char *trials;     /* measured here: what was tried (malloc'd), or NULL */
    char *note;       /* a given choice rejected here, or NULL */
    char origin[ST_CHOICE_MAX]; /* given: "FILE:LINE" */
    entry_state state;
    int measured;     /* 1: measured in this process; 0: given */
    int used;         /* a kernel asked for it */
} choice_entry;

struct st_choices {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    choice_entry *e;
    int n, cap;
};

st_status st_choices_create(st_choices **out, st_error *err)
{
    st_choices *c = st_calloc(1, sizeof *c, "kernel choices", err);
    if (!c)
        return ST_ENOMEM;
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
    pthread_cond_destroy(&c->changed);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Under the lock. */
static choice_entry *find(st_choices *c, const char *key)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->e[i].key, key) == 0)
            return &c->e[i];
    return NULL;
}

/* Under the lock; NULL when out of memory. */
static choice_entry *add(st_choices *c, const char *key)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 32;
        choice_entry *e = realloc(c->e, (size_t)cap * sizeof *e);
        if (!e)
            return NULL;
        c->e = e;
        c->cap = cap;
    }
    choice_entry *e = &c->e[c->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
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
        e->measured = 1;
    }
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
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
        size_t len = strlen(value) + strlen(why) + 64;
        e->note = malloc(len);
        if (e->note)
            snprintf(e->note, len, "the given choice '%s' was not usable here: %s", value, why);
    }
    pthread_mutex_unlock(&c->lock);
}

/* The line's key and value, trimmed, into key / value; 0 if malformed. */
static int parse_line(char *line, char *key, char *value)
{
    char *sep = strstr(line, " = ");
    if (!sep)
        return 0;
    *sep = '\0';
    char *k = line, *v = sep + 3;
    while (*k == ' ' || *k == '\t')
        k++;
    while (*v == ' ' || *v == '\t')
        v++;
    for (char *end = k + strlen(k); end > k && (end[-1] == ' ' || end[-1] == '\t');)
        *--end = '\0';
    for (char *end = v + strlen(v); end > v && (end[-1] == ' ' || end[-1] == '\t');)
        *--end = '\0';
    if (!*k || !*v || strlen(k) >= ST_CHOICE_MAX || strlen(v) >= ST_CHOICE_MAX)
        return 0;
    strcpy(key, k);
    strcpy(value, v);
    return 1;
}

st_status st_choices_parse(st_choices *c, const char *text, const char *origin, st_error *err)
{
    st_status st = ST_OK;
    int lineno = 0;
    pthread_mutex_lock(&c->lock);
    for (const char *p = text; *p && st == ST_OK;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        lineno++;
        char line[3 * ST_CHOICE_MAX], key[ST_CHOICE_MAX], value[ST_CHOICE_MAX];
        const char *q = p;
        p = eol ? eol + 1 : p + len;
        while (len && (*q == ' ' || *q == '\t')) {
            q++;
            len--;
        }
        if (len && q[len - 1] == '\r')
            len--;
        if (len == 0 || *q == '#')
            continue;
        if (len >= sizeof line) {
            st = st_fail(err, ST_EINPUT, "%s:%d: a line of %zu bytes: expected 'KEY = VALUE' "
                         "of at most %d bytes each", origin, lineno, len, ST_CHOICE_MAX - 1);
            break;
        }
        memcpy(line, q, len);
        line[len] = '\0';
        if (!parse_line(line, key, value)) {
            st = st_fail(err, ST_EINPUT, "%s:%d: expected 'KEY = VALUE' (a kernel choice, as "
                         "--save-kernel-choices writes them)", origin, lineno);
            break;
        }
        choice_entry *e = find(c, key);
        if (e && e->state == ENTRY_READY && strcmp(e->value, value) != 0) {
            st = st_fail(err, ST_EINPUT, "%s:%d: a second choice for '%s' ('%s', then '%s')",
                         origin, lineno, key, e->value, value);
            break;
        }
        if (!e && !(e = add(c, key))) {
            st = st_fail(err, ST_ENOMEM, "out of memory reading the kernel choices of %s",
                         origin);
            break;
        }
        snprintf(e->value, sizeof e->value, "%s", value);
        snprintf(e->origin, sizeof e->origin, "%s:%d", origin, lineno);
        e->state = ENTRY_READY;
        e->measured = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
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
    int n = 0;
    int values = what & ST_CHOICES_VALUES, trials = what & ST_CHOICES_TRIALS;
    int notes = what & ST_CHOICES_NOTES;
    for (int i = 0; order && i < c->n; i++) {
        choice_entry *e = &c->e[i];
        if (e->state != ENTRY_READY && !e->note)
            continue;
        order[n++] = e;
        bytes += strlen(e->key) + strlen(e->value) + 8;
        if (trials && e->trials)
            bytes += strlen(e->trials) + 4;
        if (notes && e->note)
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
            if (values && e->state == ENTRY_READY)
                at += (size_t)snprintf(text + at, bytes - at, "%s = %s\n", e->key, e->value);
            if (trials && e->trials && e->state == ENTRY_READY)
                at += (size_t)snprintf(text + at, bytes - at, "# %s\n", e->trials);
        }
    }
    int ready = 0;
    for (int i = 0; i < n; i++)
        ready += order[i]->state == ENTRY_READY;
    if (count)
        *count = ready;
    free(order);
    pthread_mutex_unlock(&c->lock);
    return text;
}

void st_choices_counts(const st_choices *cc, int *measured, int *given, int *unused)
{
    st_choices *c = (st_choices *)cc;
    pthread_mutex_lock(&c->lock);
    *measured = *given = *unused = 0;
    for (int i = 0; i < c->n; i++)
        if (c->e[i].state == ENTRY_READY) {
            if (c->e[i].measured)
                (*measured)++;
            else if (c->e[i].used)
                (*given)++;
            else
                (*unused)++;
        }
    pthread_mutex_unlock(&c->lock);
}

void st_choices_origin(st_choices *c, const char *key, char *buf, size_t size)
{
    pthread_mutex_lock(&c->lock);
    const choice_entry *e = find(c, key);
    snprintf(buf, size, "%s", e && !e->measured ? e->origin : "");
    pthread_mutex_unlock(&c->lock);
}
