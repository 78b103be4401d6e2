/* Data sources: records of (pixels, label) read by index, and the transform
 * that turns a record into a network input.
 *
 * A record is C x H x W bytes, planar (channel-major), in the source's
 * stored shape, plus a label in [0, classes). Sources are small ops tables
 * over concrete readers: IDX (MNIST, Fashion-MNIST), CIFAR-10 binary
 * batches, image lists decoded with stb_image, the striped packed store,
 * and synthetic data. Every read must be safe to call from several threads
 * at once (the prefetcher's readers do).
 *
 * The transform (Caffe's transform_param, selected in [net]) maps a record
 * to floats of the network's input shape: a random crop of the input size
 * from a larger record in training and the centre crop in testing (crop=1),
 * a random left-right mirror in training (mirror=1), then
 * (pixel - input_mean[c]) * input_scale. Random choices are keyed by (seed,
 * global sample index), so they do not depend on which thread decodes the
 * record. The epoch order is a seeded permutation, fresh every epoch. */
#ifndef ST_DATA_H
#define ST_DATA_H

#include <stdint.h>

#include "base/fileio.h"
#include "base/shape.h"
#include "base/status.h"

#define ST_MAX_CHANNELS 16 /* of input_mean= */

typedef struct st_source st_source;

typedef struct st_source_ops {
    /* Record index: pixels [C, H, W] bytes (the stored shape) and *label. */
    st_status (*read)(const st_source *s, long index, unsigned char *pixels, int *label,
                      st_error *err);
    void (*close)(st_source *s);
} st_source_ops;

struct st_source {
    const st_source_ops *ops;
    char name[512]; /* file name(s), or "synthetic", for messages */
    long count;
    st_shape shape; /* stored record shape */
    int classes;    /* every label is in [0, classes) */
    size_t read_bytes;      /* the most memory one read allocates while it runs, besides
                               the record (an image's decode); 0: none to speak of */
    char read_bytes_why[160]; /* what read_bytes is, for the memory line ("" when 0) */
};

void st_source_close(st_source *s);

static inline size_t st_record_bytes(const st_source *s)
{
    return st_shape_count(s->shape);
}

/* ---- openers (each reader's file) ---- */

/* IDX images (ubyte, N x H x W) and labels (ubyte, N), gzip or plain. At
 * most limit records are kept (0: all). Labels must be below classes. */
st_status st_idx_open(st_source **out, const char *images, const char *labels, long limit,
                      int classes, st_error *err);

/* CIFAR-10 binary batches: comma-separated files of records of 1 label byte
 * and 3072 pixel bytes (3 x 32 x 32, planar). */
st_status st_cifar_open(st_source **out, const char *files, long limit, int classes,
                        st_error *err);

/* An image list: one path per line (blank lines and '#' lines skipped).
 * With names (a file of class names, one per line: Darknet's labels=), the
 * label of a path is the one class name found in it as a substring (none or
 * several is an error naming the line); without, each line is "path label"
 * with an integer label last. Images (JPEG, PNG, BMP, ... via stb_image)
 * are decoded to shape.c channels (1 or 3) and resized to shape.h x
 * shape.w (stretched). An image that cannot be read or decoded is an error
 * naming it, unless skip_bad: then files missing at open are dropped from
 * the list, an image that fails to decode is replaced by the next one that
 * decodes, and *skipped (shared, may be NULL) counts each bad image once. */
typedef struct st_image_opts {
    st_shape shape;
    int skip_bad;
    long *skipped;
    const st_output_ids *outputs; /* the files the caller will write, or NULL: a listed
                                     image among them is refused at open (ST_EUSAGE) */
} st_image_opts;

st_status st_images_open(st_source **out, const char *list, const char *names, long limit,
                         int classes, const st_image_opts *o, st_error *err);

/* Decode the image at path as an image list's read does: to shape.c
 * channels (1 or 3), stretched to shape.h x shape.w, into pixels [C, H, W]
 * (planar). A file that cannot be opened is ST_EIO; one that cannot be
 * decoded, whose header claims more than 32 megapixels, or a 16-bit PGM /
 * PPM of other channels than shape.c, ST_EINPUT; a well-formed image whose
 * decode buffers cannot be had, ST_ENOMEM ("out of memory"); each naming
 * path. */
st_status st_image_decode(const char *path, st_shape shape, unsigned char *pixels,
                          st_error *err);

/* The most memory stb_image holds at once decoding a w x h image of
 * channels_in_file channels (16-bit when bits16) from a file of file_bytes
 * to `channels` channels, plus the resize: the bound an image list's
 * memory estimate and its out-of-memory test use (images.c says how). */
size_t st_image_decode_bytes(int w, int h, int channels_in_file, int bits16, size_t file_bytes,
                             int channels);

/* The class names of a names file (Darknet's names= / labels=): one per
 * line, trimmed, blank lines skipped, distinct, and exactly classes of them
 * (else ST_EINPUT naming the file). *names: classes strings, freed with
 * st_class_names_free. */
st_status st_class_names_read(const char *path, int classes, char ***names, st_error *err);
void st_class_names_free(char **names, int classes);

/* The striped store written by `singletrain pack` (store.h): path is its
 * index file. verify: check every block's checksum now. outputs (or NULL):
 * the files the caller will write; a stripe among them is refused
 * (ST_EUSAGE). */
st_status st_store_open(st_source **out, const char *path, long limit, int classes, int verify,
                        const st_output_ids *outputs, st_error *err);

