/* What the commands share: the precision the commands that compute with
 * trained weights take, and what every command does at its end, the
 * failure line on stderr, in one format for all of them, and the exit
 * code. */
#include "commands.h"

#include <stdio.h>

#include "options.h"

st_status st_cmd_precision(const st_backend *be, const char *option, const char *weights_path,
                           st_precision trained, st_precision *out, st_error *err)
{
    int given = (int)trained;
    st_status st = option ? st_option_choice("precision", option, st_precision_names,
                                             "fp32 or bf16", &given, err)
                          : ST_OK;
    if (st != ST_OK)
        return st;
    *out = (st_precision)given;
    char why[320];
    if (st_backend_takes_precision(be, *out, why, sizeof why))
        return ST_OK;
    if (option)
        return st_fail(err, ST_EUSAGE, "--precision %s: the %s backend %s",
                       st_precision_names[*out], be->name, why);
    return st_fail(err, ST_EUSAGE, "%s: trained in %s (its test phases computed in it), but the "
                   "%s backend %s; or give --precision fp32 to compute in fp32", weights_path,
                   st_precision_names[*out], be->name, why);
}

int st_cmd_exit_code(const char *command, st_status st, const st_error *err)
{
    if (st != ST_OK)
        fprintf(stderr, "singletrain%s%s: %s\n", command ? " " : "", command ? command : "",
                err->msg[0] ? err->msg : st_strerror(st));
    return st_exit_code(st);
}
