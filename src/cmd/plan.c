/* singletrain plan NET.cfg --nodes N1,N2,...: predict, before booking
 * nodes, what data-parallel training of NET.cfg on N of them gives
 * (PCL-DNN, Das et al. 2016, section 3; swCaffe's equations 2-6).
 *
 * The model. Each node trains B images per update (-b, default batch= of
 * [net]: as training's -b under mpirun, the batch of one node; N B in
 * all). This node trains B for a few iterations on synthetic data (the
 * trainer, with --profile's per-layer times) and so measures its iteration
 * without communication, t (data, compute, the node's sum and the update),
 * and each layer's backward time. The gradient, G bytes, is all-reduced across
 * the nodes once per iteration by the cheapest algorithm for N and G by the
 * alpha-beta-gamma formulas (dist/allreduce_cost.h, the all-reduce files'
 * own): C(N) seconds, all of it exposed without --overlap. With --overlap
 * the gradient goes in buckets of at least 512 KiB, in backward's order of
 * layers (output first), each sent when backward has passed its last
 * layer, one at a time, each by its own cheapest algorithm; what is left
 * after backward ends is exposed. The iteration takes t plus the exposed
 * part; img/s = N B / that. With --pipeline layer the same buckets, each
 * followed on the communication thread by its sum over the workers and
 * its update (the node's measured sum and update, there on one thread:
 * T times as long, shared by bytes), leave t; the next forward's layer i
 * waits for its bucket, and what it waits in all (the communication the
 * next forward cannot hide) is exposed. PCL-DNN's balance: the images per node whose
 * backward takes as long as C(N), ceil(C(N) / backward per image): with
 * fewer, communication cannot hide behind backward.
 *
 * With --mp-group G (hybrid across nodes, training's --parallel hybrid
 * --mp-group G): the layers st_net_hybrid_split names are split over
 * groups of G nodes, their G B images a group; the gradient of the other
 * layers is all-reduced over the N nodes, each block of the split layers'
 * (1/G of their gradient) over the N / G nodes holding it, and each split
 * layer's input, output and their gradients move within the group
 * (parallel/mp_cost.h); the compute is taken as measured (a split layer
 * does the same work on G B images and 1/G of its neurons). No overlap.
 *
 * The network: --net-params FILE (key=value lines), or, run under mpirun
 * with several ranks, measured between ranks 0 and 1
 * (st_cluster_measure_net); rank 0 then measures the compute and prints.
 * Without either plan exits 2: it assumes no default network. */
#include "commands.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cfg.h"
#include "base/fileio.h"
#include "base/log.h"
#include "dist/allreduce_algos.h"
#include "dist/allreduce_cost.h"
#include "dist/cluster.h"
#include "net/net.h"
#include "netpath.h"
#include "options.h"
#include "parallel/mp_cost.h"
#include "train/train.h"

#define MAX_NODES 64          /* entries of --nodes */
#define MAX_NODE_COUNT (1L << 24) /* the largest node count predicted */
#define DEFAULT_ITERS 5       /* timed iterations */
#define WARMUP_ITERS 2        /* iterations before them, left out */
#define BUCKET_BYTES (512.0 * 1024) /* --overlap's default --bucket-size */

typedef struct plan_cli {
    const char *nodes, *net_params, *csv, *backend, *sim_cross_bandwidth;
    const char *pipeline;
    int batch, threads, intra, supernode, overlap, quiet, help, mp_group;
    long iters;
} plan_cli;

#define OPT(field) offsetof(plan_cli, field)

