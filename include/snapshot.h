/* Snapshots: the weights of a network in plain layout, behind a header with
 * a magic number, a format version, the network's hash, the iteration and a
 * CRC-32 of the payload. Written atomically (fileio.h). */
#ifndef ST_SNAPSHOT_H
#define ST_SNAPSHOT_H

#include "net.h"
#include "status.h"

#define ST_SNAPSHOT_VERSION 1

st_status st_snapshot_save(const char *path, const st_net *net, const float *weights,
                           long iteration, st_error *err);

/* Load into weights [net->params.count]; a file of another network, a
 * truncated or corrupt file is ST_EINPUT naming the file and the problem. */
st_status st_snapshot_load(const char *path, const st_net *net, float *weights,
                           long *iteration, st_error *err);

#endif
