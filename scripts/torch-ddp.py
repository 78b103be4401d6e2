#!/usr/bin/python3
"""PyTorch's own data parallelism on CPUs: the SingleCaffe baseline.

Trains the network of a Darknet-format cfg (the file singletrain trains) with
torch.distributed (gloo, a file store) and DistributedDataParallel: --np P
processes of one thread each (torch.set_num_threads(1)), the global --batch
split evenly over them, synthetic inputs, and the cfg's update rule; prints
the whole job's images/s. scripts/sweep.sh --preset singlecaffe runs it as
the torch-ddp baseline.

    /usr/bin/python3 scripts/torch-ddp.py --np 2 --batch 64 --iters 200 --warmup 20 data/lenet.cfg
    /usr/bin/python3 scripts/torch-ddp.py --dry-run data/lenet.cfg data/cifar-alexnet.cfg

The model is built from the cfg section by section with Darknet's (and
singletrain's) semantics: [convolutional] (pad=1 means padding size/2; with
batch_normalize=1 a BatchNorm2d after the convolution, which then has no
bias), [maxpool] (padding= is the total padding, padding/2 of it on the
top/left, floor-mode sizes), [connected] (on the flattened C x H x W input),
[dropout], and a final [softmax] (CrossEntropyLoss); activations linear,
relu, logistic (sigmoid), tanh, leaky (0.1); the default activation is
logistic, as in Darknet. Anything else is refused. --dry-run prints the
layer table (the output shapes as singletrain's table writes them) and the
learned-parameter count that singletrain --dry-run prints for the same cfg.

The update rule and its keys come from [net] as singletrain reads them:
solver= (or adam=1), learning_rate=, momentum=, decay= (weight decay, on
convolution and connected weights only; on every parameter with
decay_mode=torch), B1=, B2=, eps= (Adam), rms_decay=
and delta= (RMSProp, AdaGrad, AdaDelta), mapped to torch.optim's SGD,
SGD(nesterov), Adagrad, RMSprop, Adadelta and Adam. The learning rate stays
at learning_rate= (no policy: runs are short). Weights start from PyTorch's
default initialisation; DistributedDataParallel keeps its defaults (25 MB
buckets, buffers broadcast from rank 0 at every forward pass).

Each process draws 4 batches of N(0,1) inputs and random labels once and
cycles them. Of --iters iterations the first --warmup are not timed; rank 0
times the rest with time.perf_counter (every iteration ends with the
gradient all-reduce of every rank, so rank 0's time is the job's):
images/s = timed iterations x global batch / seconds.

Output (rank 0, stdout): a header line; "iter I/N  loss L  X img/s" every
--log-every iterations (rank 0's own loss, mean per image over the
interval); "done: ..."; "time split, ms per iteration (rank 0): data D,
forward F, backward B, update U" (backward includes the all-reduce, which
DDP overlaps with it); and last one machine-readable line:
    result: images_per_s=X train_s=S peak_memory_mb=M final_loss=L solver=R
            data_ms=D compute_ms=F+B update_ms=U
(on one line; peak memory is rank 0's resident peak).

Exit status: 0 done, 2 bad usage or input (also: PyTorch missing), 1 a
process failed; 128 + the signal when SIGINT or SIGTERM stopped it.
"""
import argparse
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PROG = "torch-ddp.py"


class CfgError(Exception):
    """A cfg this script cannot build: the message names file and line."""


