"""The decisive check of `moe4d ckpt export --format hf`: an independent PyTorch implementation of the
exported architecture (hf_reference.py) loads the exported folder and must reproduce `moe4d eval`'s
loss within 1e-5 relative and `moe4d generate --temperature 0`'s 32 greedy tokens.

usage: hf_reference_test.py MOE4D MPIEXEC WORKDIR VARIANT
  VARIANT mixtral_gqa: GQA, all layers MoE, softmax top-k -> MixtralForCausalLM
          glm_shared:  a dense first layer, shared experts, sigmoid scores + routing bias -> Glm4MoeForCausalLM
          glm_grouped: glm_shared with group-limited routing and a scaling factor -> Glm4MoeForCausalLM
          qwen3_moe:   q/k norm, head_dim != hidden / heads, mlp_only_layers, softmax top-k not
                       renormalised -> Qwen3MoeForCausalLM
          qwen3_dense: q/k norm, head_dim != hidden / heads, tied embeddings, dense -> Qwen3ForCausalLM
          deepseek_v3: multi-head latent attention (q_lora, YaRN with mscale / mscale_all_dim), glm_grouped's
                       routing -> DeepseekV3ForCausalLM
Along the way: generate with and without the KV cache gives the same tokens, eval on 2 MPI ranks
(EP 2, TP 2 for the Qwen3 variants) gives the single-rank loss, import of the folder gives back the
checkpoint's tensors and its export the folder's tensors bit for bit, and a bf16 export holds the
fp32 tensors rounded to nearest even.
Exits 77 (CTest: skipped) without python3-torch.
"""
import json
import math
import os
import random
import shutil
import subprocess
import sys

try:
    import numpy  # noqa: F401
    import torch
except ImportError as e:
    print(f"SKIP: python3-torch / python3-numpy not installed ({e}); apt-get install python3-torch python3-numpy")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference  # noqa: E402

