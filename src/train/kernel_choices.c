/* The kernel choices of a run (train.h's st_trainer_create, set-up): the
 * table the workers share, what --kernel-choices gives, the per-host cache
 * (src/backends/choice_cache.c), rank 0's choices for every rank, and what
 * the run chose in the log and in --save-kernel-choices. */
#include "trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"

/* Whether the kernels take their implementations from the choice table
 * (measured or given), not from --conv-impl NAME. */
int trainer_kernel_choices_used(const st_trainer *t)
{
    return t->choices && (!t->o.conv_impl || strcmp(t->o.conv_impl, "auto") == 0);
}

/* Seconds a run waits for another holding the kernel-choice cache's lock
 * (which it holds while it measures: a few seconds for LeNet-5 and the
 * 32x32 AlexNets on 2 cores) before it measures without waiting. */
#define CHOICE_CACHE_WAIT 120.0

/* What the choices of this run hold for, as the cache keys them: the
 * backend's (library, instruction set, CPU, precision), the threads (which
 * share the cores while the kernels are timed) and the layers (a layer's
 * choice weighs the reorders its neighbours' layouts force, and its
 * activation is fused: neither is in its key). */
static void choice_context(const st_trainer *t, char *buf, size_t size)
{
    char backend[512];
    t->backend->choice_context(backend, sizeof backend);
    snprintf(buf, size, "%s; %d worker%s x %d intra-op thread%s; layers %016llx", backend,
             t->o.threads, t->o.threads == 1 ? "" : "s", t->o.intra, t->o.intra == 1 ? "" : "s",
             (unsigned long long)trainer_cfg_hash(&t->cfg, 0));
}

/* The kernel-choice cache, for rank 0 of a run whose kernels measure (a
 * dry run only to save its choices): its choices added to the table below
 * the given ones (none read with --kernel-choices measure), its lock held
 * until finish_choices stores what was measured. */
static st_status open_cache(st_trainer *t, st_error *err)
{
    const st_train_opts *o = &t->o;
    if (!o->choice_cache || !trainer_kernel_choices_used(t) || !t->backend->choice_context ||
        st_cluster_rank(o->cluster) != 0 || (t->dry_run && !o->save_kernel_choices))
        return ST_OK;
    if (!o->choice_cache[0]) {
        st_warn(&t->log, "kernel-choice cache: no directory for it (%s): this run measures "
                "its kernels without it (--no-choice-cache leaves the cache alone)",
                o->choice_cache_why && o->choice_cache_why[0] ? o->choice_cache_why
                                                              : "none given");
        return ST_OK;
    }
    char context[1024];
    choice_context(t, context, sizeof context);
    st_choice_cache_opts co = {.dir = o->choice_cache, .context = context,
                               .read = !o->remeasure, .lock_wait = CHOICE_CACHE_WAIT};
    return st_choice_cache_open(&t->cache, &co, t->choices, &t->log, err);
}

/* The kernel choices: --conv-impl checked against the backend's names, the
 * table the workers share, the choices --kernel-choices gives, then the
 * cache's. */
st_status trainer_setup_choices(st_trainer *t, st_error *err)
{
    const st_train_opts *o = &t->o;
    const char *const *impls = t->backend->conv_impls;
    if (!impls) /* no option asks for a choice (trainer_check_option_rules) */
        return ST_OK;
    char names[256] = "auto";
    int known = !o->conv_impl || strcmp(o->conv_impl, "auto") == 0;
    for (int i = 0; impls[i]; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", impls[i + 1] ? ", " : " or ",
                 impls[i]);
        known |= o->conv_impl && strcmp(o->conv_impl, impls[i]) == 0;
    }
    if (!known)
        return st_fail(err, ST_EUSAGE, "--conv-impl %s: expected %s", o->conv_impl, names);
    st_status st = st_choices_create(&t->choices, t->backend->choice_syntax, err);
    char *text = NULL;
    size_t len = 0;
    if (st == ST_OK && o->kernel_choices)
        st = st_read_text(o->kernel_choices, "kernel choice file", (size_t)16 << 20, &text,
                          &len, err);
    if (st == ST_OK && text)
        st = st_choices_parse(t->choices, text, len, o->kernel_choices, ST_CHOICE_FILE, err);
    free(text);
    if (st != ST_OK && o->kernel_choices)
        st_error_prefix(err, "--kernel-choices ");
    return st == ST_OK ? open_cache(t, err) : st;
}

static st_status write_choices(FILE *f, void *ctx, st_error *err)
{
    const st_trainer *t = ctx;
    fprintf(f, "# singletrain kernel choices for %s, %d worker%s of batch %d: KEY = VALUE, "
            "then what was timed (ms per call); read by --kernel-choices\n", t->cfg_path,
            t->o.threads, t->o.threads == 1 ? "" : "s", t->batch);
    char *text = st_choices_text(t->choices, ST_CHOICES_VALUES | ST_CHOICES_TRIALS, NULL);
    if (!text)
        return st_fail(err, ST_ENOMEM, "out of memory writing the kernel choices");
    fputs(text, f);
    free(text);
    return ferror(f) ? st_fail(err, ST_EIO, "%s: write failed", t->o.save_kernel_choices)
                     : ST_OK;
}

