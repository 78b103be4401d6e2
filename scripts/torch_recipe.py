"""A singletrain [net] recipe as PyTorch's SGD and learning-rate scheduler:
the construction each [net] key equals (include/ops/solver.h says the
formulas), for tests/e2e/test_schedule.sh and test_torch.sh, and for
anyone training the same recipe in PyTorch. Run with /usr/bin/python3
(Debian's python3-torch).

usage: torch_recipe.py schedule NET ITERS
    prints "ITER RATE" for ITERS iterations of NET's [net] (a cfg, or an
    ONNX model's .train sidecar): the learning rate PyTorch's scheduler
    gives the optimizer before step ITER (after ITER calls of
    scheduler.step()). Like singletrain, a [net] without max_batches=
    runs its schedule over the ITERS iterations.

As a module: net_keys(path), optimizer(model, keys) and scheduler(opt,
keys, iters). The translation:
    learning_rate, momentum, decay   SGD(lr, momentum, weight_decay); dampening 0
    solver=adam (or adam=1), B1, B2, eps, eps_mode=torch
                                     Adam(lr, betas=(B1, B2), eps, weight_decay):
                                     eps added after the bias correction, as
                                     singletrain's eps_mode=torch; the default
                                     eps_mode=caffe (Caffe's AdamSolver, eps added
                                     before it) has no PyTorch counterpart
    decay_mode=darknet (default)     weight_decay on the tensors of 2 or more
                                     dimensions (convolution and linear weights)
                                     only, 0 on biases and batch-norm tensors
    decay_mode=torch                 weight_decay on every parameter
    policy=constant                  no scheduler
    policy=step                      StepLR(step, gamma=scale)
    policy=steps                     MultiStepLR(steps, gamma) if every scale is
                                     gamma, else LambdaLR (the scales' product)
    policy=exp                       ExponentialLR(gamma)
    policy=poly                      PolynomialLR(T, power)
    policy=inv                       LambdaLR (Caffe's; PyTorch has none)
    policy=cosine                    CosineAnnealingLR(T, eta_min=learning_rate_min)
    policy=onecycle                  OneCycleLR(learning_rate, total_steps=T,
                                     pct_start, div_factor, final_div_factor,
                                     cycle_momentum=False): the momentum is not
                                     cycled (singletrain keeps momentum= fixed)
    warmup=W                         SequentialLR([LinearLR(start_factor=
                                     warmup_factor, total_iters=W), POLICY over
                                     T - W], milestones=[W])
    burn_in=B                        LambdaLR (Darknet's (t / B)^power ramp)
where T is max_batches=, else the run's iterations. Momentum is the
momentum= key (default 0.9), decay= defaults to 0.0001, as in singletrain.
"""
import math
import sys


def net_keys(path):
    """The key=value pairs of the first section ([net]) of path."""
    keys, seen = {}, 0
    for line in open(path):
        line = line.split("#")[0].split(";")[0].strip()
        if line.startswith("["):
            seen += 1
            if seen > 1:
                break
        elif "=" in line:
            k, v = line.split("=", 1)
            keys[k.strip()] = v.strip()
    return keys


def _f(keys, k, default):
    return float(keys.get(k, default))


def _list(keys, k, kind):
    return [kind(v) for v in keys[k].split(",")] if k in keys else []


def _rule(keys):
    """The update rule: solver=, Darknet's adam=1 meaning solver=adam."""
    return "adam" if keys.get("adam", "0") == "1" else keys.get("solver", "sgd")


def untranslated_solver(keys):
    """Why the recipe's update rule has no PyTorch optimizer, or None."""
    rule = _rule(keys)
    if rule == "adam" and keys.get("eps_mode", "caffe") != "torch":
        return ("solver=adam with eps_mode=caffe (Caffe's AdamSolver adds eps before the bias "
                "correction; give eps_mode=torch for torch.optim.Adam's)")
    if rule not in ("sgd", "adam"):
        return f"solver={rule} (sgd, and adam with eps_mode=torch)"
    return None


