/* Fuzz target: the IDX reader (MNIST / Fashion-MNIST images and labels,
 * plain or gzip). The input is the images file, FZ_SEPARATOR, the labels
 * file (no separator: the labels file is empty). Both are written out and
 * opened with st_idx_open, for 10 classes, then with a limit of 3 records;
 * every record of an opened source is read. */
#include "fuzz_source.h"

#define IMAGES_NAME "images-idx3-ubyte"
#define LABELS_NAME "labels-idx1-ubyte"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    fz_part part[2];
    size_t n = fz_split(data, len, part, 2);
    char images[256], labels[256];
    fz_clear();
    fz_write(images, sizeof images, IMAGES_NAME, part[0].data, part[0].len);
    fz_write(labels, sizeof labels, LABELS_NAME, n > 1 ? part[1].data : NULL,
             n > 1 ? part[1].len : 0);
    static const long limits[] = {0, 3};
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        st_source *s = NULL;
        st_error err = {0};
        st_status st = st_idx_open(&s, images, labels, limits[k], 10, &err);
        /* a failure names whichever of the two files is at fault */
        if (st != ST_OK && !strstr(err.msg, LABELS_NAME))
            fz_check(st, &err, "st_idx_open", IMAGES_NAME);
        if (st == ST_OK) {
            if (limits[k] && s->count > limits[k])
                abort();
            fz_read_all(s, "idx read", IMAGES_NAME);
            st_source_close(s);
        }
    }
    return 0;
}
