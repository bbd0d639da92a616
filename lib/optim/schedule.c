#include "lib/optim/schedule.h"

#include <math.h>

const char *const zt_schedule_names[7] = {"cosine",     "linear",      "constant", "wsd", "cosine_with_restarts",
                                          "polynomial", "inverse_sqrt"};

zt_schedule_kwargs zt_schedule_kwargs_default(zt_schedule_type t)
{
    return (zt_schedule_kwargs){.num_cycles = t == ZT_SCHEDULE_COSINE_RESTARTS ? 1 : 0.5,
                                .power = 1,
                                .lr_end = 1e-7,
                                .min_lr_rate = -1,
                                .min_lr = -1};
}

/* x in [0, 1]; false for NaN too */
static int unit_interval(double x) { return x >= 0 && x <= 1; }

zt_status zt_schedule_init(zt_schedule *s, zt_schedule_type t, double peak_lr, long total_steps, long warmup_steps,
                           double warmup_ratio, double min_lr_ratio, double decay_ratio, const zt_schedule_kwargs *kw)
{
    zt_schedule_kwargs k = kw ? *kw : zt_schedule_kwargs_default(t);
    if (k.min_lr_rate >= 0) min_lr_ratio = k.min_lr_rate;
    else if (k.min_lr >= 0) min_lr_ratio = peak_lr > 0 ? k.min_lr / peak_lr : 0;
    if (!(k.num_cycles > 0) || !(k.power > 0))
        return zt_fail(ZT_EUSER, "lr_scheduler_kwargs: num_cycles %g and power %g must be above 0", k.num_cycles,
                       k.power);
    if (t == ZT_SCHEDULE_POLYNOMIAL && !(k.lr_end >= 0 && k.lr_end < peak_lr))
        return zt_fail(ZT_EUSER, "lr_scheduler_kwargs: lr_end %g must be at least 0 and below learning_rate %g",
                       k.lr_end, peak_lr);
    if (!(peak_lr >= 0) || !isfinite(peak_lr))
        return zt_fail(ZT_EUSER, "learning_rate %g: must be a finite number >= 0", peak_lr);
    if (total_steps < 1) return zt_fail(ZT_EUSER, "total optimizer steps %ld: must be at least 1", total_steps);
    if (warmup_steps < 0) return zt_fail(ZT_EUSER, "warmup_steps %ld: must be >= 0", warmup_steps);
    if (!unit_interval(warmup_ratio)) return zt_fail(ZT_EUSER, "warmup_ratio %g: must be in [0, 1]", warmup_ratio);
    if (!unit_interval(min_lr_ratio)) return zt_fail(ZT_EUSER, "min_lr_ratio %g: must be in [0, 1]", min_lr_ratio);
    if (t == ZT_SCHEDULE_WSD && !unit_interval(decay_ratio))
        return zt_fail(ZT_EUSER, "decay_ratio %g: must be in [0, 1]", decay_ratio);

    long w = warmup_steps > 0 ? warmup_steps : (long)ceil(warmup_ratio * (double)total_steps);
    long d = 0;
    if (t == ZT_SCHEDULE_WSD) {
        long room = total_steps > w ? total_steps - w : 0;
        d = (long)ceil(decay_ratio * (double)total_steps);
        if (d > room) d = room;
    }
    *s = (zt_schedule){.type = t,
                       .peak_lr = peak_lr,
                       .min_lr_ratio = min_lr_ratio,
                       .total_steps = total_steps,
                       .warmup_steps = w,
                       .decay_steps = d,
                       .kw = k};
    return ZT_OK;
}

static double max1(long x) { return x > 1 ? (double)x : 1.0; }

/* HF's lr_lambda at s = step - 1, with its order of operations (lift = f*(1-r) + r),
 * so that the lr is bitwise the one HF computes. */
static double schedule_factor(const zt_schedule *sc, long s)
{
    long S = sc->total_steps, W = sc->warmup_steps, D = sc->decay_steps;
    double r = sc->min_lr_ratio;
    if (s < W) {
        double f = (double)s / max1(W);
        return sc->type == ZT_SCHEDULE_WSD ? f * (1 - r) + r : f;
    }
    double f = 1.0;
    switch (sc->type) {
    case ZT_SCHEDULE_CONSTANT: return 1.0;
    case ZT_SCHEDULE_LINEAR:
        f = (double)(S - s) / max1(S - W);
        if (f < 0) f = 0;
        break;
    case ZT_SCHEDULE_COSINE: {
        double p = (double)(s - W) / max1(S - W);
        f = 0.5 * (1.0 + cos(M_PI * sc->kw.num_cycles * 2.0 * (p < 1 ? p : 1)));
        if (f < 0) f = 0;
        break;
    }
    case ZT_SCHEDULE_COSINE_RESTARTS: {
        double p = (double)(s - W) / max1(S - W);
        if (p >= 1) return r;
        f = 0.5 * (1.0 + cos(M_PI * fmod(sc->kw.num_cycles * p, 1.0)));
        if (f < 0) f = 0;
        break;
    }
    case ZT_SCHEDULE_POLYNOMIAL: {
        double peak = sc->peak_lr, end = sc->kw.lr_end;
        if (s > S) return end / peak;
        double remaining = 1 - (double)(s - W) / max1(S - W);
        return ((peak - end) * pow(remaining, sc->kw.power) + end) / peak;
    }
    case ZT_SCHEDULE_INVERSE_SQRT: { /* HF's timescale minus the warmup steps is 0 with warmup */
        long ts = W ? W : 10000;
        return 1.0 / sqrt((double)(s + ts - W) / (double)ts);
    }
    case ZT_SCHEDULE_WSD:
        if (s < S - D) return 1.0;
        if (s >= S) return r;
        f = 1.0 - (double)(s - (S - D)) / max1(D);
        break;
    }
    return f * (1 - r) + r;
}

double zt_schedule_lr(const zt_schedule *s, long step)
{
    ZT_ASSERT(step >= 1);
    return s->peak_lr * schedule_factor(s, step - 1);
}
