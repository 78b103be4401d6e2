/* The backends built into this binary, looked up by name. */
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"

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

const char *st_backend_list(void)
{
    static const char list[] = "ref, dnnl, cpe";
    return list;
}

st_status st_backend_find(const char *name, const st_backend **out, st_error *err)
{
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (strcmp(name, backends[i].name) != 0)
            continue;
        if (!backends[i].backend)
            return st_fail(err, ST_EUSAGE, "--backend %s: not built into this binary "
                           "(available: %s)", name, st_backend_list());
        *out = backends[i].backend;
        return ST_OK;
    }
    return st_fail(err, ST_EUSAGE, "--backend %s: unknown backend (expected ref, dnnl or cpe; "
                   "available in this binary: %s)", name, st_backend_list());
}
