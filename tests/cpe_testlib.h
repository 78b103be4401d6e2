/* Helpers shared by the tests of the emulated SW26010 core group
 * (test_cpe, test_cpe_conv, test_cpe_kernels): a cluster that fails the
 * test when it cannot be made, and reproducible random values. */
#ifndef ST_CPE_TESTLIB_H
#define ST_CPE_TESTLIB_H

#include "testlib.h"

#include "cpe.h"

static inline st_cpe_cluster *cluster_new(void)
{
    st_cpe_cluster *cg = NULL;
    st_error err = {0};
    if (st_cpe_cluster_create(&cg, &err) != ST_OK)
        fail_msg("st_cpe_cluster_create: %s", err.msg);
    return cg;
}

/* xorshift64: uniform values in [-1, 1), the same every run. */
static inline double rand_unit(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return (double)(x >> 11) / (double)(1ull << 52) - 1.0;
}

#endif
