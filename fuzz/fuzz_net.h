/* Shared by the fuzz targets of weight files (snapshot, weights): the
 * network they read weights for, fuzz/tiny.cfg, built once per process.
 * ST_FUZZ_NET_CFG, its path, comes from mk/fuzz.mk. */
#ifndef ST_FUZZ_NET_H
#define ST_FUZZ_NET_H

#include <stdio.h>
#include <stdlib.h>

#include "net/net.h"

#ifndef ST_FUZZ_NET_CFG
#define ST_FUZZ_NET_CFG "fuzz/tiny.cfg"
#endif

typedef struct fz_net {
    st_cfg cfg;
    st_hparams hp;
    st_net net;
} fz_net;

/* The network, built on first use (never freed: it lives as long as the
 * process, like the fuzzer's own state). */
static inline const st_net *fz_tiny_net(void)
{
    static fz_net *tiny;
    if (tiny)
        return &tiny->net;
    tiny = calloc(1, sizeof *tiny);
    st_log log = {.level = ST_LOG_SILENT, .out = stderr, .err = stderr};
    st_error err = {0};
    if (!tiny || st_net_load(ST_FUZZ_NET_CFG, NULL, &tiny->cfg, &tiny->hp, &tiny->net, &log, &err)) {
        fprintf(stderr, "fuzz: cannot build %s: %s\n", ST_FUZZ_NET_CFG, err.msg);
        abort();
    }
    return &tiny->net;
}

#endif
