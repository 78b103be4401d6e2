#!/usr/bin/python3
"""PyTorch's training throughput on ResNet-50: the anchor for data/resnet50.cfg.

../shared/anchors/torch_train.py has no residual network, so
scripts/bench-anchor.sh runs this for `resnet50`, with the same command line
and the same last line:

    /usr/bin/python3 scripts/torch-resnet50.py --threads 2 --batch 32 --iters 4 [--autocast bf16]
    ...
    throughput_img_s=4.0

The network is data/resnet50.cfg's, ResNet-50 v1 as in the paper's Caffe
model: torchvision's resnet50 (25,557,032 parameters, as singletrain counts
for the cfg) with the stride 2 of each downsampling block moved from its 3x3
convolution to its first 1x1 (torchvision's "v1.5" puts it on the 3x3:
8.18 GFLOP a forward pass at 224 x 224 against the cfg's 7.72). Synthetic
N(0,1) images of 224 x 224 x 3 and random labels of 1000 classes (drawn
once), CrossEntropyLoss, plain SGD (momentum 0.9, lr 0.01), as torch_train.py
trains its networks. --autocast bf16 runs the forward pass and the loss
under torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's CPU mixed
precision. --warmup iterations are not timed; the --iters after them are
timed with time.perf_counter around the whole loop.

Needs python3-torch and python3-torchvision (Debian), and
libopenblas0-openmp for the fully connected layer. Exit status 2 when
either is missing or an option is wrong.
"""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", choices=["resnet50"], default="resnet50")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads(N)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iters", type=int, default=4, help="timed iterations")
    ap.add_argument("--warmup", type=int, default=2, help="untimed warm-up iterations")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--autocast", choices=["off", "bf16"], default="off")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    if a.threads < 1 or a.batch < 1 or a.iters < 1 or a.warmup < 0:
        ap.error("--threads, --batch and --iters must be at least 1, --warmup at least 0")
    try:
        import torch
        import torchvision
    except ImportError as e:
        print("torch-resnet50.py: %s: apt-get install python3-torch python3-torchvision "
              "libopenblas0-openmp" % e, file=sys.stderr)
        sys.exit(2)
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    model = torchvision.models.resnet50()
    for stage in (model.layer2, model.layer3, model.layer4):
        first = stage[0]
        first.conv1.stride = (2, 2)
        first.conv2.stride = (1, 1)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, 224, 224)
    y = torch.randint(0, 1000, (a.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return float(loss)

    if not a.quiet:
        params = sum(p.numel() for p in model.parameters())
        print("net=resnet50 (v1) params=%d threads=%d batch=%d iters=%d warmup=%d torch=%s "
              "autocast=%s" % (params, a.threads, a.batch, a.iters, a.warmup,
                               torch.__version__, a.autocast), flush=True)
    for _ in range(a.warmup):
        step()
    t_start = time.perf_counter()
    for _ in range(a.iters):
        loss = step()
    elapsed = time.perf_counter() - t_start
    if not a.quiet:
        print("loss last=%.4f elapsed_s=%.2f" % (loss, elapsed), flush=True)
    print("throughput_img_s=%.1f" % (a.iters * a.batch / elapsed), flush=True)


if __name__ == "__main__":
    main()