static const st_option options[] = {
    {"nodes", 'n', "N1,N2,...", "Plan", "the node counts to predict, positive integers "
     "(required)", ST_OPT_STRING, OPT(nodes), 0, 0},
    {"batch", 'b', "N", "Plan", "images per update of each node, as training's -b under mpirun "
     "(default: batch= in [net])", ST_OPT_INT, OPT(batch), 1, 1 << 20},
    {"net-params", 0, "FILE", "Plan", "the network: alpha_s=, beta_s_per_byte=, "
     "gamma_s_per_byte=, supernode= (ranks per supernode, 0: none) and "
     "cross_beta_s_per_byte= lines; without it plan must run under mpirun with several ranks, "
     "which measure alpha, beta and gamma", ST_OPT_STRING, OPT(net_params), 0, 0},
    {"supernode-size", 0, "Q", "Plan", "with the measured network: Q ranks per supernode",
     ST_OPT_INT, OPT(supernode), 1, 1 << 20},
    {"sim-cross-bandwidth", 0, "F", "Plan", "with the measured network: links between "
     "supernodes at F (0 < F <= 1) of the bandwidth inside one, as training's option",
     ST_OPT_STRING, OPT(sim_cross_bandwidth), 0, 0},
    {"mp-group", 0, "G", "Plan", "predict hybrid training across nodes, as training's "
     "--parallel hybrid --mp-group G: the fully connected layers split over groups of G "
     "nodes (every node count a multiple of G; not with --overlap)", ST_OPT_INT, OPT(mp_group),
     1, 4096},
    {"overlap", 0, NULL, "Plan", "predict training with --overlap (img/s, speed-up and the "
     "communication share of the CSV; the table shows both)", ST_OPT_FLAG, OPT(overlap), 0, 0},
    {"pipeline", 0, "none|layer", "Plan", "layer: predict training with --pipeline layer (each "
     "bucket updated after its all-reduce, the next forward waiting per layer; implies "
     "--overlap's buckets; the table adds what the next forward cannot hide)", ST_OPT_STRING,
     OPT(pipeline), 0, 0},
    {"csv", 0, "FILE", "Output", "also write nodes,img_s,speedup,comm_share,allreduce,"
     "batch_per_node, one row per node count", ST_OPT_STRING, OPT(csv), 0, 0},
    {"quiet", 'q', NULL, "Output", "print nothing (with --csv)", ST_OPT_FLAG, OPT(quiet), 0, 0},
    {"threads", 't', "N", "Compute", "worker threads of the measured node, as training's -t",
     ST_OPT_INT, OPT(threads), 1, 1024},
    {"intra", 0, "N", "Compute", "intra-op threads per worker, as training's --intra",
     ST_OPT_INT, OPT(intra), 1, 1024},
    {"backend", 0, "NAME", "Compute", "dnnl (default), ref or cpe", ST_OPT_STRING,
     OPT(backend), 0, 0},
    {"iters", 0, "N", "Compute", "iterations timed (default 5, after 2 of warm-up)",
     ST_OPT_LONG, OPT(iters), 1, 1000000},
    {"help", 'h', NULL, "Other", "this help", ST_OPT_FLAG, OPT(help), 0, 0},
};

#define N_OPTIONS ((int)(sizeof options / sizeof options[0]))

static const char *const groups[] = {"Plan", "Output", "Compute", "Other", NULL};

/* This node's measured iteration. */
typedef struct plan_measure {
    int images;         /* B */
    double iter_s;      /* t: one iteration without communication */
    double *backward_s; /* [n_layers] each layer's backward */
    double *forward_s;  /* [n_layers] each layer's forward */
    double backward_total;
    double update_s;    /* of t, the node's sum and update */
} plan_measure;

/* One predicted node count. */
typedef struct plan_row {
    int nodes;
    long images;        /* of an update, N B */
    double compute_s, allreduce_s, overlapped_s; /* t; C(N); exposed with --overlap */
    double pipelined_s; /* exposed with --pipeline layer: the next forward's waits */
    double iter_s, img_s, speedup, share;        /* as the run would (--overlap or not) */
    int algorithm;      /* the cheapest for the whole gradient; -1 on one node */
    long balance;       /* PCL-DNN's images per node; 0 on one node */
} plan_row;

/* Everything one plan holds; freed by plan_free whatever was reached. */
typedef struct plan {
    const plan_cli *o;
    const char *cfg_path;
    int nodes[MAX_NODES], n_nodes;
    int batch;
    st_net_params np;
    double cross_fraction;  /* --sim-cross-bandwidth F, 1 without */
    const char *np_source;  /* "FILE" or "measured ..." */
    int n_layers, pipeline; /* pipeline: --pipeline layer */
    double *layer_bytes;    /* [n_layers] gradient bytes of each layer */
    double *ready;          /* [n_layers] scratch: when each layer's bucket is updated */
    double grad_bytes;
    st_mp_cost *mp;         /* --mp-group: hybrid across nodes' communication, or NULL */
    plan_measure m;
    plan_row rows[MAX_NODES];
} plan;

