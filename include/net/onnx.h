/* ONNX models as networks: an ONNX file's graph translated into the cfg
 * sections this program builds networks from, its initializers the
 * network's starting weights (st_param_table.start); and a network
 * written as an ONNX model (onnx_export.c) that reads back the same.
 *
 * The schema is Debian's onnx.proto (libonnx-dev), compiled by protoc-c at
 * build time (the Makefile's ONNX_GEN); nothing is decoded by hand.
 *
 * The translation, node by node in the graph's (topological) order; each
 * node becomes a layer, or folds into the layer that made its input:
 *   Conv                  [convolutional] (square kernel, equal strides,
 *                         symmetric pads, dilations 1; group), weights OIHW
 *                         = [filters][c/groups][size][size] as they are
 *   Gemm                  [connected] (transA 0, alpha = beta = 1); B is
 *                         [out][in] with transB=1, else transposed
 *   MatMul (+ Add)        [connected] with the constant [in][out] operand
 *                         transposed; an Add of a constant is its bias
 *                         ([C] or [1, C]; [C, 1, 1] after a Conv: ONNX
 *                         broadcasts from the last axis)
 *   BatchNormalization    folded into the Conv or Gemm before it
 *                         (batch_normalize=1; a conv bias goes into the
 *                         mean), else [batchnorm]; epsilon 1e-5; its
 *                         momentum (the share of the running statistics
 *                         kept, 0..1, default 0.9) is the layer's
 *                         bn_momentum=, 1 - momentum (PyTorch's)
 *   Relu, LeakyRelu (alpha 0.1), Sigmoid, Tanh
 *                         the activation= of the Conv, Gemm or Add before
 *                         (or before the MaxPool before: a monotone
 *                         activation commutes with the maximum)
 *   MaxPool               [maxpool] (square window, equal strides; pads
 *                         top = left, bottom = right, bottom - top 0 or 1)
 *   AveragePool, GlobalAveragePool
 *                         [avgpool] (the window the whole input)
 *   Add of two layers     [shortcut] (the same shapes)
 *   Concat (axis 1)       [route]
 *   Flatten (axis 1), Reshape to [N, C*H*W]   nothing: layers read NCHW
 *   Identity, Constant    nothing (a constant is read where it is used)
 *   Transpose of a constant
 *                         nothing: the permuted tensor (any perm) is
 *                         computed at load and read where it is used
 *                         (PyTorch's bias-free Linear without constant
 *                         folding: MatMul of Transpose(W))
 *   Dropout               [dropout]
 *   LRN                   [lrn]
 *   Softmax, LogSoftmax   [softmax] (its cross-entropy is the loss; the
 *                         outputs are probabilities, not their logs)
 * A graph that does not end in a softmax gets one: the last layer's
 * outputs are the classes. A node whose input is not the last layer's
 * output is preceded by a [route] to it. Anything else (an op, an
 * attribute value, a layout) is an input error naming the node, its op and
 * what is supported; a file that is not a well-formed model is an input
 * error, never a crash: its nesting is bounded before protobuf-c decodes
 * it (onnx_wire.c), and what onnx.checker refuses, tied weights and
 * non-finite initializers are refused too (onnx_check.c, onnx_values.c).
 *
 * Adding an op: its handler and its row in onnx_ops.c's ox_ops (the list
 * in messages follows); if a layer computes it that no st_graph_op
 * describes yet (layers/layer.h), the op's row there and its writer in
 * onnx_export.c's ex_writer_of; a model in tests/lib/onnx_models.py with a
 * cfg twin.
 *
 * The sections' line numbers are the nodes' numbers, from 1, and a
 * layer's message from the build is said of its node ("model.onnx: node 3
 * 'conv1' (Conv): [convolutional] ..."); every message of a failed read
 * has the file's names made safe to print (base/strlist.h). The [net] section (hyper-parameters, data) is the sidecar's: a
 * file with a [net] section and no other, by default the model's path with
 * .onnx replaced by .train (none there: [net]'s defaults); height=, width=
 * and channels= come from the graph's input and may not be in it. */
#ifndef ST_ONNX_H
#define ST_ONNX_H

#include "base/cfg.h"
#include "base/log.h"
#include "base/status.h"
#include "net/hparams.h"
#include "net/net.h"

/* The most nodes st_onnx_load reads from a model's graph, and so the most
 * st_onnx_save writes: a network that needs more is an input error on
 * both sides, naming this limit and the count. */
#define ST_ONNX_MAX_NODES 10000

/* Whether path names an ONNX model (it ends in .onnx). */
int st_onnx_is_model(const char *path);

/* Read the ONNX model at path and its hyper-parameters (hparams_path, or
 * NULL: the sidecar, if there is one) into cfg, hp and net, as
 * st_net_load does for a cfg; net->params.start holds the initializers.
 * On failure nothing is left allocated. */
st_status st_onnx_load(const char *path, const char *hparams_path, st_cfg *cfg,
                       st_hparams *hp, st_net *net, const st_log *log, st_error *err);

/* The initializers of the ONNX model at path as the weights [net->params
 * .count] of net, a network built from a cfg or from a model: the model
 * read as st_onnx_load does (its sidecar too), its network's parameters
 * net's, name for name and size for size, else an input error naming the
 * first that differs (weights of another network). */
st_status st_onnx_load_weights(const char *path, const st_net *net, float *weights,
                               st_error *err);

/* Write net (built from cfg, whose sections name the layers in messages;
 * their options are the built layers', st_layer_ops.graph) with weights
 * [net->params.count] to path as an ONNX model, opset 13: each layer as
 * the nodes st_onnx_load reads back into the same layer (batch
 * norm as BatchNormalization with the running statistics, [cost] left
 * out: its output is its input), so that reading the file again gives the
 * same outputs bit for bit. A layer no ONNX op does ([crop], a softmax of
 * several groups, a shortcut of two shapes) is an input error naming its
 * cfg line; so is a network of more than ST_ONNX_MAX_NODES nodes, which
 * st_onnx_load would refuse. Written atomically (base/fileio.h). */
st_status st_onnx_save(const char *path, const st_net *net, const st_cfg *cfg,
                       const float *weights, st_error *err);

#endif
