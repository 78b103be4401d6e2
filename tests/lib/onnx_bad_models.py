"""Bad ONNX models, one a call, for the catalogue's red-team cases of issue
36 (tests/e2e/catalogue.tsv): each a small valid model (Conv, Flatten,
Gemm on a [N, 1, 4, 4] input, opset 13) with one mistake. Written with
a few lines of protobuf wire format, not with the onnx package: the
mistakes are ones onnx.helper would not write (3,000 nested graphs) or
onnx.checker refuses, and the catalogue needs nothing but python3.

usage: onnx_bad_models.py CASE FILE   writes the model CASE into FILE:
  deep N          a node whose attribute holds a graph whose node's
                  attribute holds a graph ... N graphs deep
  deep-type N     a graph input whose type is a sequence of a sequence ...
                  of a tensor, N types deep
  nan-weight, inf-bias   a Conv weight with a NaN, a Gemm bias with -Inf
  negative-variance      a BatchNormalization running variance below 0
  tied            one initializer the weight of two Conv nodes
  duplicate-init  two initializers of one name
  raw-and-float   the Gemm's bias with raw_data and float_data both set
  double-input, int64-input   a graph input of another element type
  gemm-4d         a Gemm reading the Conv's [N, C, H, W] output
  opset V         the default domain's opset V
  ir V            ir_version V
  bn-momentum     a BatchNormalization with momentum 1.5 (outside 0..1)
  bn-spatial      a BatchNormalization with spatial=0 (opset 7's statistics
                  per value, not per channel)
"""
import math
import random
import struct
import sys

FLOAT, INT64, DOUBLE = 1, 7, 11


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    """Field num: an int as a varint, bytes (or str, or a message's bytes)
    length-delimited."""
    if isinstance(value, int):
        return varint(num << 3) + varint(value & (2**64 - 1))
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


class Floats:
    """A float tensor: its dims and its values, row-major."""
    def __init__(self, shape, values):
        self.shape, self.values = shape, values


def tensor(name, a, raw=True, floats_too=False):
    """TensorProto: dims 1, data_type 2, float_data 4 (packed), name 8,
    raw_data 9."""
    t = b"".join(field(1, d) for d in a.shape) + field(2, FLOAT) + field(8, name)
    packed = struct.pack(f"<{len(a.values)}f", *a.values)
    if raw:
        t += field(9, packed)
    if floats_too or not raw:
        t += field(4, packed)
    return t


def value_info(name, elem, dims):
    """ValueInfoProto name 1, type 2: TypeProto tensor_type 1: elem_type 1,
    shape 2: dim 1 of dim_value 1 (dim_param 2 for the batch)."""
    shape = field(1, field(2, "N")) + b"".join(field(1, field(1, d)) for d in dims)
    return field(1, name) + field(2, field(1, field(1, elem) + field(2, shape)))


def node(op, inputs, outputs, name="", attrs=b""):
    """NodeProto input 1, output 2, name 3, op_type 4, attribute 5."""
    n = b"".join(field(1, i) for i in inputs) + b"".join(field(2, o) for o in outputs)
    return n + (field(3, name) if name else b"") + field(4, op) + attrs


def attr_ints(name, values):
    """AttributeProto name 1, ints 8, type 20 (INTS = 7)."""
    return field(5, field(1, name) + b"".join(field(8, v) for v in values) + field(20, 7))


def attr_int(name, value):
    """AttributeProto name 1, i 3, type 20 (INT = 2)."""
    return field(5, field(1, name) + field(3, value) + field(20, 2))


def attr_float(name, value):
    """AttributeProto name 1, f 2 (fixed32), type 20 (FLOAT = 1)."""
    return field(5, field(1, name) + bytes([2 << 3 | 5]) + struct.pack("<f", value) +
                 field(20, 1))


def graph(nodes, inits, inputs, output="y"):
    """GraphProto node 1, name 2, initializer 5, input 11, output 12."""
    return (b"".join(field(1, n) for n in nodes) + field(2, "g") +
            b"".join(field(5, t) for t in inits) + b"".join(field(11, i) for i in inputs) +
            field(12, value_info(output, FLOAT, [3])))


def model(g, opset=13, ir=8):
    """ModelProto ir_version 1, producer_name 2, graph 7, opset_import 8
    (domain 1, version 2)."""
    return (field(1, ir) + field(2, "onnx_bad_models.py") + field(7, g) +
            field(8, field(1, "") + field(2, opset)))


rng = random.Random(36)


def rand(*shape):
    return Floats(list(shape), [rng.gauss(0, 0.3) for _ in range(math.prod(shape))])


def const(values):
    return Floats([len(values)], list(values))


