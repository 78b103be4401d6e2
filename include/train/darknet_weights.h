/* Darknet .weights files: reading and writing the weights of the layers
 * that both singletrain and Darknet have, so a network trained by one can
 * be run by the other with the same .cfg.
 *
 * Format (Darknet's parser.c, save_weights / load_weights; native byte
 * order, little-endian wherever singletrain runs):
 *   int32 major, minor, revision   Darknet writes 0, 2, 0 and so do we
 *   seen                           images trained on: uint64 when
 *                                  major * 10 + minor >= 2 (and both are
 *                                  below 1000), else int32
 *   then, layer by layer in cfg order, float32 tensors:
 *   [convolutional]  biases[n]; if batch_normalize: scales[n],
 *                    rolling_mean[n], rolling_variance[n]; then
 *                    weights[n][c/groups][size][size]
 *   [connected]      biases[out], weights[out][in]; then if
 *                    batch_normalize: scales, rolling_mean, rolling_variance
 *   [batchnorm]      scales[c], rolling_mean[c], rolling_variance[c]
 *                    (pjreddie's Darknet, which Debian packages; the
 *                    AlexeyAB fork writes biases[c] first, and its files
 *                    with [batchnorm] layers are not this format)
 *   every other layer: nothing.
 * Files whose major or minor exceed 1000 (very old Darknet) hold connected
 * weights transposed, [in][out]; they are read, never written.
 *
 * Mapping: singletrain's parameter table names each tensor "<layer>.<role>"
 * with Darknet's role names and layouts (weights [filters, c/groups, size,
 * size] and [outputs, inputs], plain, whatever the backend), and with
 * batch_normalize=1 the layer's "biases" are batch norm's shift, as in
 * Darknet; so every tensor is copied as it is except two:
 *
 * - The running variance. Darknet normalizes (x - mean) / (sqrt(var) +
 *   .000001f); singletrain (like Caffe and oneDNN) (x - mean) /
 *   sqrt(var + eps) with eps = 1e-5. The file holds Darknet's variance, so
 *   both programs divide by the same number: writing stores
 *   (sqrt(var + eps) - 1e-6)^2 (about var + 1e-5), reading turns Darknet's
 *   var_d back into (sqrt(var_d) + 1e-6)^2 - eps. The two formulas cannot
 *   agree where var_d is below about 1e-5 (a channel nearly constant on the
 *   training data): there singletrain keeps 0 and divides by sqrt(eps) =
 *   0.0032 where Darknet divides by less. Round trips: save -> load gives
 *   the variance back to within one float ulp, not always bitwise (two
 *   neighbouring floats can map to one Darknet float); load -> save gives
 *   Darknet's variances back bitwise wherever they are above 1e-5 (checked
 *   on 840,000 values from 1e-5 to 1e6). Every other tensor is bitwise both
 *   ways.
 * - A [batchnorm] layer's biases (its shift). Darknet allocates them but
 *   neither trains nor saves them (they stay 0); saving a network whose
 *   [batchnorm] biases are not all zero is an error naming the layer, and
 *   loading sets them to zero.
 * Any other learnable tensor of a layer Darknet's file does not cover is an
 * error naming the layer. Not handled: Darknet's flipped=1 on a
 * [convolutional] layer, which makes Darknet transpose that layer's weights
 * after reading them (singletrain's cfg reader ignores the key, and so does
 * this module).
 *
 * Darknet reads short files silently and ignores extra bytes; here a file
 * that ends early is an error naming the layer where it ran out and the
 * byte counts, and so is one with bytes left over. */
#ifndef ST_DARKNET_WEIGHTS_H
#define ST_DARKNET_WEIGHTS_H

#include <stdint.h>

#include "net/net.h"
#include "base/status.h"

/* Bytes of the header this module writes: 3 int32 and a uint64 seen. */
#define ST_DARKNET_HEADER_BYTES 20

/* Floats of net's Darknet .weights file after the header; 0 and an error
 * naming the layer when net has a learnable tensor the format lacks. */
st_status st_darknet_weights_floats(const st_net *net, size_t *floats, st_error *err);

/* Write weights [net->params.count] (the arena) to path, atomically
 * (fileio.h), with seen (images trained on) in the header. */
st_status st_darknet_weights_save(const char *path, const st_net *net, const float *weights,
                                  uint64_t seen, st_error *err);

/* Read path into weights [net->params.count]; *seen if not NULL. A missing,
 * truncated or over-long file is ST_EINPUT naming it (and where it ran out);
 * on failure weights may be partly overwritten. */
st_status st_darknet_weights_load(const char *path, const st_net *net, float *weights,
                                  uint64_t *seen, st_error *err);

/* A singletrain snapshot (the file starts with "STSNAPSH", snapshot.h),
 * an ONNX model (the path ends in .onnx: its initializers, net/onnx.h's
 * st_onnx_load_weights) or else a Darknet .weights file, into weights
 * [net->params.count]: every command that takes weights reads them here. */
st_status st_weights_load_any(const char *path, const st_net *net, float *weights,
                              st_error *err);

/* The same, and *seen: Darknet's count of images trained on, or for a
 * snapshot its iteration times batch (the images per iteration); 0 for an
 * ONNX model. */
st_status st_weights_load_seen(const char *path, const st_net *net, int batch, float *weights,
                               uint64_t *seen, st_error *err);

/* The same as st_weights_load_any, and *precision: what a snapshot's run
 * computed its convolutions and inner products in (its test phases
 * included); fp32 for the other kinds. */
st_status st_weights_load_precision(const char *path, const st_net *net, float *weights,
                                    st_precision *precision, st_error *err);

#endif
