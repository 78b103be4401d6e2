/* Packing a striped store (st_store_pack; store_format.h gives its layout).
 *
 * Stripes are written under their final names (no index refers to a new
 * generation yet), sequentially, io_threads threads reading and decoding
 * the source a chunk ahead of the writer; then fsynced, read back and
 * checked against the block CRCs; then the index is written with
 * st_write_atomic (temporary name, fsync, rename over OUT, fsync of the
 * directory): the commit point. After it, every file named
 * OUT.<16 hex digits>.<3 or more digits> of another generation is removed
 * (the old store's stripes and leftovers of crashed packs; OUT.lock keeps
 * a second pack of the same OUT out meanwhile). On a failure or a stop the
 * new stripes are removed and OUT, with the store it names, is untouched. */
#include "data/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fileio.h"
#include "store_format.h"

#define DEFAULT_STRIPES 32u
#define DEFAULT_UNIT ((uint64_t)256 << 20)
#define CHUNK_BYTES ((size_t)32 << 20)         /* records decoded per round */
#define MAX_IO_THREADS 256

/* "12.3 MB" (binary units) */
static const char *human_bytes(char *buf, size_t size, uint64_t n)
{
    static const char *const units[] = {"bytes", "KB", "MB", "GB", "TB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%llu bytes", (unsigned long long)n);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

/* The default layout (also in `singletrain pack --help`): with record =
 * 4 + C x H x W bytes and N' = --stripes or 32, the unit holds
 * min(floor(256 MB / record), ceil(count / N')) records, at least one, so
 * that a small dataset still spreads over the stripes; then N = --stripes,
 * or min(32, blocks) so that every stripe gets a block. A given unit must
 * hold at least one record; its tail beyond whole records stays unused. */
static st_status plan_layout(const st_source *src, const st_pack_opts *o, store_layout *L,
                             st_error *err)
{
    L->shape = src->shape;
    if (src->shape.c < 1 || src->shape.h < 1 || src->shape.w < 1)
        return st_fail(err, ST_EINPUT, "%s: records of %d x %d x %d cannot be packed", src->name,
                       src->shape.c, src->shape.h, src->shape.w);
    uint64_t rec = store_record_size(L);
    if (rec > MAX_RECORD)
        return st_fail(err, ST_EINPUT, "%s: records of %llu bytes are too large for a store "
                       "(at most %llu)", src->name, (unsigned long long)rec,
                       (unsigned long long)MAX_RECORD);
    if (src->count < 1)
        return st_fail(err, ST_EINPUT, "%s: no records to pack", src->name);
    if (o->stripes < 0 || (uint32_t)o->stripes > MAX_STRIPES)
        return st_fail(err, ST_EUSAGE, "%d stripes: expected 1 to %u", o->stripes, MAX_STRIPES);
    if (o->stripe_unit && (uint64_t)o->stripe_unit < rec)
        return st_fail(err, ST_EUSAGE, "a stripe unit of %zu bytes cannot hold one record of "
                       "%llu bytes (4-byte label + %d x %d x %d pixels) of %s", o->stripe_unit,
                       (unsigned long long)rec, src->shape.c, src->shape.h, src->shape.w,
                       src->name);
    if (o->stripe_unit && (uint64_t)o->stripe_unit > MAX_UNIT)
        return st_fail(err, ST_EUSAGE, "a stripe unit of %zu bytes: at most %llu", o->stripe_unit,
                       (unsigned long long)MAX_UNIT);
    L->count = (uint64_t)src->count;
    uint64_t target = o->stripes ? (uint64_t)o->stripes : DEFAULT_STRIPES;
    if (o->stripe_unit) {
        L->unit = o->stripe_unit;
        L->per_block = (uint32_t)(L->unit / rec < UINT32_MAX ? L->unit / rec : UINT32_MAX);
        L->unit = L->unit / rec > UINT32_MAX ? (uint64_t)L->per_block * rec : L->unit;
    } else {
        uint64_t most = DEFAULT_UNIT / rec, share = (L->count + target - 1) / target;
        uint64_t n = share < most ? share : most;
        L->per_block = (uint32_t)(n < 1 ? 1 : n);
        L->unit = (uint64_t)L->per_block * rec;
    }
    L->blocks = (L->count + L->per_block - 1) / L->per_block;
    if (L->blocks > MAX_BLOCKS)
        return st_fail(err, ST_EUSAGE, "%llu blocks of %llu bytes: too many (at most %llu); "
                       "use a larger --stripe-unit", (unsigned long long)L->blocks,
                       (unsigned long long)L->unit, (unsigned long long)MAX_BLOCKS);
    L->stripes = o->stripes ? (uint32_t)o->stripes
                            : (uint32_t)(L->blocks < DEFAULT_STRIPES ? L->blocks
                                                                     : DEFAULT_STRIPES);
    return ST_OK;
}

/* A random generation: /dev/urandom, else the clock and the pid mixed. */
static uint64_t random_generation(void)
{
    uint64_t g = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    int ok = fd >= 0 && read(fd, &g, sizeof g) == (ssize_t)sizeof g;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        g = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^
            (uint64_t)getpid() << 40;
        g += 0x9e3779b97f4a7c15ull; /* splitmix64 finaliser */
        g = (g ^ (g >> 30)) * 0xbf58476d1ce4e5b9ull;
        g = (g ^ (g >> 27)) * 0x94d049bb133111ebull;
        g ^= g >> 31;
    }
    return g;
}

