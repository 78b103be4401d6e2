/* Kernel choices: which implementation a backend runs for each kernel of a
 * network, keyed by a text the backend makes from the kernel's name and
 * shape (the layer, the samples per call, the tensor sizes, the passes).
 *
 * One table per process, shared by its workers. A backend asks the table
 * for a kernel's key when it creates the kernel: a choice already there
 * (made by another worker of the same shape, read from a choice file or
 * from the snapshot being resumed) is used as it is; otherwise the worker
 * claims the key, measures its candidates and records the fastest, while
 * workers asking for the same key wait for it. So every worker of a shape
 * runs the same implementation, and a run given the same table (the file
 * --save-kernel-choices wrote, or a snapshot's) makes the same choices: the
 * only thing measurement changes between two runs is the table.
 *
 * Text form, one choice per line: "KEY = VALUE"; lines starting with '#'
 * are comments (a measured choice is followed by one with its trials). */
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

st_status st_choices_create(st_choices **out, st_error *err);
void st_choices_free(st_choices *c);

/* The choice for key in value [size], waiting while another worker
 * measures it; or ST_CHOICE_CLAIMED, and the caller must record it (or
 * st_choices_abandon it on failure, so that a waiting worker claims it). */
st_choice_get st_choices_get(st_choices *c, const char *key, char *value, size_t size);

/* The claimed key's choice, and the trials that made it (one line, or
 * NULL) for the log and the comment in the text. */
void st_choices_record(st_choices *c, const char *key, const char *value, const char *trials);

/* The claimed key stays without a choice. */
void st_choices_abandon(st_choices *c, const char *key);

/* A choice that was given (not measured here) cannot be used on this
 * machine (why: what is missing): it is dropped with a note, and the
 * caller asks again (and measures). */
void st_choices_reject(st_choices *c, const char *key, const char *value, const char *why);

/* Add the choices of text (the text form; origin names it in messages:
 * the file, or the snapshot) to the table; a malformed line is ST_EINPUT
 * naming origin:line and what was expected. */
st_status st_choices_parse(st_choices *c, const char *text, const char *origin, st_error *err);

/* What st_choices_text lists. */
enum {
    ST_CHOICES_VALUES = 1, /* the "KEY = VALUE" lines */
    ST_CHOICES_TRIALS = 2, /* after each measured one, "# " and its trials */
    ST_CHOICES_NOTES = 4,  /* the given choices rejected here: "# " and why */
};

/* The table in text form, ordered by key (layers in their order), with
 * what `what` asks for; malloc'd, NULL when out of memory. *count (if not
 * NULL) gets the number of choices. */
char *st_choices_text(const st_choices *c, int what, int *count);

/* Counts of the choices measured here, given (parsed) and used by a
 * kernel, and given but asked for by none (unused). */
void st_choices_counts(const st_choices *c, int *measured, int *given, int *unused);

/* Where key's given choice came from ("FILE:LINE"), into buf [size]; ""
 * when it was measured here or is unknown. */
void st_choices_origin(st_choices *c, const char *key, char *buf, size_t size);

#endif
