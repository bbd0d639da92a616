/* train/rlhf/rl_loss: the losses of zt rlhf, on log-probabilities and values, with their
 * derivatives (pure arithmetic in double; the model turns the derivatives into
 * parameter gradients through zt_llama_forward_objective).
 *
 * Each function returns one item's loss and writes the partial derivatives of that
 * loss to its d* arguments. Defaults follow DeepSpeed-Chat (PPO) and TRL (DPO, GRPO).
 */
#ifndef ZT_TRAIN_RLHF_RL_LOSS_H
#define ZT_TRAIN_RLHF_RL_LOSS_H

/* TRL's DPO loss types (rlhf.loss_type) */
typedef enum {
    ZT_DPO_SIGMOID,
    ZT_DPO_IPO,
    ZT_DPO_HINGE,
    ZT_DPO_ROBUST,
    ZT_DPO_EXO_PAIR,
    ZT_DPO_NCA_PAIR,
    ZT_DPO_BCO_PAIR,
    ZT_DPO_SPPO_HARD,
    ZT_DPO_APO_ZERO,
    ZT_DPO_APO_DOWN,
} zt_dpo_kind;

/* DPO on one pair: policy log-probabilities of the chosen and rejected answers (pc, pr)
 * and the reference's (rc, rr); with c = pc - rc, r = pr - rr, h = β·(c - r), ε = smoothing,
 * TRL's formulas:
 *   sigmoid   -(1-ε)·log σ(h) - ε·log σ(-h)  (ε > 0: cDPO)
 *   ipo       (c - r - 1/(2β))², on log-probabilities averaged over the answer's tokens (the
 *             caller divides)
 *   hinge     max(0, 1 - h)
 *   robust    (-(1-ε)·log σ(h) + ε·log σ(-h)) / (1 - 2ε)
 *   exo_pair  σ(h)·(log σ(h) - log(1-ε)) + σ(-h)·(log σ(-h) - log ε)  (ε > 0)
 *   nca_pair  -log σ(βc) - ½·log σ(-βc) - ½·log σ(-βr)
 *   bco_pair  -log σ(βc) - log σ(-βr)
 *   sppo_hard (c - 1/(2β))² + (r + 1/(2β))²
 *   apo_zero  1 - σ(βc) + σ(βr)
 *   apo_down  σ(βc) + 1 - σ(h) */
double zt_dpo_loss(zt_dpo_kind kind, double beta, double smoothing, double pc, double pr, double rc, double rr,
                   double *dpc, double *dpr);
/* ORPO's odds-ratio term of one pair, on the answers' average log-probabilities c and r (below 0;
 * taken at -1e-9 at most, where log(1 - e^x) is finite): -β·log σ(odds), odds = (c - r) -
 * (log(1 - e^c) - log(1 - e^r)). The negative log-likelihood of the chosen answer is the
 * caller's. */
double zt_orpo_loss(double beta, double c, double r, double *dc, double *dr);
/* KTO on one answer (TRL's KTO trainer): x its log-ratio, the policy's log-probability minus the
 * reference's, kl the batch's estimate of the policy's KL divergence from the reference (≥ 0, no
 * gradient), w the weight of its kind: a desirable answer's loss is w·(1 - σ(β·(x - kl))), an
 * undesirable one's w·(1 - σ(β·(kl - x))). With kl = 0 this is TRL's apo_zero_unpaired. */
double zt_kto_loss(double beta, double w, int desirable, double x, double kl, double *dx);
/* Reward model on one pair: -log σ(r_chosen - r_rejected). */
double zt_pairwise_loss(double rc, double rr, double *drc, double *drr);
/* One token of the clipped surrogate: -min(ρ·A, clip(ρ, 1-ε, 1+ε_high)·A), ρ = exp(logp - old)
 * (ε_high = ε but for DAPO's clip-higher). */
double zt_clipped_policy_loss(double logp, double old, double adv, double clip, double clip_high, double *dlogp);
/* One token of the KL estimate to the reference, exp(ref - logp) - (ref - logp) - 1 (≥ 0, unbiased). */
double zt_kl_k3(double logp, double ref, double *dlogp);
/* One token of the clipped value loss: ½·max((v - R)², (old + clip(v - old, ±ε) - R)²). */
double zt_clipped_value_loss(double v, double old, double ret, double clip, double *dv);
/* Generalized advantage estimation over one completion of n tokens: rewards and values
 * per token → advantages and returns (advantage + value). */
void zt_gae(const double *rewards, const double *values, int n, double gamma, double lam, double *adv, double *ret);
/* log σ(x) without overflow */
double zt_log_sigmoid(double x);

#endif
