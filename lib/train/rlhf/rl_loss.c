/* The losses of zt rlhf (rl_loss.h). */
#include <math.h>

#include "rl_loss.h"

double zt_log_sigmoid(double x) { return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); }

static double sigmoid(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }

double zt_dpo_loss(zt_dpo_kind kind, double beta, double smoothing, double pc, double pr, double rc, double rr,
                   double *dpc, double *dpr)
{
    double margin = (pc - rc) - (pr - rr);
    if (kind == ZT_DPO_IPO) {
        double d = margin - 1 / (2 * beta);
        *dpc = 2 * d, *dpr = -2 * d;
        return d * d;
    }
    double h = beta * margin;
    double dh = -(1 - smoothing) * sigmoid(-h) + smoothing * sigmoid(h);
    *dpc = dh * beta, *dpr = -dh * beta;
    return -(1 - smoothing) * zt_log_sigmoid(h) - smoothing * zt_log_sigmoid(-h);
}

double zt_pairwise_loss(double rc, double rr, double *drc, double *drr)
{
    double d = -sigmoid(rr - rc);
    *drc = d, *drr = -d;
    return -zt_log_sigmoid(rc - rr);
}

double zt_clipped_policy_loss(double logp, double old, double adv, double clip, double clip_high, double *dlogp)
{
    double ratio = exp(logp - old), clipped = fmin(fmax(ratio, 1 - clip), 1 + clip_high);
    double a = ratio * adv, b = clipped * adv;
    /* the unclipped term is the smaller one: its derivative; else the clipped constant's, 0 */
    *dlogp = a <= b ? -a : 0;
    return -fmin(a, b);
}

double zt_kl_k3(double logp, double ref, double *dlogp)
{
    double d = ref - logp, e = exp(d);
    *dlogp = 1 - e;
    return e - d - 1;
}

double zt_clipped_value_loss(double v, double old, double ret, double clip, double *dv)
{
    double vc = old + fmin(fmax(v - old, -clip), clip);
    double a = (v - ret) * (v - ret), b = (vc - ret) * (vc - ret);
    if (a >= b) {
        *dv = v - ret;
        return 0.5 * a;
    }
    *dv = fabs(v - old) < clip ? vc - ret : 0;
    return 0.5 * b;
}

void zt_gae(const double *rewards, const double *values, int n, double gamma, double lam, double *adv, double *ret)
{
    double last = 0;
    for (int t = n - 1; t >= 0; t--) {
        double next = t + 1 < n ? values[t + 1] : 0;
        double delta = rewards[t] + gamma * next - values[t];
        last = delta + gamma * lam * last;
        adv[t] = last;
        ret[t] = last + values[t];
    }
}
