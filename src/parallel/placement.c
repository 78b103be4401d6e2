/* The placement of a run's threads on the node; see placement.h. */
#include "parallel/placement.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/memory.h"

const char *const st_bind_names[] = {"auto", "cores", "none", NULL};

void st_placement_free(st_placement *p)
{
    free(p->pus);
    free(p->numa);
    free(p->free_pus);
    memset(p, 0, sizeof *p);
}

static int int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Append " 0-3,8" style ranges of the n values (in sorted order) to buf. */
static void append_list(char *buf, size_t size, const int *values, int n)
{
    int *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return;
    memcpy(v, values, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, int_cmp);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && v[j + 1] <= v[j] + 1)
            j++;
        size_t len = strlen(buf);
        if (j > i)
            snprintf(buf + len, size - len, "%s%d-%d", i ? "," : "", v[i], v[j]);
        else
            snprintf(buf + len, size - len, "%s%d", i ? "," : "", v[i]);
        i = j + 1;
    }
    free(v);
}

/* The workers' cores, one PU each, from core c0 on: a worker whose intra
 * cores would straddle two sockets starts on the next one when the cores
 * after it still hold every worker left. socket [w]: worker w's. */
static void place_on_cores(const st_topology *t, int c0, int c1, st_placement *p, int *socket,
                           unsigned char *used)
{
    int cur = c0, intra = p->intra;
    for (int w = 0; w < p->workers; w++) {
        int end = cur;
        while (end < c1 && t->core_socket[end] == t->core_socket[cur])
            end++;
        if (end - cur < intra && c1 - end >= (p->workers - w) * intra)
            cur = end;
        socket[w] = t->core_socket[cur];
        p->numa[w] = t->core_numa[cur];
        for (int j = 0; j < intra; j++, cur++) {
            p->pus[w * intra + j] = t->pu_os[t->core_first_pu[cur]];
            used[cur] = 1;
        }
    }
}

/* More threads than cores (--bind cores): the range's PUs in turn. */
static void place_round_robin(const st_topology *t, int c0, int c1, st_placement *p,
                              int *socket)
{
    int first = t->core_first_pu[c0];
    int n = t->core_first_pu[c1 - 1] + t->core_pus[c1 - 1] - first;
    for (int k = 0; k < p->workers * p->intra; k++)
        p->pus[k] = t->pu_os[first + k % n];
    for (int w = 0; w < p->workers; w++) {
        int core = t->pu_core[first + (w * p->intra) % n];
        socket[w] = t->core_socket[core];
        p->numa[w] = t->core_numa[core];
    }
}

/* "workers 0-11 on socket 0 (cpus 0-11), ...; prefetch and scheduler on
 * cpus 24-25": consecutive workers on one socket together. */
static void describe(st_placement *p, const int *socket, int threads, int cores)
{
    char *b = p->text;
    size_t size = sizeof p->text;
    snprintf(b, size, "bind: ");
    for (int w = 0; w < p->workers;) {
        int v = w;
        while (v + 1 < p->workers && socket[v + 1] == socket[w])
            v++;
        size_t len = strlen(b);
        snprintf(b + len, size - len, "%sworker%s %d", w ? ", " : "", v > w ? "s" : "", w);
        len = strlen(b);
        if (v > w)
            snprintf(b + len, size - len, "-%d", v);
        len = strlen(b);
        if (p->intra > 1)
            snprintf(b + len, size - len, " x %d threads", p->intra);
        len = strlen(b);
        int n = (v - w + 1) * p->intra;
        snprintf(b + len, size - len, " on socket %d (cpu%s ", socket[w], n > 1 ? "s" : "");
        append_list(b, size, p->pus + w * p->intra, n);
        len = strlen(b);
        snprintf(b + len, size - len, ")");
        w = v + 1;
    }
    size_t len = strlen(b);
    if (threads > cores)
        snprintf(b + len, size - len, "; %d threads take turns on %d core%s", threads, cores,
                 cores > 1 ? "s" : "");
    else if (p->n_free) {
        snprintf(b + len, size - len, "; prefetch and scheduler on cpu%s ",
                 p->n_free > 1 ? "s" : "");
        append_list(b, size, p->free_pus, p->n_free);
    }
}