/* The source's records, decoded a chunk at a time by worker threads. */
typedef struct pack_pool {
    const st_source *src;
    const atomic_int *stop_flag; /* st_pack_opts.stop: leave the job unfinished */
    size_t record;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int n_threads;      /* started; 0: the caller decodes inline */
    unsigned long job;  /* posted jobs; a worker takes each exactly once */
    int active;         /* workers not finished with the current job */
    int stop;
    long start, n, batch;
    unsigned char *buf; /* n records */
    atomic_long next;   /* the next unclaimed record of the job */
    atomic_int failed;
    st_status st;       /* the failure at the lowest record index */
    long bad_index;
    st_error err;
    int max_label;
} pack_pool;

/* Decode records of the current job into records of the store's format
 * until none is left; merge the outcome under the lock. */
static void pool_process(pack_pool *p)
{
    st_error e = {0};
    st_status st = ST_OK;
    int max_label = -1;
    long bad = -1;
    while (st == ST_OK && !atomic_load(&p->failed) &&
           !(p->stop_flag && atomic_load(p->stop_flag))) {
        long i = atomic_fetch_add(&p->next, p->batch);
        if (i >= p->n)
            break;
        long end = i + p->batch < p->n ? i + p->batch : p->n;
        for (; st == ST_OK && i < end; i++) {
            unsigned char *r = p->buf + (size_t)i * p->record;
            int label = -1;
            st = p->src->ops->read(p->src, p->start + i, r + 4, &label, &e);
            if (st == ST_OK && (label < 0 || label >= p->src->classes))
                st = st_fail(&e, ST_EINPUT, "%s: record %ld has label %d, not in [0, %d)",
                             p->src->name, p->start + i, label, p->src->classes);
            if (st != ST_OK) {
                bad = p->start + i;
                break;
            }
            store_put_u32(r, (uint32_t)label);
            if (label > max_label)
                max_label = label;
        }
    }
    pthread_mutex_lock(&p->mu);
    if (max_label > p->max_label)
        p->max_label = max_label;
    if (st != ST_OK && (p->st == ST_OK || bad < p->bad_index)) {
        p->st = st;
        p->bad_index = bad;
        p->err = e;
    }
    if (st != ST_OK)
        atomic_store(&p->failed, 1);
    pthread_mutex_unlock(&p->mu);
}

static void *pool_worker(void *arg)
{
    pack_pool *p = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->job == seen)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->stop)
            break;
        seen = p->job;
        pthread_mutex_unlock(&p->mu);
        pool_process(p);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Start decoding records [start, start + n) into buf (inline when no
 * thread could start; then this returns when done). */
static void pool_post(pack_pool *p, long start, long n, unsigned char *buf)
{
    pthread_mutex_lock(&p->mu);
    p->start = start;
    p->n = n;
    p->buf = buf;
    long per = n / ((long)(p->n_threads > 0 ? p->n_threads : 1) * 8);
    p->batch = per < 1 ? 1 : per > 64 ? 64 : per;
    atomic_store(&p->next, 0);
    if (p->n_threads > 0) {
        p->active = p->n_threads;
        p->job++;
        pthread_cond_broadcast(&p->work);
    }
    pthread_mutex_unlock(&p->mu);
    if (p->n_threads == 0)
        pool_process(p);
}

