/* Kernel choices: which implementation a backend runs for each kernel of a
 * network, keyed by a text the backend makes from the kernel's name and
 * shape (the layer, the samples per call, the tensor sizes, the passes).
 *
 * One table per process, shared by its workers. A backend asks the table
 * for a kernel's key when it creates the kernel: a choice already there
 * (made by another worker of the same shape, read from a choice file, from
 * the snapshot being resumed, from rank 0 or from the choice cache) is used
 * as it is; otherwise the worker claims the key, measures its candidates
 * and records the fastest, while workers asking for the same key wait for
 * it. So every worker of a shape runs the same implementation, and a run
 * given the same table (the file --save-kernel-choices wrote, a snapshot's,
 * the cache's) makes the same choices: the only thing measurement changes
 * between two runs is the table.
 *
 * Where a choice comes from decides which wins (st_choice_source): a file,
 * a snapshot or rank 0 give choices that must agree with each other; the
 * cache's give way to all of them.
 *
 * Text form, one choice per line: "KEY = VALUE"; lines starting with '#'
 * are comments (a measured choice is followed by one with its trials). The
 * VALUE's syntax is the backend's (st_choice_syntax), checked for every
 * line when it is read, whether or not a kernel asks for its key. */
#ifndef ST_CHOICES_H
#define ST_CHOICES_H

#include <stddef.h>

#include "base/status.h"

#define ST_CHOICE_MAX 256 /* bytes of a key or a value, NUL included */

typedef struct st_choices st_choices;

typedef enum st_choice_get {
    ST_CHOICE_FOUND,  /* value holds the choice */
    ST_CHOICE_CLAIMED /* absent: the caller measures, then st_choices_record */
} st_choice_get;

/* Where a choice came from, for its precedence and the log. */
typedef enum st_choice_source {
    ST_CHOICE_MEASURED, /* measured in this process */
    ST_CHOICE_FILE,     /* --kernel-choices FILE */
    ST_CHOICE_SNAPSHOT, /* the snapshot resumed */
    ST_CHOICE_RANK0,    /* multi-node: rank 0's, sent to the other ranks */
    ST_CHOICE_CACHE,    /* the choice cache (choice_cache.h): below every other source */
    ST_CHOICE_SOURCES
} st_choice_source;

/* Whether value has the syntax of one of the backend's choices; if not, 0
 * and what was expected in why [size]. */
typedef int (*st_choice_syntax)(const char *value, char *why, size_t size);

/* syntax: the backend's (NULL: any non-empty value). */
st_status st_choices_create(st_choices **out, st_choice_syntax syntax, st_error *err);
void st_choices_free(st_choices *c);

/* The choice for key in value [size], waiting while another worker
 * measures it; or ST_CHOICE_CLAIMED, and the caller must record it (or
 * st_choices_abandon it on failure, so that a waiting worker claims it). */
st_choice_get st_choices_get(st_choices *c, const char *key, char *value, size_t size);

/* The claimed key's choice, and the trials that made it (one line, or
 * NULL) for the log and the comment in the text. */
void st_choices_record(st_choices *c, const char *key, const char *value, const char *trials);

/* The claimed key's measurement is twin's: twin is a text of everything
 * the backend's measurement of key reads, less the kernel's name (so two
 * layers of one shape, with the same layouts at their edges, in the same
 * precision, have one twin). When another key of this table has that twin
 * and its choice was measured here (waiting while it is measured), that
 * choice goes to value [size] and is key's, recorded with what it came
 * from, and 1 is returned: the caller builds it without measuring. Else
 * key is twin's measurement, 0 is returned, and the caller measures and
 * records (or abandons). */
int st_choices_twin(st_choices *c, const char *key, const char *twin, char *value, size_t size);

/* The claimed key stays without a choice. */
void st_choices_abandon(st_choices *c, const char *key);

/* A choice that was given (not measured here) cannot be used on this
 * machine (why: what is missing): it is dropped with a note, and the
 * caller asks again (and measures). */
void st_choices_reject(st_choices *c, const char *key, const char *value, const char *why);

/* Add the choices of text [len] (the text form; origin names it in
 * messages: the file, the snapshot) from source to the table. Every line
 * is checked, its value's syntax included; a malformed one (a NUL byte in
 * it, no " = ", too long, a value of the wrong syntax, a second choice for
 * a key that differs from the first) is ST_EINPUT naming origin:line and
 * what was expected. A key the cache gave takes the text's choice. */
st_status st_choices_parse(st_choices *c, const char *text, size_t len, const char *origin,
                           st_choice_source source, st_error *err);

/* One line of the text form (line [len], no newline), trimmed and split
 * into key and value [ST_CHOICE_MAX each], the value's syntax checked;
 * ST_EINPUT with what was expected (no origin: the caller adds it). */
st_status st_choices_split(const st_choices *c, const char *line, size_t len, char *key,
                           char *value, st_error *err);

/* One choice from source (origin, "FILE:LINE", for messages), with
 * st_choices_parse's precedence: from the cache, it is dropped silently
 * when the key has a choice already; from elsewhere, it replaces the
 * cache's, and differing from another source's is ST_EINPUT. The value is
 * not checked here (st_choices_split does). */
st_status st_choices_add(st_choices *c, const char *key, const char *value, const char *origin,
                         st_choice_source source, st_error *err);

/* What st_choices_text lists. */
enum {
    ST_CHOICES_VALUES = 1,   /* the "KEY = VALUE" lines of the run: those a kernel took or
                                this process measured, and those a file, a snapshot or rank 0
                                gave (the cache's that no kernel took are left out) */
    ST_CHOICES_TRIALS = 2,   /* after each measured one, "# " and its trials */
    ST_CHOICES_NOTES = 4,    /* the given choices rejected here: "# " and why */
    ST_CHOICES_MEASURED = 8, /* with VALUES: only the choices measured in this process */
    ST_CHOICES_ORIGINS = 16, /* after each value, "# from " and where: "measured here", or
                                its source and FILE:LINE */
};

/* The table in text form, ordered by key (layers in their order), with
 * what `what` asks for; malloc'd, NULL when out of memory. *count (if not
 * NULL) gets the number of choices listed. */
char *st_choices_text(const st_choices *c, int what, int *count);

/* What the kernels took, by source. */
typedef struct st_choice_counts {
    int taken[ST_CHOICE_SOURCES]; /* choices a kernel took (measured: every one measured) */
    int twins;                    /* of taken[ST_CHOICE_MEASURED]: a twin's (st_choices_twin) */
    int unused;                   /* given by a file, a snapshot or rank 0, taken by none */
} st_choice_counts;

void st_choices_counts(const st_choices *c, st_choice_counts *n);

/* Where key's given choice came from ("FILE:LINE"), into buf [size]; ""
 * when it was measured here or is unknown. */
void st_choices_origin(st_choices *c, const char *key, char *buf, size_t size);

#endif
