# The multi-node SW26010 model shared by scripts/predict-sw26010.sh and
# scripts/calibrate-sw26010.sh (one copy): the time of one BSP iteration of
# data-parallel training on P TaihuLight nodes.
#
# Set before calling sw_scale: alpha (s per message), net_bw (bytes/s
# between two nodes), contention (per doubling of P), q (nodes per
# supernode), cross (times slower across supernodes), io_bw (bytes/s of
# the striped store, all nodes), spread (coefficient of variation of a
# node's iteration time).
#
# sw_scale(P, t1, n, gamma, batch, img) with t1 one processor's iteration
# (s), n the packed gradient (bytes), gamma the CPEs' sum (s per byte),
# batch images per node of img bytes, sets
#   SW_WAIT       t1 spread E[max of P standard normals]: under BSP each
#                 iteration waits for the slowest node
#   SW_ALLREDUCE  recursive halving / doubling over ranks numbered
#                 round-robin across supernodes (rhd_supernode.c's cost):
#                 2 log2(P) alpha + (inside n + across n cross) / bw(P) +
#                 (P - 1)/P n gamma, bw(P) = net_bw / (1 + contention log2 P)
#   SW_IO         the store's reads of the next batches; SW_EXPOSED the part
#                 longer than the iteration
#   SW_T, SW_SPEEDUP = P t1 / SW_T, SW_SHARE = (SW_WAIT + SW_ALLREDUCE) / SW_T

function sw_log2(x) { return log(x) / log(2) }

# E[max of P independent standard normals] = integral of x P phi(x)
# Phi(x)^(P-1) dx, by the trapezoid rule on [-9, 9] (step 1e-3); memoized.
function sw_maxnorm(P,    h, x, pdf, cdf, prev_pdf, acc, w) {
    if (P <= 1)
        return 0
    if (P in SW_MAXNORM_MEMO)
        return SW_MAXNORM_MEMO[P]
    h = 0.001; cdf = 0; prev_pdf = 0; acc = 0
    for (x = -9; x <= 9; x += h) {
        pdf = exp(-x * x / 2) / 2.5066282746310002
        cdf += (pdf + prev_pdf) * h / 2
        prev_pdf = pdf
        if (cdf > 1)
            cdf = 1
        w = P * pdf * (cdf > 0 ? exp((P - 1) * log(cdf)) : 0)
        acc += x * w * h
    }
    SW_MAXNORM_MEMO[P] = acc
    return acc
}

function sw_scale(P, t1, n, gamma, batch, img,    inside, across, bw) {
    SW_WAIT = t1 * spread * sw_maxnorm(P)
    SW_ALLREDUCE = 0
    if (P > 1) {
        inside = P <= q ? 2 * (P - 1) / P : 2 * (P - P / q) / P
        across = P <= q ? 0 : 2 * (P / q - 1) / P
        bw = net_bw / (1 + contention * sw_log2(P))
        SW_ALLREDUCE = 2 * sw_log2(P) * alpha + inside * n / bw + across * n * cross / bw
        SW_ALLREDUCE += (P - 1) / P * n * gamma
    }
    SW_IO = P * batch * img / io_bw
    SW_EXPOSED = SW_IO > t1 ? SW_IO - t1 : 0
    SW_T = t1 + SW_WAIT + SW_ALLREDUCE + SW_EXPOSED
    SW_SPEEDUP = P * t1 / SW_T
    SW_SHARE = (SW_WAIT + SW_ALLREDUCE) / SW_T
}
