/* The memory limits (base/memlimit.h) read from hand-written fixtures of
 * /proc and the cgroup file systems under a temporary root: MemAvailable
 * alone; a cgroup v2 limit at the process's cgroup and at an ancestor;
 * "max" as no limit; the v1 limit as the fallback where v2 has none, and
 * v1's "unlimited" default; a container's mount that shows a subtree; a
 * usage above the limit; nothing readable at all; and the process's own
 * address-space and data limits (ulimit -v, -d) against its VmSize and
 * VmData. */
#include "testlib.h"
#include "tmpdir.h"

#include <sys/stat.h>

#include "base/memlimit.h"

/* Write text to path under the current directory (the test's root),
 * making its directories. */
static void put(const char *path, const char *text)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = strchr(dir + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    tl_write_file(path, text, strlen(text));
}

/* The root given to the reader: the test's directory. */
static const char *root(void **state)
{
    return ((tl_tmpdir *)*state)->dir;
}

static const char *MEMINFO = "MemTotal:       24684136 kB\n"
                             "MemFree:        20000000 kB\n"
                             "MemAvailable:    8000000 kB\n"
                             "Buffers:            1000 kB\n";

/* This machine's layout: v1 hierarchies, v2 mounted at unified without
 * the memory controller. */
static const char *MOUNTS_V1 =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static const char *MOUNTS_V2 =
    "25 30 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
    "30 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n";

static void test_meminfo_alone(void **state)
{
    put("proc/meminfo", MEMINFO);
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    assert_int_equal(m.available, (size_t)8000000 * 1024);
    assert_int_equal(m.cgroup_version, 0);
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), (size_t)8000000 * 1024);
    tl_assert_contains(what, "MemAvailable in /proc/meminfo");
}

static void test_nothing_readable(void **state)
{
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), ST_MEMLIMIT_NONE);
    tl_assert_contains(what, "no limit known");
}

static void test_v2_limit_at_the_cgroup(void **state)
{
    put("proc/meminfo", MEMINFO);
    put("proc/self/mountinfo", MOUNTS_V2);
    put("proc/self/cgroup", "0::/user.slice/job.scope\n");
    put("sys/fs/cgroup/user.slice/job.scope/memory.max", "2000000000\n");
    put("sys/fs/cgroup/user.slice/job.scope/memory.current", "500000000\n");
    put("sys/fs/cgroup/user.slice/memory.max", "max\n");
    put("sys/fs/cgroup/user.slice/memory.current", "900000000\n");
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    assert_int_equal(m.cgroup_version, 2);
    assert_int_equal(m.cgroup_limit, 2000000000);
    assert_int_equal(m.cgroup_usage, 500000000);
    assert_string_equal(m.cgroup_dir, "/sys/fs/cgroup/user.slice/job.scope");
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), 1500000000);
    tl_assert_contains(what, "cgroup v2 limit of /sys/fs/cgroup/user.slice/job.scope: "
                             "memory.max 2000.0 MB, memory.current 500.0 MB");
}

/* The process's own cgroup says max; its parent's limit is the one. */
static void test_v2_limit_of_an_ancestor(void **state)
{
    put("proc/meminfo", MEMINFO);
    put("proc/self/mountinfo", MOUNTS_V2);
    put("proc/self/cgroup", "0::/a/b/c\n");
    put("sys/fs/cgroup/a/b/c/memory.max", "max\n");
    put("sys/fs/cgroup/a/b/c/memory.current", "100\n");
    put("sys/fs/cgroup/a/b/memory.max", "1000000000\n");
    put("sys/fs/cgroup/a/b/memory.current", "250000000\n");
    put("sys/fs/cgroup/a/memory.max", "4000000000\n");
    put("sys/fs/cgroup/a/memory.current", "260000000\n");
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    assert_int_equal(m.cgroup_version, 2);
    assert_string_equal(m.cgroup_dir, "/sys/fs/cgroup/a/b");
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), 750000000);
}

/* MemAvailable below the cgroup's room wins. */
static void test_meminfo_below_the_cgroup(void **state)
{
    put("proc/meminfo", "MemAvailable:     100000 kB\n");
    put("proc/self/mountinfo", MOUNTS_V2);
    put("proc/self/cgroup", "0::/job\n");
    put("sys/fs/cgroup/job/memory.max", "2000000000\n");
    put("sys/fs/cgroup/job/memory.current", "0\n");
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), (size_t)100000 * 1024);
    tl_assert_contains(what, "MemAvailable");
}

/* v2 has no memory controller here: the v1 memory hierarchy's limit. */
static void test_v1_fallback(void **state)
{
    put("proc/meminfo", MEMINFO);
    put("proc/self/mountinfo", MOUNTS_V1);
    put("proc/self/cgroup", "9:name=systemd:/\n8:cpu,cpuacct:/\n4:memory:/process_api/x1\n0::/\n");
    put("sys/fs/cgroup/memory/process_api/x1/memory.limit_in_bytes", "3000000000\n");
    put("sys/fs/cgroup/memory/process_api/x1/memory.usage_in_bytes", "40898560\n");
    put("sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", "9223372036854771712\n");
    put("sys/fs/cgroup/memory/process_api/memory.usage_in_bytes", "792207360\n");
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("sys/fs/cgroup/memory/memory.usage_in_bytes", "792207360\n");
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    assert_int_equal(m.cgroup_version, 1);
    assert_string_equal(m.cgroup_dir, "/sys/fs/cgroup/memory/process_api/x1");
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), 3000000000 - 40898560);
    tl_assert_contains(what, "cgroup v1 limit of /sys/fs/cgroup/memory/process_api/x1: "
                             "memory.limit_in_bytes 3000.0 MB");
}

