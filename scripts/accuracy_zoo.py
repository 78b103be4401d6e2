"""Time to accuracy, PyTorch's side: the model zoo of scripts/bench-accuracy.sh,
its ONNX export, PyTorch's training with a singletrain [net] recipe, and the
summary of the CSV both frameworks write. Run with /usr/bin/python3 (Debian's
python3-torch and python3-onnx; OpenBLAS: libopenblas0-openmp).

usage: accuracy_zoo.py export MODEL SEED OUT
    builds MODEL (a zoo name, or FILE.py:FUNCTION returning a freshly
    initialised torch.nn.Module from 1x28x28 images to 10 class scores)
    after torch.manual_seed(SEED) and writes OUT.onnx (torch.onnx.export,
    opset 13, training=PRESERVE: batch norm stays BatchNormalization with
    its momentum) and OUT.pt (the same initial state, for train).
usage: accuracy_zoo.py train MODEL SEED OUT RECIPE EPOCHS THREADS NAME
    trains MODEL from OUT.pt for EPOCHS epochs with RECIPE's [net] (scripts/torch_recipe.py's SGD and
    scheduler, and the augmentation below) on THREADS threads, and prints
    a CSV row "pytorch,NAME,SEED,EPOCH,SECONDS,TEST_ACC" after every epoch:
    SECONDS the training time since the first batch (the test passes,
    in eval mode, left out, as they are on singletrain's side).
usage: accuracy_zoo.py check RECIPE
    prints RECIPE's batch=; exit 2, naming the key, when RECIPE has a key
    the translation below does not know or no batch=.
usage: accuracy_zoo.py summary CSV
    per model: each framework's final test accuracy (mean and spread over
    the seeds) and the mean seconds to reach PyTorch's mean final accuracy
    (interpolated between epochs), and their ratio.

The data: Fashion-MNIST's IDX files (DATA below), pixels scaled by
float32(1/255) as singletrain does, the training set reshuffled every epoch
from SEED. An epoch is 60,000 images in ceil(60,000 / batch) batches, the
last one short, as singletrain has it (and DataLoader with drop_last=False);
the schedule runs over EPOCHS such epochs (max_batches= unless given). Recipe keys and their translation (anything else is refused, so a
recipe is never half-translated):
    batch, learning_rate, momentum, decay, decay_mode, policy and its keys,
    warmup, warmup_factor, max_batches,   torch_recipe.py (solver=sgd, or adam
    adam, B1, B2, eps, eps_mode            with eps_mode=torch)
    crop=1 crop_pad=P                      RandomCrop(28, padding=P): a shift
                                           of -P..P each way, zeros coming in
    mirror=1                               RandomHorizontalFlip(0.5)
"""
import gzip
import importlib.util
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_recipe  # noqa: E402  (a [net] recipe as PyTorch's SGD and scheduler)

DATA = "/usr/share/datasets/fashion-mnist"
CLASSES = 10
TRAIN_KEYS = {"batch", "solver", "learning_rate", "learning_rate_min", "momentum", "decay",
              "decay_mode", "policy", "step", "steps", "scales", "scale", "gamma", "power",
              "warmup", "warmup_factor", "max_batches", "pct_start", "div_factor",
              "final_div_factor", "crop", "crop_pad", "mirror", "subdivisions", "adam", "B1",
              "B2", "eps", "eps_mode"}


def zoo():
    """The zoo: name -> (function building the model, what it is)."""
    from torch import nn

    def conv_bn(cin, cout, stride=1):
        return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU()]

    class Residual(nn.Module):
        """Two 3x3 convolutions with batch norm and an identity shortcut."""

        def __init__(self, c):
            super().__init__()
            self.body = nn.Sequential(*conv_bn(c, c), nn.Conv2d(c, c, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(c))
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.body(x) + x)

    def lenet():
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5),
                             nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                             nn.Linear(500, CLASSES))

    def vgg():
        return nn.Sequential(*conv_bn(1, 16), *conv_bn(16, 16), nn.MaxPool2d(2, 2),
                             *conv_bn(16, 32), *conv_bn(32, 32), nn.MaxPool2d(2, 2),
                             nn.Flatten(), nn.Linear(32 * 7 * 7, 128, bias=False),
                             nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, CLASSES))

    def resnet():
        return nn.Sequential(*conv_bn(1, 16), Residual(16), *conv_bn(16, 32, stride=2),
                             Residual(32), *conv_bn(32, 64, stride=2), Residual(64),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, CLASSES))

    return {"lenet": (lenet, "Caffe's LeNet-5 (data/lenet.cfg)"),
            "vgg": (vgg, "4 conv3x3+BN+ReLU (16,16,32,32 ch), 2 max-pools, fc 128+BN, fc 10"),
            "resnet": (resnet, "conv+BN 16 ch, 3 stages of a 2-conv residual block "
                               "(16, 32, 64 ch; stride-2 conv+BN between), global average, fc 10")}


