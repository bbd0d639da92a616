"""Prints torch.optim.AdamW results for tests/unit/test_optim.c to compare against.

usage: /usr/bin/python3 adamw_ref.py SEED

One record a line, float32 values printed with %.9g (they read back exactly):
    hyper BETA1 BETA2 EPS WEIGHT_DECAY GRAD_SCALE N STEPS
    param P1 .. PN                      the starting parameters
and for each step:
    lr LR                               the lr of this step (it changes, as a schedule would)
    grad G1 .. GN                       the raw gradient; torch sees grad * GRAD_SCALE
    param P1 .. PN                      after the step
    m M1 .. MN
    v V1 .. VN
Prints 'skip: REASON' alone when torch cannot be imported.
"""
import sys

try:
    import torch
except ImportError as e:
    print("skip: cannot import torch (%s)" % e)
    sys.exit(0)

BETA1, BETA2, EPS, WEIGHT_DECAY, GRAD_SCALE = 0.9, 0.95, 1e-8, 0.1, 0.37
N, STEPS = 37, 6


def values(tag, t):
    print(tag, " ".join("%.9g" % x for x in t.tolist()))


def main():
    torch.manual_seed(int(sys.argv[1]))
    torch.set_num_threads(1)
    p = torch.nn.Parameter(torch.randn(N))
    opt = torch.optim.AdamW([p], lr=1e-2, betas=(BETA1, BETA2), eps=EPS,
                            weight_decay=WEIGHT_DECAY, foreach=False)
    print("hyper %r %r %r %r %r %d %d" % (BETA1, BETA2, EPS, WEIGHT_DECAY, GRAD_SCALE, N, STEPS))
    values("param", p.detach())
    for k in range(1, STEPS + 1):
        lr = 1e-2 * (0.5 + 0.1 * k)
        for group in opt.param_groups:
            group["lr"] = lr
        g = torch.randn(N) * 3
        if k == 2:
            g[:3] = 0  # zero gradients: only decay and the moments move these
        p.grad = g * GRAD_SCALE
        opt.step()
        state = opt.state[p]
        print("lr %r" % lr)
        values("grad", g)
        values("param", p.detach())
        values("m", state["exp_avg"])
        values("v", state["exp_avg_sq"])


main()
