/* Network lookup (netpath.h): the folders searched ($SINGLETRAIN_PATH's,
 * bounded, then the installed one beside the executable, or for a
 * executable built in the source tree the tree's data/), a name found in
 * them, the not-found message naming them and their networks, and
 * --list-networks. */
#include "netpath.h"

#include "base/strlist.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char FROM_CWD[] = "the current directory";
static const char FROM_ENV[] = "$SINGLETRAIN_PATH";
static const char FROM_INSTALLED[] = "the installed networks";
static const char FROM_SOURCE[] = "the source tree's networks";

/* The folders in lookup order: the current directory ("."), then
 * SINGLETRAIN_PATH's, then the installed one when the executable's path is
 * known. */
typedef struct netdirs {
    char env[ST_NETPATH_ENV_MAX + 1]; /* SINGLETRAIN_PATH, each ':' made a NUL */
    char installed[ST_PATH_MAX];      /* "" when /proc/self/exe cannot be read */
    const char *installed_from;       /* FROM_INSTALLED or FROM_SOURCE */
    const char *dir[ST_NETPATH_MAX_DIRS + 2];
    const char *from[ST_NETPATH_MAX_DIRS + 2]; /* FROM_* */
    int n;
} netdirs;

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* PREFIX/share/singletrain/networks, PREFIX the folder above the one that
 * holds the running executable (PREFIX/bin/singletrain), *from
 * FROM_INSTALLED; where that is no folder and PREFIX is the source tree
 * (the executable its build/singletrain: PREFIX/data/lenet.cfg and
 * PREFIX/Makefile are there), PREFIX/data, *from FROM_SOURCE; "" when
 * unknown. */
static void installed_dir(char *out, size_t size, const char **from)
{
    char exe[ST_PATH_MAX];
    out[0] = '\0';
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || n >= (ssize_t)sizeof exe - 1)
        return;
    exe[n] = '\0';
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash)
            return;
        *slash = '\0';
    }
    *from = FROM_INSTALLED;
    int len = snprintf(out, size, "%s/share/singletrain/networks", exe);
    if (len < 0 || (size_t)len >= size) {
        out[0] = '\0';
        return;
    }
    char lenet[ST_PATH_MAX], makefile[ST_PATH_MAX];
    struct stat sb;
    if (!is_dir(out) &&
        snprintf(lenet, sizeof lenet, "%s/data/lenet.cfg", exe) < (int)sizeof lenet &&
        snprintf(makefile, sizeof makefile, "%s/Makefile", exe) < (int)sizeof makefile &&
        stat(lenet, &sb) == 0 && stat(makefile, &sb) == 0 &&
        snprintf(out, size, "%s/data", exe) < (int)size)
        *from = FROM_SOURCE;
}

/* SINGLETRAIN_PATH's folders into d: at most ST_NETPATH_ENV_MAX bytes and
 * ST_NETPATH_MAX_DIRS folders, none empty; unset or "" adds none. */
static st_status read_env(netdirs *d, st_error *err)
{
    const char *v = getenv("SINGLETRAIN_PATH");
    if (!v || !*v)
        return ST_OK;
    size_t len = strlen(v);
    if (len > ST_NETPATH_ENV_MAX)
        return st_fail(err, ST_EINPUT, "environment variable SINGLETRAIN_PATH: %zu bytes, over "
                       "the limit of %d: expected at most %d folders separated by ':'", len,
                       ST_NETPATH_ENV_MAX, ST_NETPATH_MAX_DIRS);
    memcpy(d->env, v, len + 1);
    int k = 0;
    for (char *p = d->env; p; k++) {
        char *colon = strchr(p, ':');
        if (colon)
            *colon = '\0';
        if (!*p)
            return st_fail(err, ST_EINPUT, "environment variable SINGLETRAIN_PATH=%.300s: "
                           "folder %d is empty: expected folders separated by single ':' "
                           "('.' for the current directory)", v, k + 1);
        if (k == ST_NETPATH_MAX_DIRS)
            return st_fail(err, ST_EINPUT, "environment variable SINGLETRAIN_PATH: more than "
                           "%d folders, the limit: expected at most %d folders separated by "
                           "':'", ST_NETPATH_MAX_DIRS, ST_NETPATH_MAX_DIRS);
        d->dir[d->n] = p;
        d->from[d->n++] = FROM_ENV;
        p = colon ? colon + 1 : NULL;
    }
    return ST_OK;
}

static st_status netdirs_init(netdirs *d, st_error *err)
{
    d->n = 0;
    d->dir[d->n] = ".";
    d->from[d->n++] = FROM_CWD;
    st_status st = read_env(d, err);
    installed_dir(d->installed, sizeof d->installed, &d->installed_from);
    if (st == ST_OK && d->installed[0]) {
        d->dir[d->n] = d->installed;
        d->from[d->n++] = d->installed_from;
    }
    return st;
}

/* FOLDER/NAME into path [size] (NAME itself in the current directory);
 * 0 when it does not fit. */
static int join(char *path, size_t size, const netdirs *d, int i, const char *name)
{
    int len = d->from[i] == FROM_CWD ? snprintf(path, size, "%s", name)
                                     : snprintf(path, size, "%s/%s", d->dir[i], name);
    return len >= 0 && (size_t)len < size;
}

