/* Fuzz target: the ONNX reader and writer (net/onnx.h) and the network
 * between them. The input is an ONNX model file (a protobuf ModelProto);
 * written as fuzz.onnx, it goes through st_net_load as the trainer's does
 * (no sidecar beside it: [net]'s defaults), the layer table and the
 * network hash; a network it reads is written back with its starting
 * weights (st_onnx_save), and what is written must read back into a
 * network of the same hash. Every failure must be an input error naming
 * the file. */
#include "fuzz_files.h"

#include "base/cfg.h"
#include "net/hparams.h"
#include "net/net.h"
#include "net/onnx.h"

#define ONNX_NAME "fuzz.onnx"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    st_log log = fz_quiet_log();
    st_error err = {0};
    char path[256];
    fz_write(path, sizeof path, ONNX_NAME, data, len);
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_status st = st_net_load(path, NULL, &cfg, &hp, &net, &log, &err);
    fz_check(st, &err, "st_net_load", ONNX_NAME);
    if (st != ST_OK)
        return 0;
    st_net_print(&net, &log);
    char again[256];
    fz_path(again, sizeof again, "again.onnx");
    st_error save_err = {0};
    st = st_onnx_save(again, &net, &cfg, net.params.start, &save_err);
    fz_check(st, &save_err, "st_onnx_save", ONNX_NAME);
    if (st == ST_OK) {
        st_cfg cfg2;
        st_hparams hp2;
        st_net net2;
        st_error err2 = {0};
        if (st_net_load(again, NULL, &cfg2, &hp2, &net2, &log, &err2) != ST_OK) {
            fprintf(stderr, "fuzz: the model st_onnx_save wrote does not read back: %s\n",
                    err2.msg);
            abort();
        }
        if (st_net_hash(&net2) != st_net_hash(&net)) {
            fprintf(stderr, "fuzz: the model st_onnx_save wrote reads back as another "
                    "network\n");
            abort();
        }
        st_net_free(&net2);
        st_cfg_free(&cfg2);
    }
    st_net_free(&net);
    st_cfg_free(&cfg);
    return 0;
}
