/* The scheduler and its worker threads; see scheduler.h. */
#include "scheduler.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "barrier.h"

enum sched_cmd { CMD_STEP, CMD_TEST, CMD_ASYNC, CMD_STOP };

#define MAX_SIZES 8

typedef struct st_worker {
    st_sched *s;
    int id;
    pthread_t thread;
    int started;
    st_replica replica;
    int sizes[MAX_SIZES];  /* every shard size it will see */
    int n_sizes, cap;
    float *x;              /* its own shard buffer [cap, C, H, W] (test, async) */
    int *labels;
    long *indices;
    st_order order;        /* async: its copy of the epoch order */
    long order_epoch;
    /* results of the last command */
    double loss;
    long images, correct;
    st_worker_time time;
    st_status status;
    st_error err;
    /* async progress, under s->clock_lock */
    long clock;            /* iterations it has finished, counted from 0 */
    double clock_loss;
    long clock_images;
} st_worker;

struct st_sched {
    st_sched_opts o;
    const st_net *net;
    st_ps *ps;
    int T;
    st_worker *w;
    st_barrier start, mid, end; /* start and end include the scheduler */
    int barriers_ready;
    int launch;                 /* under clock_lock: 0 wait, 1 go, -1 cancelled */
    /* the command; written by the scheduler before `start` */
    int cmd;
    st_batch batch;
    long iteration;
    float lr, scale;
    const st_source *test;
    long async_first, async_last;
    pthread_mutex_t clock_lock;
    pthread_cond_t clock_moved;
};

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void st_shard_of(int n, int workers, int r, int *first, int *count)
{
    int q = n / workers, extra = n % workers;
    *count = q + (r < extra);
    *first = r * q + (r < extra ? r : extra);
}

int st_sched_workers(const st_sched *s)
{
    return s->T;
}

const st_replica *st_sched_replica(const st_sched *s, int worker)
{
    return &s->w[worker].replica;
}

static void add_size(st_worker *w, int n)
{
    for (int i = 0; i < w->n_sizes; i++)
        if (w->sizes[i] == n)
            return;
    if (n > 0 && w->n_sizes < MAX_SIZES)
        w->sizes[w->n_sizes++] = n;
    if (n > w->cap)
        w->cap = n;
}

/* The shard sizes worker r will be called with: its share of a full batch
 * and of the last batch of an epoch, and its chunks of the test set. */
static void plan_sizes(st_sched *s, st_worker *w)
{
    int first, count, B = s->o.batch, T = s->T;
    st_shard_of(B, T, w->id, &first, &count);
    add_size(w, count);
    int last = (int)(s->o.train->count % B);
    if (last) {
        st_shard_of(last, T, w->id, &first, &count);
        add_size(w, count);
    }
    int cap = w->cap;
    long tb = s->o.test_count * w->id / T, te = s->o.test_count * (w->id + 1) / T;
    if (te > tb && (te - tb) % cap)
        add_size(w, (int)((te - tb) % cap));
}

static st_status worker_init(st_worker *w)
{
    st_sched *s = w->s;
    plan_sizes(s, w);
    st_replica_opts ro = {.n = w->cap, .batch_sizes = w->sizes, .n_batch_sizes = w->n_sizes,
                          .training = 1, .timing = s->o.timing,
                          .backend = {s->o.intra, w->id}};
    st_status st = st_replica_init(&w->replica, s->net, s->o.backend, &ro, &w->err);
    if (st != ST_OK) {
        st_error_prefix(&w->err, "worker %d: ", w->id);
        return st;
    }
    size_t per = st_shape_count(s->net->input);
    w->x = st_calloc((size_t)w->cap * per, sizeof *w->x, "worker input", &w->err);
    w->labels = st_calloc((size_t)w->cap, sizeof *w->labels, "worker labels", &w->err);
    w->indices = st_calloc((size_t)w->cap, sizeof *w->indices, "worker indices", &w->err);
    if (!w->x || !w->labels || !w->indices)
        return ST_ENOMEM;
    w->order_epoch = -1;
    if (s->o.sync != ST_SYNC_BSP)
        return st_order_init(&w->order, s->o.train->count, s->o.seed, &w->err);
    return ST_OK;
}

/* A BSP iteration, worker r's part. It always meets the others at the
 * barrier, even after a failure, so nobody waits forever. */
