"""PyTorch as the oracle, for tests/e2e/test_torch.sh (run with /usr/bin/python3:
Debian's python3-torch and python3-onnx).

usage: torch_models.py build DIR
    defines four small networks in PyTorch with fixed seeds and writes, for
    each NAME of lenet, vgg, resnet, concat, into DIR (and for linear, whose
    bias-free nn.Linear layers the exporter writes as MatMul of Transpose,
    the same; only its forward is compared):
      NAME.onnx      torch.onnx.export of the model (opset 13), in eval mode
                     with training=PRESERVE, so that batch norm is a
                     BatchNormalization node with the running statistics,
                     not folded into the Conv before it, and its momentum
                     (BN_MOMENTUM: PyTorch's m written as ONNX's 1 - m)
      NAME/i.pgm|ppm the 16 inputs, random 8-bit pixels (PNM, which
                     singletrain decodes with stb_image), and NAME.list
                     ("path label" lines) and NAME.data (an image list)
      NAME.npz       PyTorch's answers on those inputs, computed in float64
                     from the very fp32 weights and inputs singletrain sees
                     (x = float32(pixel) * float32(1/255), its transform):
                       probs   eval mode: softmax of the logits (singletrain
                               adds the softmax; predict prints its output)
                       g:PARAM one full-batch step's gradients in train mode
                               (batch statistics), of the mean softmax
                               cross-entropy over the 16 samples (singletrain
                               sums -log p over the batch and scales the
                               gradient by 1/batch: the same mean)
                       losses  the train-mode losses of 5 full-batch SGD
                               steps, lr LR_MOMENTUM, momentum 0.9, no decay
                               (torch.optim.SGD's momentum, dampening 0, is
                               singletrain's sgd: m = 0.9 m + g; w -= lr m)
                       trained eval mode after those 5 steps, batch norm's
                               running statistics averaged with the model's
                               momentum, which singletrain reads from the
                               ONNX model (PyTorch's 0.1, vgg's 0.3)
                       rs:BUF  those running statistics (running_mean,
                               running_var: the unbiased batch variance)
                       decaylosses, decaytrained
                               the same for 5 steps of the recipe DIR/decay.train
                               (weight decay on every tensor, decay_mode=torch,
                               and a warm-up and a cosine), run by
                               scripts/torch_recipe.py's SGD and scheduler
                       adamlosses, adamtrained
                               the same for 5 steps of DIR/adam.train
                               (solver=adam, eps_mode=torch: torch.optim.Adam)
                     and the same in float32 (probs32, ...) to print how far
                     PyTorch's own fp32 is from float64.
    lenet is data/lenet.cfg layer for layer (Caffe's LeNet-5).

usage: torch_models.py compare DIR
    reads singletrain's answers, for each backend BE of dnnl and ref:
    NAME.BE.scores (predict --scores on the model's own initializers) and
    NAME-step.BE.onnx (the snapshot after one full-batch SGD step at lr
    LR_STEP, no momentum, no decay, exported with export --onnx); and
    NAME.csv (the 5 momentum steps' --log-format csv, dnnl),
    NAME.trained.scores (predict --scores with their final snapshot) and
    NAME-trained.onnx (that snapshot exported: its running statistics and
    momentum attributes against PyTorch's, for the models with batch norm),
    and the same of the decay recipe's 5 steps, NAME.decay.csv and
    NAME.decay.trained.scores, and of the Adam recipe's, NAME.adam.csv and
    NAME.adam.trained.scores; for
    linear, linear.BE.scores alone. Prints one line
    per comparison, "ok NAME WHAT: ..." or "FAIL NAME WHAT: ...", with the
    measured difference, the tolerance and PyTorch's own fp32 difference
    from float64 for scale. Exit 0 when all are ok.
"""
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
import torch_recipe  # noqa: E402  (scripts/torch_recipe.py: a [net] recipe as PyTorch's)

# SequentialLR steps its second scheduler with an epoch, which PyTorch 1.13 warns of
warnings.filterwarnings("ignore", "The epoch parameter", UserWarning)

