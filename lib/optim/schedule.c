#include "lib/optim/schedule.h"

#include <math.h>

const char *const zt_schedule_names[4] = {"cosine", "linear", "constant", "wsd"};

/* x in [0, 1]; false for NaN too */
static int unit_interval(double x) { return x >= 0 && x <= 1; }

zt_status zt_schedule_init(zt_schedule *s, zt_schedule_type t, double peak_lr, long total_steps, long warmup_steps,
                           double warmup_ratio, double min_lr_ratio, double decay_ratio)
{
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
                       .decay_steps = d};
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
        f = 0.5 * (1.0 + cos(M_PI * (p < 1 ? p : 1)));
        break;
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