/* The "kernel choices:" line: how many the kernels took from where. */
static void log_choices(const st_trainer *t, const st_choice_counts *n, int stored)
{
    char line[3 * ST_PATH_MAX + 512];
    const char *cache = t->cache ? st_choice_cache_file(t->cache) : "";
    size_t at = (size_t)snprintf(line, sizeof line, "kernel choices: %d measured at set-up%s%s",
                                 n->taken[ST_CHOICE_MEASURED] - n->twins,
                                 stored ? " and stored in the cache " : "", stored ? cache : "");
    if (n->twins && at < sizeof line)
        at += (size_t)snprintf(line + at, sizeof line - at,
                               ", %d as an identical layer's (the same shape, layouts and "
                               "precision: one measurement)",
                               n->twins);
    if (n->taken[ST_CHOICE_CACHE] && at < sizeof line)
        at += (size_t)snprintf(line + at, sizeof line - at, ", %d from the cache %s",
                               n->taken[ST_CHOICE_CACHE], cache);
    if (n->taken[ST_CHOICE_FILE] && at < sizeof line)
        at += (size_t)snprintf(line + at, sizeof line - at, ", %d from --kernel-choices %s",
                               n->taken[ST_CHOICE_FILE], t->o.kernel_choices);
    if (n->taken[ST_CHOICE_SNAPSHOT] && at < sizeof line)
        at += (size_t)snprintf(line + at, sizeof line - at, ", %d from the snapshot %s",
                               n->taken[ST_CHOICE_SNAPSHOT], t->o.resume);
    if (n->taken[ST_CHOICE_RANK0] && at < sizeof line)
        at += (size_t)snprintf(line + at, sizeof line - at, ", %d from rank 0",
                               n->taken[ST_CHOICE_RANK0]);
    st_info(&t->log, "%s%s", line, t->o.profile ? " (listed with the profile)" : "");
}

/* After set-up: what was measured and given, the text snapshots keep, the
 * cache updated with what was measured (its lock released), and
 * --save-kernel-choices. */
st_status trainer_finish_choices(st_trainer *t, st_error *err)
{
    if (!t->choices)
        return ST_OK;
    st_choice_counts n;
    int count, stored = 0;
    st_choices_counts(t->choices, &n);
    t->choices_text = st_choices_text(t->choices, ST_CHOICES_VALUES, &count);
    char *notes = st_choices_text(t->choices, ST_CHOICES_NOTES, NULL);
    char *origins = st_choices_text(t->choices, ST_CHOICES_VALUES | ST_CHOICES_ORIGINS, NULL);
    if (!t->choices_text || !notes || !origins) {
        free(notes);
        free(origins);
        return st_fail(err, ST_ENOMEM, "out of memory listing the kernel choices");
    }
    for (char *line = strtok(notes, "\n"); line; line = strtok(NULL, "\n"))
        st_warn(&t->log, "kernel choice %s; measured instead", line + 2);
    free(notes);
    if (t->cache)
        st_choice_cache_store(t->cache, t->choices, &stored);
    if (n.unused && trainer_kernel_choices_used(t))
        st_warn(&t->log, "%d of the kernel choices given match no kernel of this run (choices "
                "are per layer, shape and samples per worker: made for another network, batch "
                "or -t?)", n.unused);
    if (count && trainer_kernel_choices_used(t)) {
        log_choices(t, &n, stored);
        for (char *line = strtok(origins, "\n"); line; line = strtok(NULL, "\n"))
            st_debug(&t->log, "  %s", line);
    }
    free(origins);
    st_choice_cache_close(t->cache); /* its lock released: another run may take it */
    t->cache = NULL;
    st_status st = ST_OK;
    if (t->o.save_kernel_choices && st_cluster_rank(t->o.cluster) == 0) {
        st = st_write_atomic(t->o.save_kernel_choices, write_choices, t, err);
        if (st == ST_OK)
            st_info(&t->log, "kernel choices saved to %s", t->o.save_kernel_choices);
        else
            st_error_prefix(err, "--save-kernel-choices ");
    }
    return st;
}

/* Multi-node: every rank runs rank 0's kernel choices, so that the nodes
 * run the same implementations (and a run given rank 0's saved choices is
 * the same run): rank 0 sends them once its kernels exist (local: how its
 * set-up went), the others take them before building theirs. Every rank
 * calls this once, whatever its own set-up did. */
st_status trainer_share_choices(st_trainer *t, st_status local, st_error *err)
{
    st_cluster *c = t->o.cluster;
    char *text = NULL;
    if (st_cluster_rank(c) == 0 && local == ST_OK && t->choices)
        text = st_choices_text(t->choices, ST_CHOICES_VALUES, NULL);
    int ok = local == ST_OK && (st_cluster_rank(c) != 0 || !t->choices || text);
    st_status st = st_cluster_share_text(c, ok, &text, err);
    if (st == ST_OK && local == ST_OK && st_cluster_rank(c) != 0 && text && t->choices)
        st = st_choices_parse(t->choices, text, strlen(text), "rank 0's kernel choices",
                              ST_CHOICE_RANK0, err);
    free(text);
    return local != ST_OK ? local : st;
}
