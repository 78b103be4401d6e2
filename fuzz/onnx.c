/* Fuzz target: the ONNX reader (net/onnx.h) and the network it builds. The
 * input is an ONNX model file (a protobuf ModelProto); written as
 * fuzz.onnx, it goes through st_net_load as the trainer's does (no sidecar
 * beside it: [net]'s defaults), then the layer table and the network hash.
 * Every failure must be an input error naming the file. */
#include "fuzz_files.h"

#include "base/cfg.h"
#include "net/hparams.h"
#include "net/net.h"

#define ONNX_NAME "fuzz.onnx"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w")))
        abort();
    st_log log = {.level = ST_LOG_INFO, .out = sink, .err = sink};
    st_error err = {0};
    char path[256];
    fz_write(path, sizeof path, ONNX_NAME, data, len);
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_status st = st_net_load(path, NULL, &cfg, &hp, &net, &log, &err);
    fz_check(st, &err, "st_net_load", ONNX_NAME);
    if (st == ST_OK) {
        st_net_print(&net, &log);
        (void)st_net_hash(&net);
        st_net_free(&net);
        st_cfg_free(&cfg);
    }
    return 0;
}