def build(model):
    """A freshly initialised module: a zoo name or FILE.py:FUNCTION."""
    if ":" in model and model.split(":", 1)[0].endswith(".py"):
        path, func = model.rsplit(":", 1)
        spec = importlib.util.spec_from_file_location("user_model", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if not hasattr(mod, func):
            sys.exit(f"accuracy_zoo.py: {path} has no function {func}")
        return getattr(mod, func)()
    models = zoo()
    if model not in models:
        sys.exit(f"accuracy_zoo.py: no zoo model {model} (expected one of "
                 f"{', '.join(models)} or FILE.py:FUNCTION)")
    return models[model][0]()


def export(model, seed, out):
    import torch

    torch.manual_seed(seed)
    net = build(model)
    x = torch.zeros(1, 1, 28, 28)
    with torch.no_grad():
        y = net.eval()(x)
    if tuple(y.shape) != (1, CLASSES):
        sys.exit(f"accuracy_zoo.py: {model} gives {tuple(y.shape)} for a 1x1x28x28 input, "
                 f"expected (1, {CLASSES})")
    torch.onnx.export(net, x, out + ".onnx", opset_version=13,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    torch.save(net.state_dict(), out + ".pt")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def fashion(split):
    x = read_idx(f"{DATA}/{split}-images-idx3-ubyte.gz")
    y = read_idx(f"{DATA}/{split}-labels-idx1-ubyte.gz")
    return (x.astype(np.float32) * np.float32(1.0 / 255.0))[:, None], y.astype(np.int64)


def augment(x, rng, pad, mirror):
    """x: [N, 1, 28, 28]; RandomCrop(28, padding=pad) then RandomHorizontalFlip."""
    n, _, h, w = x.shape
    if pad:
        framed = np.zeros((n, 1, h + 2 * pad, w + 2 * pad), np.float32)
        framed[:, :, pad:pad + h, pad:pad + w] = x
        dy, dx = rng.integers(0, 2 * pad + 1, n), rng.integers(0, 2 * pad + 1, n)
        x = np.stack([framed[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(n)])
    if mirror:
        flip = rng.random(n) < 0.5
        x = x.copy()
        x[flip] = x[flip][..., ::-1]
    return x


def accuracy(net, x, y):
    import torch

    net.eval()
    hits = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            hits += int((net(torch.from_numpy(x[i:i + 1000])).argmax(1).numpy()
                         == y[i:i + 1000]).sum())
    net.train()
    return 100.0 * hits / len(x)


def recipe_keys(recipe):
    """recipe's [net] keys; exit 2 naming the key that has no translation."""
    keys = torch_recipe.net_keys(recipe)
    bad = sorted(set(keys) - TRAIN_KEYS)
    why = torch_recipe.untranslated_solver(keys)
    if why:
        bad.append(why)
    if keys.get("subdivisions", "1") != "1":
        bad.append(f"subdivisions={keys['subdivisions']} (the same arithmetic as 1: leave it out)")
    if bad:
        print(f"accuracy_zoo.py: {recipe}: no PyTorch translation for {', '.join(bad)}; "
              f"expected the keys {', '.join(sorted(TRAIN_KEYS))}", file=sys.stderr)
        sys.exit(2)
    if not keys.get("batch", "").isdigit() or int(keys["batch"]) < 1:
        print(f"accuracy_zoo.py: {recipe}: expected batch=N (a positive integer), got "
              f"'{keys.get('batch', '')}'", file=sys.stderr)
        sys.exit(2)
    return keys


def train(model, seed, out, recipe, epochs, threads, name):
    import torch

    keys = recipe_keys(recipe)
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    batch = int(keys["batch"])
    pad = int(keys.get("crop_pad", 0)) if keys.get("crop", "0") == "1" else 0
    mirror = keys.get("mirror", "0") == "1"
    xtr, ytr = fashion("train")
    xte, yte = fashion("t10k")
    net = build(model)
    net.load_state_dict(torch.load(out + ".pt"))
    net.train()
    opt = torch_recipe.optimizer(net, keys)
    sched = torch_recipe.scheduler(opt, keys, epochs * -(-len(xtr) // batch))
    lossf = torch.nn.CrossEntropyLoss()
    per_epoch = -(-len(xtr) // batch)
    seconds = 0.0
    for epoch in range(epochs):
        order = rng.permutation(len(xtr))
        for j in range(per_epoch):
            t0 = time.perf_counter()
            idx = order[j * batch:(j + 1) * batch]
            xb = augment(xtr[idx], rng, pad, mirror) if pad or mirror else xtr[idx]
            opt.zero_grad()
            loss = lossf(net(torch.from_numpy(np.ascontiguousarray(xb))),
                         torch.from_numpy(ytr[idx]))
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            seconds += time.perf_counter() - t0
            if not math.isfinite(loss.item()):
                sys.exit(f"accuracy_zoo.py: {name} seed {seed}: the loss is {loss.item()} "
                         f"in epoch {epoch + 1}")
        print(f"pytorch,{name},{seed},{epoch + 1},{seconds:.3f},{accuracy(net, xte, yte):.2f}",
              flush=True)


def time_to(rows, target):
    """Seconds at which the accuracy first reaches target, interpolated
    linearly between epochs (from 0 s at 10% before the first); None when
    never reached."""
    prev_s, prev_a = 0.0, 100.0 / CLASSES
    for s, a in rows:
        if a >= target:
            if a == prev_a:
                return s
            return prev_s + (s - prev_s) * (target - prev_a) / (a - prev_a)
        prev_s, prev_a = s, a
    return None


def summary(path):
    runs = {}
    for line in open(path):
        f = line.strip().split(",")
        if f[0] == "framework" or len(f) != 6:
            continue
        runs.setdefault((f[1], f[0]), {}).setdefault(int(f[2]), []).append(
            (int(f[3]), float(f[4]), float(f[5])))
    models = sorted({m for m, _ in runs})
    ok = True
    for m in models:
        final, spread, mean_t = {}, {}, {}
        torch_runs = runs.get((m, "pytorch"), {})
        if not torch_runs:
            continue
        finals = [sorted(r)[-1][2] for r in torch_runs.values()]
        target = sum(finals) / len(finals)
        print(f"{m}: PyTorch's mean final test accuracy {target:.2f}% is the target")
        for fw in ("pytorch", "singletrain"):
            rs = runs.get((m, fw), {})
            if not rs:
                continue
            accs = [sorted(r)[-1][2] for r in rs.values()]
            final[fw] = sum(accs) / len(accs)
            spread[fw] = max(accs) - min(accs)
            times = [time_to([(s, a) for _, s, a in sorted(r)], target) for r in rs.values()]
            reached = [t for t in times if t is not None]
            mean_t[fw] = sum(reached) / len(reached) if len(reached) == len(times) else None
            total = sum(sorted(r)[-1][1] for r in rs.values()) / len(rs)
            tt = f"{mean_t[fw]:.1f} s" if mean_t[fw] is not None else \
                f"not reached by {len(times) - len(reached)} of {len(times)} seeds"
            print(f"  {fw:12s} final {final[fw]:.2f}% (spread {spread[fw]:.2f} over "
                  f"{len(accs)} seeds: {' '.join(f'{a:.2f}' for a in accs)}), "
                  f"{total:.1f} s in all, to {target:.2f}%: {tt}")
        if "singletrain" in final:
            gap = final["singletrain"] - final["pytorch"]
            allowed = max(0.3, spread["pytorch"])
            speed = mean_t["pytorch"] / mean_t["singletrain"] \
                if mean_t.get("singletrain") and mean_t.get("pytorch") else None
            print(f"  singletrain - PyTorch: {gap:+.2f} points (allowed +-{allowed:.2f}); "
                  f"time to {target:.2f}%: "
                  f"{f'{speed:.2f}x sooner' if speed else 'not reached by every run'}")
            if speed is None:
                # both frameworks' lower mean final accuracy: every run of
                # the higher one passes it, most of the lower one's
                low = min(final.values())
                t = {fw: [time_to([(s, a) for _, s, a in sorted(r)], low)
                          for r in runs[(m, fw)].values()] for fw in final}
                mean = {fw: sum(v for v in ts if v is not None) /
                        max(1, sum(v is not None for v in ts)) for fw, ts in t.items()}
                print(f"  time to the lower mean final accuracy, {low:.2f}%: PyTorch "
                      f"{mean['pytorch']:.1f} s, singletrain {mean['singletrain']:.1f} s "
                      f"(runs that reached it), {mean['pytorch'] / mean['singletrain']:.2f}x")
            ok = ok and abs(gap) <= allowed and speed is not None and speed >= 1.5
    return ok


def main(argv):
    if len(argv) == 5 and argv[1] == "export":
        export(argv[2], int(argv[3]), argv[4])
    elif len(argv) == 9 and argv[1] == "train":
        train(argv[2], int(argv[3]), argv[4], argv[5], int(argv[6]), int(argv[7]), argv[8])
    elif len(argv) == 3 and argv[1] == "check":
        print(recipe_keys(argv[2])["batch"])
    elif len(argv) == 3 and argv[1] == "summary":
        return 0 if summary(argv[2]) else 1
    elif len(argv) == 2 and argv[1] == "zoo":
        for k, (_, what) in zoo().items():
            print(f"{k}\t{what}")
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
