/* Fuzz target: the .cfg reader and what every user of a cfg does with it.
 * The input is cfg text. It goes through st_cfg_parse (the reader's
 * in-memory entry point), then, as st_net_load does, the [net] section
 * (st_hparams_parse) and the layer builders (st_net_build), the layer
 * table and the network hash; and, written to a file, through the flat
 * key=value reader of data files (st_data_paths_load, which reads Darknet
 * .data files with st_cfg_load_flat). Every failure must be an input error
 * naming the file. */
#include "fuzz_files.h"

#include "base/cfg.h"
#include "net/hparams.h"
#include "net/net.h"

#define CFG_NAME "fuzz.cfg"
#define DATA_NAME "fuzz.data"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    st_log log = fz_quiet_log();
    st_error err = {0};
    st_cfg cfg;
    st_status st = st_cfg_parse(&cfg, CFG_NAME, (const char *)data, len, &err);
    fz_check(st, &err, "st_cfg_parse", CFG_NAME);
    if (st == ST_OK) {
        st_hparams hp;
        st_net net;
        memset(&net, 0, sizeof net);
        st = st_hparams_parse(&cfg, &hp, &log, &err);
        fz_check(st, &err, "st_hparams_parse", CFG_NAME);
        if (st == ST_OK) {
            st = st_net_build(&net, &cfg, hp.input, &log, &err);
            fz_check(st, &err, "st_net_build", CFG_NAME);
        }
        if (st == ST_OK) {
            st_net_print(&net, &log);
            (void)st_net_hash(&net);
        }
        st_net_free(&net);
    }
    st_cfg_free(&cfg);

    char path[256];
    fz_write(path, sizeof path, DATA_NAME, data, len);
    st_data_paths paths;
    memset(&paths, 0, sizeof paths);
    st_error data_err = {0};
    st = st_data_paths_load(path, &paths, &log, &data_err);
    fz_check(st, &data_err, "st_data_paths_load", DATA_NAME);
    return 0;
}