static void plan_free(plan *p)
{
    free(p->m.backward_s);
    free(p->m.forward_s);
    free(p->layer_bytes);
    free(p->ready);
    st_mp_cost_free(p->mp);
}

/* --nodes: positive integers separated by commas, at most MAX_NODE_COUNT. */
static st_status parse_nodes(plan *p, const char *text, st_error *err)
{
    const char *s = text;
    for (int k = 1;; k++) {
        size_t len = strcspn(s, ",");
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        int digits = len > 0 && end == s + len && *s >= '0' && *s <= '9';
        if (digits && (errno == ERANGE || v > MAX_NODE_COUNT))
            return st_fail(err, ST_EUSAGE, "option --nodes: element %d '%.*s' is over the "
                           "limit of %ld nodes", k, (int)len, s, MAX_NODE_COUNT);
        if (!digits || errno || v < 1)
            return st_fail(err, ST_EUSAGE, "option --nodes: element %d '%.*s' is not a "
                           "positive integer (expected node counts such as 1,2,4,8)", k,
                           (int)len, s);
        if (p->n_nodes == MAX_NODES)
            return st_fail(err, ST_EUSAGE, "option --nodes: more than %d node counts",
                           MAX_NODES);
        p->nodes[p->n_nodes++] = (int)v;
        if (!s[len])
            return ST_OK;
        s += len + 1;
    }
}

/* The keys of a net-params file, every one required: the reals (seconds,
 * in [0, 1]) at their offsets in st_net_params, then supernode=. */
static const struct {
    const char *key;
    size_t offset;
} net_keys[] = {
    {"alpha_s", offsetof(st_net_params, alpha)},
    {"beta_s_per_byte", offsetof(st_net_params, beta)},
    {"gamma_s_per_byte", offsetof(st_net_params, gamma)},
    {"cross_beta_s_per_byte", offsetof(st_net_params, cross_beta)},
    {"supernode", 0},
};

#define N_NET_KEYS ((int)(sizeof net_keys / sizeof net_keys[0]))

/* --net-params FILE: key=value lines (st_cfg_load_flat), a missing or
 * unknown key or a bad value an error naming the file (and line). */
static st_status load_net_params(plan *p, const char *path, st_error *err)
{
    st_cfg cfg;
    st_log log = st_log_default(ST_LOG_QUIET);
    st_status st = st_cfg_load_flat(&cfg, path, "net-params", err);
    if (st != ST_OK)
        return st;
    st_cfg_section *sec = &cfg.secs[0];
    for (int k = 0; k < N_NET_KEYS && st == ST_OK; k++) {
        const char *key = net_keys[k].key;
        float v = 0.0f;
        if (!st_cfg_find(sec, key))
            st = st_fail(err, ST_EINPUT, "%s: no %s= (a net-params file gives alpha_s=, "
                         "beta_s_per_byte=, gamma_s_per_byte=, supernode= and "
                         "cross_beta_s_per_byte=)", path, key);
        else if (k == N_NET_KEYS - 1)
            st = st_cfg_int(&cfg, sec, key, 0, 0, 1 << 20, &p->np.supernode, err);
        else if ((st = st_cfg_float(&cfg, sec, key, 0.0f, 0.0f, 1.0f, &v, err)) == ST_OK)
            *(double *)((char *)&p->np + net_keys[k].offset) = v;
    }
    if (st == ST_OK)
        st = st_cfg_finish_section(&cfg, sec, "net-params", NULL, &log, err);
    st_cfg_free(&cfg);
    return st;
}

/* The network, from --net-params or measured across the ranks. */
static st_status network(plan *p, st_cluster *cluster, st_error *err)
{
    const plan_cli *o = p->o;
    if (o->net_params) {
        p->np_source = o->net_params;
        return load_net_params(p, o->net_params, err);
    }
    if (!cluster)
        return st_fail(err, ST_EUSAGE, "no network to plan for: give --net-params FILE, or run "
                       "plan under mpirun with at least 2 ranks to measure it");
    st_status st = st_cluster_measure_net(cluster, &p->np, err);
    p->np.supernode = o->supernode;
    p->np.cross_beta = p->np.beta / p->cross_fraction;
    p->np_source = "measured between ranks 0 and 1";
    return st;
}

/* The bytes of each layer's gradient (its parameters, the unit the
 * buckets of --overlap gather) and their sum; with --mp-group, the layers
 * split over a group. */