def usage_exit(msg):
    print("%s: %s" % (PROG, msg), file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------- the cfg

def read_cfg(path):
    """[(type, {key: (value, line)}, line)] of a Darknet cfg, in order."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CfgError("%s: cannot read it: %s" % (path, e.strerror))
    sections = []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise CfgError("%s:%d: expected [section]" % (path, n))
            sections.append((line[1:-1].strip(), {}, n))
            continue
        if "=" not in line or not sections:
            raise CfgError("%s:%d: expected key=value inside a section" % (path, n))
        key, value = line.split("=", 1)
        key, value = key.strip(), value.split("#", 1)[0].strip()
        if key in sections[-1][1]:
            raise CfgError("%s:%d: %s= is given twice" % (path, n, key))
        sections[-1][1][key] = (value, n)
    if not sections or sections[0][0] not in ("net", "network"):
        raise CfgError("%s: the first section must be [net]" % path)
    return sections


class Section:
    """One section's keys, read with defaults; unknown keys are errors."""

    def __init__(self, path, kind, keys, line, known):
        self.path, self.kind, self.keys, self.line = path, kind, keys, line
        for k, (_, n) in keys.items():
            if k not in known:
                raise CfgError("%s:%d: [%s] %s= is not supported by %s" % (path, n, kind, k, PROG))

    def get(self, key, default, conv):
        if key not in self.keys:
            return default
        value, n = self.keys[key]
        try:
            return conv(value)
        except ValueError:
            raise CfgError("%s:%d: [%s] %s=%s is not a valid value" % (self.path, n, self.kind,
                                                                         key, value))

    def must_be(self, key, want):
        if key in self.keys and self.keys[key][0] != want:
            raise CfgError("%s:%d: [%s] %s=%s is not supported by %s (only %s)" % (
                self.path, self.keys[key][1], self.kind, key, self.keys[key][0], PROG, want))


ACTIVATIONS = ("linear", "relu", "logistic", "tanh", "leaky")
RULES = ("sgd", "nesterov", "adagrad", "rmsprop", "adadelta", "adam")


def plan_network(path):
    """The network of a cfg as plain data: (net, layers). net: input shape
    (c, h, w), classes, solver settings; layers: dicts with the type, their
    settings and the output shape, (c, h, w) or (n,)."""
    sections = read_cfg(path)
    net_kind, net_keys, net_line = sections[0]
    s = Section(path, net_kind, net_keys, net_line, net_keys)  # [net]: other keys are data, schedule
    c, h, w = (s.get("channels", 0, int), s.get("height", 0, int), s.get("width", 0, int))
    if c <= 0 or h <= 0 or w <= 0:
        raise CfgError("%s:%d: [net] needs channels=, height= and width= above 0" % (path, net_line))
    rule = s.get("solver", "", str)
    if not rule:
        rule = "adam" if s.get("adam", 0, int) else "sgd"
    if rule not in RULES:
        raise CfgError("%s: [net] solver=%s is not one of %s" % (path, rule, " ".join(RULES)))
    solver = {"rule": rule, "lr": s.get("learning_rate", 0.001, float),
              "momentum": s.get("momentum", 0.9, float), "decay": s.get("decay", 0.0001, float),
              "B1": s.get("B1", 0.9, float), "B2": s.get("B2", 0.999, float),
              "eps": s.get("eps", 0.0000001, float), "rms_decay": s.get("rms_decay", 0.99, float),
              "delta": s.get("delta", 1e-8, float),
              "decay_all": s.get("decay_mode", "darknet", str) == "torch"}
    shape = (c, h, w)
    layers = []
    classes = 0
    for i, (kind, keys, line) in enumerate(sections[1:]):
        if layers and layers[-1]["type"] == "softmax":
            raise CfgError("%s:%d: [%s] after [softmax]: %s needs the softmax last" % (
                path, line, kind, PROG))
        if kind in ("convolutional", "conv"):
            s = Section(path, kind, keys, line, ("filters", "size", "stride", "pad", "padding",
                                                 "groups", "batch_normalize", "activation",
                                                 "binary", "xnor", "dilation", "flipped", "dot",
                                                 "stopbackward"))
            for k, v in (("binary", "0"), ("xnor", "0"), ("dilation", "1")):
                s.must_be(k, v)
            if len(shape) != 3:
                raise CfgError("%s:%d: [%s] after a connected layer" % (path, line, kind))
            L = {"type": "conv", "filters": s.get("filters", 1, int), "size": s.get("size", 1, int),
                 "stride": s.get("stride", 1, int), "padding": s.get("padding", 0, int),
                 "groups": s.get("groups", 1, int), "bn": s.get("batch_normalize", 0, int),
                 "act": s.get("activation", "logistic", str)}
            if s.get("pad", 0, int):
                L["padding"] = L["size"] // 2
            if shape[0] % L["groups"] or L["filters"] % L["groups"]:
                raise CfgError("%s:%d: groups=%d must divide the input channels (%d) and "
                               "filters (%d)" % (path, line, L["groups"], shape[0], L["filters"]))
            oh = (shape[1] + 2 * L["padding"] - L["size"]) // L["stride"] + 1
            ow = (shape[2] + 2 * L["padding"] - L["size"]) // L["stride"] + 1
            L["in"], shape = shape, (L["filters"], oh, ow)
        elif kind == "maxpool":
            s = Section(path, kind, keys, line, ("size", "stride", "padding"))
            if len(shape) != 3:
                raise CfgError("%s:%d: [%s] after a connected layer" % (path, line, kind))
            stride = s.get("stride", 1, int)
            size = s.get("size", stride, int)
            L = {"type": "max", "size": size, "stride": stride,
                 "padding": s.get("padding", size - 1, int)}
            oh = (shape[1] + L["padding"] - size) // stride + 1
            ow = (shape[2] + L["padding"] - size) // stride + 1
            L["in"], shape = shape, (shape[0], oh, ow)
        elif kind == "connected":
            s = Section(path, kind, keys, line, ("output", "activation", "batch_normalize"))
            n_in = 1
            for d in shape:
                n_in *= d
            L = {"type": "connected", "output": s.get("output", 1, int),
                 "bn": s.get("batch_normalize", 0, int), "act": s.get("activation", "logistic", str),
                 "in": (n_in,), "from": shape}
            shape = (L["output"],)
        elif kind == "dropout":
            s = Section(path, kind, keys, line, ("probability",))
            L = {"type": "dropout", "p": s.get("probability", 0.5, float), "in": shape}
        elif kind == "softmax":
            s = Section(path, kind, keys, line, ("groups", "temperature"))
            s.must_be("groups", "1")
            s.must_be("temperature", "1")
            n = 1
            for d in shape:
                n *= d
            classes = n
            L = {"type": "softmax", "in": shape}
        else:
            raise CfgError("%s:%d: [%s] is not supported by %s (it builds convolutional, maxpool, "
                           "connected, dropout and a final softmax)" % (path, line, kind, PROG))
        if L.get("act", "linear") not in ACTIVATIONS:
            raise CfgError("%s:%d: activation=%s is not supported by %s (%s)" % (
                path, line, L["act"], PROG, ", ".join(ACTIVATIONS)))
        if min(shape) <= 0:
            raise CfgError("%s:%d: [%s] leaves no output (%s)" % (path, line, kind, shape))
        L["out"] = shape
        layers.append(L)
    if not layers or layers[-1]["type"] != "softmax":
        raise CfgError("%s: the last layer must be [softmax] (the loss)" % path)
    return {"input": (c, h, w), "classes": classes, "solver": solver}, layers


def shape_text(shape):
    """A shape as singletrain's layer table writes it: W x H x C, or N."""
    if len(shape) == 3:
        return "%d x %d x %d" % (shape[2], shape[1], shape[0])
    return "%d" % shape[0]


# ------------------------------------------------------------- the model

def build_model(torch, layers):
    """nn.Sequential of the planned layers, without the final softmax (the
    loss is CrossEntropyLoss on the scores)."""
    nn = torch.nn

    def activation(name):
        return {"linear": None, "relu": nn.ReLU(inplace=True), "logistic": nn.Sigmoid(),
                "tanh": nn.Tanh(), "leaky": nn.LeakyReLU(0.1, inplace=True)}[name]

    mods = []
    for L in layers:
        if L["type"] == "conv":
            mods.append(nn.Conv2d(L["in"][0], L["filters"], L["size"], stride=L["stride"],
                                  padding=L["padding"], groups=L["groups"], bias=not L["bn"]))
            if L["bn"]:
                mods.append(nn.BatchNorm2d(L["filters"]))
        elif L["type"] == "max":
            left = L["padding"] // 2
            if L["padding"]:
                mods.append(nn.ConstantPad2d((left, L["padding"] - left, left,
                                              L["padding"] - left), float("-inf")))
            mods.append(nn.MaxPool2d(L["size"], L["stride"]))
        elif L["type"] == "connected":
            if len(L["from"]) == 3:
                mods.append(nn.Flatten())
            mods.append(nn.Linear(L["in"][0], L["output"], bias=not L["bn"]))
            if L["bn"]:
                mods.append(nn.BatchNorm1d(L["output"]))
        elif L["type"] == "dropout":
            mods.append(nn.Dropout(L["p"]))
            continue
        else:  # softmax: in the loss
            continue
        act = activation(L.get("act", "linear"))
        if act is not None:
            mods.append(act)
    return nn.Sequential(*mods)


def make_optimizer(torch, model, sv):
    """torch.optim's rule for the cfg's, weight decay on the weights of
    convolutions and connected layers only (as singletrain decays), or on
    every parameter with decay_mode=torch."""
    nn = torch.nn
    decayed, other = [], []
    for m in model.modules():
        for name, p in m.named_parameters(recurse=False):
            is_weight = name == "weight" and isinstance(m, (nn.Conv2d, nn.Linear))
            (decayed if is_weight or sv["decay_all"] else other).append(p)
    groups = [{"params": decayed, "weight_decay": sv["decay"]},
              {"params": other, "weight_decay": 0.0}]
    rule, lr = sv["rule"], sv["lr"]
    o = torch.optim
    if rule == "sgd":
        return o.SGD(groups, lr=lr, momentum=sv["momentum"])
    if rule == "nesterov":
        return o.SGD(groups, lr=lr, momentum=sv["momentum"], nesterov=True)
    if rule == "adagrad":
        return o.Adagrad(groups, lr=lr, eps=sv["delta"])
    if rule == "rmsprop":
        return o.RMSprop(groups, lr=lr, alpha=sv["rms_decay"], eps=sv["delta"])
    if rule == "adadelta":
        return o.Adadelta(groups, lr=lr, rho=sv["momentum"], eps=sv["delta"])
    return o.Adam(groups, lr=lr, betas=(sv["B1"], sv["B2"]), eps=sv["eps"])


def import_torch():
    import torch
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    return torch


# ------------------------------------------------------------ --dry-run

def dry_run(cfgs):
    plans = [plan_network(path) for path in cfgs]  # refuse a cfg before importing torch
    torch = import_torch()
    for path, (net, layers) in zip(cfgs, plans):
        model = build_model(torch, layers)
        print("%s: input %s, %d classes, solver %s" % (path, shape_text(net["input"]),
                                                      net["classes"], net["solver"]["rule"]))
        for i, L in enumerate(layers):
            if L["type"] != "softmax":
                print("%5d %-9s %s -> %s" % (i, L["type"], shape_text(L["in"]),
                                             shape_text(L["out"])))
        x = torch.zeros(2, *net["input"])
        model.eval()
        with torch.no_grad():
            out = model(x)
        if tuple(out.shape) != (2, net["classes"]):
            print("%s: %s: the model's output is %s, expected (2, %d)" % (
                PROG, path, tuple(out.shape), net["classes"]), file=sys.stderr)
            return 1
        print("torch modules: " + " ".join(type(m).__name__ for m in model))
        count = sum(p.numel() for p in model.parameters())
        print("%d parameters" % count)
    return 0


# ---------------------------------------------------------- one process

def worker(a):
    from datetime import timedelta
    import resource
    torch = import_torch()
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    net, layers = plan_network(a.cfg)
    dist.init_process_group("gloo", init_method="file://" + a.store, rank=a.rank,
                            world_size=a.np, timeout=timedelta(seconds=a.peer_timeout))
    torch.manual_seed(a.seed)
    model = build_model(torch, layers)
    model.train()
    ddp = DDP(model)
    opt = make_optimizer(torch, model, net["solver"])
    loss_fn = torch.nn.CrossEntropyLoss()
    per = a.batch // a.np
    gen = torch.Generator().manual_seed(a.seed * 1000 + a.rank)
    pool = 4
    xs = [torch.randn(per, *net["input"], generator=gen) for _ in range(pool)]
    ys = [torch.randint(0, net["classes"], (per,), generator=gen) for _ in range(pool)]
    lead = a.rank == 0
    sv = net["solver"]
    if lead:
        print("torch-ddp: %s (%s), %d process%s x 1 thread, gloo, global batch %d (%d per "
              "process), solver %s (learning_rate %g), %d iterations (%d warm-up), synthetic %s "
              "inputs, %d classes, torch %s" % (
                  os.path.splitext(os.path.basename(a.cfg))[0], a.cfg, a.np,
                  "" if a.np == 1 else "es", a.batch, per, sv["rule"], sv["lr"], a.iters,
                  a.warmup, "x".join(map(str, net["input"])), net["classes"], torch.__version__),
              flush=True)
    now = time.perf_counter
    split = [0.0, 0.0, 0.0, 0.0]  # data, forward, backward, update: timed iterations
    window_loss, window_n, window_t = 0.0, 0, now()
    final_loss = float("nan")
    t_start = now()
    for it in range(a.iters):
        if it == a.warmup:
            t_start = now()
        t0 = now()
        x, y = xs[it % pool], ys[it % pool]
        t1 = now()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        t2 = now()
        loss.backward()
        t3 = now()
        opt.step()
        t4 = now()
        if it >= a.warmup:
            for k, d in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                split[k] += d
        window_loss += loss.item()
        window_n += 1
        done = it + 1
        if done % a.log_every == 0 or done == a.iters:
            final_loss = window_loss / window_n
            if lead:
                t = now()
                print("iter %d/%d  loss %.4f  %.0f img/s" % (
                    done, a.iters, final_loss, window_n * a.batch / max(t - window_t, 1e-9)),
                    flush=True)
                window_t = t
            window_loss, window_n = 0.0, 0
    seconds = now() - t_start
    timed = a.iters - a.warmup
    if lead:
        ips = timed * a.batch / seconds
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
        ms = [1e3 * s / timed for s in split]
        print("done: %d iterations, %d timed in %.3f s, %.1f img/s after warm-up (all %d "
              "process%s), peak memory %.1f MB (rank 0)" % (
                  a.iters, timed, seconds, ips, a.np, "" if a.np == 1 else "es", peak))
        print("time split, ms per iteration (rank 0): data %.3f, forward %.3f, backward %.3f "
              "(with the all-reduce), update %.3f" % tuple(ms))
        print("result: images_per_s=%.1f train_s=%.3f peak_memory_mb=%.1f final_loss=%.4f "
              "solver=%s data_ms=%.3f compute_ms=%.3f update_ms=%.3f" % (
                  ips, seconds, peak, final_loss, sv["rule"], ms[0], ms[1] + ms[2], ms[3]),
              flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


# ------------------------------------------------------------ the launcher

class Stopped(Exception):
    pass


def launch(a, argv):
    """Start --np processes of this script (--rank r) on a file store in a
    fresh directory; rank 0's stdout is ours. A process that fails stops the
    others; SIGINT / SIGTERM stop them all."""
    tmp = tempfile.mkdtemp(prefix="torch-ddp.")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    procs = {}
    stopped = [0]

    def on_signal(sig, _frame):
        stopped[0] = sig
        raise Stopped()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    rc = 0
    try:
        for r in range(a.np):
            cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(r), "--store",
                   os.path.join(tmp, "store")] + argv
            p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                 stdout=None if r == 0 else subprocess.DEVNULL)
            procs[p.pid] = (r, p)
        running = set(procs)
        while running:
            pid, status = os.wait()
            if pid not in running:
                continue
            running.discard(pid)
            code = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") \
                else (status >> 8 if os.WIFEXITED(status) else -os.WTERMSIG(status))
            procs[pid][1].returncode = code
            if code != 0:
                print("%s: rank %d failed (%s): stopping the others" % (
                    PROG, procs[pid][0], "exit %d" % code if code > 0 else "signal %d" % -code),
                    file=sys.stderr)
                rc = 1
                break
    except Stopped:
        rc = 128 + stopped[0]
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for _, p in procs.values():
            if p.returncode is None:
                p.terminate()
        for _, p in procs.values():
            if p.returncode is None:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    if rc > 128:
        print("%s: stopped by signal %d" % (PROG, rc - 128), file=sys.stderr)
    return rc


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0],
                                 epilog="The module docstring (the top of this file) says more.")
    ap.add_argument("cfg", nargs="+", help="the network: a Darknet cfg (several with --dry-run)")
    ap.add_argument("--np", type=int, default=1, help="processes, one thread each (default 1)")
    ap.add_argument("--batch", type=int, help="global batch, split evenly over the processes "
                    "(default: batch= in [net])")
    ap.add_argument("--iters", type=int, default=100, help="iterations, warm-up included (100)")
    ap.add_argument("--warmup", type=int, default=10, help="iterations not timed (10)")
    ap.add_argument("--log-every", type=int, default=10, help="a progress line every N (10)")
    ap.add_argument("--seed", type=int, default=1, help="weights and synthetic data (1)")
    ap.add_argument("--peer-timeout", type=int, default=300,
                    help="seconds a process waits for the others (300)")
    ap.add_argument("--dry-run", action="store_true",
                    help="print each cfg's layer table and parameter count, train nothing")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    a = ap.parse_args(argv)
    if importlib.util.find_spec("torch") is None:
        usage_exit("PyTorch is missing for %s: apt-get install python3-torch "
                   "(Debian's, for /usr/bin/python3)" % sys.executable)
    try:
        if a.dry_run:
            return dry_run(a.cfg)
        if len(a.cfg) != 1:
            usage_exit("one cfg to train (several only with --dry-run)")
        a.cfg = a.cfg[0]
        net, _ = plan_network(a.cfg)
    except CfgError as e:
        usage_exit(str(e))
    if a.batch is None:
        sections = read_cfg(a.cfg)
        a.batch = int(sections[0][1].get("batch", ("1", 0))[0])
    for name, v, lo in (("--np", a.np, 1), ("--batch", a.batch, 1), ("--iters", a.iters, 1),
                        ("--warmup", a.warmup, 0), ("--log-every", a.log_every, 1),
                        ("--peer-timeout", a.peer_timeout, 1)):
        if v < lo:
            usage_exit("%s %d: expected at least %d" % (name, v, lo))
    if a.warmup >= a.iters:
        usage_exit("--warmup %d leaves no timed iteration of --iters %d" % (a.warmup, a.iters))
    if a.batch % a.np:
        usage_exit("--batch %d is not a multiple of --np %d (each process takes an equal part)"
                   % (a.batch, a.np))
    if a.rank is not None:
        if not a.store or not 0 <= a.rank < a.np:
            usage_exit("--rank needs --store and 0 <= rank < --np (the launcher's options)")
        return worker(a)
    return launch(a, argv)


if __name__ == "__main__":
    sys.exit(main())
