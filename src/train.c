/* The trainer: set-up from a cfg and options, the iteration loop with test
 * phases and progress lines, and the final snapshot.
 *
 * One iteration: take the next mini-batch of the epoch's permutation (the
 * last one of an epoch may be smaller), forward and backward on the worker,
 * then reduce the gradient and apply the solver slice by slice (ps.h). */
#define _POSIX_C_SOURCE 200809L
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cfg.h"
#include "data.h"
#include "hparams.h"
#include "ps.h"
#include "snapshot.h"

/* Synthetic data when no files are given: records per split by default. */
#define SYNTHETIC_TRAIN 1024
#define SYNTHETIC_TEST 256

struct st_trainer {
    st_log log;
    st_train_opts o;
    char cfg_path[ST_PATH_MAX];
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    const st_backend *backend;
    st_ps ps;
    st_replica replica;
    st_source *train, *test;
    st_order order;
    int batch;
    long iterations, iters_per_epoch, shuffled_epoch;
    float *x;      /* [batch, C, H, W] */
    int *labels;   /* [batch] */
    long *indices; /* [batch] */
};

st_train_opts st_train_defaults(void)
{
    st_train_opts o = {.threads = 1, .intra = 1, .seed = 1, .backend = "dnnl", .log_every = 100};
    return o;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const st_net *st_trainer_net(const st_trainer *t)
{
    return &t->net;
}

const float *st_trainer_weights(const st_trainer *t)
{
    return t->ps.weights;
}

void st_trainer_free(st_trainer *t)
{
    if (!t)
        return;
    st_replica_free(&t->replica);
    st_ps_free(&t->ps);
    st_source_close(t->train);
    st_source_close(t->test);
    st_order_free(&t->order);
    free(t->x);
    free(t->labels);
    free(t->indices);
    st_net_free(&t->net);
    st_cfg_free(&t->cfg);
    free(t);
}

/* Check that a data source fits the network's input. */
static st_status check_shape(const st_trainer *t, const st_source *s, st_error *err)
{
    st_shape a = s->shape, b = t->net.input;
    if (a.c == b.c && a.h == b.h && a.w == b.w)
        return ST_OK;
    return st_fail(err, ST_EINPUT, "%s: images are %d x %d x %d but %s:%d [net] expects "
                   "width x height x channels %d x %d x %d", s->name, a.w, a.h, a.c,
                   t->cfg.path, t->cfg.secs[0].line, b.w, b.h, b.c);
}

static st_status open_data(st_trainer *t, st_error *err)
{
    st_data_paths d = t->hp.data;
    int synthetic = t->o.data && strcmp(t->o.data, "synthetic") == 0;
    if (t->o.data && !synthetic) {
        memset(&d, 0, sizeof d);
        st_status st = st_data_paths_load(t->o.data, &d, &t->log, err);
        if (st != ST_OK)
            return st;
    }
    if (synthetic || (!d.train[0] && !d.test[0])) {
        long ntrain = t->o.train_images ? t->o.train_images : SYNTHETIC_TRAIN;
        long ntest = t->o.test_images ? t->o.test_images : SYNTHETIC_TEST;
        st_info(&t->log, "no data given: training on %ld synthetic images of %d x %d x %d, "
                "%d classes (testing on %ld more)", ntrain, t->net.input.w, t->net.input.h,
                t->net.input.c, t->net.classes, ntest);
        st_status st = st_synthetic_open(&t->train, t->net.input, t->net.classes, ntrain,
                                         t->o.seed, err);
        if (st == ST_OK)
            st = st_synthetic_open(&t->test, t->net.input, t->net.classes, ntest,
                                   t->o.seed ^ 0x5eedULL, err);
        return st;
    }
    const char *where = t->o.data ? t->o.data : t->cfg.path;
    if (!d.train[0] || !d.train_labels[0])
        return st_fail(err, ST_EINPUT, "%s: needs both train= and train_labels= (IDX images "
                       "and labels)", where);
    if (d.test[0] && !d.test_labels[0])
        return st_fail(err, ST_EINPUT, "%s: test= needs test_labels=", where);
    st_status st = st_idx_open(&t->train, d.train, d.train_labels, t->o.train_images,
                               t->net.classes, err);
    if (st == ST_OK)
        st = check_shape(t, t->train, err);
    if (st == ST_OK && d.test[0]) {
        st = st_idx_open(&t->test, d.test, d.test_labels, t->o.test_images, t->net.classes,
                         err);
        if (st == ST_OK)
            st = check_shape(t, t->test, err);
    }
    if (st == ST_OK)
        st_info(&t->log, "data: %ld training images from %s, %ld test images%s%s",
                t->train->count, t->train->name, t->test ? t->test->count : 0L,
                t->test ? " from " : "", t->test ? t->test->name : "");
    return st;
}

static st_status plan_schedule(st_trainer *t, st_error *err)
{
    t->iters_per_epoch = (t->train->count + t->batch - 1) / t->batch;
    if (t->o.iters)
        t->iterations = t->o.iters;
    else if (t->o.epochs)
        t->iterations = t->o.epochs * t->iters_per_epoch;
    else if (t->hp.max_batches)
        t->iterations = t->hp.max_batches;
    else
        return st_fail(err, ST_EUSAGE, "%s: no schedule: give --iters, --epochs or "
                       "max_batches= in [net]", t->cfg.path);
    if (!t->hp.solver.lr.max_batches)
        t->hp.solver.lr.max_batches = t->iterations;
    return ST_OK;
}

static st_status check_trainable(const st_trainer *t, st_error *err)
{
    const st_layer *last = t->net.layers[t->net.n_layers - 1];
    if (last->is_loss)
        return ST_OK;
    return st_fail(err, ST_EINPUT, "%s:%d: the last layer is [%s]: training needs a loss "
                   "layer ([softmax] or [cost]) at the end", t->cfg.path, last->line,
                   last->ops->type);
}

/* Fail before training, not after it, if the weights could not be saved. */
static st_status check_snapshot_dir(const char *dir, st_error *err)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return st_fail(err, ST_EUSAGE, "--snapshot-dir %s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return st_fail(err, ST_EUSAGE, "--snapshot-dir %s: not a directory", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return st_fail(err, ST_EUSAGE, "--snapshot-dir %s: not writable: %s", dir,
                       strerror(errno));
    return ST_OK;
}

