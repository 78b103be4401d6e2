/* The all-reduce algorithms, looked up by name for --allreduce NAME. */
#include <string.h>

#include "allreduce.h"

const st_allreduce_algo st_allreduce_algos[] = {
    {"mpi", st_allreduce_mpi, "the MPI library's MPI_Allreduce (baseline)"},
    {"ring", st_allreduce_ring, "ring reduce-scatter + all-gather"},
    {"rhd", st_allreduce_rhd, "recursive halving + doubling (Rabenseifner)"},
    {"rhd-supernode", st_allreduce_rhd_supernode,
     "rhd over ranks renumbered round-robin across supernodes"},
    {"binomial", st_allreduce_binomial, "binomial-tree reduce + broadcast"},
    {"ps", st_allreduce_ps, "parameter-server star on rank 0"},
};

const size_t st_allreduce_count = sizeof st_allreduce_algos / sizeof st_allreduce_algos[0];

st_status st_allreduce_find(const char *name, const st_allreduce_algo **out, st_error *err)
{
    for (size_t i = 0; i < st_allreduce_count; i++)
        if (strcmp(name, st_allreduce_algos[i].name) == 0) {
            *out = &st_allreduce_algos[i];
            return ST_OK;
        }
    char names[256] = "";
    for (size_t i = 0; i < st_allreduce_count; i++) {
        const char *sep = i == 0 ? "" : i + 1 == st_allreduce_count ? " or " : ", ";
        strncat(names, sep, sizeof names - strlen(names) - 1);
        strncat(names, st_allreduce_algos[i].name, sizeof names - strlen(names) - 1);
    }
    return st_fail(err, ST_EUSAGE, "--allreduce %s: unknown algorithm (expected %s)", name,
                   names);
}
