/* How much more memory this process may take, from what the kernel says:
 * MemAvailable of /proc/meminfo (memory that can be handed out without
 * swapping), the room left under the memory limit of the process's
 * cgroup, and under its own limits (below). The smallest is the room.
 *
 * cgroup v2: memory.max - memory.current of the cgroup /proc/self/cgroup
 * names ("0::PATH") and of each ancestor that has a limit, the tightest
 * winning ("max" is no limit). v1, when no v2 limit applies: the same with
 * memory.limit_in_bytes - memory.usage_in_bytes of the memory hierarchy's
 * cgroup (its default, a number near 2^63, is no limit). The cgroup file
 * systems are found in /proc/self/mountinfo (at /sys/fs/cgroup and
 * /sys/fs/cgroup/memory when it lists none).
 *
 * The process's own limits on its address space (ulimit -v, RLIMIT_AS)
 * and data (ulimit -d, RLIMIT_DATA), their soft values from
 * /proc/self/limits, leave limit - VmSize and limit - VmData of
 * /proc/self/status: an allocation past them fails whatever the machine
 * has free. They bound virtual memory, which is more than the resident
 * memory the estimate counts (thread stacks and malloc's arenas are
 * reserved whole), so a run close to them may still fail to allocate.
 *
 * Every file is read under a root directory ("" for this machine), so that
 * tests can point the reader at hand-written fixtures (ROOT/proc/meminfo,
 * ROOT/proc/self/cgroup, ROOT/sys/fs/cgroup/...). A file that is missing or
 * unreadable is no limit: the process may only be refused for what is
 * known. */
#ifndef ST_MEMLIMIT_H
#define ST_MEMLIMIT_H

#include <stddef.h>

#define ST_MEMLIMIT_NONE ((size_t)-1) /* nothing known: no limit */

typedef struct st_memlimit {
    size_t available;     /* MemAvailable in bytes, or ST_MEMLIMIT_NONE */
    int cgroup_version;   /* 2 or 1: the version of the tightest cgroup limit; 0: none */
    size_t cgroup_limit;  /* that cgroup's memory.max (memory.limit_in_bytes), bytes */
    size_t cgroup_usage;  /* its memory.current (memory.usage_in_bytes), bytes */
    char cgroup_dir[512]; /* its directory, under the root given */
    size_t as_limit;      /* the soft address-space limit (ulimit -v, RLIMIT_AS), bytes,
                             or ST_MEMLIMIT_NONE */
    size_t as_used;       /* VmSize, bytes (read when a limit above is set) */
    size_t data_limit;    /* the soft data-size limit (ulimit -d, RLIMIT_DATA), or NONE */
    size_t data_used;     /* VmData, bytes */
} st_memlimit;

/* Read the limits under root ("" for this machine's files). */
void st_memlimit_read(const char *root, st_memlimit *m);

/* The room: the smallest of MemAvailable, the cgroup's limit - usage and
 * the process's address-space and data limits less their use,
 * ST_MEMLIMIT_NONE when none is known; which one it is goes to what
 * [size] ("MemAvailable in /proc/meminfo", "the cgroup v2 limit of
 * /sys/fs/cgroup/a: memory.max 2048.0 MB, memory.current 1024.0 MB", or
 * "no limit known"). */
size_t st_memlimit_room(const st_memlimit *m, char *what, size_t size);

#endif
