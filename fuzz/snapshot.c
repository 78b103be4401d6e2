/* Fuzz target: the snapshot reader. The input is a snapshot file of the
 * network fuzz/tiny.cfg (header, weights, solver state); it is read as
 * `singletrain --weights` and `predict` read it (st_snapshot_load: the
 * weights alone; both checksums, the header's and the payload's, are
 * checked either way) and as `--resume` does (st_snapshot_resume) for a solver
 * with one state plane (momentum SGD, as the seeds were trained) and with
 * two (Adam). The weights read must be the file's floats, and resuming must
 * accept exactly what loading accepts. */
#include "fuzz_files.h"
#include "fuzz_net.h"

#include "train/snapshot.h"

#define SNAPSHOT_NAME "tiny.snap"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    const st_net *net = fz_tiny_net();
    size_t count = net->params.count;
    char path[256];
    fz_write(path, sizeof path, SNAPSHOT_NAME, data, len);
    float *weights = calloc(count, sizeof *weights);
    float *state = calloc(2 * count, sizeof *state);
    if (!weights || !state)
        abort();

    st_error err = {0};
    long iteration = -1;
    st_status st = st_snapshot_load(path, net, weights, &iteration, &err);
    fz_check(st, &err, "st_snapshot_load", SNAPSHOT_NAME);
    /* the weights follow the header and the settings, whose sizes are the
     * u32 at offsets 12 and 60 */
    if (st == ST_OK) {
        uint32_t header, settings;
        memcpy(&header, data + 12, sizeof header);
        memcpy(&settings, data + 60, sizeof settings);
        size_t at = (size_t)header + settings;
        if (len < at + count * sizeof *weights ||
            memcmp(weights, data + at, count * sizeof *weights) != 0) {
            fprintf(stderr, "fuzz: the weights read are not the file's\n");
            abort();
        }
    }
    for (int planes = 1; planes <= 2; planes++) {
        st_snapshot_meta meta;
        memset(&meta, 0, sizeof meta);
        st_error resume_err = {0};
        st_status rs = st_snapshot_resume(path, net, weights, state, planes, &meta,
                                          &resume_err);
        fz_check(rs, &resume_err, "st_snapshot_resume", SNAPSHOT_NAME);
        if (rs == ST_OK && (meta.state_planes != planes || st != ST_OK ||
                            meta.iteration != iteration || !memchr(meta.solver, 0, 16))) {
            fprintf(stderr, "fuzz: resume accepted what load did not, or the meta differ\n");
            abort();
        }
        free(meta.settings);
    }
    free(state);
    free(weights);
    return 0;
}