/* Folder i has NAME as a regular file (or a link to one). */
static int has_file(const netdirs *d, int i, const char *name)
{
    char path[ST_PATH_MAX];
    struct stat sb;
    return join(path, sizeof path, d, i, name) && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int network_name(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return e->d_name[0] != '.' && ((n > 4 && strcmp(e->d_name + n - 4, ".cfg") == 0) ||
                                   (n > 5 && strcmp(e->d_name + n - 5, ".onnx") == 0));
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Folder i's network files (*.cfg, *.onnx: regular files), sorted, into
 * *names (free with free_names); their count, or -1 with the reason in
 * why when the folder cannot be read. */
static int folder_networks(const netdirs *d, int i, struct dirent ***names, char *why,
                           size_t why_size)
{
    int n = scandir(d->dir[i], names, network_name, by_name);
    if (n < 0) {
        snprintf(why, why_size, "%s", errno == ENOENT ? "absent" : strerror(errno));
        *names = NULL;
        return -1;
    }
    int kept = 0;
    for (int k = 0; k < n; k++) {
        if (has_file(d, i, (*names)[k]->d_name))
            (*names)[kept++] = (*names)[k];
        else
            free((*names)[k]);
    }
    return kept;
}

static void free_names(struct dirent **names, int n)
{
    for (int k = 0; k < n; k++)
        free(names[k]);
    free(names);
}

/* The networks a message names per folder: at most this many, then a count. */
#define NAMES_SHOWN 12

/* ARG found nowhere: the folders searched in order and their networks. */
static st_status not_found(const netdirs *d, const char *arg, st_error *err)
{
    char text[900];
    size_t len = 0;
    text[0] = '\0';
    for (int i = 0; i < d->n; i++) {
        struct dirent **names;
        char why[128];
        int n = folder_networks(d, i, &names, why, sizeof why);
        st_str_appendf(text, sizeof text, &len, "%s%s (%s): ", i ? "; " : "", d->dir[i], d->from[i]);
        if (n < 0)
            st_str_appendf(text, sizeof text, &len, "%s", why);
        else if (n == 0)
            st_str_appendf(text, sizeof text, &len, "no networks");
        for (int k = 0; k < n && k < NAMES_SHOWN; k++)
            st_str_appendf(text, sizeof text, &len, "%s%s", k ? " " : "", names[k]->d_name);
        if (n > NAMES_SHOWN)
            st_str_appendf(text, sizeof text, &len, " and %d more", n - NAMES_SHOWN);
        if (n >= 0)
            free_names(names, n);
    }
    if (!d->installed[0])
        st_str_appendf(text, sizeof text, &len, "; the installed networks: unknown (/proc/self/exe "
               "cannot be read)");
    return st_fail(err, ST_EINPUT, "network %s: no such file in the folders searched, in "
                   "order: %s. Give its path, or add its folder to SINGLETRAIN_PATH "
                   "(colon-separated); singletrain --list-networks lists them", arg, text);
}

st_status st_netpath_find(st_netpath *np, const char *arg, st_error *err)
{
    np->found_in = NULL;
    struct stat sb;
    if (!*arg || strchr(arg, '/') || stat(arg, &sb) == 0) {
        if ((size_t)snprintf(np->path, sizeof np->path, "%s", arg) >= sizeof np->path)
            return st_fail(err, ST_EINPUT, "network %.200s...: a path over the limit of %d "
                           "bytes", arg, ST_PATH_MAX - 1);
        return ST_OK;
    }
    netdirs d;
    st_status st = netdirs_init(&d, err);
    for (int i = 1; st == ST_OK && i < d.n; i++)
        if (has_file(&d, i, arg) && join(np->path, sizeof np->path, &d, i, arg)) {
            np->found_in = d.from[i];
            return ST_OK;
        }
    return st == ST_OK ? not_found(&d, arg, err) : st;
}

/* The note of a network found by lookup. */
#define USING "using %s (found in %s)"

void st_netpath_note(const st_netpath *np, const st_log *log)
{
    if (np->found_in)
        st_info(log, USING, np->path, np->found_in);
}

st_status st_netpath_find_for(st_netpath *np, const char *command, const char *arg, int quiet,
                              st_error *err)
{
    st_status st = st_netpath_find(np, arg, err);
    if (st == ST_OK && np->found_in && !quiet)
        fprintf(stderr, "singletrain %s: " USING "\n", command, np->path, np->found_in);
    return st;
}

/* The first folder before i that has NAME; -1 when none. */
static int shadowing(const netdirs *d, int i, const char *name)
{
    for (int j = 0; j < i; j++)
        if (has_file(d, j, name))
            return j;
    return -1;
}

st_status st_netpath_list(FILE *out, st_error *err)
{
    netdirs d;
    st_status st = netdirs_init(&d, err);
    if (st != ST_OK)
        return st;
    for (int i = 0; i < d.n; i++) {
        struct dirent **names;
        char why[128], by[ST_PATH_MAX];
        int n = folder_networks(&d, i, &names, why, sizeof why);
        if (n < 0 && d.from[i] != FROM_CWD)
            fprintf(stderr, "singletrain: %s (%s): %s\n", d.dir[i], d.from[i], why);
        for (int k = 0; k < n; k++) {
            const char *name = names[k]->d_name;
            int j = shadowing(&d, i, name);
            fprintf(out, "%-24s %s  (%s", name, d.dir[i], d.from[i]);
            if (j >= 0 && join(by, sizeof by, &d, j, name))
                fprintf(out, "; shadowed: %s is %s)\n", name, by);
            else
                fputs(")\n", out);
        }
        if (n >= 0)
            free_names(names, n);
    }
    if (!d.installed[0])
        fprintf(stderr, "singletrain: the installed networks: unknown (/proc/self/exe cannot "
                "be read)\n");
    return ST_OK;
}