static void worker_step(st_worker *w)
{
    st_sched *s = w->s;
    int r = w->id, first, count;
    size_t per = st_shape_count(s->net->input);
    st_shard_of(s->batch.n, s->T, r, &first, &count);
    double t0 = now_seconds();
    w->loss = 0.0;
    w->images = count;
    if (w->status == ST_OK && count > 0) {
        st_shard shard = {count, s->batch.x + (size_t)first * per, s->batch.labels + first,
                          s->batch.sample0 + first};
        st_step_info info = {1, s->o.seed, s->iteration};
        w->status = st_replica_forward(&w->replica, s->ps->weights, &shard, &info, &w->loss,
                                       &w->err);
        if (w->status == ST_OK)
            w->status = st_replica_backward(&w->replica, s->ps->weights, s->ps->grads[r],
                                            &shard, &info, NULL, &w->err);
    } else if (count == 0) {
        memset(s->ps->grads[r], 0, s->ps->count * sizeof(float));
    }
    double t1 = now_seconds();
    st_barrier_wait(&s->mid);
    double t2 = now_seconds();
    st_ps_reduce(s->ps, r, s->scale, s->o.intra);
    double t3 = now_seconds();
    st_ps_apply(s->ps, r, s->o.solver, s->lr, s->o.intra);
    double t4 = now_seconds();
    w->time = (st_worker_time){t1 - t0, t2 - t1, t3 - t2, t4 - t3};
}

/* Worker r's part of the test set, in chunks of its capacity. */
static void worker_test(st_worker *w)
{
    st_sched *s = w->s;
    long b = s->test->count * w->id / s->T, e = s->test->count * (w->id + 1) / s->T;
    int classes = s->net->classes;
    st_step_info info = {0, s->o.seed, 0};
    w->correct = 0;
    w->loss = 0.0;
    for (long at = b; at < e && w->status == ST_OK; at += w->cap) {
        int n = (int)(e - at < w->cap ? e - at : w->cap);
        for (int i = 0; i < n; i++)
            w->indices[i] = at + i;
        double loss = 0.0;
        st_shard shard = {n, w->x, w->labels, at};
        w->status = st_source_batch(s->test, w->indices, n, w->x, w->labels, &w->err);
        if (w->status == ST_OK)
            w->status = st_replica_forward(&w->replica, s->ps->weights, &shard, &info, &loss,
                                           &w->err);
        if (w->status != ST_OK)
            break;
        w->loss += loss;
        const float *out = st_replica_output(&w->replica, s->net->output_layer);
        for (int i = 0; i < n; i++) {
            const float *o = out + (size_t)i * classes;
            int best = 0;
            for (int c = 1; c < classes; c++)
                if (o[c] > o[best])
                    best = c;
            w->correct += best == w->labels[i];
        }
    }
}

static long min_clock(const st_sched *s)
{
    long m = s->w[0].clock;
    for (int r = 1; r < s->T; r++)
        m = s->w[r].clock < m ? s->w[r].clock : m;
    return m;
}

static void finish_async_iteration(st_worker *w, long clock, double loss, int images)
{
    st_sched *s = w->s;
    pthread_mutex_lock(&s->clock_lock);
    w->clock = clock;
    w->clock_loss += loss;
    w->clock_images += images;
    pthread_cond_broadcast(&s->clock_moved);
    pthread_mutex_unlock(&s->clock_lock);
}

