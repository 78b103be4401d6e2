/* The commands besides training, dispatched by main: each parses its own
 * arguments (argv[0] is the command's name) and returns the exit code
 * (0 success, 2 bad usage or input, 1 run-time failure). */
#ifndef ST_COMMANDS_H
#define ST_COMMANDS_H

#include "backends/backend.h"
#include "base/status.h"

/* singletrain pack SRC OUT: decode a source into a striped store. */
int st_cmd_pack(int argc, char **argv);

/* singletrain read SRC: read random batches of a source and report the
 * throughput (records/s, MB/s, time per record). */
int st_cmd_read(int argc, char **argv);

/* singletrain predict NET.cfg WEIGHTS IMAGE...: classify images with a
 * snapshot or a Darknet .weights file and print the top classes. */
int st_cmd_predict(int argc, char **argv);

/* singletrain eval NET.cfg WEIGHTS: test accuracy and loss of the weights
 * on the data set's test split in inference mode, as training's test
 * phase reports them. */
int st_cmd_eval(int argc, char **argv);

/* singletrain export NET.cfg WEIGHTS OUT.weights: write Darknet's .weights
 * from a snapshot (or re-write a .weights file). */
int st_cmd_export(int argc, char **argv);

/* singletrain plan NET.cfg --nodes N1,N2,...: predict iteration time,
 * img/s, speed-up and the best all-reduce of training on N nodes. */
int st_cmd_plan(int argc, char **argv);

/* What a command that computes with trained weights computes in: option
 * (--precision's value, or NULL) else trained (what the weights' run
 * computed in, st_weights_load_precision), if backend be takes it on this
 * host; else ST_EUSAGE naming the option, or weights_path and the way to
 * evaluate in fp32. */
st_status st_cmd_precision(const st_backend *be, const char *option, const char *weights_path,
                           st_precision trained, st_precision *out, st_error *err);

/* The exit code of a command that ended with st (st_exit_code's), after
 * printing a failure on stderr as "singletrain COMMAND: MESSAGE" (err's
 * message, else the status's; COMMAND NULL, for training: "singletrain:
 * MESSAGE"). */
int st_cmd_exit_code(const char *command, st_status st, const st_error *err);

#endif
