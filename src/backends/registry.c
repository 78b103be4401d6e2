/* The backends built into this binary, looked up by name, and what a
 * backend computes in. */
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "base/strlist.h"

extern const st_backend st_backend_ref;
extern const st_backend st_backend_dnnl;
extern const st_backend st_backend_cpe;

static const struct {
    const char *name;
    const st_backend *backend; /* NULL: known but not built */
} backends[] = {
    {"ref", &st_backend_ref},
    {"dnnl", &st_backend_dnnl},
    {"cpe", &st_backend_cpe},
};

#define N_BACKENDS (sizeof backends / sizeof backends[0])

void st_backend_list(char *buf, size_t size, int built_only, const char *last_sep)
{
    size_t n = 0, k = 0;
    for (size_t i = 0; i < N_BACKENDS; i++)
        n += !built_only || backends[i].backend;
    buf[0] = '\0';
    for (size_t i = 0; i < N_BACKENDS; i++)
        if (!built_only || backends[i].backend)
            st_strlist_append(buf, size, backends[i].name, k++, n, last_sep);
}

st_status st_backend_find(const char *name, const st_backend **out, st_error *err)
{
    char known[128], built[128];
    st_backend_list(built, sizeof built, 1, ", ");
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (strcmp(name, backends[i].name) != 0)
            continue;
        if (!backends[i].backend)
            return st_fail(err, ST_EUSAGE, "--backend %s: not built into this binary "
                           "(available: %s)", name, built);
        *out = backends[i].backend;
        return ST_OK;
    }
    st_backend_list(known, sizeof known, 0, " or ");
    return st_fail(err, ST_EUSAGE, "--backend %s: unknown backend (expected %s; available in "
                   "this binary: %s)", name, known, built);
}

int st_backend_takes_precision(const st_backend *be, st_precision p, char *why, size_t size)
{
    if (p == ST_PRECISION_FP32)
        return 1;
    if (be->precision_supported)
        return be->precision_supported(p, why, size);
    snprintf(why, size, "computes in fp32 only");
    return 0;
}
