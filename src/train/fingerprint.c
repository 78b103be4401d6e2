/* Multi-node: what every rank must agree on before training together
 * (st_trainer_fingerprint, compared by st_cluster_agree) and the
 * communication channels its run needs; the cfg's hash, which the
 * kernel-choice cache's context also takes (kernel_choices.c, layout.c). */
#include "trainer_internal.h"

#include <stdint.h>
#include <string.h>

#include "base/hash.h"
#include "parallel/overlap.h"

/* Whether key names data in [net] (train=, test=, ...): the data's paths
 * may differ between nodes, its content is compared instead. */
static int is_data_key(const char *key)
{
    static const char *const keys[] = {"train", "train_labels", "test", "valid",
                                       "test_labels", "names", "labels", "classes", NULL};
    for (int i = 0; keys[i]; i++)
        if (strcmp(key, keys[i]) == 0)
            return 1;
    return 0;
}

uint64_t trainer_cfg_hash(const st_cfg *cfg, int with_net)
{
    uint64_t h = ST_HASH_START;
    for (int s = with_net ? 0 : 1; s < cfg->n_secs; s++) {
        const st_cfg_section *sec = &cfg->secs[s];
        h = st_hash_string(h, sec->type);
        for (int k = 0; k < sec->n_opts; k++)
            if (s > 0 || !is_data_key(sec->opts[k].key)) {
                h = st_hash_string(h, sec->opts[k].key);
                h = st_hash_string(h, sec->opts[k].val);
            }
    }
    return h;
}

static uint64_t lr_schedule_hash(const st_lr_schedule *lr)
{
    uint64_t h = st_hash_bytes(ST_HASH_START, lr->steps, (size_t)lr->n_steps * sizeof(int));
    h = st_hash_bytes(h, lr->scales, (size_t)lr->n_steps * sizeof(float));
    double rest[] = {lr->gamma, lr->power, lr->scale, lr->step, lr->burn_in,
                     (double)lr->max_batches, lr->warmup, lr->warmup_factor, lr->lr_min,
                     lr->pct_start, lr->div_factor, lr->final_div_factor};
    return st_hash_bytes(h, rest, sizeof rest);
}

/* What changes the computation, in the order it is compared (the first
 * difference is named). Deliberately left out, free to differ: the output
 * (--log-format, --log-every, --metrics, -q, -v, --profile, --cpe-trace,
 * --trace's path),
 * what rank 0 alone does (the test set, --test-interval, --no-test,
 * --test-images, --snapshot-dir, --snapshot-every (and whether every rank
 * snapshots at the same points with --rank-update partitioned),
 * --stop-at-accuracy and --patience, whose stop reaches the others through
 * the iterations' control sums), how fast data is read
 * (--io-threads, --no-verify), --warmup (speed figures only),
 * --peer-timeout, and the data's paths (their content is compared). */