static st_status layer_bytes(plan *p, const st_net *net, st_error *err)
{
    p->n_layers = net->n_layers;
    p->layer_bytes = st_calloc((size_t)net->n_layers + 1, sizeof *p->layer_bytes,
                               "the layers' gradient sizes", err);
    p->ready = st_calloc((size_t)net->n_layers + 1, sizeof *p->ready, "the layers' buckets",
                         err);
    if (!p->layer_bytes || !p->ready)
        return ST_ENOMEM;
    for (int k = 0; k < net->params.n; k++) {
        double bytes = (double)(net->params.p[k].count * sizeof(float));
        p->layer_bytes[net->params.p[k].layer] += bytes;
        p->grad_bytes += bytes;
    }
    return st_mp_cost_create(&p->mp, net, p->o->mp_group, err);
}

/* Train `images` per node for a few iterations, a quiet trial run
 * (st_trainer_trial) with the layers timed: t and the layers' backward
 * times into m. */
static st_status measure(plan *p, int images, plan_measure *m, st_error *err)
{
    const plan_cli *o = p->o;
    st_log log = st_log_default(ST_LOG_QUIET);
    st_train_opts to = st_train_defaults();
    long iters = o->iters ? o->iters : DEFAULT_ITERS;
    to.batch = images;
    to.threads = o->threads;
    to.intra = o->intra;
    to.backend = o->backend ? o->backend : "dnnl";
    to.data = "synthetic";
    st_trainer_trial(&to, &log, WARMUP_ITERS, iters);
    to.profile = 1; /* the layers' times, which a trial leaves out */
    m->images = images;
    m->backward_s = st_calloc((size_t)p->n_layers + 1, sizeof *m->backward_s,
                              "the layers' backward times", err);
    m->forward_s = st_calloc((size_t)p->n_layers + 1, sizeof *m->forward_s,
                             "the layers' forward times", err);
    if (!m->backward_s || !m->forward_s)
        return ST_ENOMEM;
    st_trainer *t = NULL;
    st_train_result res = {0};
    st_status st = st_trainer_create(&t, p->cfg_path, &to, &log, err);
    if (st == ST_OK)
        st = st_trainer_run(t, &res, err);
    if (st == ST_OK) {
        const st_layer_time *lt = st_trainer_layer_times(t);
        for (int i = 0; i < p->n_layers; i++) {
            m->backward_s[i] = (lt[i].backward_data + lt[i].backward_weights) / (double)iters;
            m->forward_s[i] = lt[i].forward / (double)iters;
            m->backward_total += m->backward_s[i];
        }
        m->iter_s = res.seconds / (double)iters;
        m->update_s = (res.split.aggregate + res.split.update) / (double)iters;
    }
    st_trainer_free(t);
    if (st != ST_OK)
        st_error_prefix(err, "measuring this node's iteration: ");
    return st;
}

/* Exposed all-reduce time with --overlap over n nodes: buckets of layers
 * from the output back, each of at least BUCKET_BYTES (the last of what
 * is left), sent in order on one channel as backward completes them. */
static double overlapped(const plan *p, const plan_measure *m, int n)
{
    double now = 0.0, channel = 0.0, bucket = 0.0, s;
    for (int i = p->n_layers - 1; i >= 0; i--) {
        now += m->backward_s[i];
        bucket += p->layer_bytes[i];
        if (bucket > 0 && (bucket >= BUCKET_BYTES || i == 0)) {
            st_allreduce_cheapest(n, bucket, &p->np, &s);
            channel = (channel > now ? channel : now) + s;
            bucket = 0.0;
        }
    }
    return channel > now ? channel - now : 0.0;
}

/* Exposed communication with --pipeline layer over n nodes: overlapped()'s
 * buckets, each followed on the communication thread by its sum over the
 * workers and its update (m->update_s of the whole gradient on the T
 * workers: T times that on the one thread, shared by bytes); after
 * backward, the next forward's layer i waits for its bucket's update. The
 * seconds it waits in all. */
