"""An independent NumPy reference of the Hugging Face Llama/Mistral/Qwen2/Qwen3, Gemma 2/3,
OLMo 2, Phi-3, SmolLM3 and Granite forward passes, for checking zt's conventions (rotate-half RoPE,
rope_scaling, grouped KV heads, biases, sliding windows, tied head, q/k norms, the families'
norms, activations, soft-capping and rotary variants) on small models, and of PEFT's LoRA
adapters on them. Used by tests/cli/t0500-reference.sh and t2400-lora.sh. On the 12 models of
tests/fixtures/parity (parity_model.py's weights) its losses were within 1.1e-7 of the fp32
losses transformers computed (expected.json), for every family.

    llama_ref.py perturb DIR     give norm weights and biases random values (rewrites DIR)
    llama_ref.py loss DIR DATA [ADAPTER]
                                 mean cross-entropy over {"input_ids": [...]} lines, each
                                 sequence on its own, labels = input_ids shifted by one; with
                                 a PEFT adapter directory, of the model with its adapters
    llama_ref.py adapter DIR OUT R ALPHA RSLORA MODULE...
                                 write a PEFT LoRA adapter directory for model DIR into OUT, with
                                 random A and B (B not zero, so that the adapters change the loss)
"""
import json
import math
import struct
import sys

import numpy as np


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8 : 8 + n])
    h.pop("__metadata__", None)
    out = {}
    for name, e in h.items():
        assert e["dtype"] == "F32", e
        s, t = e["data_offsets"]
        out[name] = np.frombuffer(b[8 + n + s : 8 + n + t], "<f4").reshape(e["shape"]).astype(np.float64)
    return out


def write_st(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        raw = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header).encode()
    hj += b" " * (-len(hj) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))


def inv_freq(cfg, R, T, local):
    """The rotary frequencies of R rotated elements and their cos/sin factor at length T; local:
    Gemma 3's windowed layers (rope_local_base_freq, no rope_scaling)."""
    theta = cfg.get("rope_local_base_freq", 10000.0) if local else cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (np.arange(0, R, 2, dtype=np.float64) / R))
    rs = {} if local else cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        inv = inv / rs["factor"]
    elif kind == "llama3":
        f, lo, hi, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > old / lo, inv / f, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / f + smooth * scaled
        medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
        inv = np.where(medium, smoothed, scaled)
    elif kind == "longrope":  # Phi-3: the long factors once the sequence passes the original length
        old = cfg["original_max_position_embeddings"]
        inv = inv / np.array(rs["long_factor"] if T > old else rs["short_factor"])
        s = cfg["max_position_embeddings"] / old
        return inv, math.sqrt(1 + math.log(s) / math.log(old)) if s > 1 else 1.0
    return inv, 1.0


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], -1)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def layer_window(cfg, l):
    """Layer l's sliding window, None for none: Gemma 2 windows even layers, Gemma 3 those with
    (l + 1) % sliding_window_pattern != 0, Qwen only with use_sliding_window."""
    t, w = cfg["model_type"], cfg.get("sliding_window")
    if t == "gemma2":
        return w if l % 2 == 0 else None
    if t == "gemma3_text":
        return w if (l + 1) % cfg.get("sliding_window_pattern", 6) else None
    return w if cfg.get("use_sliding_window", t not in ("qwen2", "qwen3")) else None