/* SSP / ASP: worker r's shard of every iteration, at its own pace. */
static void worker_async(st_worker *w)
{
    st_sched *s = w->s;
    const st_source *src = s->o.train;
    int B = s->o.batch, r = w->id;
    long ipe = (src->count + B - 1) / B;
    memset(&w->time, 0, sizeof w->time);
    for (long i = s->async_first; i < s->async_last && w->status == ST_OK; i++) {
        double t0 = now_seconds();
        if (s->o.sync == ST_SYNC_SSP) {
            pthread_mutex_lock(&s->clock_lock);
            while (i - s->o.staleness > min_clock(s))
                pthread_cond_wait(&s->clock_moved, &s->clock_lock);
            pthread_mutex_unlock(&s->clock_lock);
        }
        double t1 = now_seconds();
        long epoch = i / ipe, b0 = (i % ipe) * B;
        if (epoch != w->order_epoch) {
            st_order_shuffle(&w->order, epoch);
            w->order_epoch = epoch;
        }
        int n = (int)(src->count - b0 < B ? src->count - b0 : B), first, count;
        st_shard_of(n, s->T, r, &first, &count);
        double loss = 0.0;
        if (count > 0) {
            st_shard shard = {count, w->x, w->labels, epoch * src->count + b0 + first};
            st_step_info info = {1, s->o.seed, i};
            w->status = st_source_batch(src, w->order.perm + b0 + first, count, w->x,
                                        w->labels, &w->err);
            if (w->status == ST_OK)
                w->status = st_replica_forward(&w->replica, s->ps->weights, &shard, &info,
                                               &loss, &w->err);
            if (w->status == ST_OK)
                w->status = st_replica_backward(&w->replica, s->ps->weights, s->ps->grads[r],
                                                &shard, &info, NULL, &w->err);
        }
        double t2 = now_seconds();
        /* divided by the whole batch: the T updates of an iteration add up
         * to the BSP step */
        if (count > 0 && w->status == ST_OK)
            st_ps_apply_own(s->ps, r, 1.0f / (float)n, s->o.solver,
                            st_lr_at(&s->o.solver->lr, i), s->o.intra);
        double t3 = now_seconds();
        w->time.barrier += t1 - t0;
        w->time.compute += t2 - t1;
        w->time.update += t3 - t2;
        /* a failed worker jumps to the end so nobody waits for it */
        finish_async_iteration(w, w->status == ST_OK ? i + 1 : s->async_last, loss, count);
    }
}

static void *worker_main(void *arg)
{
    st_worker *w = arg;
    st_sched *s = w->s;
    /* Wait until every worker thread exists (or creating one failed). */
    pthread_mutex_lock(&s->clock_lock);
    while (s->launch == 0)
        pthread_cond_wait(&s->clock_moved, &s->clock_lock);
    int go = s->launch > 0;
    pthread_mutex_unlock(&s->clock_lock);
    if (!go)
        return NULL;
    w->status = worker_init(w);
    st_barrier_wait(&s->end); /* report set-up */
    for (;;) {
        st_barrier_wait(&s->start);
        int cmd = s->cmd;
        if (cmd == CMD_STOP)
            break;
        if (cmd == CMD_STEP)
            worker_step(w);
        else if (cmd == CMD_TEST && w->status == ST_OK)
            worker_test(w);
        else if (cmd == CMD_ASYNC)
            worker_async(w);
        st_barrier_wait(&s->end);
    }
    return NULL;
}

/* The first worker failure, copied to err. */
static st_status collect_status(st_sched *s, st_error *err)
{
    for (int r = 0; r < s->T; r++)
        if (s->w[r].status != ST_OK) {
            st_fail(err, s->w[r].status, "%s", s->w[r].err.msg);
            return s->w[r].status;
        }
    return ST_OK;
}

static void run_command(st_sched *s, int cmd)
{
    s->cmd = cmd;
    st_barrier_wait(&s->start);
    st_barrier_wait(&s->end);
}

void st_sched_free(st_sched *s)
{
    if (!s)
        return;
    if (s->launch > 0) {
        s->cmd = CMD_STOP;
        st_barrier_wait(&s->start);
    }
    for (int r = 0; r < s->T; r++) {
        st_worker *w = &s->w[r];
        if (w->started)
            pthread_join(w->thread, NULL);
        st_replica_free(&w->replica);
        st_order_free(&w->order);
        free(w->x);
        free(w->labels);
        free(w->indices);
    }
    if (s->barriers_ready) {
        st_barrier_destroy(&s->start);
        st_barrier_destroy(&s->mid);
        st_barrier_destroy(&s->end);
        pthread_mutex_destroy(&s->clock_lock);
        pthread_cond_destroy(&s->clock_moved);
    }
    free(s->w);
    free(s);
}

