/* The all-reduce algorithms' table, expanded from the one list in
 * allreduce_algos.h, and the lookup by name for --allreduce NAME. */
#include "dist/allreduce.h"

#define ENTRY(fn, name, reduce_scatter, allgather, summary)                                  \
    {name, st_allreduce_##fn, reduce_scatter, allgather, summary},
const st_allreduce_algo st_allreduce_algos[] = {ST_ALLREDUCE_ALGOS(ENTRY)};
#undef ENTRY

st_status st_allreduce_find(const char *name, const st_allreduce_algo **out, st_error *err)
{
    int i;
    st_status st = st_allreduce_index(name, &i, err);
    if (st == ST_OK)
        *out = &st_allreduce_algos[i];
    return st;
}