/* v1's default limit is no limit. */
static void test_v1_unlimited(void **state)
{
    put("proc/meminfo", MEMINFO);
    put("proc/self/mountinfo", MOUNTS_V1);
    put("proc/self/cgroup", "4:memory:/p\n0::/\n");
    put("sys/fs/cgroup/memory/p/memory.limit_in_bytes", "9223372036854771712\n");
    put("sys/fs/cgroup/memory/p/memory.usage_in_bytes", "40898560\n");
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    assert_int_equal(m.cgroup_version, 0);
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), (size_t)8000000 * 1024);
}

/* A container's view: the mount shows the subtree /docker/abc, which
 * /proc/self/cgroup names in full. Usage above the limit leaves no room. */
static void test_container_subtree(void **state)
{
    put("proc/meminfo", MEMINFO);
    put("proc/self/mountinfo",
        "1120 1110 0:30 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n");
    put("proc/self/cgroup", "0::/docker/abc/sub\n");
    put("sys/fs/cgroup/sub/memory.max", "1000000\n");
    put("sys/fs/cgroup/sub/memory.current", "2000000\n");
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    assert_int_equal(m.cgroup_version, 2);
    assert_string_equal(m.cgroup_dir, "/sys/fs/cgroup/sub");
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), 0);
}

/* Without mountinfo, v2 is looked for at /sys/fs/cgroup; malformed
 * numbers are no limit. */
static void test_default_mount_and_garbage(void **state)
{
    put("proc/meminfo", "MemTotal: 1 kB\nMemAvailable: lots\n");
    put("proc/self/cgroup", "0::/j\n");
    put("sys/fs/cgroup/j/memory.max", "12x\n");
    put("sys/fs/cgroup/j/memory.current", "1\n");
    put("sys/fs/cgroup/memory.max", "5000000\n");
    put("sys/fs/cgroup/memory.current", "1000000\n");
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    assert_int_equal(m.available, ST_MEMLIMIT_NONE);
    assert_int_equal(m.cgroup_version, 2);
    assert_string_equal(m.cgroup_dir, "/sys/fs/cgroup");
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), 4000000);
}

/* /proc/self/limits with the soft limits set or not (its real layout). */
static void put_limits(const char *address_space, const char *data)
{
    char text[1024];
    snprintf(text, sizeof text,
             "Limit                     Soft Limit           Hard Limit           Units     \n"
             "Max cpu time              unlimited            unlimited            seconds   \n"
             "Max file size             unlimited            unlimited            bytes     \n"
             "Max data size             %-20s unlimited            bytes     \n"
             "Max stack size            8388608              unlimited            bytes     \n"
             "Max address space         %-20s unlimited            bytes     \n"
             "Max locked memory         8388608              8388608              bytes     \n",
             data, address_space);
    put("proc/self/limits", text);
}

static const char *STATUS = "Name:\tsingletrain\nVmPeak:\t  300000 kB\n"
                            "VmSize:\t  200000 kB\nVmData:\t   50000 kB\nVmRSS:\t   10000 kB\n";

/* ulimit -v: the address-space limit less VmSize, when tighter than
 * MemAvailable (it was not counted: a run passed the check, then failed
 * to allocate). */
static void test_address_space_limit(void **state)
{
    put("proc/meminfo", MEMINFO);
    put("proc/self/status", STATUS);
    put_limits("1536000000", "unlimited");
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    assert_int_equal(m.as_limit, 1536000000);
    assert_int_equal(m.as_used, (size_t)200000 * 1024);
    assert_int_equal(m.data_limit, ST_MEMLIMIT_NONE);
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), 1536000000 - 200000 * 1024);
    tl_assert_contains(what, "the address-space limit (ulimit -v) of 1536.0 MB: VmSize 204.8 MB");
    /* above what the machine has free: MemAvailable is the room */
    put_limits("99000000000", "unlimited");
    st_memlimit_read(root(state), &m);
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), (size_t)8000000 * 1024);
    tl_assert_contains(what, "MemAvailable");
    /* VmSize over the limit already: no room */
    put_limits("100000000", "unlimited");
    st_memlimit_read(root(state), &m);
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), 0);
}

/* ulimit -d: the data-size limit less VmData; unlimited is no limit. */
static void test_data_limit(void **state)
{
    put("proc/self/status", STATUS);
    put_limits("unlimited", "300000000");
    st_memlimit m;
    st_memlimit_read(root(state), &m);
    char what[256];
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), 300000000 - 50000 * 1024);
    tl_assert_contains(what, "the data-size limit (ulimit -d) of 300.0 MB: VmData 51.2 MB");
    put_limits("unlimited", "unlimited");
    st_memlimit_read(root(state), &m);
    assert_int_equal(st_memlimit_room(&m, what, sizeof what), ST_MEMLIMIT_NONE);
    tl_assert_contains(what, "no limit known");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        tl_tmpdir_test(test_meminfo_alone),
        tl_tmpdir_test(test_nothing_readable),
        tl_tmpdir_test(test_v2_limit_at_the_cgroup),
        tl_tmpdir_test(test_v2_limit_of_an_ancestor),
        tl_tmpdir_test(test_meminfo_below_the_cgroup),
        tl_tmpdir_test(test_v1_fallback),
        tl_tmpdir_test(test_v1_unlimited),
        tl_tmpdir_test(test_container_subtree),
        tl_tmpdir_test(test_default_mount_and_garbage),
        tl_tmpdir_test(test_address_space_limit),
        tl_tmpdir_test(test_data_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