st_status st_sched_create(st_sched **out, const st_net *net, st_ps *ps,
                          const st_sched_opts *o, st_error *err)
{
    *out = NULL;
    if (o->threads < 1 || o->batch < o->threads)
        return st_fail(err, ST_EUSAGE, "-b %d with -t %d: every worker needs at least one "
                       "image of the batch (expected -b >= -t)", o->batch, o->threads);
    st_sched *s = st_calloc(1, sizeof *s, "scheduler", err);
    if (!s)
        return ST_ENOMEM;
    s->o = *o;
    s->net = net;
    s->ps = ps;
    s->T = o->threads;
    s->w = st_calloc((size_t)s->T, sizeof *s->w, "workers", err);
    if (!s->w) {
        free(s);
        return ST_ENOMEM;
    }
    if (st_barrier_init(&s->start, s->T + 1) || st_barrier_init(&s->mid, s->T) ||
        st_barrier_init(&s->end, s->T + 1) || pthread_mutex_init(&s->clock_lock, NULL) ||
        pthread_cond_init(&s->clock_moved, NULL)) {
        free(s->w);
        free(s);
        return st_fail(err, ST_EINTERNAL, "cannot create the scheduler's barriers");
    }
    s->barriers_ready = 1;
    int started = 0;
    for (int r = 0; r < s->T; r++) {
        st_worker *w = &s->w[r];
        w->s = s;
        w->id = r;
        w->started = pthread_create(&w->thread, NULL, worker_main, w) == 0;
        started += w->started;
    }
    pthread_mutex_lock(&s->clock_lock);
    s->launch = started == s->T ? 1 : -1;
    pthread_cond_broadcast(&s->clock_moved);
    pthread_mutex_unlock(&s->clock_lock);
    if (started < s->T) {
        st_fail(err, ST_EIO, "cannot create worker threads: %d of %d started", started, s->T);
        st_sched_free(s);
        return ST_EIO;
    }
    st_barrier_wait(&s->end);
    st_status st = collect_status(s, err);
    if (st != ST_OK) {
        st_sched_free(s);
        return st;
    }
    *out = s;
    return ST_OK;
}

st_status st_sched_step(st_sched *s, const st_batch *b, long iteration, float lr,
                        st_step_result *res, st_error *err)
{
    s->batch = *b;
    s->iteration = iteration;
    s->lr = lr;
    s->scale = 1.0f / (float)b->n;
    run_command(s, CMD_STEP);
    st_status st = collect_status(s, err);
    if (st != ST_OK)
        return st;
    memset(res, 0, sizeof *res);
    for (int r = 0; r < s->T; r++) {
        const st_worker_time *t = &s->w[r].time;
        res->loss += s->w[r].loss;
        res->time.compute += t->compute / s->T;
        res->time.barrier += t->barrier / s->T;
        res->time.aggregate += t->aggregate / s->T;
        res->time.update += t->update / s->T;
    }
    return ST_OK;
}

st_status st_sched_test(st_sched *s, const st_source *test, long *correct, double *loss,
                        st_error *err)
{
    s->test = test;
    run_command(s, CMD_TEST);
    st_status st = collect_status(s, err);
    if (st != ST_OK)
        return st;
    *correct = 0;
    *loss = 0.0;
    for (int r = 0; r < s->T; r++) {
        *correct += s->w[r].correct;
        *loss += s->w[r].loss;
    }
    return ST_OK;
}

st_status st_sched_run_async(st_sched *s, long first, long last, long every,
                             st_progress_fn progress, void *ctx, st_worker_time *time,
                             st_error *err)
{
    s->async_first = first;
    s->async_last = last;
    for (int r = 0; r < s->T; r++) {
        s->w[r].clock = first;
        s->w[r].clock_loss = 0.0;
        s->w[r].clock_images = 0;
    }
    s->cmd = CMD_ASYNC;
    st_barrier_wait(&s->start);
    for (long target = first + every; progress && first < last; target += every) {
        if (target > last)
            target = last;
        double loss = 0.0;
        long images = 0;
        pthread_mutex_lock(&s->clock_lock);
        while (min_clock(s) < target)
            pthread_cond_wait(&s->clock_moved, &s->clock_lock);
        for (int r = 0; r < s->T; r++) {
            loss += s->w[r].clock_loss;
            images += s->w[r].clock_images;
            s->w[r].clock_loss = 0.0;
            s->w[r].clock_images = 0;
        }
        pthread_mutex_unlock(&s->clock_lock);
        progress(ctx, target, loss, images);
        if (target == last)
            break;
    }
    st_barrier_wait(&s->end);
    memset(time, 0, sizeof *time);
    for (int r = 0; r < s->T; r++) {
        time->compute += s->w[r].time.compute / s->T;
        time->barrier += s->w[r].time.barrier / s->T;
        time->update += s->w[r].time.update / s->T;
    }
    return collect_status(s, err);
}