/* count deterministic records of the given shape with learnable structure:
 * each class has its own pattern (a function of seed and class), each record
 * adds its own noise. The records are numbers first .. first + count - 1 of
 * seed's stream: sources with the same seed and disjoint ranges (a training
 * and a test split) hold different samples of the same classes. */
#define ST_SYNTHETIC_TEST_FIRST (1ull << 40) /* the test split's first record */
st_status st_synthetic_open(st_source **out, st_shape shape, int classes, long count,
                            uint64_t seed, uint64_t first, st_error *err);

/* What a data file or command line names for one split. */
typedef struct st_source_spec {
    const char *path;   /* IDX images, CIFAR .bin list, store index, or image list */
    const char *labels; /* IDX: the labels file */
    const char *names;  /* image lists: class names (Darknet's labels=) */
    long limit;         /* keep at most this many records (0: all) */
    int classes;
    st_image_opts images; /* its outputs also a store's */
    int verify;         /* stores: check block checksums at open */
} st_source_spec;

/* What st_source_open takes a path for, by its name and content:
 * CIFAR batches (the first of its comma-separated files ends in .bin), a
 * store (its magic), IDX images (their magic, 1 or 3 dimensions), an image
 * list (text, or empty); or what it refuses: a path that is not a readable
 * regular file, a gzip file that does not decompress (both with the reason
 * in why [why_len], which must hold "" on entry), binary data of none of
 * those kinds. */
typedef enum st_source_kind {
    ST_SOURCE_CIFAR,
    ST_SOURCE_STORE,
    ST_SOURCE_IDX,
    ST_SOURCE_LIST,
    ST_SOURCE_UNREADABLE,
    ST_SOURCE_BAD_GZIP,
    ST_SOURCE_UNKNOWN,
} st_source_kind;

st_source_kind st_source_kind_of(const char *path, char *why, size_t why_len);

/* Open by content (st_source_kind_of): IDX images need labels. */
st_status st_source_open(st_source **out, const st_source_spec *spec, st_error *err);

/* A zlib message (gzerror's) without the "<fd:N>: " that zlib puts in front
 * for a file opened by descriptor (the readers open through fileio.h). */
const char *st_zlib_message(const char *msg);

/* The first len bytes of the regular file at path into buf, through zlib
 * (which reads plain files too), as st_source_open looks at them: how many
 * it got; 0 when it is empty or cannot be opened (the reader's opener says
 * why); -1 with zlib's reason in why [why_len] (which must hold "" on entry)
 * when a gzip file does not decompress (corrupt, or cut short before its
 * first bytes). */
int st_file_head(const char *path, unsigned char *buf, int len, char *why, size_t why_len);

/* ---- transform ---- */

typedef struct st_transform {
    st_shape input;                /* the network's */
    float mean[ST_MAX_CHANNELS];   /* input_mean=, per channel, in pixel units */
    float scale;                   /* input_scale= (default 1/255) */
    int crop;                      /* crop=1 */
    int crop_pad;                  /* crop_pad=P (with crop=1): the record framed by P
                                    * pixels of 0 before the random crop, as
                                    * torchvision's RandomCrop(size, padding=P) */
    int mirror;                    /* mirror=1 */
    uint64_t seed;
} st_transform;

/* Whether the source's records can become inputs: same channels; the same
 * size, or (crop=1) at least as large once framed by crop_pad pixels on
 * each side. net_where says where the input shape
 * is defined ("net.cfg:1 [net]"), for the message. */
st_status st_transform_check(const st_transform *t, const st_source *s, const char *net_where,
                             st_error *err);

/* One record to the input [C, H, W] floats; sample keys the random crop and
 * mirror (training only; testing takes the centre, unmirrored). */
void st_transform_apply(const st_transform *t, st_shape stored, const unsigned char *pixels,
                        float *x, int training, long sample);

/* Records indices[0..n) to inputs x [n, C, H, W] and labels [n]; sample0 is
 * the global index of the first (the transform's key). pixels: a buffer of
 * st_record_bytes(s) bytes. */
st_status st_source_batch(const st_source *s, const st_transform *t, const long *indices,
                          int n, float *x, int *labels, int training, long sample0,
                          unsigned char *pixels, st_error *err);

/* Room for a chunk of up to cap records of a source: inputs [cap, C, H, W]
 * after the transform, labels [cap], the records' indices [cap] and one
 * record's bytes (st_source_batch's pixels). */
typedef struct st_records_buf {
    int cap;
    float *x;
    int *labels;
    long *indices;
    unsigned char *pixels;
} st_records_buf;

/* What st_records_buf_init allocates for cap records of input_values floats
 * each and records of record_bytes bytes. */
size_t st_records_buf_bytes(int cap, size_t input_values, size_t record_bytes);
st_status st_records_buf_init(st_records_buf *b, int cap, size_t input_values,
                              size_t record_bytes, st_error *err);
void st_records_buf_free(st_records_buf *b);

/* Records [first, first + n) of s, in order (n <= b->cap), into b->x and
 * b->labels, as testing reads them (the centre, unmirrored). */
st_status st_records_read_range(const st_source *s, const st_transform *t, st_records_buf *b,
                                long first, int n, st_error *err);

/* ---- epoch order ---- */

typedef struct st_order {
    long n;
    long *perm;
    uint64_t seed;
} st_order;

st_status st_order_init(st_order *o, long n, uint64_t seed, st_error *err);
/* A permutation of 0..n-1 that depends only on (seed, epoch). */
void st_order_shuffle(st_order *o, long epoch);
void st_order_free(st_order *o);

#endif
