/* Helpers shared by the C tests (cmocka): build a network from cfg text,
 * a logger that keeps quiet, and the case filter of a test with cases of
 * its own. Each test binary registers its tests in one cmocka group;
 * scripts/run-tests.sh runs every binary under a timeout. */
#ifndef ST_TESTLIB_H
#define ST_TESTLIB_H

#include <fnmatch.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/cfg.h"
#include "net/hparams.h"
#include "base/log.h"
#include "net/net.h"
#include "base/status.h"

static inline st_log tl_silent_log(void)
{
    st_log log = {ST_LOG_SILENT, NULL, NULL, NULL};
    return log;
}

/* Parse cfg text (named path in messages) into cfg, hparams and net. On
 * failure everything is freed and err holds the message. */
static inline st_status tl_build(const char *path, const char *text, st_cfg *cfg,
                                 st_hparams *hp, st_net *net, st_error *err)
{
    st_log log = tl_silent_log();
    memset(net, 0, sizeof *net);
    st_status st = st_cfg_parse(cfg, path, text, strlen(text), err);
    if (st != ST_OK)
        return st;
    st = st_hparams_parse(cfg, hp, &log, err);
    if (st == ST_OK)
        st = st_net_build(net, cfg, hp->input, &log, err);
    if (st != ST_OK)
        st_cfg_free(cfg);
    return st;
}

/* ST_TEST_FILTER (make test T=...; tests/README.md) is "TESTS" or
 * "TESTS/CASES": scripts/run-tests.sh runs the tests whose names match
 * TESTS; a test with cases of its own (test_conformance) then runs those
 * whose names match CASES. The CASES part, or NULL: every case. */
static inline const char *tl_case_filter(void)
{
    const char *f = getenv("ST_TEST_FILTER");
    const char *slash = f ? strchr(f, '/') : NULL;
    return slash && slash[1] ? slash + 1 : NULL;
}

/* Whether the case called name is selected by pattern (from
 * tl_case_filter; NULL selects every case): a shell pattern matched
 * anywhere in the name, as run-tests.sh matches the tests' names. */
static inline int tl_case_selected(const char *pattern, const char *name)
{
    char glob[256];
    if (!pattern)
        return 1;
    snprintf(glob, sizeof glob, "*%s*", pattern);
    return fnmatch(glob, name, 0) == 0;
}

/* Assert that msg contains needle, printing both when it does not. */
#define tl_assert_contains(msg, needle)                                                   \
    do {                                                                                  \
        if (!strstr((msg), (needle)))                                                     \
            fail_msg("message \"%s\" does not contain \"%s\"", (msg), (needle));           \
    } while (0)

#endif