static double pipelined(const plan *p, const plan_measure *m, int n)
{
    int threads = p->o->threads ? p->o->threads : 1;
    double per_byte = p->grad_bytes > 0 ? m->update_s * threads / p->grad_bytes : 0.0;
    double now = 0.0, channel = 0.0, bucket = 0.0, s;
    int top = p->n_layers - 1; /* the bucket's highest layer */
    for (int i = p->n_layers - 1; i >= 0; i--) {
        now += m->backward_s[i];
        bucket += p->layer_bytes[i];
        if (bucket > 0 && (bucket >= BUCKET_BYTES || i == 0)) {
            st_allreduce_cheapest(n, bucket, &p->np, &s);
            channel = (channel > now ? channel : now) + s + per_byte * bucket;
            for (int j = i; j <= top; j++)
                p->ready[j] = channel;
            top = i - 1;
            bucket = 0.0;
        }
    }
    double at = now, waited = 0.0;
    for (int i = 0; i < p->n_layers; i++) {
        if (p->layer_bytes[i] > 0 && p->ready[i] > at) {
            waited += p->ready[i] - at;
            at = p->ready[i];
        }
        at += m->forward_s[i];
    }
    return waited;
}

static void predict_row(const plan *p, const plan_measure *m, int n, plan_row *r)
{
    r->nodes = n;
    r->images = (long)n * m->images;
    r->compute_s = m->iter_s;
    r->allreduce_s = 0.0;
    r->algorithm = n > 1 ? st_allreduce_cheapest(n, p->grad_bytes, &p->np, &r->allreduce_s)
                         : -1;
    if (p->mp) /* instead the other layers', each block's and the group's exchange */
        r->algorithm = st_mp_cost_iteration(p->mp, n, m->images, &p->np, &r->allreduce_s);
    /* hybrid runs without overlap: nothing hides */
    r->overlapped_s = p->mp ? r->allreduce_s : overlapped(p, m, n);
    r->pipelined_s = n > 1 && p->pipeline ? pipelined(p, m, n) : 0.0;
    double exposed = p->pipeline ? r->pipelined_s
                     : p->o->overlap ? r->overlapped_s : r->allreduce_s;
    /* pipelined, the node's sum and update move to the communication thread */
    r->iter_s = r->compute_s - (p->pipeline && n > 1 ? m->update_s : 0.0) + exposed;
    r->img_s = (double)r->images / r->iter_s;
    r->speedup = r->img_s / (m->images / m->iter_s);
    r->share = exposed / r->iter_s;
    double per_image = m->backward_total / m->images;
    r->balance = n > 1 && per_image > 0 ? (long)ceil(r->allreduce_s / per_image) : 0;
}

static const char *algorithm_name(const plan_row *r)
{
    return r->algorithm >= 0 ? st_allreduce_names[r->algorithm] : "none";
}

static st_status write_csv(FILE *f, void *ctx, st_error *err)
{
    const plan *p = ctx;
    fprintf(f, "nodes,img_s,speedup,comm_share,allreduce,batch_per_node\n");
    for (int i = 0; i < p->n_nodes; i++) {
        const plan_row *r = &p->rows[i];
        fprintf(f, "%d,%.6g,%.6g,%.6g,%s,%ld\n", r->nodes, r->img_s, r->speedup, r->share,
                algorithm_name(r), r->balance);
    }
    return ST_OK;
}