void st_trainer_fingerprint(const st_trainer *t, st_cluster_fingerprint *fp)
{
    const st_solver_cfg *sv = &t->hp.solver;
    const st_source *train = t->train;
    memset(fp, 0, sizeof *fp);
    st_cluster_fp_add(fp, "the network (cfg hash)", st_net_hash(&t->net));
    st_cluster_fp_add(fp, "the batch (-b)", (uint64_t)t->batch);
    st_cluster_fp_add(fp, "subdivisions (--subdivisions, subdivisions= in [net])",
                      (uint64_t)t->subdivisions);
    st_cluster_fp_add(fp, "the worker count (-t)", (uint64_t)t->o.threads);
    st_cluster_fp_add(fp, "the intra-op threads (--intra)", (uint64_t)t->o.intra);
    st_cluster_fp_add(fp, "the seed (--seed)", t->o.seed);
    st_cluster_fp_add(fp, "the schedule (iterations)", (uint64_t)t->iterations);
    st_cluster_fp_add(fp, "the solver (solver=)", (uint64_t)sv->rule);
    st_cluster_fp_add(fp, "the synchronisation (--sync)", (uint64_t)t->o.sync);
    st_cluster_fp_add(fp, "the all-reduce algorithm (--allreduce)", (uint64_t)t->allreduce);
    st_cluster_fp_add(fp, "--overlap", (uint64_t)t->o.overlap);
    st_cluster_fp_add(fp, "--pipeline", (uint64_t)t->o.pipeline);
    st_cluster_fp_add(fp, "--rank-update", (uint64_t)t->o.rank_update);
    /* Partitioned, every rank sends its parts of the solver state to rank
     * 0's snapshots: they must all snapshot at the same iterations. */
    int partitioned = trainer_partitioned(t);
    st_cluster_fp_add(fp, "--snapshot-dir (given or not; with --rank-update partitioned every "
                      "rank takes part in the snapshots)",
                      (uint64_t)(partitioned && t->o.snapshot_dir));
    st_cluster_fp_add(fp, "--snapshot-every (with --rank-update partitioned every rank takes "
                      "part in the snapshots)",
                      (uint64_t)(partitioned ? t->o.snapshot_every : 0));
    /* Every rank records and meets the others to align the clocks and to
     * gather the events on rank 0 (the file's path is rank 0's alone). */
    st_cluster_fp_add(fp, "--trace (given or not: every rank takes part in the timeline)",
                      (uint64_t)(t->o.trace != NULL));
    st_cluster_fp_add(fp, "--trace-iters", t->o.trace ? (uint64_t)t->o.trace_first << 32 ^
                      (uint64_t)t->o.trace_last : 0);
    st_cluster_fp_add(fp, "--allreduce-granularity", t->o.allreduce_granularity &&
                      strcmp(t->o.allreduce_granularity, "layer") == 0);
    st_cluster_fp_add(fp, "--bucket-size", t->o.bucket_bytes);
    st_cluster_fp_add(fp, "--supernode-size", (uint64_t)t->o.supernode_size);
    st_cluster_fp_add_double(fp, "--sim-cross-bandwidth", t->o.sim_cross_bandwidth);
    st_cluster_fp_add(fp, "the backend (--backend)", st_hash_string(ST_HASH_START,
                                                                    t->backend->name));
    /* With --conv-impl NAME a rank runs its own implementation instead of
     * rank 0's choices (share_choices), which round differently; hybrid
     * runs the fully connected layers model-parallel. Both ran to exit 0
     * with other weights than a uniform run's. --parallel auto is compared
     * as resolved (from values compared here). */
    st_cluster_fp_add(fp, "the convolution implementation (--conv-impl)",
                      st_hash_string(ST_HASH_START, t->o.conv_impl ? t->o.conv_impl : "auto"));
    st_cluster_fp_add(fp, "the precision (--precision)", (uint64_t)t->o.precision);
    st_cluster_fp_add(fp, "the parallelism (--parallel, as resolved)", (uint64_t)t->o.hybrid);
    st_cluster_fp_add(fp, "the model-parallel groups (--mp-group, as resolved)",
                      (uint64_t)t->o.mp_group);
    st_cluster_fp_add_double(fp, "the learning rate (learning_rate= in [net])",
                             sv->lr.learning_rate);
    st_cluster_fp_add(fp, "the learning-rate policy (policy= in [net])", sv->lr.policy);
    st_cluster_fp_add(fp, "the learning-rate schedule (steps=, scales=, step=, scale=, "
                      "gamma=, power=, burn_in=, warmup=, warmup_factor=, learning_rate_min=, "
                      "pct_start=, div_factor=, final_div_factor=, max_batches= in [net])",
                      lr_schedule_hash(&sv->lr));
    st_cluster_fp_add_double(fp, "the momentum (momentum= in [net])", sv->momentum);
    st_cluster_fp_add_double(fp, "the weight decay (decay= in [net])", sv->decay);
    st_cluster_fp_add(fp, "the tensors decayed (decay_mode= in [net])", sv->decay_mode);
    double rule[] = {sv->beta1, sv->beta2, sv->eps, sv->eps_mode, sv->rms_decay, sv->delta};
    st_cluster_fp_add(fp, "the update rule's settings (B1=, B2=, eps=, eps_mode=, rms_decay=, "
                      "delta= in [net])", st_hash_bytes(ST_HASH_START, rule, sizeof rule));
    double transform[ST_MAX_CHANNELS + 3];
    for (int c = 0; c < ST_MAX_CHANNELS; c++)
        transform[c] = t->transform.mean[c];
    transform[ST_MAX_CHANNELS] = t->transform.scale;
    transform[ST_MAX_CHANNELS + 1] = t->transform.crop;
    transform[ST_MAX_CHANNELS + 2] = t->transform.mirror;
    st_cluster_fp_add(fp, "the input transform (input_mean=, input_scale=, crop=, mirror= in "
                      "[net])", st_hash_bytes(ST_HASH_START, transform, sizeof transform));
    st_cluster_fp_add(fp, "a key of the cfg (the cfgs differ beyond the data paths)",
                      trainer_cfg_hash(&t->cfg, 1));
    st_cluster_fp_add(fp, "the training data's kind (--data synthetic, or files)",
                      strcmp(train->name, "synthetic") == 0);
    st_cluster_fp_add(fp, "the number of training records (--train-images, the data)",
                      (uint64_t)train->count);
    int shape[] = {train->shape.c, train->shape.h, train->shape.w, train->classes};
    st_cluster_fp_add(fp, "the training records' shape or classes (the data, image_size=)",
                      st_hash_bytes(ST_HASH_START, shape, sizeof shape));
    st_cluster_fp_add(fp, "--skip-bad-images", (uint64_t)t->o.skip_bad_images);
    st_cluster_fp_add(fp, "the first iteration (--resume)", (uint64_t)t->start);
    /* Partitioned, rank 0 alone holds a resumed solver state until the run
     * hands out its parts: the weights are compared, not the state. */
    uint64_t h = st_hash_bytes(ST_HASH_START, t->ps.weights, t->ps.count * sizeof(float));
    if (!partitioned)
        h = st_hash_bytes(h, t->ps.state,
                          t->ps.count * (size_t)t->ps.state_planes * sizeof(float));
    st_cluster_fp_add(fp, "the initial weights or solver state (--weights, --resume)", h);
}

int st_trainer_channels(const st_trainer *t)
{
    return t->o.threads + (t->o.overlap ? ST_OVERLAP_CLASSES : 0);
}