def small(w=None, b=None, bn=None, elem=FLOAT, gemm_4d=False, opset=13, ir=8, extra=(),
          both=False, more_inputs=()):
    """Conv 2 filters 3x3 (pads 1) [+ BatchNormalization], Flatten, Gemm
    to 3 classes on [N, 1, 4, 4]."""
    w = rand(2, 1, 3, 3) if w is None else w
    b = rand(3) if b is None else b
    nodes = [node("Conv", ["x", "w", "cb"], ["c"], "conv1", attr_ints("pads", [1, 1, 1, 1]))]
    inits = [tensor("w", w), tensor("cb", rand(2)), tensor("wf", rand(3, 32)),
             tensor("b", b, floats_too=both)]
    last = "c"
    if bn is not None:
        nodes.append(node("BatchNormalization", ["c", "s", "t", "m", "v"], ["n"], "bn1",
                          bn[1]))
        inits += [tensor("s", const([1, 1])), tensor("t", const([0, 0])),
                  tensor("m", const([0, 0])), tensor("v", const(bn[0]))]
        last = "n"
    if not gemm_4d:
        nodes.append(node("Flatten", [last], ["f"]))
        last = "f"
    nodes.append(node("Gemm", [last, "wf", "b"], ["y"], "fc", attr_int("transB", 1)))
    return model(graph(nodes, inits + list(extra), [value_info("x", elem, [1, 4, 4])] + list(more_inputs)),
                 opset, ir)


def deep(depth):
    """depth graphs, each the then_branch (AttributeProto g 6, type 20
    GRAPH = 5) of an If node of the graph around it; built inside out,
    without recursion."""
    g = field(2, "inner")
    for _ in range(depth - 1):
        attr = field(1, "then_branch") + field(6, g) + field(20, 5)
        g = field(1, node("If", ["x"], ["y"], attrs=field(5, attr))) + field(2, "g")
    return model(g + field(11, value_info("x", FLOAT, [1, 4, 4])) +
                 field(12, value_info("y", FLOAT, [3])))


def deep_type(depth):
    """The graph input's type a sequence (TypeProto sequence_type 4:
    elem_type 1) of a sequence ... depth types deep."""
    t = field(1, field(1, FLOAT))
    for _ in range(depth - 1):
        t = field(4, field(1, t))
    return small(more_inputs=[field(1, "extra") + field(2, t)])


def tied():
    """Two Conv nodes read the initializer 'w' (2 filters of 2 channels)."""
    pads = attr_ints("pads", [1, 1, 1, 1])
    nodes = [node("Conv", ["x", "w0"], ["a"], "conv0", pads),
             node("Conv", ["a", "w"], ["b"], "conv1", pads),
             node("Conv", ["b", "w"], ["c"], "conv2", pads),
             node("Flatten", ["c"], ["f"]),
             node("Gemm", ["f", "wf"], ["y"], "fc", attr_int("transB", 1))]
    inits = [tensor("w0", rand(2, 1, 3, 3)), tensor("w", rand(2, 2, 3, 3)),
             tensor("wf", rand(3, 32))]
    return model(graph(nodes, inits, [value_info("x", FLOAT, [1, 4, 4])]))


def make(case, arg):
    if case == "deep":
        return deep(int(arg))
    if case == "nan-weight":
        w = rand(2, 1, 3, 3)
        w.values[16] = math.nan  # [1][0][2][1]
        return small(w=w)
    if case == "inf-bias":
        return small(b=const([0.5, -math.inf, 0.25]))
    if case == "negative-variance":
        return small(bn=([1.0, -0.5], b""))
    if case == "bn-momentum":
        return small(bn=([1.0, 1.0], attr_float("momentum", 1.5)))
    if case == "deep-type":
        return deep_type(int(arg))
    if case == "bn-spatial":
        return small(bn=([1.0, 1.0], attr_int("spatial", 0)))
    if case == "tied":
        return tied()
    if case == "duplicate-init":
        return small(extra=[tensor("wf", rand(3, 32))])
    if case == "raw-and-float":
        return small(both=True)
    if case == "double-input":
        return small(elem=DOUBLE)
    if case == "int64-input":
        return small(elem=INT64)
    if case == "gemm-4d":
        return small(gemm_4d=True)
    if case == "opset":
        return small(opset=int(arg))
    if case == "ir":
        return small(ir=int(arg))
    if case == "good":
        return small()
    raise SystemExit(f"onnx_bad_models.py: unknown case {case}")


def main():
    if len(sys.argv) < 3:
        raise SystemExit("usage: onnx_bad_models.py CASE [ARG] FILE")
    case, out = sys.argv[1], sys.argv[-1]
    arg = sys.argv[2] if len(sys.argv) > 3 else None
    with open(out, "wb") as f:
        f.write(make(case, arg))


if __name__ == "__main__":
    main()