def loss(cfg, W, ids):
    """Summed cross-entropy of one sequence and its target count. Gemma 2/3: (1 + w) norms, four
    a layer, embeddings times sqrt(hidden) in fp32, GeGLU, query_pre_attn_scalar, soft-capping;
    OLMo 2: norms on the blocks' outputs only, q/k norms over the whole projections; Phi-3: fused
    qkv_proj and gate_up_proj, partial rotary, longrope; SmolLM3: no rotary on no_rope_layers' 0s;
    Granite: embeddings, scores, blocks' outputs and logits scaled by its four multipliers."""
    t = cfg["model_type"]
    gemma, olmo, phi = t in ("gemma2", "gemma3_text"), t == "olmo2", t == "phi3"
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    D = cfg.get("head_dim") or C // H
    R = int(D * cfg.get("partial_rotary_factor", 1.0))
    eps = cfg.get("rms_norm_eps", 1e-6)
    T = len(ids)
    x = W["model.embed_tokens.weight"][ids]
    if gemma:
        x = x * float(np.float32(math.sqrt(C)))
    granite = t == "granite"
    resid = cfg.get("residual_multiplier", 1.0) if granite else 1.0
    if granite:
        x = x * cfg.get("embedding_multiplier", 1.0)
    tables = {}
    for local in (False, True):
        inv, factor = inv_freq(cfg, R, T, local)
        ang = np.outer(np.arange(T), inv)
        tables[local] = factor * np.cos(np.concatenate([ang, ang], -1)), factor * np.sin(np.concatenate([ang, ang], -1))
    scale = cfg["query_pre_attn_scalar"] ** -0.5 if gemma else 1 / math.sqrt(D)
    if granite:
        scale = cfg.get("attention_multiplier", 1.0)
    cap = cfg.get("attn_logit_softcapping")

    def lin(name, v):
        y = v @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    def norm(name, v):
        return rms(v, W[name + ".weight"] + (1 if gemma else 0), eps)

    def rope(v, local):
        cos, sin = tables[local]
        r = v[..., :R]
        return np.concatenate([r * cos + rotate_half(r) * sin, v[..., R:]], -1)

    def attention(p, h, l):
        if phi:
            q, k, v = np.split(lin(p + "self_attn.qkv_proj", h), [H * D, (H + KV) * D], -1)
        else:
            q, k, v = lin(p + "self_attn.q_proj", h), lin(p + "self_attn.k_proj", h), lin(p + "self_attn.v_proj", h)
        if olmo:  # one norm over the whole q and one over the whole k projection
            q, k = norm(p + "self_attn.q_norm", q), norm(p + "self_attn.k_norm", k)
        q, k, v = (a.reshape(T, n, D).transpose(1, 0, 2) for a, n in ((q, H), (k, KV), (v, KV)))
        if not olmo and p + "self_attn.q_norm.weight" in W:  # Qwen3, Gemma 3: each head normed
            q, k = norm(p + "self_attn.q_norm", q), norm(p + "self_attn.k_norm", k)
        window = layer_window(cfg, l)
        if cfg.get("no_rope_layers", [1] * (l + 1))[l]:
            local = t == "gemma3_text" and window is not None
            q, k = rope(q, local), rope(k, local)
        k, v = np.repeat(k, H // KV, 0), np.repeat(v, H // KV, 0)  # repeat_kv
        s = q @ k.transpose(0, 2, 1) * scale
        if cap:
            s = cap * np.tanh(s / cap)
        mask = np.tril(np.ones((T, T), bool))
        if window:
            mask &= np.triu(np.ones((T, T), bool), -(window - 1))
        s = np.where(mask, s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True)) @ v
        return lin(p + "self_attn.o_proj", a.transpose(1, 0, 2).reshape(T, H * D))

    def mlp(p, h):
        if phi:
            g, u = np.split(lin(p + "mlp.gate_up_proj", h), 2, -1)
        else:
            g, u = lin(p + "mlp.gate_proj", h), lin(p + "mlp.up_proj", h)
        return lin(p + "mlp.down_proj", (gelu_tanh(g) if gemma else g / (1 + np.exp(-g))) * u)

    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        a = attention(p, x if olmo else norm(p + "input_layernorm", x), l)
        x = x + (norm(p + "post_attention_layernorm", a) if gemma or olmo else resid * a)
        h = x if olmo else norm(p + ("pre_feedforward_layernorm" if gemma else "post_attention_layernorm"), x)
        m = mlp(p, h)
        x = x + (norm(p + "post_feedforward_layernorm", m) if gemma or olmo else resid * m)
    x = norm("model.norm", x)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    logits = x @ head.T
    if granite:
        logits = logits / cfg.get("logits_scaling", 1.0)
    if cfg.get("final_logit_softcapping"):
        logits = cfg["final_logit_softcapping"] * np.tanh(logits / cfg["final_logit_softcapping"])
    m = logits.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[:, 0]
    return (lse[:-1] - logits[np.arange(T - 1), ids[1:]]).sum(), T - 1


def lora_scale(c):
    return c["lora_alpha"] / (math.sqrt(c["r"]) if c.get("use_rslora") else c["r"])


def merge_adapter(W, d):
    """W + s·B·A for every adapter: what PEFT's forward computes for a linear layer (without dropout)."""
    c = json.load(open(d + "/adapter_config.json"))
    A = read_st(d + "/adapter_model.safetensors")
    for name, a in A.items():
        if ".lora_A." in name:
            base = name.replace("base_model.model.", "", 1).replace(".lora_A.weight", ".weight")
            W[base] = W[base] + lora_scale(c) * A[name.replace(".lora_A.", ".lora_B.")] @ a


def make_adapter(d, out, r, alpha, rslora, modules):
    import os

    W = read_st(d + "/model.safetensors")
    rng = np.random.default_rng(3)
    A = {}
    for name in sorted(W):
        mod = name.split(".")[-2]
        if mod in modules and name.endswith("proj.weight"):
            o, i = W[name].shape
            p = "base_model.model." + name[: -len(".weight")]
            A[p + ".lora_A.weight"] = rng.uniform(-1, 1, (r, i)) / math.sqrt(i)
            A[p + ".lora_B.weight"] = 0.5 * rng.standard_normal((o, r))
    os.makedirs(out, exist_ok=True)
    write_st(out + "/adapter_model.safetensors", A)
    cfg = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": d, "r": r,
           "lora_alpha": alpha, "lora_dropout": 0.0, "target_modules": modules, "bias": "none",
           "use_rslora": rslora, "use_dora": False, "modules_to_save": None, "fan_in_fan_out": False,
           "init_lora_weights": True, "inference_mode": True}
    json.dump(cfg, open(out + "/adapter_config.json", "w"), indent=2)


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "adapter":
        a = sys.argv
        make_adapter(d, a[3], int(a[4]), float(a[5]), a[6] == "true", a[7:])
        return
    W = read_st(d + "/model.safetensors")
    if cmd == "perturb":
        r = np.random.default_rng(5)
        for name, a in W.items():
            if a.ndim == 1:
                W[name] = 1 + 0.5 * r.standard_normal(a.shape) if name.endswith("norm.weight") else 0.5 * r.standard_normal(a.shape)
            else:
                W[name] = a * 25  # larger weights than init: attention patterns that are not uniform
        write_st(d + "/model.safetensors", W)
        return
    cfg = json.load(open(d + "/config.json"))
    if len(sys.argv) > 4:
        merge_adapter(W, sys.argv[4])
    total, n = 0.0, 0
    for line in open(sys.argv[3]):
        s, k = loss(cfg, W, np.array(json.loads(line)["input_ids"]))
        total, n = total + s, n + k
    print(json.dumps({"loss": total / n, "tokens": n}))


main()
