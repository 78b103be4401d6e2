/* The recorder of --trace: tracks of events, one per thread, and their
 * JSON in the Chrome trace event format; see trace.h. */
#include "base/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

/* Tracks a recorder holds at most: the workers (-t at most 4096), the
 * scheduler, the prefetcher and the communication thread. */
#define MAX_TRACKS 4200

struct st_trace_track {
    st_trace *owner;
    char name[48];
    int tid;
    long first, last;       /* the window, the owner's */
    size_t n, cap;
    long dropped;
    st_trace_event *events; /* [cap] */
};

struct st_trace {
    long first, last;
    double origin;
    int n_tracks;
    st_trace_track **tracks; /* [MAX_TRACKS] */
};

st_status st_trace_create(st_trace **out, long first, long last, st_error *err)
{
    *out = NULL;
    st_trace *t = st_calloc(1, sizeof *t, "the trace", err);
    st_trace_track **tracks = st_calloc(MAX_TRACKS, sizeof *tracks, "the trace", err);
    if (!t || !tracks) {
        free(t);
        free(tracks);
        return ST_ENOMEM;
    }
    t->first = first;
    t->last = last;
    t->origin = st_now();
    t->tracks = tracks;
    *out = t;
    return ST_OK;
}

void st_trace_free(st_trace *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_tracks; i++) {
        free(t->tracks[i]->events);
        free(t->tracks[i]);
    }
    free(t->tracks);
    free(t);
}

void st_trace_set_origin(st_trace *t, double origin)
{
    if (t)
        t->origin = origin;
}

/* Events of a track: per_iteration for each iteration of the window, and
 * extra. */
static size_t track_events(long iterations, size_t per_iteration, size_t extra)
{
    return (size_t)iterations * per_iteration + extra;
}

/* An event's JSON text at most: put_event's fields, its names and details
 * of a few dozen bytes, ST_TRACE_ARGS numbers of 25 characters. */
#define EVENT_JSON_MAX (256 + 64 * ST_TRACE_ARGS)

size_t st_trace_track_bytes(long iterations, size_t per_iteration, size_t extra)
{
    return track_events(iterations, per_iteration, extra) *
               (sizeof(st_trace_event) + EVENT_JSON_MAX) +
           sizeof(st_trace_track);
}

st_status st_trace_track_add(st_trace *t, const char *name, size_t per_iteration, size_t extra,
                             st_trace_track **out, st_error *err)
{
    *out = NULL;
    if (!t)
        return ST_OK;
    if (t->n_tracks == MAX_TRACKS)
        return st_fail(err, ST_EINTERNAL, "--trace: more than %d threads to record",
                       MAX_TRACKS);
    st_trace_track *k = st_calloc(1, sizeof *k, "a trace track", err);
    size_t cap = track_events(t->last - t->first + 1, per_iteration, extra);
    st_trace_event *events = k ? st_calloc(cap, sizeof *events, "a trace track", err) : NULL;
    if (!events) {
        free(k);
        return ST_ENOMEM;
    }
    k->owner = t;
    snprintf(k->name, sizeof k->name, "%s", name);
    k->tid = t->n_tracks + 1;
    k->first = t->first;
    k->last = t->last;
    k->cap = cap;
    k->events = events;
    t->tracks[t->n_tracks++] = k;
    *out = k;
    return ST_OK;
}

st_trace_track *st_trace_at(st_trace_track *k, long it)
{
    return k && it >= k->first && it <= k->last ? k : NULL;
}

void st_trace_add(st_trace_track *k, const st_trace_event *e)
{
    if (k->n == k->cap) {
        k->dropped++;
        return;
    }
    k->events[k->n++] = *e;
}

void st_trace_span(st_trace_track *k, const char *cat, const char *name, long it, double t0,
                   double t1)
{
    st_trace_event e = {.name = name, .index = -1, .cat = cat, .iteration = it, .t0 = t0,
                        .t1 = t1};
    st_trace_add(k, &e);
}

long st_trace_dropped(const st_trace *t)
{
    long n = 0;
    for (int i = 0; t && i < t->n_tracks; i++)
        n += t->tracks[i]->dropped;
    return n;
}

void st_trace_put_string(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* Microseconds with three decimals, from nanoseconds: whole numbers
 * rounded once, so that an event inside another stays inside it. */
static void put_us(FILE *f, long long ns)
{
    long long a = ns < 0 ? -ns : ns;
    fprintf(f, "%s%lld.%03lld", ns < 0 ? "-" : "", a / 1000, a % 1000);
}

static long long to_ns(const st_trace *t, double seconds)
{
    return llround((seconds - t->origin) * 1e9);
}

static void put_event(FILE *f, const st_trace *t, int pid, int tid, const st_trace_event *e)
{
    fputs(",\n{\"name\":\"", f);
    st_trace_put_string(f, e->name);
    if (e->index >= 0)
        fprintf(f, " %d", e->index);
    if (e->detail) {
        fputc(' ', f);
        st_trace_put_string(f, e->detail);
    }
    fprintf(f, "\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", e->cat, pid,
            tid);
    long long ns0 = to_ns(t, e->t0), ns1 = to_ns(t, e->t1);
    put_us(f, ns0);
    fputs(",\"dur\":", f);
    put_us(f, ns1 > ns0 ? ns1 - ns0 : 0);
    fputs(",\"args\":{", f);
    const char *sep = "";
    if (e->iteration >= 0) {
        fprintf(f, "\"iteration\":%ld", e->iteration);
        sep = ",";
    }
    if (e->text_key && e->text) {
        fprintf(f, "%s\"%s\":\"", sep, e->text_key);
        st_trace_put_string(f, e->text);
        fputc('"', f);
        sep = ",";
    }
    for (int a = 0; a < ST_TRACE_ARGS && e->key[a]; a++) {
        fprintf(f, "%s\"%s\":%.17g", sep, e->key[a], isfinite(e->value[a]) ? e->value[a] : 0.0);
        sep = ",";
    }
    fputs("}}", f);
}

st_status st_trace_json(const st_trace *t, int pid, const char *process_name, char **text,
                        size_t *len, st_error *err)
{
    *text = NULL;
    *len = 0;
    FILE *f = open_memstream(text, len);
    if (!f)
        return st_fail(err, ST_ENOMEM, "out of memory writing the trace");
    fprintf(f, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"name\":\"", pid);
    st_trace_put_string(f, process_name);
    fprintf(f, "\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"sort_index\":%d}}", pid, pid);
    for (int i = 0; i < t->n_tracks; i++) {
        const st_trace_track *k = t->tracks[i];
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"name\":\"", pid, k->tid);
        st_trace_put_string(f, k->name);
        fprintf(f, "\"}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"sort_index\":%d}}", pid, k->tid, k->tid);
    }
    for (int i = 0; i < t->n_tracks; i++)
        for (size_t j = 0; j < t->tracks[i]->n; j++)
            put_event(f, t, pid, t->tracks[i]->tid, &t->tracks[i]->events[j]);
    if (fclose(f) != 0 || !*text) {
        free(*text);
        *text = NULL;
        return st_fail(err, ST_ENOMEM, "out of memory writing the trace");
    }
    return ST_OK;
}
