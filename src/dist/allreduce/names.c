/* The all-reduce algorithms' names, the lookup by name and the ranks' parts
 * of a buffer, free of MPI so that every build checks --allreduce NAME and
 * lays out the partitioned solver state; see allreduce_algos.h. */
#include "dist/allreduce_algos.h"

#include <string.h>

#include "base/strlist.h"

#define NAME_OF(fn, name, reduce_scatter, allgather, summary) name,
const char *const st_allreduce_names[] = {ST_ALLREDUCE_ALGOS(NAME_OF)};
#undef NAME_OF

const size_t st_allreduce_count = sizeof st_allreduce_names / sizeof st_allreduce_names[0];

st_status st_allreduce_index(const char *name, int *index, st_error *err)
{
    for (size_t i = 0; i < st_allreduce_count; i++)
        if (strcmp(name, st_allreduce_names[i]) == 0) {
            *index = (int)i;
            return ST_OK;
        }
    char names[256] = "";
    for (size_t i = 0; i < st_allreduce_count; i++)
        st_strlist_append(names, sizeof names, st_allreduce_names[i], i, st_allreduce_count,
                          " or ");
    return st_fail(err, ST_EUSAGE, "--allreduce %s: unknown algorithm (expected %s)", name,
                   names);
}

/* floor(n b / p) without overflow. */
static size_t part_start(size_t n, int p, int b)
{
    size_t q = n / (size_t)p, rem = n % (size_t)p;
    return q * (size_t)b + rem * (size_t)b / (size_t)p;
}

void st_allreduce_part(size_t n, int p, int q, size_t *start, size_t *count)
{
    *start = part_start(n, p, q);
    *count = part_start(n, p, q + 1) - *start;
}
