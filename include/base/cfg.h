/* The Darknet-format .cfg reader: sections in brackets, key=value lines,
 * '#' and ';' comments (whole-line, or after whitespace at the end of a
 * line), blank lines. It knows nothing about layers: it stores sections and
 * options with their line numbers, and its typed getters turn a malformed or
 * out-of-range value into "file:line: [section] key=value: what was expected".
 * Every getter marks the option as used; st_cfg_finish_section then rejects
 * keys nobody read (unless the caller lists them as known-but-ignored, which
 * gives one warning per key). */
#ifndef ST_CFG_H
#define ST_CFG_H

#include "base/log.h"
#include "base/status.h"

typedef struct st_cfg_option {
    char *key;
    char *val;
    int line;
    int used;
} st_cfg_option;

typedef struct st_cfg_section {
    char *type; /* text between the brackets */
    int line;   /* line of the header */
    st_cfg_option *opts;
    int n_opts;
} st_cfg_section;

typedef struct st_cfg {
    char *path; /* as given, used in every message */
    st_cfg_section *secs;
    int n_secs;
    char **warned; /* "type.key" strings already warned about */
    int n_warned;
} st_cfg;

/* Read and parse a file. On failure cfg is left empty (safe to free). */
st_status st_cfg_load(st_cfg *cfg, const char *path, st_error *err);

/* Read a key=value file without sections (Darknet's .data files, kind
 * "data"; plan's "net-params"): all its options are in secs[0], of type
 * kind; messages name it a "KIND file". */
st_status st_cfg_load_flat(st_cfg *cfg, const char *path, const char *kind, st_error *err);

/* Parse text of len bytes; path is only used in messages. */
st_status st_cfg_parse(st_cfg *cfg, const char *path, const char *text, size_t len,
                       st_error *err);

void st_cfg_free(st_cfg *cfg);

/* Build a cfg in memory (a network translated from another format): a
 * section at the end, and an option at the end of the last section (a key
 * it already has is an error, as in a file). line is what messages cite. */
st_status st_cfg_add_section(st_cfg *cfg, const char *type, int line, st_error *err);
st_status st_cfg_add_option(st_cfg *cfg, const char *key, const char *val, int line,
                            st_error *err);

/* The option, or NULL; marks it used. */
st_cfg_option *st_cfg_find(st_cfg_section *sec, const char *key);

/* Typed getters: absent key -> *out = def and ST_OK; malformed or outside
 * [lo, hi] -> ST_EINPUT with the option's file:line. */
st_status st_cfg_int(const st_cfg *cfg, st_cfg_section *sec, const char *key, int def,
                     int lo, int hi, int *out, st_error *err);
st_status st_cfg_float(const st_cfg *cfg, st_cfg_section *sec, const char *key, float def,
                       float lo, float hi, float *out, st_error *err);
void st_cfg_string(st_cfg_section *sec, const char *key, const char *def, const char **out);

/* The length of the decimal number s starts with: an optional sign,
 * digits with an optional point (at least one digit), an optional
 * exponent; 0 when it does not start with one. strtod and strtof also
 * take hexadecimal ("0x10"), "inf" and "nan", which no cfg key and no
 * option accepts: integers are decimal, and so are reals. */
size_t st_decimal_length(const char *s);

/* Comma-separated lists; more than max entries is an error. */
st_status st_cfg_int_list(const st_cfg *cfg, st_cfg_section *sec, const char *key, int *out,
                          int max, int *count, st_error *err);
st_status st_cfg_float_list(const st_cfg *cfg, st_cfg_section *sec, const char *key,
                            float *out, int max, int *count, st_error *err);

/* One of a NULL-terminated list of names; *out is its index. */
st_status st_cfg_enum(const st_cfg *cfg, st_cfg_section *sec, const char *key,
                      const char *const *names, int def, int *out, st_error *err);

/* Every option not read yet: a warning if it is listed in ignored
 * (NULL-terminated, may be NULL), else an error. The warning is given once
 * per kind and key; kind is the section's canonical type, so [conv] and
 * [convolutional] count as one. */
st_status st_cfg_finish_section(st_cfg *cfg, st_cfg_section *sec, const char *kind,
                                const char *const *ignored, const st_log *log, st_error *err);

/* Where an option stands, for messages built by callers: "file:line". */
const char *st_cfg_where(const st_cfg *cfg, int line, char *buf, size_t size);

/* The cfg's settings as canonical text: one line "SECTION KEY=VALUE" per
 * option (SECTION the section's index from 0), the keys of each section in
 * byte order, leaving out the keys of the first section listed in skip
 * (NULL-terminated, may be NULL). Two cfgs that differ only in comments,
 * blank lines, spacing or the order of keys give the same text. *text is
 * malloc'd and NUL-terminated; *len its bytes. */
st_status st_cfg_settings(const st_cfg *cfg, const char *const *skip, char **text,
                          size_t *len, st_error *err);

/* Compare this cfg's settings (skip as above) with text of len bytes from
 * st_cfg_settings of another cfg: 0 when they are the same, else 1 and the
 * first difference in msg, at this cfg's file:line: "net.cfg:7: [net]
 * momentum=0.95, but the other has momentum=0.9", "... but the other has no
 * momentum=", "net.cfg:16: [maxpool] has no stride=, but the other has
 * stride=2". other names the other cfg in the message. */
int st_cfg_settings_differ(const st_cfg *cfg, const char *const *skip, const char *text,
                           size_t len, const char *other, char *msg, size_t size);

#endif
