/* How many cores this process may run on: the affinity mask when there is
 * one (taskset, cgroups, mpirun's binding), else the online cores. Sizes
 * the default worker and reader counts and tells the barrier whether its
 * threads can spin. */
#ifndef ST_CORES_H
#define ST_CORES_H

int st_usable_cores(void);

/* The cores the machine has online, whatever this process's affinity. */
int st_online_cores(void);

#endif