/* The PUs of the cores in [c0, c1) no worker has. */
static st_status take_free(const st_topology *t, int c0, int c1, const unsigned char *used,
                           st_placement *p, st_error *err)
{
    int n = 0;
    for (int c = c0; c < c1; c++)
        n += used[c] ? 0 : t->core_pus[c];
    if (!n)
        return ST_OK;
    p->free_pus = st_calloc((size_t)n, sizeof *p->free_pus, "placement", err);
    if (!p->free_pus)
        return ST_ENOMEM;
    for (int c = c0; c < c1; c++)
        for (int k = 0; !used[c] && k < t->core_pus[c]; k++)
            p->free_pus[p->n_free++] = t->pu_os[t->core_first_pu[c] + k];
    return ST_OK;
}

st_status st_place(const st_topology *t, st_bind mode, int workers, int intra, int share,
                   int shares, st_placement *p, st_error *err)
{
    memset(p, 0, sizeof *p);
    p->workers = workers;
    p->intra = intra;
    if (workers < 1 || intra < 1 || shares < 1 || share < 0 || share >= shares)
        return st_fail(err, ST_EINTERNAL, "placement of %d x %d threads, share %d of %d",
                       workers, intra, share, shares);
    if (mode == ST_BIND_NONE) { /* t may be empty: --bind none loads no topology */
        snprintf(p->text, sizeof p->text, "bind: none (--bind none): the OS places the "
                 "threads");
        return ST_OK;
    }
    int c0 = (int)((long)share * t->n_cores / shares);
    int c1 = (int)((long)(share + 1) * t->n_cores / shares);
    if (c1 == c0) { /* more shares than cores: a core each, in turn */
        c0 = share % t->n_cores;
        c1 = c0 + 1;
    }
    int threads = workers * intra, cores = c1 - c0;
    if (mode == ST_BIND_AUTO && threads > cores) {
        snprintf(p->text, sizeof p->text, "bind: none: %d threads on %d core%s (--bind "
                 "cores pins them anyway, in turns)", threads, cores, cores > 1 ? "s" : "");
        return ST_OK;
    }
    int *socket = calloc((size_t)workers, sizeof *socket);
    unsigned char *used = calloc((size_t)t->n_cores, 1);
    p->pus = st_calloc((size_t)threads, sizeof *p->pus, "placement", err);
    p->numa = st_calloc((size_t)workers, sizeof *p->numa, "placement", err);
    st_status st = ST_OK;
    if (!socket || !used || !p->pus || !p->numa)
        st = st_fail(err, ST_ENOMEM, "out of memory for the placement");
    if (st == ST_OK && threads <= cores) {
        place_on_cores(t, c0, c1, p, socket, used);
        st = take_free(t, c0, c1, used, p, err);
    } else if (st == ST_OK) {
        place_round_robin(t, c0, c1, p, socket);
    }
    if (st == ST_OK) {
        p->bound = 1;
        describe(p, socket, threads, cores);
    }
    free(socket);
    free(used);
    if (st != ST_OK)
        st_placement_free(p);
    return st;
}

st_status st_bind_self(const int *pus, int n, st_error *err)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < n; i++)
        if (pus[i] >= 0 && pus[i] < CPU_SETSIZE)
            CPU_SET(pus[i], &set);
    int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (e != 0)
        return st_fail(err, ST_EIO, "cannot pin a thread to cpu %d%s: %s", n ? pus[0] : -1,
                       n > 1 ? " and others" : "", strerror(e));
    return ST_OK;
}

void st_affinity_save(st_affinity *a)
{
    cpu_set_t set;
    _Static_assert(sizeof set <= sizeof a->mask, "st_affinity holds a cpu_set_t");
    a->saved = pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0;
    if (a->saved)
        memcpy(a->mask, &set, sizeof set);
}

void st_affinity_restore(st_affinity *a)
{
    if (!a->saved)
        return;
    cpu_set_t set;
    memcpy(&set, a->mask, sizeof set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    a->saved = 0;
}

void st_placement_numa_need(const st_topology *t, const st_placement *p, double shared,
                            double per_worker, double *need)
{
    for (int k = 0; k < t->n_numa; k++)
        need[k] = 0.0;
    for (int w = 0; p->bound && w < p->workers; w++)
        need[p->numa[w]] += shared / p->workers + per_worker;
}
