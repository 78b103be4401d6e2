/* How many cores this process may run on: the affinity mask when there is
 * one (taskset, cgroups, mpirun's binding), else the online cores. Sizes
 * the default worker and reader counts and tells the barrier whether its
 * threads can spin. Also the CPU's model name, which the kernel-choice
 * cache keys on. */
#ifndef ST_CORES_H
#define ST_CORES_H

#include <stddef.h>

int st_usable_cores(void);

/* The cores the machine has online, whatever this process's affinity. */
int st_online_cores(void);

/* The CPU's model name (/proc/cpuinfo's first "model name") into buf
 * [size]; "unknown" where it says none. */
void st_cpu_model(char *buf, size_t size);

#endif