static void pool_wait(pack_pool *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->active > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static void pool_start(pack_pool *p, const st_source *src, const atomic_int *stop,
                       size_t record, int threads, pthread_t *tid)
{
    p->src = src;
    p->stop_flag = stop;
    p->record = record;
    p->max_label = -1;
    atomic_init(&p->next, 0);
    atomic_init(&p->failed, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int t = 0; t < threads; t++) {
        if (pthread_create(&tid[p->n_threads], NULL, pool_worker, p) != 0)
            break;
        p->n_threads++;
    }
}

static void pool_stop(pack_pool *p, pthread_t *tid)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int t = 0; t < p->n_threads; t++)
        pthread_join(tid[t], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
}

/* One pack in progress. */
typedef struct packing {
    const st_source *src;
    const char *out;
    const st_pack_opts *o;
    store_layout L;
    FILE **files;     /* [stripes] while writing */
    uint32_t created; /* stripe files created so far */
    int lock_fd;      /* OUT.lock, held; -1 when not */
    char lock[4200];  /* its path */
    char name[4200];  /* scratch: a stripe's name */
} packing;

/* ST_ESTOPPED if the pack was asked to stop (before the commit). */
static st_status check_stop(const packing *pk, st_error *err)
{
    int sig = pk->o->stop ? atomic_load(pk->o->stop) : 0;
    if (!sig)
        return ST_OK;
    return st_fail(err, ST_ESTOPPED, "%s: %s: stopped before the store was complete; its new "
                   "stripes are removed, the store it held before (if any) is as it was",
                   pk->out, strsignal(sig));
}

/* The lock of OUT (see store.h): taken with flock, and checked to be still
 * the file named OUT.lock, since its holder removes that file when done (a
 * pack that opened it just before would hold a lock on a removed file). */
static st_status lock_out(packing *pk, st_error *err)
{
    snprintf(pk->lock, sizeof pk->lock, "%s.lock", pk->out);
    for (int tries = 0; tries < 16; tries++) {
        int fd = open(pk->lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
            return st_fail(err, ST_EIO, "%s: cannot create the lock %s: %s", pk->out, pk->lock,
                           strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            char pid[32] = "";
            ssize_t got = e == EWOULDBLOCK ? pread(fd, pid, sizeof pid - 1, 0) : 0;
            close(fd);
            if (got > 0)
                pid[strcspn(pid, "\n")] = '\0';
            if (e == EWOULDBLOCK)
                return st_fail(err, ST_EIO, "%s: another pack (process %s) is writing this "
                               "store (it holds %s): wait for it to end, or pack into another "
                               "OUT", pk->out, got > 0 ? pid : "unknown", pk->lock);
            return st_fail(err, ST_EIO, "%s: cannot lock %s: %s", pk->out, pk->lock,
                           strerror(e));
        }
        struct stat held, named;
        if (fstat(fd, &held) == 0 && stat(pk->lock, &named) == 0 &&
            held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
            char pid[32];
            int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
                st_status st = st_fail(err, ST_EIO, "%s: cannot write the lock %s: %s",
                                       pk->out, pk->lock, strerror(errno));
                unlink(pk->lock);
                close(fd);
                return st;
            }
            pk->lock_fd = fd;
            return ST_OK;
        }
        close(fd);
    }
    return st_fail(err, ST_EIO, "%s: cannot take the lock %s: it keeps changing", pk->out,
                   pk->lock);
}

/* Remove OUT.lock while still holding it, then release it. */
static void unlock_out(packing *pk)
{
    if (pk->lock_fd < 0)
        return;
    unlink(pk->lock);
    close(pk->lock_fd);
    pk->lock_fd = -1;
}

