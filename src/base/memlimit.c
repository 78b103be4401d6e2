/* Reading the memory limits of /proc and the cgroup file systems; see
 * memlimit.h. */
#include "base/memlimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A v1 limit at or above this is the kernel's "unlimited" (2^63 rounded
 * down to a page). */
#define V1_UNLIMITED ((size_t)1 << 62)

static FILE *open_under(const char *root, const char *path)
{
    char full[1024];
    snprintf(full, sizeof full, "%s%s", root, path);
    return fopen(full, "r");
}

/* Up to size - 1 bytes of ROOT/path into buf, NUL-ended; 0 if unreadable. */
static int read_text(const char *root, const char *path, char *buf, size_t size)
{
    FILE *f = open_under(root, path);
    if (!f)
        return 0;
    size_t n = fread(buf, 1, size - 1, f);
    int ok = !ferror(f);
    fclose(f);
    buf[n] = '\0';
    return ok;
}

/* Whether the comma-separated list holds item. */
static int has_item(const char *list, const char *item)
{
    size_t len = strlen(item);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, item, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return 0;
}

/* A cgroup file system as mounted: the directory of the hierarchy it shows
 * (mountinfo's field 4) and where (field 5). */
typedef struct cg_mount {
    int found;
    char root[256];
    char point[256];
} cg_mount;

static void find_mounts(const char *root, cg_mount *v2, cg_mount *v1)
{
    memset(v2, 0, sizeof *v2);
    memset(v1, 0, sizeof *v1);
    FILE *f = open_under(root, "/proc/self/mountinfo");
    if (!f) {
        *v2 = (cg_mount){1, "/", "/sys/fs/cgroup"};
        *v1 = (cg_mount){1, "/", "/sys/fs/cgroup/memory"};
        return;
    }
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        /* ID PARENT MAJOR:MINOR ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER */
        char mroot[256], point[256], type[64], super[512];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %255s %255s", mroot, point) != 2 ||
            sscanf(dash + 3, "%63s %*s %511s", type, super) != 2)
            continue;
        cg_mount *m = strcmp(type, "cgroup2") == 0 ? v2
                      : strcmp(type, "cgroup") == 0 && has_item(super, "memory") ? v1 : NULL;
        if (m && !m->found) {
            m->found = 1;
            snprintf(m->root, sizeof m->root, "%s", mroot);
            snprintf(m->point, sizeof m->point, "%s", point);
        }
    }
    fclose(f);
}

/* The process's cgroup paths from /proc/self/cgroup: v2's ("0::PATH") and
 * the v1 memory hierarchy's ("N:...,memory,...:PATH"); "" when absent. */
static void find_paths(const char *root, char *v2, char *v1, size_t size)
{
    char text[8192];
    v2[0] = v1[0] = '\0';
    if (!read_text(root, "/proc/self/cgroup", text, sizeof text))
        return;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        if (strcmp(line, "0") == 0 && c1 + 1 == c2)
            snprintf(v2, size, "%s", c2 + 1);
        else if (has_item(c1 + 1, "memory"))
            snprintf(v1, size, "%s", c2 + 1);
    }
}

/* A limit or usage file of dir: its bytes, ST_MEMLIMIT_NONE for "max" or
 * the v1 default; 0 if unreadable or not a number. */
static int read_bytes(const char *root, const char *dir, const char *file, size_t *out)
{
    char path[1024], text[64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!read_text(root, path, text, sizeof text))
        return 0;
    if (strncmp(text, "max", 3) == 0) {
        *out = ST_MEMLIMIT_NONE;
        return 1;
    }
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || (*end && *end != '\n') || text[0] == '-')
        return 0;
    *out = v >= V1_UNLIMITED ? ST_MEMLIMIT_NONE : (size_t)v;
    return 1;
}

/* The tightest limit of the cgroup at path (as /proc/self/cgroup names it)
 * and its ancestors on mount m, into *lim; 0 if none has one. */
static int tightest(const char *root, const cg_mount *m, const char *path, int version,
                    st_memlimit *lim)
{
    size_t len = strlen(m->root);
    if (!m->found || !path[0])
        return 0;
    if (strcmp(m->root, "/") == 0)
        len = 0;
    else if (strncmp(path, m->root, len) != 0 || (path[len] && path[len] != '/'))
        return 0; /* the process's cgroup is outside what this mount shows */
    char dir[512];
    snprintf(dir, sizeof dir, "%s%s", m->point, strcmp(path + len, "/") == 0 ? "" : path + len);
    const char *limit_file = version == 2 ? "memory.max" : "memory.limit_in_bytes";
    const char *usage_file = version == 2 ? "memory.current" : "memory.usage_in_bytes";
    int found = 0;
    size_t best = 0;
    for (;;) {
        size_t limit, usage;
        if (read_bytes(root, dir, limit_file, &limit) && limit != ST_MEMLIMIT_NONE &&
            read_bytes(root, dir, usage_file, &usage) && usage != ST_MEMLIMIT_NONE) {
            size_t room = limit > usage ? limit - usage : 0;
            if (!found || room < best) {
                found = 1;
                best = room;
                lim->cgroup_version = version;
                lim->cgroup_limit = limit;
                lim->cgroup_usage = usage;
                snprintf(lim->cgroup_dir, sizeof lim->cgroup_dir, "%s", dir);
            }
        }
        char *slash = strrchr(dir, '/');
        if (strcmp(dir, m->point) == 0 || !slash || (size_t)(slash - dir) < strlen(m->point))
            break;
        *slash = '\0';
    }
    return found;
}

