/* Fuzz target: the CIFAR-10 binary reader. The input is one batch file
 * (3073-byte records: a label byte, 3 x 32 x 32 pixels). It is opened with
 * st_cifar_open as a list of one file, and as the list "file, file" with a
 * limit that ends inside the second copy; every record of an opened source
 * is read and its label checked against the class count. */
#include "fuzz_files.h"

#include "data.h"

#define BATCH_NAME "data_batch_1.bin"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static void read_all(st_source *s)
{
    unsigned char pixels[3 * 32 * 32];
    if (st_record_bytes(s) != sizeof pixels)
        abort();
    for (long i = 0; i < s->count; i++) {
        st_error err = {0};
        int label = -1;
        st_status st = s->ops->read(s, i, pixels, &label, &err);
        fz_check(st, &err, "cifar read", BATCH_NAME);
        if (st == ST_OK && (label < 0 || label >= s->classes)) {
            fprintf(stderr, "fuzz: record %ld has label %d of %d classes\n", i, label,
                    s->classes);
            abort();
        }
    }
}

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
            if (runs[k].limit && s->count > runs[k].limit)
                abort();
            read_all(s);
            st_source_close(s);
        }
    }
    return 0;
}
