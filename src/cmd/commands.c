/* What every command does at its end: the failure line on stderr, in one
 * format for all of them, and the exit code. */
#include "commands.h"

#include <stdio.h>

int st_cmd_exit_code(const char *command, st_status st, const st_error *err)
{
    if (st != ST_OK)
        fprintf(stderr, "singletrain%s%s: %s\n", command ? " " : "", command ? command : "",
                err->msg[0] ? err->msg : st_strerror(st));
    return st_exit_code(st);
}