NAMES = ["lenet", "vgg", "resnet", "concat"]
# forward only (predict on both backends against PyTorch): "linear", bias-free
# nn.Linear layers, which the exporter without constant folding writes as
# MatMul(x, Transpose(W)) (issue 36)
FORWARD_ONLY = ["linear"]
BACKENDS = ["dnnl", "ref"]  # forward and one step on each; the 5 steps on dnnl
N = 16               # inputs per model; one batch, so the data order does not matter
CLASSES = 10
LR_STEP = 512.0      # a power of two: (w0 - w1) / lr is exact in float64, and
                     # lr |g| >> |w0| makes w1's fp32 rounding ~6e-8 of lr |g|
LR_MOMENTUM = 0.05
STEPS = 5
# PyTorch's batch-norm momentum per model (running = (1 - m) running + m
# batch), exported as ONNX's momentum 1 - m, which singletrain honours; the
# others keep PyTorch's default
BN_MOMENTUM = {"vgg": 0.3}
DECAY_RECIPE = "decay.train"  # the [net] of the decay run, written by test_torch.sh
ADAM_RECIPE = "adam.train"  # the [net] of the Adam run (eps_mode=torch), likewise

# Tolerances, as max |a - b| / max |b| over a tensor (b PyTorch's, float64,
# so that the difference measured is singletrain's fp32 error alone).
# singletrain computes in fp32: each output or gradient is a sum of K
# products (K up to 800 in lenet's fc; 16 x 24 x 24 = 9216 per weight of its
# first conv's gradient), whose rounding error is at most K eps |terms|
# (eps = 6e-8) and, summed in blocks as oneDNN does, typically
# sqrt(K) eps |terms|: ~6e-6 of the terms for K = 9216. Relative to the
# tensor's largest value that grows by the cancellation in the sum
# (sum |terms| / |sum|), largest in batch norm's backward, which subtracts
# means of such sums, and deep in the net, where the gradients are small:
# a factor ~10 there keeps it under 1e-4, the bound. Measured (this
# machine): forward <= 1.8e-7 (dnnl) and 1.2e-7 (ref); gradients <= 3.4e-5
# (dnnl: resnet's second block's first batch-norm bias, whose largest
# gradient, 8e-3, is 1/50 of the net's) and 1.2e-6 (ref, whose batch norm
# sums in double); PyTorch's own fp32 is 4e-6 from its float64.
TOL_FORWARD = 1e-4   # also after 5 steps: their weights are off PyTorch's by
                     # ~5 x 1e-4 of the updates, a tiny part of the weights
TOL_GRAD = 1e-4
# Five steps: the loss of step k follows k - 1 updates, each off PyTorch's
# by at most TOL_GRAD of its gradient; errors adding linearly over the
# steps (the worst case) bound the loss's relative drift by STEPS x TOL_GRAD
# = 5e-4. The printed loss has 6 significant digits (2e-6 of a loss of 2.3),
# which is what the measured difference, <= 1.9e-6, shows.
TOL_LOSS = STEPS * TOL_GRAD
# The running statistics after the 5 steps average the batch statistics of
# each step, computed with weights that follow k - 1 updates, each off
# PyTorch's by at most TOL_GRAD of its gradient: the losses' bound. A
# channel's batch mean sums its weights' errors over all its inputs, which
# shows with a large momentum: measured (this machine) 1.6e-4 for vgg's
# first running mean at momentum 0.3 on dnnl (its gradients off by up to
# 3.4e-5), 1.4e-7 for the same on ref; 1.1e-6 for resnet's at 0.1.
TOL_RUNNING = TOL_LOSS


def image_ext(c):
    return "pgm" if c == 1 else "ppm"


def write_pnm(path, pixels):
    """pixels: uint8 [C, H, W], C 1 (P5) or 3 (P6)."""
    c, h, w = pixels.shape
    with open(path, "wb") as f:
        f.write(b"P%d\n%d %d\n255\n" % (5 if c == 1 else 6, w, h))
        f.write(np.ascontiguousarray(pixels.transpose(1, 2, 0)).tobytes())