/* The soft limit named (a row of /proc/self/limits: "Max address space
 * 419430400   unlimited   bytes"): its bytes, ST_MEMLIMIT_NONE when
 * "unlimited" or not found. */
static size_t soft_limit(const char *limits, const char *name)
{
    const char *at = strstr(limits, name);
    if (!at)
        return ST_MEMLIMIT_NONE;
    at += strlen(name);
    while (*at == ' ' || *at == '\t')
        at++;
    char *end;
    unsigned long long v = strtoull(at, &end, 10);
    if (end == at || (*end != ' ' && *end != '\t'))
        return ST_MEMLIMIT_NONE; /* "unlimited" */
    return (size_t)v;
}

/* A "kB" line of /proc/self/status ("VmSize:\t  123456 kB") in bytes; 0
 * when not found. */
static size_t status_bytes(const char *status, const char *name)
{
    const char *at = strstr(status, name);
    if (!at)
        return 0;
    char *end;
    unsigned long long kb = strtoull(at + strlen(name), &end, 10);
    return end == at + strlen(name) ? 0 : (size_t)kb * 1024;
}

void st_memlimit_read(const char *root, st_memlimit *m)
{
    memset(m, 0, sizeof *m);
    m->available = ST_MEMLIMIT_NONE;
    m->as_limit = m->data_limit = ST_MEMLIMIT_NONE;
    char text[8192];
    if (read_text(root, "/proc/self/limits", text, sizeof text)) {
        m->as_limit = soft_limit(text, "Max address space");
        m->data_limit = soft_limit(text, "Max data size");
    }
    if ((m->as_limit != ST_MEMLIMIT_NONE || m->data_limit != ST_MEMLIMIT_NONE) &&
        read_text(root, "/proc/self/status", text, sizeof text)) {
        m->as_used = status_bytes(text, "VmSize:");
        m->data_used = status_bytes(text, "VmData:");
    }
    if (read_text(root, "/proc/meminfo", text, sizeof text)) {
        const char *at = strstr(text, "MemAvailable:");
        char *end;
        unsigned long long kb = at ? strtoull(at + 13, &end, 10) : 0;
        if (at && end != at + 13)
            m->available = (size_t)kb * 1024;
    }
    cg_mount v2, v1;
    char path2[256], path1[256];
    find_mounts(root, &v2, &v1);
    find_paths(root, path2, path1, sizeof path2);
    if (!tightest(root, &v2, path2, 2, m))
        tightest(root, &v1, path1, 1, m);
}

/* limit - used, 0 when used is over it, ST_MEMLIMIT_NONE without a limit. */
static size_t left_under(size_t limit, size_t used)
{
    return limit == ST_MEMLIMIT_NONE ? ST_MEMLIMIT_NONE : limit > used ? limit - used : 0;
}

size_t st_memlimit_room(const st_memlimit *m, char *what, size_t size)
{
    size_t cgroup = m->cgroup_version == 0 ? ST_MEMLIMIT_NONE
                    : m->cgroup_limit > m->cgroup_usage ? m->cgroup_limit - m->cgroup_usage : 0;
    size_t as = left_under(m->as_limit, m->as_used);
    size_t data = left_under(m->data_limit, m->data_used);
    if (cgroup == ST_MEMLIMIT_NONE && m->available == ST_MEMLIMIT_NONE &&
        as == ST_MEMLIMIT_NONE && data == ST_MEMLIMIT_NONE) {
        snprintf(what, size, "no limit known");
        return ST_MEMLIMIT_NONE;
    }
    if (as <= data && as <= cgroup && as <= m->available) {
        snprintf(what, size, "the address-space limit (ulimit -v) of %.1f MB: VmSize %.1f MB "
                 "in /proc/self/status", (double)m->as_limit / 1e6, (double)m->as_used / 1e6);
        return as;
    }
    if (data <= cgroup && data <= m->available) {
        snprintf(what, size, "the data-size limit (ulimit -d) of %.1f MB: VmData %.1f MB in "
                 "/proc/self/status", (double)m->data_limit / 1e6, (double)m->data_used / 1e6);
        return data;
    }
    if (cgroup < m->available) {
        snprintf(what, size, "the cgroup v%d limit of %s: %s %.1f MB, %s %.1f MB",
                 m->cgroup_version, m->cgroup_dir,
                 m->cgroup_version == 2 ? "memory.max" : "memory.limit_in_bytes",
                 (double)m->cgroup_limit / 1e6,
                 m->cgroup_version == 2 ? "memory.current" : "memory.usage_in_bytes",
                 (double)m->cgroup_usage / 1e6);
        return cgroup;
    }
    snprintf(what, size, "MemAvailable in /proc/meminfo");
    return m->available;
}