static void print_table(const plan *p, const st_net *net)
{
    const st_net_params *np = &p->np;
    printf("plan: %s, %d images per update of each node, gradient %.0f bytes in %d layers, %d node "
           "count%s\n", p->cfg_path, p->batch, p->grad_bytes, net->n_layers, p->n_nodes,
           p->n_nodes > 1 ? "s" : "");
    printf("network (%s): alpha %.4g s, beta %.4g s/byte, gamma %.4g s/byte, supernode %d, "
           "cross beta %.4g s/byte\n", p->np_source, np->alpha, np->beta, np->gamma,
           np->supernode, np->cross_beta);
    double mp_bytes = 0.0;
    int mp_layers = 0, G = p->mp ? st_mp_cost_split(p->mp, &mp_bytes, &mp_layers) : 0;
    if (G)
        printf("hybrid across nodes (--mp-group %d): the fully connected layers' %.0f bytes of "
               "gradient in blocks of 1/%d all-reduced over N / %d nodes, the rest over N, and "
               "the groups' exchange of %d layer%s: all in the allreduce column\n",
               G, mp_bytes, G, G, mp_layers, mp_layers == 1 ? "" : "s");
    if (p->pipeline)
        printf("--pipeline layer: each bucket's sum and update (%.5f ms of compute) after its "
               "all-reduce on the communication thread; pipelined: what the next forward "
               "cannot hide\n", 1e3 * p->m.update_s);
    printf("img/s, speed-up and comm share as training %s; ms per iteration:\n",
           p->pipeline ? "with --pipeline layer" : p->o->overlap ? "with --overlap"
                                                              : "without --overlap");
    printf("%6s %7s %11s %11s %11s ", "nodes", "batch", "compute", "allreduce", "overlapped");
    if (p->pipeline)
        printf("%11s ", "pipelined");
    printf("%11s %11s %8s %6s  %-13s %s\n", "iteration", "img/s", "speedup", "comm", "best",
           "balance");
    for (int i = 0; i < p->n_nodes; i++) {
        const plan_row *r = &p->rows[i];
        printf("%6d %7ld %11.5f %11.5f %11.5f ", r->nodes, r->images, 1e3 * r->compute_s,
               1e3 * r->allreduce_s, 1e3 * r->overlapped_s);
        if (p->pipeline)
            printf("%11.5f ", 1e3 * r->pipelined_s);
        printf("%11.5f %11.2f %8.3f %5.1f%%  %-13s %ld\n", 1e3 * r->iter_s, r->img_s,
               r->speedup, 100 * r->share, algorithm_name(r), r->balance);
    }
}

/* Measure, predict, print and write; on rank 0 (or alone). */
static st_status predict(plan *p, st_error *err)
{
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_log log = st_log_default(ST_LOG_QUIET);
    st_status st = st_net_load(p->cfg_path, NULL, &cfg, &hp, &net, &log, err);
    if (st != ST_OK)
        return st;
    p->batch = p->o->batch ? p->o->batch : hp.batch;
    if ((st = layer_bytes(p, &net, err)) == ST_OK)
        st = measure(p, p->batch, &p->m, err);
    for (int i = 0; i < p->n_nodes && st == ST_OK; i++)
        predict_row(p, &p->m, p->nodes[i], &p->rows[i]);
    if (st == ST_OK && !p->o->quiet)
        print_table(p, &net);
    if (st == ST_OK && p->o->csv)
        st = st_write_atomic(p->o->csv, write_csv, p, err);
    if (st == ST_OK && fflush(stdout) != 0)
        st = st_fail(err, ST_EIO, "standard output: write failed: %s", strerror(errno));
    st_net_free(&net);
    st_cfg_free(&cfg);
    return st;
}

static st_status check_args(plan *p, const plan_cli *o, int n_pos, st_error *err)
{
    if (n_pos != 1)
        return st_fail(err, ST_EUSAGE, "expected one network cfg file, got %d arguments "
                       "(usage: singletrain plan NET.cfg --nodes N1,N2,... [options])", n_pos);
    if (!o->nodes)
        return st_fail(err, ST_EUSAGE, "option --nodes: required (the node counts to "
                       "predict, such as --nodes 1,2,4,8)");
    if (o->net_params && (o->supernode || o->sim_cross_bandwidth))
        return st_fail(err, ST_EUSAGE, "option --%s: only with the measured network (the "
                       "--net-params file gives supernode= and cross_beta_s_per_byte=)",
                       o->supernode ? "supernode-size" : "sim-cross-bandwidth");
    if (o->mp_group > 1 && o->overlap)
        return st_fail(err, ST_EUSAGE, "option --mp-group %d with --overlap: hybrid training "
                       "runs without overlap; give one", o->mp_group);
    if (o->pipeline && strcmp(o->pipeline, "none") && strcmp(o->pipeline, "layer"))
        return st_fail(err, ST_EUSAGE, "option --pipeline: expected none or layer, got '%s'",
                       o->pipeline);
    p->pipeline = o->pipeline && strcmp(o->pipeline, "layer") == 0;
    if (o->mp_group > 1 && p->pipeline)
        return st_fail(err, ST_EUSAGE, "option --mp-group %d with --pipeline layer: hybrid "
                       "training runs without the pipeline; give one", o->mp_group);
    st_status st = parse_nodes(p, o->nodes, err);
    for (int i = 0; st == ST_OK && o->mp_group > 1 && i < p->n_nodes; i++)
        if (p->nodes[i] % o->mp_group)
            st = st_fail(err, ST_EUSAGE, "option --nodes: %d is not a multiple of --mp-group %d "
                         "(the nodes form groups of %d)", p->nodes[i], o->mp_group,
                         o->mp_group);
    p->cross_fraction = 1.0;
    if (st == ST_OK)
        st = st_option_real("sim-cross-bandwidth", o->sim_cross_bandwidth, 1.0,
                            "a fraction F with 0 < F <= 1", &p->cross_fraction, err);
    if (st == ST_OK && o->csv)
        st = st_check_output_path("--csv", o->csv, err);
    const st_named_path out[] = {{"--csv", o->csv}};
    const st_named_path in[] = {{"NET.cfg", p->cfg_path}, {"--net-params", o->net_params}};
    if (st == ST_OK && o->csv)
        st = st_check_distinct(out, 1, in, o->net_params ? 2 : 1, err);
    return st;
}

