/* A network from a file (st_net_load): an ONNX model (a path ending in
 * .onnx: onnx.c), or a Darknet cfg with its [net] section; above both
 * net.c and onnx.c, which builds through net.c, so that net/ calls one way. */
#include <string.h>

#include "net/net.h"
#include "net/onnx.h"

st_status st_net_load(const char *path, const char *hparams, st_cfg *cfg, st_hparams *hp,
                      st_net *net, const st_log *log, st_error *err)
{
    memset(net, 0, sizeof *net);
    if (st_onnx_is_model(path))
        return st_onnx_load(path, hparams, cfg, hp, net, log, err);
    memset(cfg, 0, sizeof *cfg);
    if (hparams)
        return st_fail(err, ST_EUSAGE, "--hparams %s: only an ONNX model takes its training "
                       "settings from another file (%s has its own [net] section)", hparams,
                       path);
    st_status st = st_cfg_load(cfg, path, err);
    if (st != ST_OK)
        return st;
    st = st_hparams_parse(cfg, hp, log, err);
    if (st == ST_OK)
        st = st_net_build(net, cfg, hp->input, log, err);
    if (st != ST_OK)
        st_cfg_free(cfg);
    return st;
}