def optimizer(model, keys, no_decay=()):
    """torch.optim.SGD, or Adam, over model's parameters as the recipe
    decays them; no_decay: parameters that take no decay whatever
    decay_mode says (a bias right before batch norm, which singletrain
    folds into the running mean on import: it has nothing to decay). A
    rule without a translation (untranslated_solver) exits."""
    import torch

    why = untranslated_solver(keys)
    if why:
        sys.exit(f"torch_recipe.py: no PyTorch translation for {why}")
    lr, momentum, decay = _f(keys, "learning_rate", 0.001), _f(keys, "momentum", 0.9), \
        _f(keys, "decay", 0.0001)
    skip = {id(p) for p in no_decay}
    params = [p for p in model.parameters() if id(p) not in skip]
    kept = [p for p in model.parameters() if id(p) in skip]
    if keys.get("decay_mode", "darknet") == "torch":
        groups = [{"params": params, "weight_decay": decay}]
    else:
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    if kept:
        groups.append({"params": kept, "weight_decay": 0.0})
    if _rule(keys) == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=(_f(keys, "B1", 0.9), _f(keys, "B2", 0.999)),
                                eps=_f(keys, "eps", 1e-7))
    return torch.optim.SGD(groups, lr=lr, momentum=momentum)


def _policy(opt, keys, T):
    """The policy's scheduler over T iterations, or None for constant."""
    from torch.optim import lr_scheduler as L

    policy = keys.get("policy", "constant")
    lr = _f(keys, "learning_rate", 0.001)
    gamma, power, scale = _f(keys, "gamma", 1), _f(keys, "power", 4), _f(keys, "scale", 1)
    if policy == "constant":
        return None
    if policy == "step":
        return L.StepLR(opt, int(keys.get("step", 1)), gamma=scale)
    if policy == "steps":
        steps, scales = _list(keys, "steps", int), _list(keys, "scales", float)
        if len(set(scales)) == 1:
            return L.MultiStepLR(opt, steps, gamma=scales[0])
        return L.LambdaLR(opt, lambda t: math.prod(s for n, s in zip(steps, scales) if n <= t))
    if policy == "exp":
        return L.ExponentialLR(opt, gamma)
    if policy == "poly":
        return L.PolynomialLR(opt, total_iters=T, power=power)
    if policy == "inv":
        return L.LambdaLR(opt, lambda t: (1 + gamma * t) ** -power)
    if policy == "cosine":
        return L.CosineAnnealingLR(opt, T, eta_min=_f(keys, "learning_rate_min", 0))
    if policy == "onecycle":
        return L.OneCycleLR(opt, lr, total_steps=T, pct_start=_f(keys, "pct_start", 0.3),
                            div_factor=_f(keys, "div_factor", 25),
                            final_div_factor=_f(keys, "final_div_factor", 1e4),
                            cycle_momentum=False)
    sys.exit(f"torch_recipe.py: policy={policy}: no PyTorch translation")


def scheduler(opt, keys, iters):
    """The recipe's scheduler for a run of iters iterations (None: constant)."""
    from torch.optim import lr_scheduler as L

    T = int(keys.get("max_batches", 0)) or iters
    warmup, burn_in = int(keys.get("warmup", 0)), int(keys.get("burn_in", 0))
    if burn_in:
        power = _f(keys, "power", 4)
        main = _policy(opt, keys, T)
        if main is not None:
            sys.exit("torch_recipe.py: burn_in= with a policy: no PyTorch translation")
        return L.LambdaLR(opt, lambda t: (t / burn_in) ** power if t < burn_in else 1.0)
    if not warmup:
        return _policy(opt, keys, T)
    ramp = L.LinearLR(opt, start_factor=_f(keys, "warmup_factor", 1 / 3), end_factor=1.0,
                      total_iters=warmup)
    main = _policy(opt, keys, max(T - warmup, 1))
    if main is None:
        return ramp
    return L.SequentialLR(opt, [ramp, main], milestones=[warmup])


def schedule(path, iters):
    import torch

    keys = net_keys(path)
    w = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    # the rate alone: any optimizer takes it (the rule's translation is not asked)
    opt = torch.optim.SGD([w], lr=_f(keys, "learning_rate", 0.001))
    sched = scheduler(opt, keys, iters)
    for i in range(iters):
        print(f"{i} {opt.param_groups[0]['lr']:.17g}")
        opt.step()
        if sched is not None:
            sched.step()


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "schedule":
        sys.exit("usage: torch_recipe.py schedule NET ITERS")
    schedule(sys.argv[2], int(sys.argv[3]))
