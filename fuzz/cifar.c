/* Fuzz target: the CIFAR-10 binary reader. The input is one batch file
 * (3073-byte records: a label byte, 3 x 32 x 32 pixels). It is opened with
 * st_cifar_open as a list of one file, and as the list "file, file" with a
 * limit that ends inside the second copy; every record of an opened source
 * is read and its label checked against the class count. */
#include "fuzz_source.h"

#define BATCH_NAME "data_batch_1.bin"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    char path[256], list[600];
    fz_write(path, sizeof path, BATCH_NAME, data, len);
    long records = (long)(len / 3073);
    struct {
        const char *fmt;
        long limit;
    } runs[] = {{"%s", 0}, {"%s, %s", records + 1}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        snprintf(list, sizeof list, runs[k].fmt, path, path);
        st_source *s = NULL;
        st_error err = {0};
        st_status st = st_cifar_open(&s, list, runs[k].limit, 10, &err);
        fz_check(st, &err, "st_cifar_open", BATCH_NAME);
        if (st == ST_OK) {
            if ((runs[k].limit && s->count > runs[k].limit) || st_record_bytes(s) != 3 * 32 * 32)
                abort();
            fz_read_all(s, "cifar read", BATCH_NAME);
            st_source_close(s);
        }
    }
    return 0;
}