static st_status create_stripes(packing *pk, st_error *err)
{
    store_layout *L = &pk->L;
    /* a generation whose stripe 0 exists (the current store's, a leftover)
     * is drawn again */
    for (int tries = 0; tries < 16; tries++) {
        L->generation = random_generation();
        store_stripe_name(pk->name, sizeof pk->name, pk->out, L->generation, 0);
        if (access(pk->name, F_OK) != 0)
            break;
    }
    for (; pk->created < L->stripes; pk->created++) {
        uint32_t k = pk->created;
        store_stripe_name(pk->name, sizeof pk->name, pk->out, L->generation, k);
        int fd = open(pk->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
            return st_fail(err, ST_EIO, "%s: cannot create stripe %s: %s", pk->out, pk->name,
                           strerror(errno));
        pk->files[k] = fdopen(fd, "wb");
        if (!pk->files[k]) {
            close(fd);
            pk->created++; /* created: removed on failure */
            return st_fail(err, ST_EIO, "%s: cannot open stripe %s: %s", pk->out, pk->name,
                           strerror(errno));
        }
        setvbuf(pk->files[k], NULL, _IOFBF, (size_t)1 << 18);
    }
    return ST_OK;
}

static st_status write_zeros(FILE *f, uint64_t n, const char *path, st_error *err)
{
    static const unsigned char zeros[4096];
    st_status st = ST_OK;
    while (st == ST_OK && n) {
        size_t piece = n < sizeof zeros ? (size_t)n : sizeof zeros;
        st = st_fwrite(f, zeros, piece, path, err);
        n -= piece;
    }
    return st;
}

/* Append records [start, start + n) (in buf, in the store's format) to
 * their stripes, updating the block CRCs and padding finished blocks. */
static st_status write_chunk(packing *pk, long start, long n, const unsigned char *buf,
                             st_error *err)
{
    store_layout *L = &pk->L;
    uint64_t rec = store_record_size(L), i = (uint64_t)start, end = (uint64_t)(start + n);
    st_status st = ST_OK;
    while (st == ST_OK && i < end) {
        uint64_t b = i / L->per_block, block_end = (b + 1) * L->per_block;
        if (block_end > L->count)
            block_end = L->count;
        uint64_t stop = block_end < end ? block_end : end;
        uint32_t k = (uint32_t)(b % L->stripes);
        const unsigned char *p = buf + (i - (uint64_t)start) * rec;
        uint64_t bytes = (stop - i) * rec;
        store_stripe_name(pk->name, sizeof pk->name, pk->out, L->generation, k);
        st = st_fwrite(pk->files[k], p, (size_t)bytes, pk->name, err);
        L->crc[b] = store_crc(L->crc[b], p, bytes);
        if (st == ST_OK && stop == block_end && b + L->stripes < L->blocks)
            st = write_zeros(pk->files[k], L->unit - store_block_used(L, b), pk->name, err);
        i = stop;
    }
    return st;
}

/* Decode the source with the worker pool a chunk ahead of the writer. */
static st_status write_records(packing *pk, double t0, st_error *err)
{
    store_layout *L = &pk->L;
    const st_log *log = pk->o->log;
    size_t rec = (size_t)store_record_size(L);
    long count = (long)L->count;
    long chunk = (long)(CHUNK_BYTES / rec);
    if (chunk < 1)
        chunk = 1;
    if (chunk > count)
        chunk = count;
    int threads = pk->o->io_threads < 1 ? 1 : pk->o->io_threads;
    if (threads > MAX_IO_THREADS)
        threads = MAX_IO_THREADS;
    unsigned char *buf[2] = {malloc((size_t)chunk * rec), malloc((size_t)chunk * rec)};
    pthread_t *tid = st_calloc((size_t)threads, sizeof *tid, "pack threads", err);
    st_status st = ST_OK;
    if (!tid)
        st = ST_ENOMEM;
    else if (!buf[0] || !buf[1])
        st = st_fail(err, ST_ENOMEM, "out of memory: two chunks of %ld records of %zu bytes",
                     chunk, rec);
    pack_pool pool = {0};
    if (st == ST_OK) {
        pool_start(&pool, pk->src, pk->o->stop, rec, threads, tid);
        pool_post(&pool, 0, chunk, buf[0]);
        pool_wait(&pool);
    }
    double last_log = st_now();
    /* chunk k is written from buf[k % 2] while chunk k + 1 is decoded */
    for (long start = 0, k = 0; st == ST_OK && start < count && !atomic_load(&pool.failed);
         k++) {
        long n = count - start < chunk ? count - start : chunk;
        long next = start + n, next_n = count - next < chunk ? count - next : chunk;
        st = check_stop(pk, err); /* also: a stop may have left chunk k undecoded */
        if (st != ST_OK)
            break;
        if (next < count)
            pool_post(&pool, next, next_n, buf[(k + 1) % 2]);
        st = write_chunk(pk, start, n, buf[k % 2], err);
        if (next < count)
            pool_wait(&pool);
        start = next;
        double now = st_now();
        if (st == ST_OK && now - last_log >= 2.0 && start < count) {
            last_log = now;
            st_info(log, "pack: %ld of %ld records (%.0f records/s)", start, count,
                    (double)start / (now - t0));
        }
    }
    if (tid && buf[0] && buf[1]) {
        pool_stop(&pool, tid);
        if (st == ST_OK && pool.st != ST_OK)
            st = st_fail(err, pool.st, "%s", pool.err.msg);
        L->classes = (uint32_t)(pool.max_label + 1);
    }
    free(buf[0]);
    free(buf[1]);
    free(tid);
    return st;
}

/* Flush, fsync and close every stripe (fsync only when all went well). */
static st_status close_stripes(packing *pk, st_status st, st_error *err)
{
    for (uint32_t k = 0; pk->files && k < pk->L.stripes; k++) {
        FILE *f = pk->files[k];
        if (!f)
            continue;
        store_stripe_name(pk->name, sizeof pk->name, pk->out, pk->L.generation, k);
        if (st == ST_OK && fflush(f) != 0)
            st = st_fail(err, ST_EIO, "%s: write failed: %s", pk->name, strerror(errno));
        if (st == ST_OK && fsync(fileno(f)) != 0)
            st = st_fail(err, ST_EIO, "%s: fsync failed: %s", pk->name, strerror(errno));
        if (fclose(f) != 0 && st == ST_OK)
            st = st_fail(err, ST_EIO, "%s: close failed: %s", pk->name, strerror(errno));
        pk->files[k] = NULL;
    }
    return st;
}

/* Read the new stripes back: lengths and every block's CRC. */
static st_status verify_new(packing *pk, st_error *err)
{
    int *fds = st_calloc(pk->L.stripes, sizeof *fds, "stripe files", err);
    if (!fds)
        return ST_ENOMEM;
    for (uint32_t k = 0; k < pk->L.stripes; k++)
        fds[k] = -1;
    st_status st = store_stripes_open(pk->out, &pk->L, fds, err);
    if (st == ST_OK)
        st = store_blocks_verify(pk->out, &pk->L, fds, err);
    if (st != ST_OK)
        st_error_prefix(err, "verifying what was just written: ");
    store_stripes_close(fds, pk->L.stripes);
    free(fds);
    return st;
}

typedef struct index_out {
    const char *path;
    const unsigned char *data;
    size_t len;
} index_out;

static st_status write_index_bytes(FILE *f, void *ctx, st_error *err)
{
    const index_out *x = ctx;
    return st_fwrite(f, x->data, x->len, x->path, err);
}

/* The commit point: the index, atomically over OUT. */
static st_status write_index(packing *pk, size_t *bytes, st_error *err)
{
    index_out x = {pk->out, NULL, 0};
    unsigned char *d = store_index_encode(&pk->L, &x.len, err);
    if (!d)
        return ST_ENOMEM;
    x.data = d;
    st_status st = st_write_atomic(pk->out, write_index_bytes, &x, err);
    free(d);
    *bytes = x.len;
    return st;
}

/* Whether name is base.<16 hex>.<3+ digits>; *gen gets the hex. */
static int is_stripe_of(const char *name, const char *base, uint64_t *gen)
{
    size_t blen = strlen(base);
    if (strncmp(name, base, blen) != 0 || name[blen] != '.')
        return 0;
    const char *p = name + blen + 1;
    uint64_t g = 0;
    for (int i = 0; i < 16; i++, p++) {
        int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (v < 0)
            return 0;
        g = g << 4 | (uint64_t)v;
    }
    if (*p++ != '.')
        return 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        digits++;
    if (*p || digits < 3)
        return 0;
    *gen = g;
    return 1;
}

/* After the commit: remove stripes of every other generation of OUT (the
 * names are collected first, then removed, so that the listing is not
 * changed under readdir). A failure here only warns: the new store is
 * complete. */
static void remove_old_generations(packing *pk)
{
    char *dcopy = strdup(pk->out), *bcopy = strdup(pk->out);
    DIR *dir = dcopy && bcopy ? opendir(dirname(dcopy)) : NULL;
    const char *base = bcopy ? basename(bcopy) : NULL;
    size_t blen = base ? strlen(base) : 0, n = 0, cap = 0;
    char **old = NULL;
    if (!dir)
        st_warn(pk->o->log, "%s: cannot list its directory to remove older stripes: %s",
                pk->out, strerror(errno));
    for (struct dirent *e; dir && (e = readdir(dir));) {
        uint64_t g;
        if (!is_stripe_of(e->d_name, base, &g) || g == pk->L.generation)
            continue;
        if (n == cap) {
            char **grown = realloc(old, (cap ? 2 * cap : 16) * sizeof *old);
            if (!grown)
                break;
            old = grown;
            cap = cap ? 2 * cap : 16;
        }
        /* OUT's directory part, then the entry's name past OUT's base */
        size_t len = strlen(pk->out) + strlen(e->d_name + blen) + 1;
        if (!(old[n] = malloc(len)))
            break;
        snprintf(old[n++], len, "%s%s", pk->out, e->d_name + blen);
    }
    if (dir)
        closedir(dir);
    int removed = 0;
    for (size_t i = 0; i < n; i++) {
        if (unlink(old[i]) != 0)
            st_warn(pk->o->log, "cannot remove the old stripe %s: %s", old[i], strerror(errno));
        else
            removed++;
        free(old[i]);
    }
    if (removed)
        st_debug(pk->o->log, "pack: removed %d stripe files of older generations of %s",
                 removed, pk->out);
    free(old);
    free(dcopy);
    free(bcopy);
}

st_status st_store_pack(const st_source *src, const char *out, const st_pack_opts *o,
                        long *written, st_error *err)
{
    static const st_pack_opts defaults = {.io_threads = 1};
    double t0 = st_now();
    packing pk = {.src = src, .out = out, .o = o ? o : &defaults, .lock_fd = -1};
    size_t index_bytes = 0;
    st_status st = plan_layout(src, pk.o, &pk.L, err);
    if (st == ST_OK && strlen(out) + 32 > sizeof pk.name)
        st = st_fail(err, ST_EUSAGE, "%s: the output path is too long", out);
    if (st == ST_OK) {
        pk.L.crc = st_calloc(pk.L.blocks, sizeof *pk.L.crc, "block checksums", err);
        pk.files = pk.L.crc ? st_calloc(pk.L.stripes, sizeof *pk.files, "stripe files", err)
                            : NULL;
        if (!pk.files)
            st = ST_ENOMEM;
    }
    if (st == ST_OK)
        st = lock_out(&pk, err);
    if (st == ST_OK)
        st = create_stripes(&pk, err);
    if (st == ST_OK)
        st = write_records(&pk, t0, err);
    st = close_stripes(&pk, st, err);
    if (st == ST_OK)
        st = check_stop(&pk, err);
    if (st == ST_OK)
        st = verify_new(&pk, err);
    if (st == ST_OK)
        st = check_stop(&pk, err);
    if (st == ST_OK)
        st = write_index(&pk, &index_bytes, err);
    if (st == ST_OK) {
        remove_old_generations(&pk);
        uint64_t total = index_bytes;
        for (uint32_t k = 0; k < pk.L.stripes; k++)
            total += store_stripe_bytes(&pk.L, k);
        double secs = st_now() - t0;
        char unit[32], size[32];
        st_info(pk.o->log, "packed %llu records of %d x %d x %d, %u classes, into %u stripes "
                "of %s units (%llu records per block, %llu blocks): %s in %.2f s "
                "(%.0f records/s): %s", (unsigned long long)pk.L.count, pk.L.shape.c,
                pk.L.shape.h, pk.L.shape.w, pk.L.classes, pk.L.stripes,
                human_bytes(unit, sizeof unit, pk.L.unit), (unsigned long long)pk.L.per_block,
                (unsigned long long)pk.L.blocks, human_bytes(size, sizeof size, total), secs,
                secs > 0 ? (double)pk.L.count / secs : 0.0, out);
        if (written)
            *written = (long)pk.L.count;
    } else {
        for (uint32_t k = 0; k < pk.created; k++) {
            store_stripe_name(pk.name, sizeof pk.name, out, pk.L.generation, k);
            unlink(pk.name);
        }
    }
    unlock_out(&pk);
    free(pk.files);
    free(pk.L.crc);
    return st;
}