st_status st_trainer_create(st_trainer **out, const char *cfg_path, const st_train_opts *o,
                            const st_log *log, st_error *err)
{
    *out = NULL;
    st_trainer *t = st_calloc(1, sizeof *t, "trainer", err);
    if (!t)
        return ST_ENOMEM;
    t->log = *log;
    t->o = *o;
    t->shuffled_epoch = -1;
    snprintf(t->cfg_path, sizeof t->cfg_path, "%s", cfg_path);
    st_status st = st_backend_find(o->backend, &t->backend, err);
    if (st == ST_OK && o->snapshot_dir)
        st = check_snapshot_dir(o->snapshot_dir, err);
    if (st == ST_OK)
        st = st_net_load(cfg_path, &t->cfg, &t->hp, &t->net, log, err);
    if (st == ST_OK)
        st = check_trainable(t, err);
    if (st == ST_OK) {
        t->batch = o->batch ? o->batch : t->hp.batch;
        if (o->threads > 1)
            st_warn(log, "-t %d: this build trains with one worker thread", o->threads);
        st_net_print(&t->net, log);
        st = open_data(t, err);
    }
    if (st == ST_OK)
        st = plan_schedule(t, err);
    if (st == ST_OK)
        st = st_ps_init(&t->ps, &t->net.params, 1, st_solver_state_per_param(&t->hp.solver),
                        err);
    if (st == ST_OK) {
        st_params_init(&t->net.params, t->ps.weights, o->seed);
        /* Every sample count a call will see: full batches, the last one of
         * an epoch, and the last one of the test set. */
        int sizes[3] = {t->batch, (int)(t->train->count % t->batch),
                        t->test ? (int)(t->test->count % t->batch) : 0};
        st_replica_opts ro = {.n = t->batch, .batch_sizes = sizes, .n_batch_sizes = 3,
                              .training = 1, .timing = o->profile, .backend = {o->intra, 0}};
        st = st_replica_init(&t->replica, &t->net, t->backend, &ro, err);
    }
    if (st == ST_OK)
        st = st_order_init(&t->order, t->train->count, o->seed, err);
    if (st == ST_OK) {
        t->x = st_calloc((size_t)t->batch * st_shape_count(t->net.input), sizeof *t->x,
                         "input batch", err);
        t->labels = st_calloc((size_t)t->batch, sizeof *t->labels, "label batch", err);
        t->indices = st_calloc((size_t)t->batch, sizeof *t->indices, "batch indices", err);
        if (!t->x || !t->labels || !t->indices)
            st = ST_ENOMEM;
    }
    if (st != ST_OK) {
        st_trainer_free(t);
        return st;
    }
    *out = t;
    return ST_OK;
}

