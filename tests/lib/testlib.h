/* Helpers shared by the C tests (cmocka): build a network from cfg text,
 * and a logger that keeps quiet. Each test binary registers its tests in one
 * cmocka group; scripts/run-tests.sh runs every binary under a timeout. */
#ifndef ST_TESTLIB_H
#define ST_TESTLIB_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* Assert that msg contains needle, printing both when it does not. */
#define tl_assert_contains(msg, needle)                                                   \
    do {                                                                                  \
        if (!strstr((msg), (needle)))                                                     \
            fail_msg("message \"%s\" does not contain \"%s\"", (msg), (needle));           \
    } while (0)

#endif
