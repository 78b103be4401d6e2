/* The usable core count and the CPU's name; see cores.h. */
#include "base/cores.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int st_usable_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return st_online_cores();
}

int st_online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void st_cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon)
            continue;
        char *name = colon + 1 + strspn(colon + 1, " \t");
        name[strcspn(name, "\n")] = '\0';
        if (*name)
            snprintf(buf, size, "%s", name);
        break;
    }
    fclose(f);
}