/* Fraction of the samples whose highest class score is their label, and the
 * mean loss, over a whole source in batches of the replica's size. */
static st_status evaluate(st_trainer *t, const st_source *src, double *accuracy, double *loss,
                          st_error *err)
{
    long correct = 0;
    double loss_sum = 0.0;
    int classes = t->net.classes;
    st_step_info info = {0, t->o.seed, 0};
    for (long b0 = 0; b0 < src->count; b0 += t->batch) {
        int n = (int)(src->count - b0 < t->batch ? src->count - b0 : t->batch);
        for (int i = 0; i < n; i++)
            t->indices[i] = b0 + i;
        st_status st = st_source_batch(src, t->indices, n, t->x, t->labels, err);
        st_shard shard = {n, t->x, t->labels, b0};
        double batch_loss = 0.0;
        if (st == ST_OK)
            st = st_replica_forward(&t->replica, t->ps.weights, &shard, &info, &batch_loss, err);
        if (st != ST_OK)
            return st;
        loss_sum += batch_loss;
        const float *out = st_replica_output(&t->replica, t->net.output_layer);
        for (int i = 0; i < n; i++) {
            const float *o = out + (size_t)i * classes;
            int best = 0;
            for (int c = 1; c < classes; c++)
                if (o[c] > o[best])
                    best = c;
            correct += best == t->labels[i];
        }
    }
    *accuracy = (double)correct / (double)src->count;
    *loss = loss_sum / (double)src->count;
    return ST_OK;
}

/* One iteration; *images gets its batch size, *loss its summed loss, and
 * split the time it spent on each part. */
static st_status train_step(st_trainer *t, long it, int *images, double *loss,
                            st_time_split *split, st_error *err)
{
    long epoch = it / t->iters_per_epoch, j = it % t->iters_per_epoch;
    double t0 = now_seconds();
    if (epoch != t->shuffled_epoch) {
        st_order_shuffle(&t->order, epoch);
        t->shuffled_epoch = epoch;
    }
    long b0 = j * t->batch, count = t->train->count;
    int n = (int)(count - b0 < t->batch ? count - b0 : t->batch);
    st_status st = st_source_batch(t->train, t->order.perm + b0, n, t->x, t->labels, err);
    st_shard shard = {n, t->x, t->labels, epoch * count + b0};
    st_step_info info = {1, t->o.seed, it};
    double t1 = now_seconds();
    if (st == ST_OK)
        st = st_replica_forward(&t->replica, t->ps.weights, &shard, &info, loss, err);
    if (st == ST_OK)
        st = st_replica_backward(&t->replica, t->ps.weights, t->ps.grads[0], &shard, &info, NULL,
                                 err);
    if (st != ST_OK)
        return st;
    if (!isfinite(*loss))
        return st_fail(err, ST_EDIVERGED, "iteration %ld: the loss is %g: training diverged "
                       "(try a lower learning_rate)", it, *loss);
    double t2 = now_seconds();
    float lr = st_lr_at(&t->hp.solver.lr, it);
    st_ps_reduce(&t->ps, 0, 1.0f / (float)n, t->o.intra);
    st_ps_apply(&t->ps, 0, &t->hp.solver, lr, t->o.intra);
    double t3 = now_seconds();
    split->data += t1 - t0;
    split->compute += t2 - t1;
    split->update += t3 - t2;
    *images = n;
    return ST_OK;
}

static st_status run_test(st_trainer *t, long it, st_train_result *res, st_error *err)
{
    if (!t->test)
        return ST_OK;
    double acc, loss;
    st_status st = evaluate(t, t->test, &acc, &loss, err);
    if (st != ST_OK)
        return st;
    st_info(&t->log, "test  iter %ld  accuracy %.2f%%  loss %.4f  (%ld images)", it,
            100.0 * acc, loss, t->test->count);
    res->test_accuracy = acc;
    res->test_loss = loss;
    return ST_OK;
}

