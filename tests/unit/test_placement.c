/* The placement of a run's threads (parallel/placement.h) on hwloc's
 * synthetic topologies (base/topology.h), against hand-written
 * expectations: SingleCaffe's node (two 12-core sockets, -t 24 and workers
 * of 8 intra-op threads that must not straddle a socket), two sockets of
 * two NUMA nodes of 8 cores with 2 hardware threads each (one thread per
 * core first; round robin over the hardware threads past the cores with
 * --bind cores; not bound by auto), a cpuset that leaves half a socket,
 * two ranks sharing a node's cores, --bind none, what each NUMA node must
 * hold for its workers, and the topology's own errors (a description hwloc
 * refuses, a malformed or empty list of allowed PUs). The real machine's
 * topology is loaded too: every PU it lists is one this process may run
 * on, and memory moved to a NUMA node is found there. */
#include "testlib.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/topology.h"
#include "parallel/placement.h"

static void load(st_topology *t, const char *synthetic, const char *allowed)
{
    st_error err = {0};
    if (st_topology_load(t, synthetic, allowed, &err) != ST_OK)
        fail_msg("topology %s: %s", synthetic ? synthetic : "of this machine", err.msg);
}

static void place(const st_topology *t, st_bind mode, int workers, int intra, int share,
                  int shares, st_placement *p)
{
    st_error err = {0};
    if (st_place(t, mode, workers, intra, share, shares, p, &err) != ST_OK)
        fail_msg("placement of %d x %d: %s", workers, intra, err.msg);
    print_message("  %s\n", p->text);
}

/* The placement's PUs are want [n] (OS indexes, worker by worker). */
static void assert_pus(const st_placement *p, const int *want, int n)
{
    assert_true(p->bound);
    assert_int_equal(p->workers * p->intra, n);
    for (int i = 0; i < n; i++)
        if (p->pus[i] != want[i])
            fail_msg("thread %d (worker %d): cpu %d, expected %d", i, i / p->intra, p->pus[i],
                     want[i]);
}

static void assert_free(const st_placement *p, const int *want, int n)
{
    assert_int_equal(p->n_free, n);
    for (int i = 0; i < n; i++)
        assert_int_equal(p->free_pus[i], want[i]);
}

static void test_two_sockets_of_twelve(void **state)
{
    (void)state;
    st_topology t;
    load(&t, "pack:2 core:12 pu:1", NULL);
    assert_int_equal(t.n_pus, 24);
    assert_int_equal(t.n_cores, 24);
    assert_int_equal(t.n_sockets, 2);
    assert_int_equal(t.core_socket[11], 0);
    assert_int_equal(t.core_socket[12], 1);
    st_placement p;
    int all[24];
    for (int i = 0; i < 24; i++)
        all[i] = i;
    place(&t, ST_BIND_AUTO, 24, 1, 0, 1, &p);
    assert_pus(&p, all, 24);
    assert_int_equal(p.n_free, 0);
    tl_assert_contains(p.text, "workers 0-11 on socket 0 (cpus 0-11), workers 12-23 on "
                               "socket 1 (cpus 12-23)");
    st_placement_free(&p);
    /* 2 x 8: the second worker would straddle; it starts on socket 1 */
    place(&t, ST_BIND_AUTO, 2, 8, 0, 1, &p);
    int two[16] = {0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15, 16, 17, 18, 19};
    assert_pus(&p, two, 16);
    int left[8] = {8, 9, 10, 11, 20, 21, 22, 23};
    assert_free(&p, left, 8);
    tl_assert_contains(p.text, "prefetch and scheduler on cpus 8-11,20-23");
    st_placement_free(&p);
    /* 3 x 8 takes every core: the second worker must straddle */
    place(&t, ST_BIND_AUTO, 3, 8, 0, 1, &p);
    assert_pus(&p, all, 24);
    st_placement_free(&p);
    st_topology_free(&t);
}

static void test_hardware_threads(void **state)
{
    (void)state;
    st_topology t;
    load(&t, "pack:2 numa:2 core:8 pu:2", NULL);
    assert_int_equal(t.n_pus, 64);
    assert_int_equal(t.n_cores, 32);
    assert_int_equal(t.n_numa, 4);
    assert_int_equal(t.core_numa[8], 1);
    assert_int_equal(t.core_socket[16], 1);
    st_placement p;
    int per_core[32];
    for (int i = 0; i < 32; i++)
        per_core[i] = 2 * i; /* one hardware thread of each core */
    place(&t, ST_BIND_AUTO, 32, 1, 0, 1, &p);
    assert_pus(&p, per_core, 32);
    st_placement_free(&p);
    place(&t, ST_BIND_AUTO, 8, 4, 0, 1, &p); /* 4 cores each */
    assert_pus(&p, per_core, 32);
    tl_assert_contains(p.text, "workers 0-3 x 4 threads on socket 0");
    st_placement_free(&p);
    place(&t, ST_BIND_AUTO, 33, 1, 0, 1, &p); /* more threads than cores */
    assert_false(p.bound);
    tl_assert_contains(p.text, "33 threads on 32 cores");
    st_placement_free(&p);
    place(&t, ST_BIND_CORES, 40, 1, 0, 1, &p); /* in turns over the hardware threads */
    int turns[40];
    for (int i = 0; i < 40; i++)
        turns[i] = i;
    assert_pus(&p, turns, 40);
    st_placement_free(&p);
    place(&t, ST_BIND_NONE, 2, 1, 0, 1, &p);
    assert_false(p.bound);
    assert_null(p.pus);
    st_placement_free(&p);
    st_topology_free(&t);
}

