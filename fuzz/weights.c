/* Fuzz target: the Darknet .weights reader, and the dispatch between it
 * and the snapshot reader that --weights, predict and export use. The
 * input is a weights file of the network fuzz/tiny.cfg (Darknet's header
 * of three int32 and a 32- or 64-bit "seen", then float tensors layer by
 * layer); it goes through st_darknet_weights_load and st_weights_load_seen
 * (which reads "STSNAPSH" files as snapshots). A file of the old layout
 * (major or minor above 1000) has its connected weights transposed. */
#include "fuzz_files.h"
#include "fuzz_net.h"

#include "train/darknet_weights.h"

#define WEIGHTS_NAME "tiny.weights"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    const st_net *net = fz_tiny_net();
    char path[256];
    fz_write(path, sizeof path, WEIGHTS_NAME, data, len);
    float *weights = calloc(net->params.count, sizeof *weights);
    if (!weights)
        abort();
    st_error err = {0};
    uint64_t seen = 0;
    st_status st = st_darknet_weights_load(path, net, weights, &seen, &err);
    fz_check(st, &err, "st_darknet_weights_load", WEIGHTS_NAME);
    st_error any_err = {0};
    st = st_weights_load_seen(path, net, 4, weights, &seen, &any_err);
    fz_check(st, &any_err, "st_weights_load_seen", WEIGHTS_NAME);
    free(weights);
    return 0;
}