MODELS = {
    # Grouped-query attention (4 query heads on 2 KV heads), rope_theta 1e6, experts narrower than
    # ffn_hidden_size, every layer MoE with softmax top-2 renormalised: MixtralForCausalLM.
    "mixtral_gqa": """
model:
  vocab_size: 320
  hidden_size: 32
  num_layers: 2
  num_heads: 4
  num_kv_heads: 2
  rope_theta: 1000000.0
  norm_eps: 1.0e-6
  ffn_hidden_size: 48
  seq_length: 48
  moe: {num_experts: 4, top_k: 2, layer_freq: 1, expert_ffn_hidden_size: 32, capacity_factor: null,
        aux_loss_coeff: 0.01}
""",
    # A leading dense layer, a shared expert, sigmoid scores with the aux-loss-free bias (non-zero after
    # training, carried as e_score_correction_bias), GQA: Glm4MoeForCausalLM.
    "glm_shared": """
model:
  vocab_size: 320
  hidden_size: 32
  num_layers: 3
  num_heads: 4
  num_kv_heads: 2
  ffn_hidden_size: 48
  seq_length: 48
  moe: {num_experts: 4, top_k: 2, layer_freq: 1, first_dense_layers: 1, expert_ffn_hidden_size: 16,
        shared_experts: 2, score_function: sigmoid, normalize_top_k: true, capacity_factor: null,
        aux_loss_coeff: 0.0, router_bias_update_rate: 0.01}
""",
    # DeepSeek-V3-style routing: 8 experts in 4 groups, top-3 from the best 2 groups, weights scaled by
    # 2.5, sigmoid scores with the bias, a sequence-wise balance loss: Glm4MoeForCausalLM's n_group,
    # topk_group, routed_scaling_factor.
    "glm_grouped": """
model:
  vocab_size: 320
  hidden_size: 32
  num_layers: 3
  num_heads: 4
  num_kv_heads: 2
  ffn_hidden_size: 48
  seq_length: 48
  moe: {num_experts: 8, top_k: 3, layer_freq: 1, first_dense_layers: 1, expert_ffn_hidden_size: 16,
        shared_experts: 1, score_function: sigmoid, normalize_top_k: true, capacity_factor: null,
        num_groups: 4, group_topk: 2, routed_scaling_factor: 2.5, load_balancing_type: seq_aux_loss,
        aux_loss_coeff: 0.001, router_bias_update_rate: 0.01}
""",
    # Qwen3-MoE: per-head q/k RMSNorm, head_dim 12 (4 heads x 12 = 48 != hidden 32), GQA, layer 1
    # dense (mlp_only_layers) with ffn_hidden_size, softmax top-2 of 8 fine-grained experts without
    # renormalisation (Qwen3MoeConfig's norm_topk_prob false), untied.
    "qwen3_moe": """
model:
  vocab_size: 320
  hidden_size: 32
  num_layers: 3
  num_heads: 4
  num_kv_heads: 2
  head_dim: 12
  qk_layernorm: true
  rope_theta: 1000000.0
  norm_eps: 1.0e-6
  ffn_hidden_size: 48
  seq_length: 48
  moe: {num_experts: 8, top_k: 2, layer_freq: 1, dense_layers: [1], expert_ffn_hidden_size: 16,
        normalize_top_k: false, capacity_factor: null, aux_loss_coeff: 0.001}
""",
    # Qwen3 (dense): q/k norm, head_dim 16 (4 x 16 = 64 != 32), GQA, tied embeddings.
    "qwen3_dense": """
model:
  vocab_size: 320
  hidden_size: 32
  num_layers: 3
  num_heads: 4
  num_kv_heads: 2
  head_dim: 16
  qk_layernorm: true
  tie_embeddings: true
  norm_eps: 1.0e-6
  ffn_hidden_size: 128
  seq_length: 48
""",
    # DeepSeek-V3: multi-head latent attention with a compressed query, YaRN (factor 4 over 12 positions,
    # so max_position_embeddings = 48 = seq_length; mscale != mscale_all_dim, so both the cos/sin factor
    # and the softmax scale differ from 1), a dense first layer, a shared expert, sigmoid scores with the
    # bias, 8 experts in 4 groups, top-3 from the best 2, weights scaled by 2.5: DeepseekV3ForCausalLM.
    "deepseek_v3": """
model:
  vocab_size: 320
  hidden_size: 32
  num_layers: 3
  num_heads: 4
  q_lora_rank: 16
  kv_lora_rank: 12
  qk_nope_head_dim: 4
  qk_rope_head_dim: 12
  rope_theta: 100.0
  v_head_dim: 6
  rope_scaling: {factor: 4, original_max_position_embeddings: 12, mscale: 1.0, mscale_all_dim: 0.8}
  norm_eps: 1.0e-6
  ffn_hidden_size: 48
  seq_length: 48
  moe: {num_experts: 8, top_k: 3, layer_freq: 1, first_dense_layers: 1, expert_ffn_hidden_size: 16,
        shared_experts: 1, score_function: sigmoid, normalize_top_k: true, capacity_factor: null,
        num_groups: 4, group_topk: 2, routed_scaling_factor: 2.5, aux_loss_coeff: 0.0,
        router_bias_update_rate: 0.01}
""",
}
# The tied dense model needs more steps before its greedy tokens stop repeating one token.
STEPS = {"qwen3_dense": 200, "deepseek_v3": 150}
ARCH = {"mixtral_gqa": "MixtralForCausalLM", "glm_shared": "Glm4MoeForCausalLM", "glm_grouped": "Glm4MoeForCausalLM",
        "qwen3_moe": "Qwen3MoeForCausalLM", "qwen3_dense": "Qwen3ForCausalLM", "deepseek_v3": "DeepseekV3ForCausalLM"}


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def corpus(path):
    rng = random.Random(7)
    words = ("the quick brown fox jumps over a lazy dog while seven wizards quietly hex "
             "every jovial mixture of tokens experts route to").split()
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(8, 40))) for _ in range(400)]
    with open(path, "w") as f:
        f.write("\n%\n".join(docs) + "\n")


