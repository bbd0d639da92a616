"""An independent NumPy reference of the Hugging Face Llama/Mistral/Qwen2/Qwen3 forward pass,
for checking zt's conventions (rotate-half RoPE, rope_scaling, grouped KV heads, biases,
sliding window, tied head, Qwen3's q/k norms) on small models, and of PEFT's LoRA adapters on
them. Used by tests/cli/t0500-reference.sh and t2400-lora.sh.

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


def inv_freq(cfg, D):
    inv = 1.0 / (cfg.get("rope_theta", 10000.0) ** (np.arange(0, D, 2, dtype=np.float64) / D))
    rs = cfg.get("rope_scaling") or {}
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
    return inv


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], -1)


def loss(cfg, W, ids):
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    D = cfg.get("head_dim") or C // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    T = len(ids)
    x = W["model.embed_tokens.weight"][ids]
    ang = np.outer(np.arange(T), inv_freq(cfg, D))
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
    mask = np.tril(np.ones((T, T), bool))
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", cfg["model_type"] not in ("qwen2", "qwen3")) else None
    if window:
        mask &= np.triu(np.ones((T, T), bool), -(window - 1))

    def lin(name, v):
        y = v @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        q = lin(p + "self_attn.q_proj", h).reshape(T, H, D).transpose(1, 0, 2)
        k = lin(p + "self_attn.k_proj", h).reshape(T, KV, D).transpose(1, 0, 2)
        v = lin(p + "self_attn.v_proj", h).reshape(T, KV, D).transpose(1, 0, 2)
        if p + "self_attn.q_norm.weight" in W:  # Qwen3: each head normed before the rotary embedding
            q, k = rms(q, W[p + "self_attn.q_norm.weight"], eps), rms(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = np.repeat(k, H // KV, 0), np.repeat(v, H // KV, 0)  # repeat_kv
        s = q @ k.transpose(0, 2, 1) / math.sqrt(D)
        s = np.where(mask, s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True)) @ v
        x = x + lin(p + "self_attn.o_proj", a.transpose(1, 0, 2).reshape(T, H * D))
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        g, u = lin(p + "mlp.gate_proj", h), lin(p + "mlp.up_proj", h)
        x = x + lin(p + "mlp.down_proj", g / (1 + np.exp(-g)) * u)
    x = rms(x, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    logits = x @ head.T
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
