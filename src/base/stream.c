/* Writing to the standard streams; see stream.h. */
#include "base/stream.h"

#include <errno.h>
#include <string.h>

int st_stream_ok(FILE *f)
{
    return f && !ferror(f);
}

void st_stream_flush(FILE *f)
{
    if (fflush(f) == 0 && !ferror(f))
        return;
    int e = errno;
    if (f != stderr && !ferror(stderr))
        fprintf(stderr, "singletrain: warning: writing to standard %s failed: %s: nothing more "
                "is written there, the run goes on\n", f == stdout ? "output" : "error",
                strerror(e));
}

int st_streams_failed(void)
{
    fflush(stdout);
    return ferror(stdout) || ferror(stderr);
}
