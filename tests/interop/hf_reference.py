"""An independent forward pass of the Hugging Face architectures moe4d exports to.

Written from the semantics of transformers' modeling_mixtral.py (MixtralForCausalLM),
modeling_glm4_moe.py (Glm4MoeForCausalLM), modeling_qwen3_moe.py (Qwen3MoeForCausalLM),
modeling_qwen3.py (Qwen3ForCausalLM) and modeling_deepseek_v3.py (DeepseekV3ForCausalLM), not from
moe4d's code: nn.Linear weights [out, in],
RMSNorm x * rsqrt(mean(x^2) + eps) * w, RoPE by rotate_half with inv_freq = theta^(-2i/head_dim)
and absolute positions, grouped-query attention by repeat_kv (query head h reads key/value head
h // (heads / kv_heads)), causal softmax attention scaled by head_dim^-0.5, Mixtral's softmax router
(top-k, renormalised), GLM-4-MoE's sigmoid router (selection by score + e_score_correction_bias,
among the topk_group of n_group expert groups with the best top-2 sums, weights = scores of the
picks, optionally renormalised, times routed_scaling_factor) plus its shared experts, and its
first_k_dense_replace dense layers; Qwen3's q_norm / k_norm (an RMSNorm over each
head's head_dim elements of q and k, after the projection and before RoPE), head_dim from config.json
(num_heads * head_dim may differ from hidden_size), Qwen3-MoE's softmax router (top-k of the softmax
over all experts, renormalised only with norm_topk_prob), sparse layers where (l + 1) %
decoder_sparse_step == 0 and l is not in mlp_only_layers, else a dense MLP of intermediate_size.
DeepSeek-V3: DeepseekV3Attention (q = q_b_proj(RMSNorm_1e-6(q_a_proj x)) or q_proj x, split per head
into [nope, rope]; kv_a_proj_with_mqa x = [latent, k_rope] with one k_rope shared by all heads;
kv_b_proj(RMSNorm_1e-6(latent)) = per head [k_nope, v]; rope_interleave: the rotary part is
de-interleaved (even then odd elements) before rotate_half; softmax scale qk_head_dim^-0.5, times
yarn_get_mscale(factor, mscale_all_dim)^2 with YaRN), YaRN's inv_freq and attention factor as
_compute_yarn_parameters (factor = max_position_embeddings / original_max_position_embeddings),
and DeepseekV3TopkRouter / DeepseekV3MoE routing (GLM-4-MoE's) with the first_k_dense_replace layers.
Computed in float64 as a reference.

The folder is read with a few lines of Python (no safetensors package): 8-byte little-endian
header length, JSON header, raw little-endian data.
"""
import json
import math
import os
import struct

import numpy as np
import torch