def build(out):
    import os

    import torch
    from torch import nn

    torch.set_num_threads(1)
    recipes = {"decay": torch_recipe.net_keys(f"{out}/{DECAY_RECIPE}"),
               "adam": torch_recipe.net_keys(f"{out}/{ADAM_RECIPE}")}

    def conv_bn(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU()]

    class ResBlock(nn.Module):
        """conv-BN-relu, conv-BN, + the block's input, relu: an Add of two
        layers' outputs (singletrain's [shortcut])."""

        def __init__(self, c):
            super().__init__()
            self.a = nn.Sequential(*conv_bn(c, c))
            self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(self.a(x))) + x)

    class DenseBlock(nn.Module):
        """the input and a conv of it, concatenated on the channels (Concat:
        singletrain's [route])."""

        def __init__(self, c, grow):
            super().__init__()
            self.conv = nn.Conv2d(c, grow, 3, padding=1)

        def forward(self, x):
            return torch.cat([x, torch.tanh(self.conv(x))], 1)

    def make(name):
        if name == "lenet":  # data/lenet.cfg: conv 20 5x5, max, conv 50 5x5, max, fc 500, fc 10
            return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5),
                                 nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(800, 500),
                                 nn.ReLU(), nn.Linear(500, CLASSES)), (1, 28, 28)
        if name == "vgg":
            return nn.Sequential(*conv_bn(3, 8), *conv_bn(8, 8), nn.MaxPool2d(2, 2),
                                 *conv_bn(8, 16), nn.MaxPool2d(2, 2), nn.Flatten(),
                                 nn.Linear(256, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                 nn.Linear(32, CLASSES)), (3, 16, 16)
        if name == "resnet":
            return nn.Sequential(*conv_bn(3, 8), ResBlock(8), nn.MaxPool2d(2, 2), ResBlock(8),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(8, CLASSES)), (3, 16, 16)
        if name == "linear":
            return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(256, 16, bias=False), nn.ReLU(),
                                 nn.Linear(16, CLASSES, bias=False)), (3, 8, 8)
        # concat
        return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), DenseBlock(6, 4),
                             nn.MaxPool2d(2, 2), DenseBlock(10, 6), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(16, CLASSES)), (3, 16, 16)

    for k, name in enumerate(NAMES + FORWARD_ONLY):
        torch.manual_seed(100 + k)
        net, shape = make(name)
        for m in net.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.momentum = BN_MOMENTUM.get(name, m.momentum)
        rng = np.random.default_rng(200 + k)
        # batch norm: scales and shifts off 1 and 0, running statistics off
        # 0 and 1, so that the eval forward tests them; but vgg's BatchNorm1d
        # keeps PyTorch's (weight and running variance ones, bias and running
        # mean zeros), which the exporter writes as two initializers and two
        # Identity nodes giving the equal ones
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                with torch.no_grad():
                    m.weight.copy_(torch.from_numpy(1 + 0.2 * rng.standard_normal(c)))
                    m.bias.copy_(torch.from_numpy(0.2 * rng.standard_normal(c)))
                    m.running_mean.copy_(torch.from_numpy(0.2 * rng.standard_normal(c)))
                    m.running_var.copy_(torch.from_numpy(0.5 + rng.random(c)))
        pixels = rng.integers(0, 256, (N,) + shape, dtype=np.uint8)
        labels = rng.integers(0, CLASSES, N)
        os.makedirs(f"{out}/{name}", exist_ok=True)
        with open(f"{out}/{name}.list", "w") as f:
            for i in range(N):
                path = f"{name}/{i}.{image_ext(shape[0])}"
                write_pnm(f"{out}/{path}", pixels[i])
                f.write(f"{path} {labels[i]}\n")
        with open(f"{out}/{name}.data", "w") as f:
            f.write(f"classes={CLASSES}\ntrain={name}.list\n")
        x32 = pixels.astype(np.float32) * np.float32(1.0 / 255.0)

        net.eval()
        torch.onnx.export(net, torch.from_numpy(x32[:1]), f"{out}/{name}.onnx", opset_version=13,
                          training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                          input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        state = {k: v.clone() for k, v in net.state_dict().items()}
        ref = {}
        for dtype, tag in ((torch.float64, ""), (torch.float32, "32")):
            net.load_state_dict(state)
            net.to(dtype)
            x = torch.from_numpy(x32).to(dtype)
            y = torch.from_numpy(labels)
            net.eval()
            with torch.no_grad():
                ref["probs" + tag] = torch.softmax(net(x), 1).numpy()
            net.train()
            net.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            for p_name, p in net.named_parameters():
                ref[f"g{tag}:{p_name}"] = p.grad.numpy().copy()
            for run in ("", "decay", "adam"):
                net.load_state_dict(state)
                net.to(dtype)
                if run:  # the recipe as scripts/torch_recipe.py reads it
                    opt = torch_recipe.optimizer(net, recipes[run], folded_biases(net))
                    sched = torch_recipe.scheduler(opt, recipes[run], STEPS)
                else:
                    opt = torch.optim.SGD(net.parameters(), lr=LR_MOMENTUM, momentum=0.9)
                    sched = None
                losses = []
                for _ in range(STEPS):
                    opt.zero_grad()
                    loss = nn.functional.cross_entropy(net(x), y)
                    losses.append(loss.item())
                    loss.backward()
                    opt.step()
                    if sched is not None:
                        sched.step()
                ref[run + "losses" + tag] = np.array(losses)
                if run == "":
                    for b_name, b in net.named_buffers():
                        if "running" in b_name:
                            ref[f"rs{tag}:{b_name}"] = b.numpy().copy()
                net.eval()
                with torch.no_grad():
                    ref[run + "trained" + tag] = torch.softmax(net(x), 1).numpy()
                net.train()
        np.savez(f"{out}/{name}.npz", **ref)


def folded_biases(net):
    """The biases of the Conv2d and Linear layers right before batch norm:
    singletrain folds each into the running mean on import (its
    batch_normalize=1 layers have no bias), so it has no tensor to decay
    with decay_mode=torch. PyTorch would decay it: nothing changes in
    train mode (batch norm subtracts it) but the eval-mode running mean
    lags the shrinking bias (2.7e-4 of vgg's outputs after the 5 steps of
    the decay recipe). Kept out of the decay, as singletrain has it."""
    from torch import nn

    out, mods = [], list(net.modules())
    for a, b in zip(mods, mods[1:]):
        if isinstance(a, (nn.Conv2d, nn.Linear)) and a.bias is not None and \
                isinstance(b, (nn.BatchNorm1d, nn.BatchNorm2d)):
            out.append(a.bias)
    return out


def rel(a, b):
    """max |a - b| / max |b|"""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def learned(model):
    """The nodes with weights of an ONNX model, in order: (op, [input names])."""
    ops = ("Conv", "Gemm", "MatMul", "BatchNormalization")
    return [(n.op_type, list(n.input)) for n in model.graph.node if n.op_type in ops]


def forward(out, name, stem, ref, say, key, what):
    """predict --scores in NAME.STEM.scores ("path<TAB>score..." lines)
    against PyTorch's probabilities ref[key]."""
    scores = {}
    for line in open(f"{out}/{name}.{stem}.scores"):
        f = line.rstrip("\n").split("\t")
        scores[int(f[0].rsplit("/", 1)[1].split(".")[0])] = [float(v) for v in f[1:]]
    got = np.array([scores.get(i, []) for i in range(N)])
    ok = got.shape == ref[key].shape
    d = rel(got, ref[key]) if ok else 1.0
    say(ok and d <= TOL_FORWARD, name, f"{what} (eval mode, class scores)", d,
        TOL_FORWARD, f"; PyTorch fp32: {rel(ref[key + '32'], ref[key]):.2g}")


def gradients(out, name, be, ref, torch_model, say):
    """(w0 - w1) / lr of backend be's step against PyTorch's gradients, the
    tensors paired by their place in the nodes with weights (singletrain's
    export names them its own way)."""
    import onnx
    from onnx import numpy_helper

    w0 = {t.name: numpy_helper.to_array(t) for t in torch_model.graph.initializer}
    for n in torch_model.graph.node:  # an initializer under another name
        if n.op_type == "Identity" and n.input[0] in w0:
            w0[n.output[0]] = w0[n.input[0]]
    step = onnx.load(f"{out}/{name}-step.{be}.onnx")
    w1 = {t.name: numpy_helper.to_array(t) for t in step.graph.initializer}
    a, b = learned(torch_model), learned(step)
    what = f"gradients {be}"
    if [op for op, _ in a] != [op for op, _ in b]:
        say(False, name, what, 1.0, TOL_GRAD, f"; not the same nodes with weights: PyTorch's "
            f"{[op for op, _ in a]}, singletrain's {[op for op, _ in b]}")
        return
    worst, worst32, where, seen, wrong = 0.0, 0.0, "", set(), []
    for (_, ins_a), (_, ins_b) in zip(a, b):
        for ia, ib in zip(ins_a[1:], ins_b[1:]):
            if "g:" + ia not in ref:  # running statistics: not trained by the gradient
                continue
            before, after, g_ref = w0[ia].astype(np.float64), w1[ib], ref["g:" + ia]
            if before.shape != g_ref.shape or after.size != g_ref.size:
                wrong.append(f"{ia} {after.shape} vs {g_ref.shape}")
                continue
            seen.add(ia)
            g = (before - after.reshape(before.shape).astype(np.float64)) / LR_STEP
            d = rel(g, g_ref)
            worst32 = max(worst32, rel(ref["g32:" + ia], g_ref))
            if d >= worst:
                worst, where = d, ia
    # A bias before batch norm is folded into the running mean on import
    # (singletrain's batch_normalize=1 layers have none): in train mode
    # batch norm subtracts it again, so PyTorch's gradient is 0 (up to
    # float64 rounding, ~1e-16 of the others); any other missing tensor
    # is a failure.
    grads = [k for k in ref.files if k.startswith("g:")]
    largest = max(np.max(np.abs(ref[k])) for k in grads)
    folded = [k[2:] for k in grads if k[2:] not in seen]
    lost = [k for k in folded if np.max(np.abs(ref["g:" + k])) > 1e-12 * largest]
    note = f"; folded into batch norm, gradient 0: {' '.join(folded)}" if folded else ""
    if lost or wrong:
        note += f"; MISSING or of another shape in singletrain: {' '.join(lost + wrong)}"
    say(worst <= TOL_GRAD and seen and not lost and not wrong, name,
        f"{what} ({len(seen)} tensors)", worst, TOL_GRAD,
        f"; worst {where}; PyTorch fp32: {worst32:.2g}{note}")


def losses(out, name, ref, say, run="", what="SGD steps with momentum"):
    """the 5 steps' losses: column 5 of --log-format csv, printed to 6 digits"""
    csv = f"{out}/{name}.{run}.csv" if run else f"{out}/{name}.csv"
    got = [float(line.split(",")[4]) for line in open(csv) if line.startswith("train,")]
    key = run + "losses"
    ok = len(got) == STEPS
    d = rel(got, ref[key]) if ok else 1.0
    say(ok and d <= TOL_LOSS, name, f"losses of {STEPS} {what} "
        f"({' '.join(f'{v:.6g}' for v in got)})", d, TOL_LOSS,
        f"; PyTorch's {' '.join(f'{v:.6g}' for v in ref[key])}")


def running(out, name, ref, torch_model, say):
    """batch norm's running statistics after the 5 steps (NAME-trained.onnx,
    the final snapshot exported) against PyTorch's, paired as gradients()
    pairs the weights, and each BatchNormalization's momentum attribute
    against the model's. A bias before batch norm is folded into the running
    mean on import: singletrain's mean is PyTorch's less that bias (its
    gradient is 0, so the bias has not moved), which is added back."""
    import onnx
    from onnx import numpy_helper

    w0 = {t.name: numpy_helper.to_array(t) for t in torch_model.graph.initializer}
    trained = onnx.load(f"{out}/{name}-trained.onnx")
    w1 = {t.name: numpy_helper.to_array(t) for t in trained.graph.initializer}
    bn_a = {n.input[3]: n for n in torch_model.graph.node if n.op_type == "BatchNormalization"}
    bn_b = {n.input[3]: n for n in trained.graph.node if n.op_type == "BatchNormalization"}
    a, b = learned(torch_model), learned(trained)
    what = "running statistics after 5 steps"
    if [op for op, _ in a] != [op for op, _ in b]:
        say(False, name, what, 1.0, TOL_RUNNING, "; not the same nodes with weights")
        return
    worst, worst32, where, n, momenta, prev, wrong = 0.0, 0.0, "", 0, set(), None, []

    def attr(node):
        return next((x.f for x in node.attribute if x.name == "momentum"), 0.9)

    for (op, ins_a), (_, ins_b) in zip(a, b):
        if op == "BatchNormalization":
            keep_a, keep_b = attr(bn_a[ins_a[3]]), attr(bn_b[ins_b[3]])
            momenta.add(f"{1 - keep_a:.3g}")
            if abs(keep_a - keep_b) > 1e-7:
                wrong.append(f"{ins_a[3]}: ONNX momentum {keep_b:.9g} in singletrain's export, "
                             f"PyTorch's {keep_a:.9g}")
            for k in (3, 4):
                got = w1[ins_b[k]].astype(np.float64)
                if k == 3 and len(prev[0]) > 2 and len(prev[1]) == 2:
                    got = got + w0[prev[0][2]].astype(np.float64).reshape(got.shape)
                d = rel(got, ref["rs:" + ins_a[k]])
                worst32 = max(worst32, rel(ref["rs32:" + ins_a[k]], ref["rs:" + ins_a[k]]))
                n += 1
                if d >= worst:
                    worst, where = d, ins_a[k]
        prev = (ins_a, ins_b)
    note = f"; WRONG {wrong[0]} (and {len(wrong) - 1} more)" if wrong else ""
    say(n > 0 and worst <= TOL_RUNNING and not wrong, name, f"{what} ({n} tensors, momentum "
        f"{' '.join(sorted(momenta))})", worst, TOL_RUNNING,
        f"; worst {where}; PyTorch fp32: {worst32:.2g}{note}")


def compare(out):
    import onnx

    bad = 0

    def say(ok, name, what, diff, tol, extra=""):
        nonlocal bad
        bad += not ok
        print(f"{'ok' if ok else 'FAIL'} {name} {what}: max relative difference {diff:.2g} "
              f"(tolerance {tol:g}{extra})")

    for name in NAMES:
        ref = np.load(f"{out}/{name}.npz")
        torch_model = onnx.load(f"{out}/{name}.onnx")
        for be in BACKENDS:
            forward(out, name, be, ref, say, "probs", f"forward {be}")
            gradients(out, name, be, ref, torch_model, say)
        losses(out, name, ref, say)
        forward(out, name, "trained", ref, say, "trained", f"after {STEPS} steps")
        if any(k.startswith("rs:") for k in ref.files):
            running(out, name, ref, torch_model, say)
        losses(out, name, ref, say, "decay", "SGD steps with the decay recipe")
        forward(out, name, "decay.trained", ref, say, "decaytrained",
                f"after {STEPS} steps of the decay recipe")
        losses(out, name, ref, say, "adam", "Adam steps (eps_mode=torch)")
        forward(out, name, "adam.trained", ref, say, "adamtrained",
                f"after {STEPS} Adam steps")
    for name in FORWARD_ONLY:
        ref = np.load(f"{out}/{name}.npz")
        for be in BACKENDS:
            forward(out, name, be, ref, say, "probs", f"forward {be}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "compare"):
        sys.exit("usage: torch_models.py build|compare DIR")
    if sys.argv[1] == "build":
        build(sys.argv[2])
    else:
        sys.exit(compare(sys.argv[2]))