/* A cpuset of PUs 6-23: half of socket 0 and all of socket 1. */
static void test_half_a_socket(void **state)
{
    (void)state;
    st_topology t;
    load(&t, "pack:2 core:12 pu:1", "6-23");
    assert_int_equal(t.n_cores, 18);
    assert_int_equal(t.pu_os[0], 6);
    assert_int_equal(t.core_socket[5], 0);
    assert_int_equal(t.core_socket[6], 1);
    st_placement p;
    place(&t, ST_BIND_AUTO, 3, 5, 0, 1, &p);
    int want[15] = {6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
    assert_pus(&p, want, 15);
    int left[3] = {11, 22, 23};
    assert_free(&p, left, 3);
    st_placement_free(&p);
    st_topology_free(&t);
}

/* Two ranks on one node that mpirun did not bind: a half each. */
static void test_ranks_share_the_node(void **state)
{
    (void)state;
    st_topology t;
    load(&t, "pack:2 core:12 pu:1", NULL);
    st_placement p;
    place(&t, ST_BIND_AUTO, 4, 1, 1, 2, &p);
    int want[4] = {12, 13, 14, 15};
    assert_pus(&p, want, 4);
    assert_int_equal(p.n_free, 8);
    st_placement_free(&p);
    place(&t, ST_BIND_AUTO, 13, 1, 0, 2, &p); /* more than its 12 */
    assert_false(p.bound);
    st_placement_free(&p);
    st_topology_free(&t);
}

static void test_topology_errors(void **state)
{
    (void)state;
    st_topology t;
    st_error err = {0};
    assert_int_equal(st_topology_load(&t, "pack:2 bogus:3", NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "pack:2 bogus:3");
    err = (st_error){0};
    assert_int_equal(st_topology_load(&t, "pack:2 core:12 pu:1", "0-5,x", &err), ST_EINPUT);
    tl_assert_contains(err.msg, "0-5,x");
    err = (st_error){0};
    assert_int_equal(st_topology_load(&t, "pack:2 core:12 pu:1", "40-50", &err), ST_EINPUT);
    tl_assert_contains(err.msg, "leaves no processing unit");
}

/* What each NUMA node must hold: the shared bytes split as the workers'
 * slices, each worker's own bytes on its node. 8 workers of 4 cores on
 * four nodes of 8 cores: 2 each; 14 workers on two nodes of 12: 12 and 2. */
static void test_numa_need(void **state)
{
    (void)state;
    st_topology t;
    load(&t, "pack:2 numa:2 core:8 pu:2", NULL);
    st_placement p;
    place(&t, ST_BIND_AUTO, 8, 4, 0, 1, &p);
    int nodes[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    for (int w = 0; w < 8; w++)
        assert_int_equal(p.numa[w], nodes[w]);
    double need[4];
    st_placement_numa_need(&t, &p, 800.0, 10.0, need);
    for (int k = 0; k < 4; k++)
        assert_true(need[k] == 2.0 * (100.0 + 10.0));
    st_placement_free(&p);
    st_topology_free(&t);
    load(&t, "pack:2 numa:1 core:12 pu:1", NULL);
    assert_int_equal(t.n_numa, 2);
    place(&t, ST_BIND_AUTO, 14, 1, 0, 1, &p);
    double two[2];
    st_placement_numa_need(&t, &p, 1400.0, 1.0, two);
    assert_true(two[0] == 12.0 * 101.0);
    assert_true(two[1] == 2.0 * 101.0);
    st_placement_free(&p);
    place(&t, ST_BIND_NONE, 14, 1, 0, 1, &p); /* nothing pinned: nothing placed */
    st_placement_numa_need(&t, &p, 1400.0, 1.0, two);
    assert_true(two[0] == 0.0 && two[1] == 0.0);
    st_placement_free(&p);
    st_topology_free(&t);
}

/* This machine: pages moved to its first NUMA node are there (with one
 * node, the move is left out and the pages are there anyway: what a
 * machine with one node can show). */
static void test_memory_placement(void **state)
{
    (void)state;
    st_topology t;
    load(&t, NULL, NULL);
    size_t bytes = 1 << 20;
    char *buf = aligned_alloc(4096, bytes);
    assert_non_null(buf);
    memset(buf, 1, bytes);
    st_error err = {0};
    assert_int_equal(st_topology_move(&t, buf, bytes, 0, &err), ST_OK);
    int node = st_topology_memory_node(&t, buf, bytes);
    print_message("  %d NUMA node(s); 1 MB moved to node 0 (OS %d): on node %d\n", t.n_numa,
                  t.numa_os[0], node);
    assert_int_equal(node, 0);
    if (t.n_numa > 1) {
        assert_int_equal(st_topology_move(&t, buf, bytes, t.n_numa - 1, &err), ST_OK);
        assert_int_equal(st_topology_memory_node(&t, buf, bytes), t.n_numa - 1);
    }
    free(buf);
    st_topology_free(&t);
}

/* This machine: every PU listed is in this process's affinity. */
static void test_this_machine(void **state)
{
    (void)state;
    st_topology t;
    load(&t, NULL, NULL);
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    assert_int_equal(t.n_pus, CPU_COUNT(&set));
    for (int i = 0; i < t.n_pus; i++)
        assert_true(CPU_ISSET(t.pu_os[i], &set));
    print_message("  this machine: %d PUs, %d cores, %d sockets, %d NUMA nodes\n", t.n_pus,
                  t.n_cores, t.n_sockets, t.n_numa);
    st_topology_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_sockets_of_twelve),
        cmocka_unit_test(test_hardware_threads),
        cmocka_unit_test(test_half_a_socket),
        cmocka_unit_test(test_ranks_share_the_node),
        cmocka_unit_test(test_topology_errors),
        cmocka_unit_test(test_numa_need),
        cmocka_unit_test(test_memory_placement),
        cmocka_unit_test(test_this_machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
