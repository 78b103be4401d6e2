/* Where a network argument (NET.cfg, or an ONNX model) is found, for every
 * command that takes one (training, --dry-run, plan, predict, eval,
 * export): as given when it has a slash or names a file in the current
 * directory; else in the folders of $SINGLETRAIN_PATH (colon-separated, in
 * order), then in the installed networks folder, PREFIX/share/singletrain/
 * networks, PREFIX being the folder above the running executable's
 * (/proc/self/exe: a relocated or DESTDIR-staged install finds its own).
 * Not found: ST_EINPUT naming the argument, the folders searched in order
 * and the networks there. --list-networks prints the networks of every
 * folder in lookup order, shadowed ones marked. */
#ifndef ST_NETPATH_H
#define ST_NETPATH_H

#include <stdio.h>

#include "base/log.h"
#include "base/status.h"
#include "net/hparams.h"

/* SINGLETRAIN_PATH's bounds: longer or with more folders is an error
 * naming the limit. */
#define ST_NETPATH_ENV_MAX 4096
#define ST_NETPATH_MAX_DIRS 32

typedef struct st_netpath {
    char path[ST_PATH_MAX]; /* the file to read: the argument, or FOLDER/argument */
    const char *found_in;   /* NULL: as given; else "$SINGLETRAIN_PATH" or "the installed networks" */
} st_netpath;

/* NET as given or found (above); *np is filled in either case. */
st_status st_netpath_find(st_netpath *np, const char *arg, st_error *err);

/* "using FILE (NET found in ...)" on log's info stream when np was found
 * by lookup; nothing when it was given as a path. */
void st_netpath_note(const st_netpath *np, const st_log *log);

/* st_netpath_find for a command other than training (plan, predict, eval,
 * export), whose stdout is its result: the note on stderr, "singletrain
 * COMMAND: using ...", unless quiet. */
st_status st_netpath_find_for(st_netpath *np, const char *command, const char *arg, int quiet,
                              st_error *err);

/* --list-networks: one line per network file (*.cfg, *.onnx) of each
 * folder, in lookup order: NAME, FOLDER, where the folder comes from, and
 * for a name an earlier folder also has, which file the lookup takes. */
st_status st_netpath_list(FILE *out, st_error *err);

#endif