/* Under mpirun: the ranks first agree on their command lines (checked:
 * how this rank's went), so that a refusal every rank reaches alike is
 * printed once, by rank 0 (*quiet on the others), and a rank refused
 * alone stops the others; then every rank measures the network (unless
 * --net-params gives it); rank 0 goes on alone, the others wait for its
 * outcome. */
static st_status run_plan(plan *p, st_status checked, int *quiet, st_error *err)
{
    st_cluster *cluster = NULL;
    st_error init_err = {0};
    st_status st = st_cluster_init(&cluster, NULL, NULL, &init_err);
    if (checked != ST_OK && !cluster) /* refused, and no other rank to meet */
        return checked;
    if (st != ST_OK) {
        *err = init_err;
        return st;
    }
    if (cluster) {
        st_cluster_fingerprint none = {0};
        st_error own = *err;
        int alike = 0;
        st = st_cluster_agree(cluster, checked, &none, &alike, err);
        if (checked != ST_OK)
            *err = own; /* this rank's refusal, not the others' echo of it */
        *quiet = alike && st_cluster_rank(cluster) > 0;
    }
    int agreed = st == ST_OK;
    if (st == ST_OK)
        st = network(p, cluster, err);
    if (st == ST_OK && st_cluster_rank(cluster) == 0)
        st = predict(p, err);
    if (cluster && agreed) {
        int signal = 0;
        st = st_cluster_outcome(cluster, st, &signal, err);
    }
    st_cluster_free(cluster);
    return st;
}

int st_cmd_plan(int argc, char **argv)
{
    plan_cli o = {0};
    plan p;
    memset(&p, 0, sizeof p);
    p.o = &o;
    const char *pos[2];
    int n_pos = 0;
    st_error err = {0};
    st_status st = st_options_parse(options, N_OPTIONS, &o, argc, argv, pos, 2, &n_pos, &err);
    if (st == ST_OK && o.help) {
        st_options_help(stdout, "usage: singletrain plan NET.cfg --nodes N1,N2,... [options]\n"
                        "       mpirun -np 2 singletrain plan NET.cfg --nodes N1,N2,... "
                        "[options]\n\nPredicts data-parallel training of NET.cfg (or hybrid, "
                        "--mp-group) on each node count, each node training -b images per "
                        "update: this node's "
                        "iteration is measured (a few iterations on synthetic data), the "
                        "all-reduce "
                        "of the gradient costed by the alpha-beta-gamma formulas of every "
                        "algorithm with the network of --net-params FILE (or, under mpirun, "
                        "measured between ranks 0 and 1; one or the other is required). "
                        "Prints per node count the ms per iteration (compute, all-reduce, "
                        "what --overlap leaves exposed), img/s, speed-up over one node, the "
                        "communication share, the cheapest all-reduce and PCL-DNN's balance: "
                        "the images per node whose backward lasts as long as the "
                        "all-reduce.\n", options, N_OPTIONS, groups);
        return 0;
    }
    p.cfg_path = pos[0];
    if (st == ST_OK)
        st = check_args(&p, &o, n_pos, &err);
    st_netpath net;
    if (st == ST_OK && (st = st_netpath_find_for(&net, "plan", pos[0], o.quiet, &err)) == ST_OK)
        p.cfg_path = net.path;
    int quiet = 0;
    if (st == ST_OK || st_cluster_launched())
        st = run_plan(&p, st, &quiet, &err);
    plan_free(&p);
    return quiet ? st_exit_code(st) : st_cmd_exit_code("plan", st, &err);
}
