/* How much more memory this process may take, from what the kernel says:
 * MemAvailable of /proc/meminfo (memory that can be handed out without
 * swapping), and the room left under the memory limit of the process's
 * cgroup. The smaller of the two is the room.
 *
 * cgroup v2: memory.max - memory.current of the cgroup /proc/self/cgroup
 * names ("0::PATH") and of each ancestor that has a limit, the tightest
 * winning ("max" is no limit). v1, when no v2 limit applies: the same with
 * memory.limit_in_bytes - memory.usage_in_bytes of the memory hierarchy's
 * cgroup (its default, a number near 2^63, is no limit). The cgroup file
 * systems are found in /proc/self/mountinfo (at /sys/fs/cgroup and
 * /sys/fs/cgroup/memory when it lists none).
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
} st_memlimit;

/* Read the limits under root ("" for this machine's files). */
void st_memlimit_read(const char *root, st_memlimit *m);

/* The room: the smaller of MemAvailable and the cgroup's limit - usage,
 * ST_MEMLIMIT_NONE when neither is known; which one it is goes to what
 * [size] ("MemAvailable in /proc/meminfo", "the cgroup v2 limit of
 * /sys/fs/cgroup/a: memory.max 2048.0 MB, memory.current 1024.0 MB", or
 * "no limit known"). */
size_t st_memlimit_room(const st_memlimit *m, char *what, size_t size);

#endif