def main():
    moe4d, mpiexec, work, variant = sys.argv[1:5]
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    corpus(f"{work}/corpus.txt")
    run([moe4d, "prepare", "--input", f"{work}/corpus.txt", "--doc-separator", "percent", "--output", f"{work}/data", "--tokenizer", "bpe",
         "--vocab-size", "300", "--valid-fraction", "0.1"])
    with open(f"{work}/model.yaml", "w") as f:
        f.write(MODELS[variant] + f"""
parallel_config: {{data_parallel: 1}}
train: {{global_batch_size: 8, steps: {STEPS.get(variant, 60)}, lr: 5.0e-3, min_lr: 3.0e-4, warmup_steps: 3, seed: 5, eval_batches: 2}}
data: {{train: {work}/data/train.bin, valid: {work}/data/valid.bin, tokenizer: {work}/data/tokenizer.model}}
checkpoint: {{dir: {work}/ckpt, interval: 0, keep: 1}}
""")
    run([moe4d, "train", f"{work}/model.yaml", "--quiet"])
    # A small shard size so that the folder is sharded with an index, as save_pretrained does.
    run([moe4d, "ckpt", "export", f"{work}/ckpt", "--format", "hf", f"{work}/hf", "--max-shard-size", "40KB"])
    assert os.path.exists(f"{work}/hf/model.safetensors.index.json"), os.listdir(f"{work}/hf")

    ev = json.loads(run([moe4d, "eval", f"{work}/ckpt", "--data", f"{work}/data/valid.bin", "--batches", "2",
                         "--json"]))
    qwen = variant.startswith("qwen3")
    split = ["--tp", "2"] if qwen else ["--ep", "2"]  # Qwen3: TP over heads with the replicated q/k norms
    ev2 = json.loads(run([mpiexec, "--oversubscribe", "--bind-to", "none", "-np", "2", moe4d, "eval", f"{work}/ckpt",
                          "--data", f"{work}/data/valid.bin", "--batches", "2"] + split + ["--json"]))
    prompt = "the quick brown fox"
    gen = json.loads(run([moe4d, "generate", f"{work}/ckpt", "--prompt", prompt, "--temperature", "0",
                          "--tokens", "32", "--json"]))
    gen_uncached = json.loads(run([moe4d, "generate", f"{work}/ckpt", "--prompt", prompt, "--temperature", "0",
                                   "--tokens", "32", "--json", "--no-kv-cache"]))

    model = hf_reference.HfReference(f"{work}/hf")
    config = model.config
    failures = []
    if config["architectures"] != [ARCH[variant]]:
        failures.append(f"architectures {config['architectures']}, expected [{ARCH[variant]}]")
    with open(f"{work}/hf/generation_config.json") as f:
        eos = json.load(f)["eos_token_id"]
    if eos != 1 or config["eos_token_id"] != 1:
        failures.append(f"eos_token_id {eos} / {config['eos_token_id']}, expected moe4d's </s> id 1")
    tokens = hf_reference.read_shard(f"{work}/data/valid.bin")
    with torch.no_grad():
        ref_loss = hf_reference.eval_loss(model, tokens, ev["windows"], config["max_position_embeddings"])
        ref_ids = model.greedy(gen["prompt_ids"], 32, config["tokenizer_vocab_size"], eos)
        # Negative control: the exported weights read with the other RoPE convention must miss the
        # loss by far more than the tolerance, or the comparison could not catch a wrong permutation.
        model.rotate = hf_reference.rotate_pairs
        control_loss = hf_reference.eval_loss(model, tokens, ev["windows"], config["max_position_embeddings"])
        model.rotate = hf_reference.rotate_half
    rel = abs(ev["loss"] - ref_loss) / ref_loss
    print(f"loss: moe4d eval {ev['loss']:.8f} ({split} {ev2['loss']:.8f}), reference {ref_loss:.8f}, rel {rel:.2e}")
    print(f"greedy moe4d     {gen['ids']}\ngreedy reference {ref_ids}")
    if not rel < 1e-5:
        failures.append(f"eval loss {ev['loss']} vs reference {ref_loss}: relative difference {rel:.2e} >= 1e-5")
    control = abs(control_loss - ref_loss) / ref_loss
    print(f"negative control (pairwise RoPE on the exported rows): loss {control_loss:.8f}, rel {control:.2e}")
    if not control > 1e-3:
        failures.append(f"the other RoPE convention gives nearly the same loss (rel {control:.2e}): too weak a check")
    if abs(ev2["loss"] - ev["loss"]) / ev["loss"] >= 1e-5:
        failures.append(f"eval on {split} {ev2['loss']} vs single rank {ev['loss']}")
    if gen["ids"] != ref_ids:
        failures.append("greedy tokens differ from the reference")
    if variant in ("glm_shared", "glm_grouped", "deepseek_v3"):
        bias = [b for n, t in model.t.items() if n.endswith("e_score_correction_bias") for b in t.tolist()]
        if not any(b != 0 for b in bias):
            failures.append("the trained router bias did not reach e_score_correction_bias (all zero)")
    if gen["ids"] != gen_uncached["ids"]:
        failures.append(f"KV-cached tokens {gen['ids']} differ from uncached {gen_uncached['ids']}")
    if len(gen["ids"]) != 32 and gen["stop"] != "eos":
        failures.append(f"generate stopped after {len(gen['ids'])} tokens ({gen['stop']})")

    # Import gives back the checkpoint's tensors exactly.
    run([moe4d, "ckpt", "import", "--format", "hf", f"{work}/hf", "--output", f"{work}/imported", "--data",
         f"{work}/data/train.bin"])
    ckpt_dir = open(f"{work}/ckpt/latest").read().strip()
    original = hf_reference.read_safetensors(f"{work}/ckpt/{ckpt_dir}/model.safetensors")
    imported = hf_reference.read_safetensors(f"{work}/imported/step_00000000/model.safetensors")
    if set(original) != set(imported):
        failures.append(f"imported tensor names differ: {sorted(set(original) ^ set(imported))}")
    for name in original:
        if name in imported and not torch.equal(original[name], imported[name]):
            failures.append(f"imported {name} differs from the original")
    ev3 = json.loads(run([moe4d, "eval", f"{work}/imported", "--data", f"{work}/data/valid.bin", "--batches", "2",
                          "--json"]))
    if ev3["loss"] != ev["loss"]:
        failures.append(f"eval of the imported checkpoint {ev3['loss']} != {ev['loss']}")

    # Export of the imported checkpoint gives back the folder's tensors bit for bit (import -> export).
    run([moe4d, "ckpt", "export", f"{work}/imported", "--format", "hf", f"{work}/hf_again", "--max-shard-size",
         "40KB"])
    _, exported = hf_reference.load_folder(f"{work}/hf")
    _, again = hf_reference.load_folder(f"{work}/hf_again")
    if set(exported) != set(again):
        failures.append(f"re-exported tensor names differ: {sorted(set(exported) ^ set(again))}")
    mismatched = [n for n in exported if n in again and not torch.equal(exported[n], again[n])]
    if mismatched:
        failures.append(f"re-exported tensors differ from the first export: {mismatched[:5]}")
    # bf16 export: each tensor is the fp32 one rounded to nearest even (ties to even), torch_dtype bfloat16.
    run([moe4d, "ckpt", "export", f"{work}/ckpt", "--format", "hf", f"{work}/hf_bf16", "--dtype", "bf16"])
    bf16_config, bf16 = hf_reference.load_folder(f"{work}/hf_bf16")
    if bf16_config.get("torch_dtype") != "bfloat16":
        failures.append(f"bf16 export: torch_dtype {bf16_config.get('torch_dtype')}")
    for name, t in exported.items():
        want = t.to(torch.float32).to(torch.bfloat16).to(torch.float64)
        if name not in bf16 or not torch.equal(bf16[name], want):
            failures.append(f"bf16 export: {name} is not the fp32 tensor rounded to bf16")
            break
    with torch.no_grad():
        bf16_loss = hf_reference.eval_loss(hf_reference.HfReference(f"{work}/hf_bf16"), tokens, ev["windows"],
                                           config["max_position_embeddings"])
    print(f"bf16 export: reference loss {bf16_loss:.6f} (fp32 {ref_loss:.6f})")
    if not abs(bf16_loss - ref_loss) / ref_loss < 2e-2:
        failures.append(f"bf16 export loss {bf16_loss} far from fp32 {ref_loss}")

    # train.init_from: training starts from the imported weights (fresh optimizer), in any layout.
    step1 = {}
    for layout, ranks in (("data_parallel: 1", 1),
                          ("tensor_parallel: 2, sequence_parallel: true" if qwen else "expert_parallel: 2", 2)):
        name = f"init_{ranks}"
        with open(f"{work}/{name}.yaml", "w") as f:
            f.write(MODELS[variant] + f"""
parallel_config: {{{layout}}}
train: {{global_batch_size: 8, steps: 2, lr: 1.0e-3, seed: 9, init_from: {work}/imported,
         metrics_file: {work}/{name}.jsonl}}
data: {{train: {work}/data/train.bin, tokenizer: {work}/data/tokenizer.model}}
""")
        launcher = [mpiexec, "--oversubscribe", "--bind-to", "none", "-np", str(ranks)] if ranks > 1 else []
        run(launcher + [moe4d, "train", f"{work}/{name}.yaml", "--quiet"])
        with open(f"{work}/{name}.jsonl") as f:
            step1[ranks] = json.loads(f.readline())["loss"]
    print(f"train.init_from step-1 loss: single rank {step1[1]:.6f}, 2 ranks {step1[2]:.6f}")
    if abs(step1[1] - step1[2]) / step1[1] >= 1e-5:
        failures.append(f"train.init_from: 2-rank step-1 loss {step1[2]} != single rank {step1[1]}")
    if not step1[1] < 0.8 * math.log(config["vocab_size"]):  # a fresh model starts near ln(vocab)
        failures.append(f"train.init_from: step-1 loss {step1[1]} is not that of the trained weights")

    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
