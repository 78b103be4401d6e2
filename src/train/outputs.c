/* The run's outputs (set-up): the snapshots' names, the temporaries a
 * killed run left, and every output's path checked against the inputs and
 * the other outputs before any work. */
#include "trainer_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"

/* NAME of the snapshots DIR/NAME_TAG.snap: the cfg's file name without its
 * last extension (exp.a.cfg: exp.a; .hidden.cfg: .hidden). The longest
 * name, NAME_ITERATION.snap.tmp.PID, must fit the directory's file-name
 * limit: checked now, not after training. */
st_status trainer_name_snapshots(st_trainer *t, st_error *err)
{
    const char *base = strrchr(t->cfg_path, '/');
    base = base ? base + 1 : t->cfg_path;
    const char *dot = strrchr(base, '.');
    int len = (int)(dot && dot != base ? dot - base : (ptrdiff_t)strlen(base));
    snprintf(t->snapshot_name, sizeof t->snapshot_name, "%.*s", len, base);
    if (!t->o.snapshot_dir)
        return ST_OK;
    char longest[ST_PATH_MAX + 64];
    int n = snprintf(longest, sizeof longest, "%s_%ld.snap", t->snapshot_name, LONG_MAX);
    long name_max = st_name_max(t->o.snapshot_dir);
    if ((long)n + ST_TEMP_SUFFIX_MAX > name_max)
        return st_fail(err, ST_EUSAGE, "%s: the snapshots' names would be too long for "
                       "--snapshot-dir %s: %s.snap.tmp.PID takes up to %d bytes, over its "
                       "limit of %ld: give the cfg a shorter name", t->cfg_path,
                       t->o.snapshot_dir, longest, n + ST_TEMP_SUFFIX_MAX, name_max);
    if (strlen(t->o.snapshot_dir) + 1 + (size_t)n + ST_TEMP_SUFFIX_MAX >= ST_PATH_MAX)
        return st_fail(err, ST_EUSAGE, "--snapshot-dir %s: the snapshots' paths would be "
                       "longer than %d bytes", t->o.snapshot_dir, ST_PATH_MAX - 1);
    return ST_OK;
}

/* A run killed while writing a snapshot leaves its temporary file
 * (NAME_TAG.snap.tmp.PID, never the final name): clear those of processes
 * that are gone. */
void trainer_remove_killed_snapshot_writes(const st_trainer *t)
{
    char prefix[ST_PATH_MAX + 1];
    snprintf(prefix, sizeof prefix, "%s_", t->snapshot_name);
    int n = st_remove_stale_temporaries(t->o.snapshot_dir, prefix, ".snap");
    if (n > 0)
        st_info(&t->log, "removed %d temporary file%s of snapshot writes that were killed "
                "(%s/%s*.snap.tmp.PID)", n, n == 1 ? "" : "s", t->o.snapshot_dir, prefix);
}

/* Whether path is a snapshot this run may write: DIR/NAME_final.snap,
 * DIR/NAME_ITERATION.snap or, with test-driven stopping, DIR/NAME_best.snap
 * of --snapshot-dir DIR. */
static int is_snapshot_path(const st_trainer *t, const char *path)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t name = strlen(t->snapshot_name), len = strlen(base);
    if (!t->o.snapshot_dir || len < name + 1 + 5 || strncmp(base, t->snapshot_name, name) != 0 ||
        base[name] != '_' || strcmp(base + len - 5, ".snap") != 0)
        return 0;
    const char *tag = base + name + 1;
    size_t tag_len = len - name - 1 - 5;
    int named = (tag_len == 5 && strncmp(tag, "final", 5) == 0) ||
                (tag_len == 4 && strncmp(tag, "best", 4) == 0 && trainer_stopping(t));
    if (!named && (tag_len == 0 || strspn(tag, "0123456789") < tag_len))
        return 0;
    char dir[ST_PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    return st_same_file(dir, t->o.snapshot_dir);
}

int trainer_outputs(const st_trainer *t, st_named_path *out, char **partials)
{
    const st_train_opts *o = &t->o;
    /* the files written over time and their temporaries, TARGET.partial
     * (none when written in place) */
    const st_named_path over_time[TRAINER_PARTIALS] = {
        {"--metrics", o->metrics}, {"--cpe-trace", o->cpe_trace},
        {"--cpe-report", o->cpe_report}, {"--trace", trainer_trace_path(t)},
    };
    static const char *const temporaries[TRAINER_PARTIALS] = {
        "--metrics's temporary", "--cpe-trace's temporary", "--cpe-report's temporary",
        "--trace's temporary",
    };
    int n = 0;
    for (int i = 0; i < TRAINER_PARTIALS; i++) {
        partials[i] = over_time[i].path ? st_output_partial_name(over_time[i].path) : NULL;
        out[n++] = over_time[i];
        out[n++] = (st_named_path){temporaries[i], partials[i]};
    }
    out[n++] = (st_named_path){"--save-kernel-choices", o->save_kernel_choices};
    return n;
}

void trainer_outputs_free(char **partials)
{
    for (int i = 0; i < TRAINER_PARTIALS; i++)
        free(partials[i]);
}

/* Before any work: no output is a directory or in a directory it cannot be
 * written to, and none would overwrite an input or another output (the
 * snapshots may replace the one resumed or started from: that is a run
 * going on). */
st_status trainer_check_paths(const st_trainer *t, st_error *err)
{
    const st_train_opts *o = &t->o;
    const st_data_paths *d = &t->data;
    st_named_path outputs[TRAINER_OUTPUTS];
    char *partials[TRAINER_PARTIALS];
    int n_out = trainer_outputs(t, outputs, partials);
    const st_named_path inputs[] = {
        {"the network cfg", t->cfg_path}, {"--data", o->data},
        {"train=", d->train}, {"train_labels=", d->train_labels}, {"test=", d->test},
        {"test_labels=", d->test_labels}, {"names=", d->names},
        {"--kernel-choices", o->kernel_choices}, {"--cpe-model", o->cpe_model},
        {"--cpe-machine", o->cpe_machine},
        {"--resume", o->resume}, {"--weights", o->weights}, /* STARTS, last */
    };
    enum { STARTS = 2 }; /* runs go on from them: a snapshot may replace them */
    int n_in = (int)(sizeof inputs / sizeof inputs[0]);
    st_status st = ST_OK;
    /* the files, not their temporaries (every second one of the first) */
    for (int i = 0; st == ST_OK && i < n_out; i += i < 2 * TRAINER_PARTIALS ? 2 : 1)
        if (outputs[i].path)
            st = st_check_output_path(outputs[i].what, outputs[i].path, err);
    if (st == ST_OK)
        st = st_check_distinct(outputs, n_out, inputs, n_in, err);
    for (int i = 0; st == ST_OK && i < n_out + n_in - STARTS; i++) {
        const st_named_path *p = i < n_out ? &outputs[i] : &inputs[i - n_out];
        if (p->path && p->path[0] && is_snapshot_path(t, p->path))
            st = st_fail(err, ST_EUSAGE, "%s %s is one of the snapshots --snapshot-dir %s "
                         "would write (%s_final.snap, %s_ITERATION.snap%s%s%s): give another "
                         "file", p->what, p->path, o->snapshot_dir, t->snapshot_name,
                         t->snapshot_name, trainer_stopping(t) ? ", " : "",
                         trainer_stopping(t) ? t->snapshot_name : "",
                         trainer_stopping(t) ? "_best.snap" : "");
    }
    trainer_outputs_free(partials);
    return st;
}