_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[base + begin:base + end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<"))
        tensors[name] = torch.from_numpy(array.astype(np.float64).reshape(info["shape"]))
    return tensors


def load_folder(folder):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(folder, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        for file in sorted(set(weight_map.values())):
            tensors.update(read_safetensors(os.path.join(folder, file)))
        assert set(tensors) == set(weight_map), "index and shards disagree"
    else:
        tensors = read_safetensors(os.path.join(folder, "model.safetensors"))
    return config, tensors


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_pairs(x):
    """The other RoPE convention, (2i, 2i+1) pairs: only the test's negative control uses it, to show
    that the comparison can tell the conventions apart."""
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def swiglu(x, gate, up, down):
    return torch.nn.functional.silu(x @ gate.T) * (x @ up.T) @ down.T


class HfReference:
    def __init__(self, folder):
        self.config, self.t = load_folder(folder)
        c = self.config
        self.arch = c["architectures"][0]
        assert self.arch in ("MixtralForCausalLM", "Glm4MoeForCausalLM", "Qwen3MoeForCausalLM",
                             "Qwen3ForCausalLM", "DeepseekV3ForCausalLM"), self.arch
        self.qwen = self.arch.startswith("Qwen3")
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or c["hidden_size"] // self.heads
        self.eps = c["rms_norm_eps"]
        self.theta = c["rope_theta"]
        self.top_k = c.get("num_experts_per_tok")
        self.rotate = rotate_half
        if self.arch == "Glm4MoeForCausalLM":
            assert c.get("partial_rotary_factor", 0.5) == 1.0 and not c.get("use_qk_norm", False)
            assert not c.get("attention_bias", False)
        self.deepseek = self.arch == "DeepseekV3ForCausalLM"
        if self.deepseek:
            assert c.get("rope_interleave", True) and not c.get("attention_bias", False)
            assert c.get("num_nextn_predict_layers", 0) == 0

    def yarn(self, dim):
        """(inv_freq, attention_factor) of _compute_yarn_parameters (fp32 as HF), or plain RoPE's."""
        c = self.config
        r = c.get("rope_scaling") or {}
        pos_freqs = self.theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
        if r.get("rope_type", r.get("type")) != "yarn":
            return (1.0 / pos_freqs).double(), 1.0
        original = r.get("original_max_position_embeddings")
        factor = c["max_position_embeddings"] / original if original else r["factor"]
        original = original or c["max_position_embeddings"]

        def get_mscale(scale, m=1):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
        mscale, mscale_all_dim = r.get("mscale"), r.get("mscale_all_dim")
        attention_factor = (get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
                            if mscale and mscale_all_dim else get_mscale(factor))

        def correction_dim(rotations):
            return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(self.theta))
        low = max(math.floor(correction_dim(r.get("beta_fast") or 32)), 0)
        high = min(math.ceil(correction_dim(r.get("beta_slow") or 1)), dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        extrapolation_weight = 1 - ramp
        inv_freq = ((1.0 / (factor * pos_freqs)) * (1 - extrapolation_weight)
                    + (1.0 / pos_freqs) * extrapolation_weight)
        return inv_freq.double(), attention_factor

    def mla_attention(self, x, p):
        c = self.config
        S, H = x.shape[0], self.heads
        nope, rope, vd = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        if c.get("q_lora_rank") is None:
            q = x @ self.t[p + "q_proj.weight"].T
        else:
            q = rms_norm(x @ self.t[p + "q_a_proj.weight"].T, self.t[p + "q_a_layernorm.weight"], 1e-6)
            q = q @ self.t[p + "q_b_proj.weight"].T
        q = q.view(S, H, nope + rope).transpose(0, 1)
        q_pass, q_rot = q[..., :nope], q[..., nope:]
        kv = x @ self.t[p + "kv_a_proj_with_mqa.weight"].T
        latent, k_rot = kv[:, :c["kv_lora_rank"]], kv[:, c["kv_lora_rank"]:]
        kv = rms_norm(latent, self.t[p + "kv_a_layernorm.weight"], 1e-6) @ self.t[p + "kv_b_proj.weight"].T
        kv = kv.view(S, H, nope + vd).transpose(0, 1)
        k_pass, v = kv[..., :nope], kv[..., nope:]
        k_rot = k_rot[None]  # [1, S, rope]: one rotary key for all heads
        inv_freq, attention_factor = self.yarn(rope)
        freqs = torch.arange(S, dtype=torch.float64)[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos() * attention_factor, emb.sin() * attention_factor
        # rope_interleave: even elements, then odd, then rotate_half (the negative control,
        # self.rotate = rotate_pairs, reads the rows as rope_interleave false instead).
        if self.rotate is rotate_half:
            q_rot = torch.cat((q_rot[..., 0::2], q_rot[..., 1::2]), dim=-1)
            k_rot = torch.cat((k_rot[..., 0::2], k_rot[..., 1::2]), dim=-1)
        q_rot = q_rot * cos + rotate_half(q_rot) * sin
        k_rot = k_rot * cos + rotate_half(k_rot) * sin
        q = torch.cat((q_pass, q_rot), dim=-1)
        k = torch.cat((k_pass, k_rot.expand(H, S, rope)), dim=-1)
        scale = (nope + rope) ** -0.5
        r = c.get("rope_scaling")
        if r is not None and r.get("mscale_all_dim"):
            m = 0.1 * r["mscale_all_dim"] * math.log(r["factor"]) + 1.0 if r["factor"] > 1 else 1.0
            scale = scale * m * m
        scores = q @ k.transpose(1, 2) * scale
        mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
        out = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
        return out.transpose(0, 1).reshape(S, H * vd) @ self.t[p + "o_proj.weight"].T

    def attention(self, x, p):
        if self.deepseek:
            return self.mla_attention(x, p)
        S = x.shape[0]
        hd, H, KV = self.head_dim, self.heads, self.kv_heads
        q = (x @ self.t[p + "q_proj.weight"].T).view(S, H, hd).transpose(0, 1)
        k = (x @ self.t[p + "k_proj.weight"].T).view(S, KV, hd).transpose(0, 1)
        v = (x @ self.t[p + "v_proj.weight"].T).view(S, KV, hd).transpose(0, 1)
        if self.qwen:  # per-head RMSNorm over head_dim, before RoPE
            q = rms_norm(q, self.t[p + "q_norm.weight"], self.eps)
            k = rms_norm(k, self.t[p + "k_norm.weight"], self.eps)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        freqs = torch.arange(S, dtype=torch.float64)[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        if self.rotate is rotate_pairs:  # angles repeat per pair instead of per half
            cos = torch.repeat_interleave(cos[:, :hd // 2], 2, dim=-1)
            sin = torch.repeat_interleave(sin[:, :hd // 2], 2, dim=-1)
        q = q * cos + self.rotate(q) * sin
        k = k * cos + self.rotate(k) * sin
        rep = H // KV
        k = k[:, None].expand(KV, rep, S, hd).reshape(H, S, hd)
        v = v[:, None].expand(KV, rep, S, hd).reshape(H, S, hd)
        scores = q @ k.transpose(1, 2) * hd ** -0.5
        mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return out.transpose(0, 1).reshape(S, H * hd) @ self.t[p + "o_proj.weight"].T

    def routed(self, x, p, picks, weights, names):
        """Sum over each token's picked experts of weight x SwiGLU expert (names: its gate, up, down)."""
        out = torch.zeros_like(x)
        for e in range(self.t[p + "gate.weight"].shape[0]):
            rows, slot = torch.where(picks == e)
            if rows.numel() == 0:
                continue
            q = p + f"experts.{e}."
            y = swiglu(x[rows], *(self.t[q + n + ".weight"] for n in names))
            out.index_add_(0, rows, y * weights[rows, slot, None])
        return out

    def mixtral_moe(self, x, p):
        probs = torch.softmax(x @ self.t[p + "gate.weight"].T, dim=-1)
        weights, picks = torch.topk(probs, self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        return self.routed(x, p, picks, weights, ("w1", "w3", "w2"))

    def qwen3_moe(self, x, p):
        probs = torch.softmax(x @ self.t[p + "gate.weight"].T, dim=-1)
        weights, picks = torch.topk(probs, self.top_k, dim=-1)
        if self.config.get("norm_topk_prob", False):
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return self.routed(x, p, picks, weights, ("gate_proj", "up_proj", "down_proj"))

    def qwen3_sparse(self, layer):
        c = self.config
        return (self.arch == "Qwen3MoeForCausalLM" and layer not in (c.get("mlp_only_layers") or [])
                and (layer + 1) % c.get("decoder_sparse_step", 1) == 0)

    def glm_moe(self, x, p):
        c = self.config
        scores = torch.sigmoid(x @ self.t[p + "gate.weight"].T)
        choice = scores + self.t[p + "gate.e_score_correction_bias"]
        groups, topk_group = c.get("n_group", 1), c.get("topk_group", 1)
        if groups > 1:  # Glm4MoeMoE.route_tokens_to_experts: the topk_group groups with the best top-2 sums
            group_scores = choice.view(-1, groups, scores.shape[1] // groups).topk(2, dim=-1)[0].sum(dim=-1)
            group_idx = torch.topk(group_scores, k=topk_group, dim=-1)[1]
            group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
            allowed = group_mask.repeat_interleave(scores.shape[1] // groups, dim=1).bool()
            # HF masks with 0.0, not -inf: the same picks unless a bias pushes an allowed score below 0.
            choice = choice.masked_fill(~allowed, 0.0)
        picks = torch.topk(choice, self.top_k, dim=-1)[1]
        weights = scores.gather(1, picks)
        if c.get("norm_topk_prob", True):
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        weights = weights * c.get("routed_scaling_factor", 1.0)
        out = self.routed(x, p, picks, weights, ("gate_proj", "up_proj", "down_proj"))
        s = p + "shared_experts."
        if c.get("n_shared_experts", 0) > 0:
            out = out + swiglu(x, self.t[s + "gate_proj.weight"], self.t[s + "up_proj.weight"],
                               self.t[s + "down_proj.weight"])
        return out

    def logits(self, ids):
        """Logits [S, vocab_size] of a sequence of token ids at positions 0..S-1."""
        c = self.config
        x = self.t["model.embed_tokens.weight"][torch.tensor(ids)]
        for l in range(c["num_hidden_layers"]):
            p = f"model.layers.{l}."
            x = x + self.attention(rms_norm(x, self.t[p + "input_layernorm.weight"], self.eps), p + "self_attn.")
            h = rms_norm(x, self.t[p + "post_attention_layernorm.weight"], self.eps)
            if self.arch == "MixtralForCausalLM":
                x = x + self.mixtral_moe(h, p + "block_sparse_moe.")
            elif self.qwen and self.qwen3_sparse(l):
                x = x + self.qwen3_moe(h, p + "mlp.")
            elif self.qwen or l < c.get("first_k_dense_replace", 0):
                q = p + "mlp."
                x = x + swiglu(h, self.t[q + "gate_proj.weight"], self.t[q + "up_proj.weight"],
                               self.t[q + "down_proj.weight"])
            else:
                x = x + self.glm_moe(h, p + "mlp.")
        x = rms_norm(x, self.t["model.norm.weight"], self.eps)
        head = self.t["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else self.t["lm_head.weight"]
        return x @ head.T

    def greedy(self, prompt, new_tokens, vocab_limit, eos):
        ids = list(prompt)
        out = []
        for _ in range(new_tokens):
            nxt = int(torch.argmax(self.logits(ids)[-1, :vocab_limit]))
            if nxt == eos:
                break
            ids.append(nxt)
            out.append(nxt)
        return out


def read_shard(path):
    """A moe4d token shard: <stem>.bin raw ids with a <stem>.json header."""
    stem = path[:-4] if path.endswith(".bin") else path
    with open(stem + ".json") as f:
        header = json.load(f)
    return np.fromfile(stem + ".bin", dtype="<u2" if header["dtype"] == "uint16" else "<u4").astype(np.int64)


def eval_loss(model, tokens, windows, seq_len):
    """Mean cross-entropy over `windows` fixed windows spread evenly over the shard (first at 0, last
    ending at the shard's end), the windows moe4d eval uses."""
    total = 0.0
    for i in range(windows):
        start = 0 if windows == 1 else (len(tokens) - seq_len - 1) * i // (windows - 1)
        inputs = tokens[start:start + seq_len]
        targets = torch.tensor(tokens[start + 1:start + seq_len + 1])
        logp = torch.log_softmax(model.logits(inputs.tolist()), dim=-1)
        total += float(-logp[torch.arange(seq_len), targets].mean())
    return total / windows
