"""ONNX models for tests/e2e/test_onnx.sh, built with onnx.helper (Debian's
python3-onnx; run with /usr/bin/python3), and their twins in singletrain's
own formats.

usage: onnx_models.py DIR   writes into DIR:
  lenet.onnx, lenet.cfg, lenet.weights
      a LeNet-like model (Conv + bias + BatchNormalization + Relu, MaxPool,
      Conv with pads, MaxPool, LeakyRelu(0.1), Flatten, Gemm transB=1 +
      Relu, MatMul + Add; no softmax: singletrain adds it; attributes at
      their defaults and initializers also graph inputs, as PyTorch's
      exporter may write them; batch norm's momentum 0.75, the twin's
      bn_momentum=0.25) with seeded random
      initializers, and the same network as a cfg with the same weights as a
      Darknet .weights file (the conv bias before batch norm goes into the
      mean; the variance is one that Darknet's reads back bitwise)
  mixed.onnx, mixed.cfg, mixed.weights
                  every other supported op (a grouped Conv, Sigmoid, Tanh,
                  Concat, standalone BatchNormalization, LRN, Add, Dropout,
                  AveragePool over the whole input, Identity, Reshape,
                  LogSoftmax), and its cfg twin with the same weights
                  (the BatchNormalization's momentum ONNX's default 0.9,
                  the twin's bn_momentum=0.1)
  global.onnx     GlobalAveragePool
  unsupported.onnx   an Erf node (node 2, named 'erf1')
  no_init.onnx    a Conv whose weight is no initializer
  bad_shape.onnx  a Gemm whose weight does not fit its input
  bad_attr.onnx   a MaxPool with ceil_mode=1
  not_last.onnx   a graph whose output is not its last layer's
  bad_bias.onnx   a Conv plus a constant of dims [C], which ONNX adds along
                  the width
  bad_softmax.onnx   a Softmax over the last axis of [N, C, 1, 1]
  empty_conv.onnx, big_pool.onnx, dup_output.onnx, escape.onnx
                  a Conv weight of dims [0, 1, 3, 3]; a MaxPool window
                  larger than its input before a Gemm of no inputs; a Relu
                  writing its input's name; a node named with terminal
                  escape sequences
  transpose.onnx, transpose_twin.onnx
                  Transposes of initializers (any permutation) before a
                  Conv, a MatMul and a Gemm, and the same model with the
                  weights transposed by numpy
  transpose_layer.onnx   a Transpose of the graph's input
"""
import struct
import sys

import numpy as np
from onnx import TensorProto, checker, helper, numpy_helper, save

OPSET = [helper.make_opsetid("", 13)]
rng = np.random.default_rng(7)


