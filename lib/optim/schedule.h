/* optim/schedule: learning-rate schedules as in Hugging Face transformers' get_scheduler.
 *
 *     zt_schedule s;
 *     if (zt_schedule_init(&s, ZT_SCHEDULE_COSINE, 2e-5, total_steps, 0, 0.03, 0.0, 0.1, NULL)) return ...;
 *     for (long k = 1; k <= total_steps; k++) h.lr = zt_schedule_lr(&s, k);
 *
 * Optimizer step k (1-based) uses peak * f(k-1), HF's LambdaLR convention, with S total
 * steps, W warmup steps, r = min_lr_ratio and s = k-1:
 *
 *     warmup     s < W: f = s/W, so with warmup the first step has lr 0 (as in HF)
 *     constant   f = 1                                      (HF constant_with_warmup)
 *     linear     f = r + (1-r) * max(0, (S-s)/(S-W))        (HF linear when r = 0)
 *     cosine     f = r + (1-r) * 0.5*(1 + cos(pi*p)), p = (s-W)/(S-W)
 *                                                           (HF cosine_with_min_lr)
 *                with num_cycles c: cos(pi*2c*p), HF's (c = 0.5 by default)
 *     cosine_with_restarts   f = r + (1-r) * 0.5*(1 + cos(pi*((c*p) mod 1))) for p < 1, r from
 *                p = 1 on (c = 1 by default; HF when r = 0)
 *     polynomial f = ((peak-e) * (1 - (s-W)/(S-W))^power + e) / peak, e = lr_end, and e/peak
 *                past S (HF's; r plays no part)
 *     inverse_sqrt   f = 1/sqrt(s/ts) past warmup, ts = W, or 10000 without warmup (HF's:
 *                get_scheduler passes it no kwargs; r plays no part)
 *     wsd        D = ceil(decay_ratio*S) decay steps (at most S-W); stable f = 1 until
 *                s = S-D, then f = r + (1-r)*(1 - (s-(S-D))/D), and r from s = S on
 *                (HF get_wsd_schedule with decay_type "linear", whose warmup is also
 *                lifted: f = r + (1-r)*s/W)
 *
 * Divisors are at least 1 as in HF. The last step (k = S) therefore still has a little
 * more than r*peak with linear, cosine and wsd. Past S the lr stays at r*peak (cosine is
 * held at p = 1 instead of rising again). warmup_steps > 0 wins over warmup_ratio; else
 * W = ceil(warmup_ratio*S), as HF's TrainingArguments.get_warmup_steps.
 */
#ifndef ZT_OPTIM_SCHEDULE_H
#define ZT_OPTIM_SCHEDULE_H

#include "lib/core/status.h"

/* train.lr_scheduler_type */
typedef enum zt_schedule_type {
    ZT_SCHEDULE_COSINE,
    ZT_SCHEDULE_LINEAR,
    ZT_SCHEDULE_CONSTANT,
    ZT_SCHEDULE_WSD,
    ZT_SCHEDULE_COSINE_RESTARTS,
    ZT_SCHEDULE_POLYNOMIAL,
    ZT_SCHEDULE_INVERSE_SQRT,
} zt_schedule_type;
/* "cosine", "linear", "constant", "wsd", "cosine_with_restarts", "polynomial", "inverse_sqrt": indexed by type */
extern const char *const zt_schedule_names[7];

/* What Hugging Face's lr_scheduler_kwargs set in the schedules that take them */
typedef struct zt_schedule_kwargs {
    double num_cycles;          /* cosine (0.5: a half wave) and cosine_with_restarts (1) */
    double power, lr_end;       /* polynomial: 1 and 1e-7 */
    double min_lr_rate, min_lr; /* cosine: the floor as a ratio or an lr (for min_lr_ratio); < 0: unset */
} zt_schedule_kwargs;
/* HF's defaults for type t */
zt_schedule_kwargs zt_schedule_kwargs_default(zt_schedule_type t);

typedef struct zt_schedule {
    zt_schedule_type type;
    double peak_lr;
    double min_lr_ratio; /* r */
    long total_steps;    /* S: optimizer steps in the run */
    long warmup_steps;   /* W */
    long decay_steps;    /* wsd: D, the last D steps of S */
    zt_schedule_kwargs kw;
} zt_schedule;

/* kw NULL: HF's defaults; its min_lr_rate or min_lr, where set, is r in place of min_lr_ratio.
 * Fails with ZT_EUSER on a value out of range (total_steps < 1, ratios outside [0, 1], negative
 * lr or warmup, num_cycles or power not above 0, lr_end not below the lr). */
zt_status zt_schedule_init(zt_schedule *s, zt_schedule_type type, double peak_lr, long total_steps, long warmup_steps,
                           double warmup_ratio, double min_lr_ratio, double decay_ratio, const zt_schedule_kwargs *kw);

/* The lr of optimizer step `step` (1-based). */
double zt_schedule_lr(const zt_schedule *s, long step);

#endif
