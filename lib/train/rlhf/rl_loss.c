/* The losses of zt rlhf (rl_loss.h). */
#include <math.h>

#include "rl_loss.h"

double zt_log_sigmoid(double x) { return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); }

static double sigmoid(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }

double zt_dpo_loss(zt_dpo_kind kind, double beta, double smoothing, double pc, double pr, double rc, double rr,
                   double *dpc, double *dpr)
{
    double c = pc - rc, r = pr - rr, margin = c - r, h = beta * margin, a = beta * c, b = beta * r, e = smoothing;
    double loss, dh = 0, da = 0, db = 0; /* the loss's derivatives in h, βc and βr */
    switch (kind) {
    case ZT_DPO_IPO: {
        double d = margin - 1 / (2 * beta);
        *dpc = 2 * d, *dpr = -2 * d;
        return d * d;
    }
    case ZT_DPO_SPPO_HARD: {
        double w = c - 0.5 / beta, l = r + 0.5 / beta;
        *dpc = 2 * w, *dpr = 2 * l;
        return w * w + l * l;
    }
    case ZT_DPO_HINGE: loss = fmax(0, 1 - h), dh = h < 1 ? -1 : 0; break;
    case ZT_DPO_ROBUST:
        loss = (-(1 - e) * zt_log_sigmoid(h) + e * zt_log_sigmoid(-h)) / (1 - 2 * e);
        dh = (-(1 - e) * sigmoid(-h) - e * sigmoid(h)) / (1 - 2 * e);
        break;
    case ZT_DPO_EXO_PAIR: /* the derivative: σ(h)·σ(-h)·(h - log((1-ε)/ε)) */
        loss = sigmoid(h) * (zt_log_sigmoid(h) - log1p(-e)) + sigmoid(-h) * (zt_log_sigmoid(-h) - log(e));
        dh = sigmoid(h) * sigmoid(-h) * (h - log1p(-e) + log(e));
        break;
    case ZT_DPO_NCA_PAIR:
        loss = -zt_log_sigmoid(a) - 0.5 * zt_log_sigmoid(-a) - 0.5 * zt_log_sigmoid(-b);
        da = -sigmoid(-a) + 0.5 * sigmoid(a), db = 0.5 * sigmoid(b);
        break;
    case ZT_DPO_BCO_PAIR:
        loss = -zt_log_sigmoid(a) - zt_log_sigmoid(-b);
        da = -sigmoid(-a), db = sigmoid(b);
        break;
    case ZT_DPO_APO_ZERO:
        loss = 1 - sigmoid(a) + sigmoid(b);
        da = -sigmoid(a) * sigmoid(-a), db = sigmoid(b) * sigmoid(-b);
        break;
    case ZT_DPO_APO_DOWN:
        loss = sigmoid(a) + 1 - sigmoid(h);
        da = sigmoid(a) * sigmoid(-a), dh = -sigmoid(h) * sigmoid(-h);
        break;
    default: /* sigmoid */
        loss = -(1 - e) * zt_log_sigmoid(h) - e * zt_log_sigmoid(-h);
        dh = -(1 - e) * sigmoid(-h) + e * sigmoid(h);
    }
    *dpc = beta * (dh + da), *dpr = beta * (db - dh);
    return loss;
}

double zt_kto_loss(double beta, double w, int desirable, double x, double kl, double *dx)
{
    double h = desirable ? beta * (x - kl) : beta * (kl - x);
    double dh = -w * sigmoid(h) * sigmoid(-h);
    *dx = desirable ? beta * dh : -beta * dh;
    return w * sigmoid(-h);
}

double zt_orpo_loss(double beta, double c, double r, double *dc, double *dr)
{
    c = fmin(c, -1e-9), r = fmin(r, -1e-9);
    double odds = (c - r) - (log(-expm1(c)) - log(-expm1(r))), s = sigmoid(-odds);
    *dc = -beta * s / -expm1(c); /* d odds / dc = 1 + e^c / (1 - e^c) = 1 / (1 - e^c) */
    *dr = beta * s / -expm1(r);
    return -beta * zt_log_sigmoid(odds);
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