def rand(*shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def darknet_variance(c):
    """(var, var_d) of c channels: a running variance singletrain reads back
    bitwise from Darknet's var_d (darknet_weights.c: (sqrt(var_d) + 1e-6)^2 -
    1e-5, in double), so that an ONNX model and its .weights twin hold the
    same bits."""
    var_d = (0.5 + np.abs(rand(c))).astype(np.float32)
    eps = np.float64(np.float32(1e-5))
    var = ((np.sqrt(var_d.astype(np.float64)) + 1e-6) ** 2 - eps).astype(np.float32)
    return var, var_d


def write_weights(path, parts):
    """A Darknet .weights file: header 0.2.0, seen 0, then the tensors."""
    with open(path, "wb") as f:
        f.write(struct.pack("<iiiQ", 0, 2, 0, 0))
        for p in parts:
            f.write(np.ascontiguousarray(p, dtype="<f4").tobytes())


def model(nodes, inits, in_shape, out_name="y", check=True, inits_as_inputs=False):
    """inits_as_inputs: the initializers also listed as graph inputs, as
    older exporters (PyTorch's keep_initializers_as_inputs) write them."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"] + list(in_shape))
    y = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, ["N", "K"])
    extra = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
             for t in inits] if inits_as_inputs else []
    g = helper.make_graph(nodes, "g", extra + [x], [y], initializer=inits)
    m = helper.make_model(g, opset_imports=OPSET, producer_name="onnx_models.py")
    if check:
        checker.check_model(m)
    return m


def lenet(out):
    w1, b1 = rand(4, 1, 5, 5), rand(4)
    scale, shift = (1 + rand(4)).astype(np.float32), rand(4)
    var, var_d = darknet_variance(4)
    mean = rand(4)
    w2, b2 = rand(8, 4, 3, 3), rand(8)
    w3, b3 = rand(32, 288, scale=0.05), rand(32)
    w4, b4 = rand(32, 10), rand(10)
    n = helper.make_node
    # the attributes PyTorch's exporter writes even at their defaults
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], name="/conv1/Conv", kernel_shape=[5, 5],
          dilations=[1, 1], group=1, strides=[1, 1], pads=[0, 0, 0, 0]),
        # momentum 0.75 (ONNX's: the share kept), the twin's bn_momentum=0.25
        n("BatchNormalization", ["c1", "scale", "shift", "mean", "var"], ["n1"], name="bn1",
          epsilon=1e-5, momentum=0.75),
        n("Relu", ["n1"], ["r1"]),
        n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=0,
          dilations=[1, 1], pads=[0, 0, 0, 0]),
        n("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        n("MaxPool", ["c2"], ["m2"], kernel_shape=[2, 2], strides=[2, 2]),
        n("LeakyRelu", ["m2"], ["p2"], alpha=0.1),
        n("Flatten", ["p2"], ["f"], axis=1),
        n("Gemm", ["f", "w3", "b3"], ["g3"], alpha=1.0, beta=1.0, transB=1),
        n("Relu", ["g3"], ["r3"]),
        n("MatMul", ["r3", "w4"], ["m4"]),
        n("Add", ["m4", "b4"], ["y"]),
    ]
    inits = [init(k, v) for k, v in [("w1", w1), ("b1", b1), ("scale", scale),
                                     ("shift", shift), ("mean", mean), ("var", var),
                                     ("w2", w2), ("b2", b2), ("w3", w3), ("b3", b3),
                                     ("w4", w4), ("b4", b4)]]
    save(model(nodes, inits, [1, 28, 28], inits_as_inputs=True), out + "/lenet.onnx")
    with open(out + "/lenet.cfg", "w") as f:
        f.write(open(out + "/lenet.train").read().replace("[net]", "[net]\nheight=28\n"
                                                          "width=28\nchannels=1", 1))
        f.write("""
[convolutional]
batch_normalize=1
bn_momentum=0.25
filters=4
size=5
stride=1
padding=0
activation=relu

[maxpool]
size=2
stride=2
padding=0

[convolutional]
filters=8
size=3
stride=1
padding=1
activation=leaky

[maxpool]
size=2
stride=2
padding=0

[connected]
output=32
activation=relu

[connected]
output=10
activation=linear

[softmax]
""")
    write_weights(out + "/lenet.weights",
                  [shift, scale, mean - b1, var_d, w1, b2, w2, b3, w3, b4, w4.T])


def mixed(out):
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "wa", "ba"], ["a"], pads=[1, 1, 1, 1]),
        n("Sigmoid", ["a"], ["as"]),
        n("Conv", ["as", "wb", "bb"], ["b"], pads=[1, 1, 1, 1], group=2),
        n("Tanh", ["b"], ["bt"]),
        n("Concat", ["as", "bt"], ["cat"], axis=1),
        n("BatchNormalization", ["cat", "s", "t", "m", "v"], ["bn"]),
        n("LRN", ["bn"], ["lrn"], size=3),
        n("Conv", ["lrn", "wc", "bc"], ["c"], pads=[1, 1, 1, 1]),
        n("Add", ["c", "as"], ["sum"]),
        n("Relu", ["sum"], ["sr"]),
        n("Dropout", ["sr"], ["d"]),
        n("AveragePool", ["d"], ["ap"], kernel_shape=[8, 8]),
        n("Identity", ["ap"], ["api"]),
        n("Reshape", ["api", "shape"], ["flat"]),
        n("Gemm", ["flat", "wf", "bf"], ["logits"], transB=1),
        n("LogSoftmax", ["logits"], ["y"], axis=1),
    ]
    var, var_d = darknet_variance(8)
    # the standalone batch norm's shift is 0: Darknet's .weights has none
    t = dict([("wa", rand(4, 3, 3, 3)), ("ba", rand(4)), ("wb", rand(4, 2, 3, 3)),
              ("bb", rand(4)), ("s", 1 + rand(8)), ("t", np.zeros(8, np.float32)),
              ("m", rand(8)), ("v", var), ("wc", rand(4, 8, 3, 3)), ("bc", rand(4)),
              ("wf", rand(5, 4)), ("bf", rand(5)), ("shape", np.array([-1, 4], np.int64))])
    save(model(nodes, [init(k, v) for k, v in t.items()], [3, 8, 8]), out + "/mixed.onnx")
    with open(out + "/mixed.cfg", "w") as f:
        f.write("""[net]
height=8
width=8
channels=3

[convolutional]
filters=4
size=3
padding=1
activation=logistic

[convolutional]
filters=4
size=3
padding=1
groups=2
activation=tanh

[route]
layers=0,1

[batchnorm]
bn_momentum=0.1

[lrn]
size=3
alpha=0.0001
beta=0.75
k=1

[convolutional]
filters=4
size=3
padding=1
activation=linear

[shortcut]
from=0
activation=relu

[dropout]
probability=0.5

[avgpool]

[connected]
output=5
activation=linear

[softmax]
""")
    write_weights(out + "/mixed.weights", [t["ba"], t["wa"], t["bb"], t["wb"], t["s"], t["m"],
                                           var_d, t["bc"], t["wc"], t["bf"], t["wf"]])
    gnodes = [n("Conv", ["x", "wa"], ["a"]), n("GlobalAveragePool", ["a"], ["g"]),
              n("Flatten", ["g"], ["y"])]
    save(model(gnodes, [init("wa", rand(6, 3, 3, 3))], [3, 8, 8]), out + "/global.onnx")


def broken(out):
    n = helper.make_node
    fc = [init("w", rand(10, 48))]
    save(model([n("Flatten", ["x"], ["f"]), n("Erf", ["f"], ["e"], name="erf1"),
                n("Gemm", ["e", "w"], ["y"], transB=1)], fc, [3, 4, 4]),
         out + "/unsupported.onnx")
    save(model([n("Conv", ["x", "nope"], ["y"])], [], [3, 4, 4], check=False),
         out + "/no_init.onnx")
    save(model([n("Flatten", ["x"], ["f"]), n("Gemm", ["f", "w"], ["y"], transB=1)],
               [init("w", rand(10, 47))], [3, 4, 4], check=False), out + "/bad_shape.onnx")
    save(model([n("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], ceil_mode=1),
                n("Flatten", ["p"], ["f"]), n("Gemm", ["f", "w"], ["y"], transB=1)],
               [init("w", rand(10, 12))], [3, 4, 4]), out + "/bad_attr.onnx")
    save(model([n("Flatten", ["x"], ["f"]), n("Gemm", ["f", "w"], ["y"], transB=1),
                n("Gemm", ["y", "w2"], ["z"], transB=1)], fc + [init("w2", rand(3, 10))],
               [3, 4, 4], check=False), out + "/not_last.onnx")


def bad_bias(out):
    """A Conv (4 channels of 4 x 4) plus a constant of dims [4]: ONNX adds it
    along the width, not per channel; singletrain must refuse it."""
    n = helper.make_node
    inits = [init("w", rand(4, 3, 1, 1)), init("b", rand(4)), init("wf", rand(5, 64))]
    save(model([n("Conv", ["x", "w"], ["c"]), n("Add", ["c", "b"], ["a"]),
                n("Flatten", ["a"], ["f"]), n("Gemm", ["f", "wf"], ["y"], transB=1)],
               inits, [3, 4, 4]), out + "/bad_bias.onnx")


def bad_softmax(out):
    """Softmax at opset 13's default axis, -1, of [N, C, 1, 1]: over the
    width (of 1), not over the channels; singletrain must refuse it."""
    n = helper.make_node
    save(model([n("Conv", ["x", "w"], ["c"]), n("GlobalAveragePool", ["c"], ["g"]),
                n("Softmax", ["g"], ["y"])], [init("w", rand(4, 3, 1, 1))], [3, 4, 4]),
         out + "/bad_softmax.onnx")


def messages(out):
    """Issue 36's messages: each must say what is wrong, where."""
    n = helper.make_node
    save(model([n("Conv", ["x", "w"], ["y"], name="conv")],
               [init("w", np.zeros((0, 1, 3, 3), np.float32))], [1, 8, 8], check=False),
         out + "/empty_conv.onnx")
    # a window larger than the input: the Gemm after it has no inputs, and
    # the MaxPool is at fault
    save(model([n("MaxPool", ["x"], ["p"], name="pool", kernel_shape=[9, 9]),
                n("Flatten", ["p"], ["f"]), n("Gemm", ["f", "w"], ["y"], name="fc", transB=1)],
               [init("w", np.zeros((3, 0), np.float32))], [1, 8, 8], check=False),
         out + "/big_pool.onnx")
    save(model([n("Conv", ["x", "w"], ["c"], name="conv"), n("Relu", ["c"], ["c"], name="relu"),
                n("Flatten", ["c"], ["f"]), n("Gemm", ["f", "wf"], ["y"], transB=1)],
               [init("w", rand(2, 1, 3, 3)), init("wf", rand(3, 72))], [1, 8, 8], check=False),
         out + "/dup_output.onnx")
    save(model([n("Flatten", ["x"], ["f"]), n("Erf", ["f"], ["e"], name="e\x1b[31mred\x1b[0m"),
                n("Gemm", ["e", "w"], ["y"], transB=1)], [init("w", rand(3, 64))], [1, 8, 8]),
         out + "/escape.onnx")


def transpose(out):
    """Transposes of initializers, as PyTorch writes a bias-free Linear
    without constant folding (MatMul of Transpose(W)): a Conv weight stored
    as [kw, kh, C, O] behind Transpose perm [3, 2, 1, 0], a MatMul of
    Transpose(W1), a Gemm (transB=0) of Transpose(W2) (no perm: reversed);
    and transpose_twin.onnx, the same weights transposed by numpy instead.
    transpose_layer.onnx transposes the graph's input."""
    n = helper.make_node
    w, w1, w2, b2 = rand(4, 1, 3, 3), rand(8, 676, scale=0.05), rand(5, 8), rand(5)
    save(model([n("Transpose", ["wp"], ["wt"], perm=[3, 2, 1, 0]),
                n("Conv", ["x", "wt"], ["c"]), n("MaxPool", ["c"], ["p"], kernel_shape=[2, 2],
                                                  strides=[2, 2]),
                n("Flatten", ["p"], ["f"]), n("Transpose", ["w1"], ["w1t"], perm=[1, 0]),
                n("MatMul", ["f", "w1t"], ["h"]), n("Relu", ["h"], ["r"]),
                n("Transpose", ["w2"], ["w2t"]), n("Gemm", ["r", "w2t", "b2"], ["y"])],
               [init("wp", w.transpose(3, 2, 1, 0)), init("w1", w1), init("w2", w2),
                init("b2", b2)], [1, 28, 28]), out + "/transpose.onnx")
    save(model([n("Conv", ["x", "w"], ["c"]), n("MaxPool", ["c"], ["p"], kernel_shape=[2, 2],
                                                 strides=[2, 2]),
                n("Flatten", ["p"], ["f"]), n("MatMul", ["f", "w1t"], ["h"]),
                n("Relu", ["h"], ["r"]), n("Gemm", ["r", "w2t", "b2"], ["y"])],
               [init("w", w), init("w1t", w1.T.copy()), init("w2t", w2.T.copy()),
                init("b2", b2)], [1, 28, 28]), out + "/transpose_twin.onnx")
    save(model([n("Transpose", ["x"], ["t"], name="tr", perm=[0, 1, 3, 2]),
                n("Flatten", ["t"], ["f"]), n("Gemm", ["f", "w"], ["y"], transB=1)],
               [init("w", rand(3, 64))], [1, 8, 8]), out + "/transpose_layer.onnx")


def main():
    out = sys.argv[1]
    lenet(out)
    mixed(out)
    broken(out)
    bad_bias(out)
    bad_softmax(out)
    messages(out)
    transpose(out)


if __name__ == "__main__":
    main()