static st_status save_final(st_trainer *t, st_error *err)
{
    if (!t->o.snapshot_dir)
        return ST_OK;
    const char *base = strrchr(t->cfg_path, '/');
    base = base ? base + 1 : t->cfg_path;
    size_t len = strcspn(base, ".");
    char path[ST_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%.*s_final.snap", t->o.snapshot_dir, (int)len, base);
    st_status st = st_snapshot_save(path, &t->net, t->ps.weights, t->iterations, err);
    if (st == ST_OK)
        st_info(&t->log, "weights saved to %s", path);
    else
        st_error_prefix(err, "--snapshot-dir: ");
    return st;
}

/* Per-layer milliseconds per iteration and the iteration's time split. */
static void print_profile(const st_trainer *t, const st_train_result *res, long timed)
{
    const st_net *net = &t->net;
    double iters = (double)(timed > 0 ? timed : 1), total = 0.0;
    for (int i = 0; i < net->n_layers; i++) {
        const st_layer_time *lt = &t->replica.time[i];
        total += lt->forward + lt->backward_data + lt->backward_weights;
    }
    st_info(&t->log, "profile: ms per iteration over %ld iterations (after %ld warm-up)", timed,
            t->o.warmup);
    st_info(&t->log, "layer  type        forward  bwd-data  bwd-weights    total  share");
    for (int i = 0; i < net->n_layers; i++) {
        const st_layer_time *lt = &t->replica.time[i];
        double sum = lt->forward + lt->backward_data + lt->backward_weights;
        st_info(&t->log, "%5d  %-9s %9.3f %9.3f %12.3f %8.3f %5.1f%%", i,
                net->layers[i]->ops->short_name, 1e3 * lt->forward / iters,
                1e3 * lt->backward_data / iters, 1e3 * lt->backward_weights / iters,
                1e3 * sum / iters, total > 0 ? 100.0 * sum / total : 0.0);
    }
    const st_time_split *s = &res->split;
    st_info(&t->log, "iteration: data %.3f ms, compute %.3f ms, update %.3f ms",
            1e3 * s->data / iters, 1e3 * s->compute / iters, 1e3 * s->update / iters);
    st_info(&t->log, "throughput: %.1f img/s, %.1f GFLOP/s (%.3f GFLOP per image: 3 x forward)",
            res->images_per_s, res->gflops, 3.0 * net->flops / 1e9);
}

st_status st_trainer_run(st_trainer *t, st_train_result *res, st_error *err)
{
    memset(res, 0, sizeof *res);
    res->test_accuracy = -1.0;
    st_info(&t->log, "training: %ld iterations of batch %d (%ld per epoch), backend %s, "
            "seed %llu", t->iterations, t->batch, t->iters_per_epoch, t->backend->name,
            (unsigned long long)t->o.seed);
    long test_every = t->o.test_interval ? t->o.test_interval : t->iters_per_epoch;
    double train_time = 0.0, window_time = 0.0, window_loss = 0.0;
    long images = 0, window_images = 0;
    for (long it = 0; it < t->iterations; it++) {
        if (it == t->o.warmup && t->replica.time) {
            memset(t->replica.time, 0, (size_t)t->net.n_layers * sizeof *t->replica.time);
            memset(&res->split, 0, sizeof res->split);
        }
        double t0 = now_seconds(), loss = 0.0;
        int n = 0;
        st_status st = train_step(t, it, &n, &loss, &res->split, err);
        if (st != ST_OK)
            return st;
        double dt = now_seconds() - t0;
        window_time += dt;
        window_images += n;
        window_loss += loss;
        if (it >= t->o.warmup) {
            train_time += dt;
            images += n;
        }
        if (it == 0)
            res->first_loss = loss / n;
        if (t->o.loss_trace)
            t->o.loss_trace[it] = loss / n;
        long done = it + 1;
        if (done % t->o.log_every == 0 || done == t->iterations) {
            res->last_loss = window_loss / (double)window_images;
            st_info(&t->log, "iter %ld/%ld  epoch %.2f  loss %.4f  lr %.5g  %.0f img/s", done,
                    t->iterations, (double)done / (double)t->iters_per_epoch, res->last_loss,
                    st_lr_at(&t->hp.solver.lr, it), (double)window_images / window_time);
            window_time = window_loss = 0.0;
            window_images = 0;
        }
        if (!t->o.no_test && (done % test_every == 0 || done == t->iterations)) {
            st = run_test(t, done, res, err);
            if (st != ST_OK)
                return st;
        }
    }
    res->iterations = t->iterations;
    res->seconds = train_time;
    res->images_per_s = train_time > 0 ? (double)images / train_time : 0.0;
    res->gflops = res->images_per_s * 3.0 * t->net.flops / 1e9;
    st_info(&t->log, "done: %ld iterations, %ld images in %.1f s (%.0f img/s)", t->iterations,
            images, train_time, res->images_per_s);
    if (res->test_accuracy >= 0)
        st_info(&t->log, "final test accuracy %.2f%%", 100.0 * res->test_accuracy);
    if (t->o.profile)
        print_profile(t, res, t->iterations - t->o.warmup);
    return save_final(t, err);
}
