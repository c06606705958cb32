"""trtllm-serve's --config / --extra_llm_api_options YAML (kvplan/engines/trtllm/options.py): its values reach
the plan, flags typed on the command line win over it (TensorRT-LLM >= 1.2, NVIDIA/TensorRT-LLM#14812), and a
bad file is one line naming file:line, exit 2.

Pool figures: Qwen/Qwen2.5-7B on an H100 (85,018,877,624 B) under kvplan's TensorRT-LLM rule, as derived in
tests/test_trtllm_rules.py (the model's max_seq_len of 131,072 changes nothing there: one dummy request of 8,192
tokens, an estimation pool of at least max_batch_size blocks that holds the 128-request graph): weights
15,231,233,024 + activations 1,107,296,256 + CUDA graphs 116,785,152 + CUDA context 654,982,512 leave
67,908,580,680 B free; 57,344 B of KV per token (bf16)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.api import estimates
from kvplan.deployment.front_doors import from_cli
from kvplan.deployment.launch import parse_command
from kvplan.errors import KvplanError

MODEL = "Qwen/Qwen2.5-7B"


def write(tmp_path: Path, text: str, name: str = "extra.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def plan_of(deployment):
    return estimates(deployment, (), False, None)[0].plan


def pasted(*words: str):
    return from_cli({"gpu": ("h100", "--gpu")}, [], None, ["trtllm-serve", MODEL, *words], environ={})


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", *args], capture_output=True, text=True,
                          timeout=60)


def test_max_tokens_caps_the_pool(tmp_path):
    # kv_cache_config.max_tokens 100,001 is below the 1,065,808 tokens the 0.9 fraction gives: whole blocks of
    # 100,001 tokens (resource_manager.py calculate_max_num_blocks rounds down) = 3,125 blocks = 100,000 tokens
    config = write(tmp_path, "kv_cache_config:\n  max_tokens: 100001\n")
    plan = plan_of(pasted("--config", config))
    assert plan.capacity.num_blocks == 3_125 and plan.capacity.tokens == 100_000


def test_free_gpu_memory_fraction_changes_the_pool(tmp_path):
    # 67,908,580,680 x 0.5 = 33,954,290,340 B // 57,344 = 592,115 tokens -> 18,503 whole blocks of 32
    config = write(tmp_path, "kv_cache_config:\n  free_gpu_memory_fraction: 0.5\n")
    plan = plan_of(pasted("--extra_llm_api_options", config))
    assert plan.capacity.num_blocks == 18_503 and plan.capacity.tokens == 592_096


def test_tokens_per_block_sets_the_block(tmp_path):
    # 64-token blocks: the estimation pool (at least max_batch_size 2,048 blocks) still holds the 128-request graph,
    # so the free memory is the same. 0.9 (0.8999999761581421 as a C++ float) of 67,908,580,680 = 61,117,720,992 B
    # // 57,344 = 1,065,808 tokens -> 16,653 whole blocks of 64 = 1,065,792 tokens
    config = write(tmp_path, "kv_cache_config:\n  tokens_per_block: 64\n")
    plan = plan_of(pasted("--config", config))
    assert plan.capacity.num_blocks == 16_653 and plan.capacity.tokens == 1_065_792


def test_max_gpu_total_bytes_zero_is_no_cap(tmp_path):
    # KvCacheConfig.max_gpu_total_bytes defaults to 0, meaning no cap: the fraction's 33,306 blocks stay
    config = write(tmp_path, "kv_cache_config:\n  max_gpu_total_bytes: 0\n")
    assert plan_of(pasted("--config", config)).capacity.num_blocks == 33_306


def test_host_cache_size_is_a_host_tier_beside_the_unchanged_pool(tmp_path):
    # kv_cache_config.host_cache_size 100 GiB = 107,374,182,400 B per rank. KVCacheManager.calculate_max_num_blocks
    # (resource_manager.py as stored in 2026): 107,374,182,400 // 57,344 = 1,872,457 tokens // 32 = 58,514
    # secondary blocks = 1,872,448 tokens, in capacity.offload_tokens; the GPU pool keeps its 33,306 blocks.
    config = write(tmp_path, "kv_cache_config:\n  host_cache_size: 107374182400\n")
    plan = plan_of(pasted("--config", config))
    assert plan.capacity.num_blocks == 33_306 and plan.capacity.offload_tokens == 1_872_448
    assert any(note.startswith("host KV cache (kv_cache_config.host_cache_size 107,374,182,400 B per rank)")
               for note in plan.notes)
    # 0 (no host pool) and the default leave none
    none = write(tmp_path, "kv_cache_config:\n  host_cache_size: 0\n", "none.yaml")
    assert plan_of(pasted("--config", none)).capacity.offload_tokens == 0


def test_host_cache_size_must_be_whole_bytes(tmp_path):
    config = write(tmp_path, "kv_cache_config:\n  host_cache_size: 1.5\n")
    with pytest.raises(KvplanError, match="whole number of bytes") as caught:
        plan_of(pasted("--config", config))
    assert caught.value.where == f"{config}:2: kv_cache_config.host_cache_size"


@pytest.mark.parametrize(("text", "message"), [
    ("kv_cache_config:\n  host_cache_size: 1000000000000000000000000000000\n", "whole number of bytes up to"),
    ("enable_attention_dp: 7\n", "enable_attention_dp: expected true or false, got 7"),
])
def test_absurd_options_are_one_line_errors(tmp_path, text, message):
    # 10^30 bytes was refused as a GiB figure with no unit; a non-boolean enable_attention_dp was ignored
    with pytest.raises(KvplanError, match=message):
        plan_of(pasted("--config", write(tmp_path, text)))


def test_a_bad_tp_size_beside_attention_dp_is_refused_under_its_own_flag():
    # the TP size was copied into --enable_attention_dp's value and refused there ("--enable_attention_dp: must
    # be within [1, 4,096], got 0")
    with pytest.raises(KvplanError, match="must be within") as caught:
        plan_of(pasted("--tp_size", "0", "--enable_attention_dp"))
    assert caught.value.where == "--tp_size"



def test_flag_on_the_command_line_wins_over_the_file(tmp_path):
    # explicit CLI > YAML > defaults (update_llm_args_with_extra_dict with explicit_cli_keys, TensorRT-LLM 1.2)
    config = write(tmp_path, "max_batch_size: 64\nmax_num_tokens: 4096\nkv_cache_config:\n"
                             "  free_gpu_memory_fraction: 0.5\n")
    dep = parse_command(["trtllm-serve", MODEL, "--config", config, "--max_batch_size", "32",
                         "--free_gpu_memory_fraction", "0.7"]).deployment()
    assert dep.max_num_seqs == 32 and dep.gpu_memory_utilization == 0.7
    assert dep.max_num_batched_tokens == 4096  # not on the command line: the file's, over the default 8192
    assert dep.where("max_num_batched_tokens") == f"{config}:2: max_num_tokens"
    assert f"--max_batch_size 32 wins over {config}:1: max_batch_size 64" in dep.notes


def test_flags_typed_to_kvplan_win_over_its_config_file(tmp_path):
    config = write(tmp_path, "max_seq_len: 8192\ntensor_parallel_size: 2\n")
    dep = from_cli({"engine": ("trtllm", "--engine"), "model": (MODEL, "--model")}, ["--tp_size", "4"], config,
                   None, environ={})
    assert dep.tensor_parallel_size == 4 and dep.max_model_len == 8192


def test_known_keys_are_noted_or_listed(tmp_path):
    config = write(tmp_path, "kv_cache_config:\n  enable_block_reuse: false\ncuda_graph_config:\n"
                             "  enable_padding: true\n  max_batch_size: 64\nprint_iter_log: true\n"
                             "moe_expert_parallel_size: 2\n")
    dep = parse_command(["trtllm-serve", MODEL, "--config", config]).deployment()
    notes = dep.notes
    # kv_cache_config.enable_block_reuse is read (DeepSeek-V4's FP8 context-MLA workspace, trtllm/deepseek_v4.py)
    assert dep.enable_prefix_caching is False and dep.where("enable_prefix_caching").endswith(
        "extra.yaml:2: kv_cache_config.enable_block_reuse")
    assert f"{config}: not memory-relevant: print_iter_log" in notes
    assert any(n.startswith(f"{config}:3: cuda_graph_config is accepted but not modelled (CUDA graphs") for n in notes)
    assert f"{config}:7: moe_expert_parallel_size is accepted but not modelled" in notes


def test_empty_file_is_no_options(tmp_path):
    # update_llm_args_with_extra_options reads an empty file as {}: the defaults' 33,306 blocks
    config = write(tmp_path, "# nothing yet\n")
    assert plan_of(pasted("--config", config)).capacity.num_blocks == 33_306


@pytest.mark.parametrize(("text", "where", "message"), [
    ("max_batch_size: 8\nkv_cache_config:\n  max_token: 100\n", ":3: kv_cache_config.max_token",
     "did you mean kv_cache_config.max_tokens?"),
    ("max_batch_sise: 8\n", ":1: max_batch_sise", "did you mean max_batch_size?"),
    ("kv_cache_config:\n  max_tokens: 1\n  max_tokens: 2\n", ":3", "given twice (lines 2 and 3)"),
    ("- max_batch_size: 8\n", ":1", "expected a mapping of LLM-API options"),
    ("kv_cache_config: 0.9\n", ":1: kv_cache_config", "expected a mapping of kv_cache_config fields"),
    ("max_batch_size: lots\n", ":1: max_batch_size", ""),
    ("kv_cache_config:\n  free_gpu_memory_fraction: 1.5\n", ":2: kv_cache_config.free_gpu_memory_fraction",
     "must be within (0, 1]"),
])
def test_bad_files_are_one_line_errors(tmp_path, text, where, message):
    config = write(tmp_path, text)
    with pytest.raises(KvplanError) as caught:
        parse_command(["trtllm-serve", MODEL, "--config", config]).deployment()
    assert str(caught.value).startswith(config + where + ": ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_billion_laughs_is_refused_with_its_line(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]" for i in range(8)]
    config = write(tmp_path, "\n".join(lines) + "\n")
    result = run_cli("estimate", "--gpu", "h100", "--", "trtllm-serve", MODEL, "--config", config)
    assert result.returncode == 2 and result.stdout == ""
    error = result.stderr.strip()
    assert error.startswith(f"kvplan: error: {config}:") and "expands to more than" in error
    assert int(error.split(f"{config}:")[1].split(":")[0]) in range(1, 10) and len(error.splitlines()) == 1


def test_bad_key_exits_2_naming_file_line_and_key(tmp_path):
    config = write(tmp_path, "kv_cache_config:\n  max_tokns: 100\n")
    result = run_cli("estimate", "--gpu", "h100", "--engine", "trtllm", "--model", MODEL, "--config", config)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().startswith(f"kvplan: error: {config}:2: kv_cache_config.max_tokns: unknown")


def test_same_plan_through_both_front_doors(tmp_path):
    # kv_cache_config.max_tokens 100,001 -> 3,125 blocks either way
    config = write(tmp_path, "kv_cache_config:\n  max_tokens: 100001\nmax_seq_len: 8192\n")
    through_option = run_cli("estimate", "--gpu", "h100", "--engine", "trtllm", "--model", MODEL, "--config",
                             config, "--json")
    through_paste = run_cli("estimate", "--gpu", "h100", "--json", "--", "trtllm-serve", MODEL, "--config", config)
    assert through_option.returncode == 0 and through_paste.returncode == 0, through_option.stderr
    first, second = json.loads(through_option.stdout), json.loads(through_paste.stdout)
    assert first["capacity"]["num_blocks"] == 3_125 and first["capacity"] == second["capacity"]
    assert first["memory"] == second["memory"]


def test_attention_dp_keeps_every_kv_head_on_every_rank(tmp_path):
    # KVCacheManager.get_cache_size_per_token (tensorrt_llm/_torch/pyexecutor/resource_manager.py as stored in 2026,
    # and _util.py _get_cache_size_per_token at d8ae02ca): tp_size = 1 if mapping.enable_attention_dp. Qwen2.5-7B
    # at TP 4: 2 x 28 layers x 4 KV heads x 128 x 2 B = 57,344 B a token on each rank, not 4 x less (14,336).
    plain = plan_of(pasted("--tp_size", "4", "--max_seq_len", "8192"))
    flag = plan_of(pasted("--tp_size", "4", "--enable_attention_dp", "--max_seq_len", "8192"))
    assert plain.layout.bytes_per_token == 14_336 and flag.layout.bytes_per_token == 57_344
    assert any(note.startswith("--enable_attention_dp: attention DP: each of the 4 ranks") for note in flag.notes)
    # the options file's enable_attention_dp, beside its tensor_parallel_size
    config = write(tmp_path, "tensor_parallel_size: 4\nenable_attention_dp: true\nmax_seq_len: 8192\n")
    from_file = plan_of(pasted("--config", config))
    assert from_file.layout.bytes_per_token == 57_344
    off = write(tmp_path, "tensor_parallel_size: 4\nenable_attention_dp: false\n", "off.yaml")
    assert plan_of(pasted("--config", off)).layout.bytes_per_token == 14_336


def test_lora_device_cache_comes_out_of_the_kv_memory(tmp_path):
    # Qwen2.5-7B (hidden 3,584, 28 heads / 4 KV heads of 128, MLP 18,944) on an H100, TP 1, max_seq_len 32,768.
    # Each module's one-rank size is in + out (runtime/loraModule.cpp createLoraModules): attn_q 3,584 + 3,584 =
    # 7,168, attn_k and attn_v 3,584 + 512 = 4,096, attn_dense 7,168, mlp_h_to_4h, mlp_gate and mlp_4h_to_h
    # 3,584 + 18,944 = 22,528: page width 4,096, largest 22,528 (ceil 6 widths). max_loras 4, rank 64
    # (_util.py create_py_executor_instance): 64 x 28 layers x 7 modules x 4 = 50,176 module layers x 6 =
    # 301,056 slots; a page holds max(8 x (2 + 1 + 1 + 2 + 6 + 6 + 6) x 28, ceil(64 x 22,528 / 4,096)) = 5,376
    # (peftCacheManager.cpp getPageManagerConfig): 56 pages x 5,376 x 4,096 x 2 B = 2,466,250,752 B, allocated
    # before the KV cache is sized. Free 85,018,877,624 - 17,697,483,776 - 1,107,296,256 - 116,785,152 - 654,982,512
    # = 65,442,329,928 x 0.9f = 58,898,095,374 // 57,344 = 1,027,101 -> 32,096 blocks = 1,027,072 tokens.
    config = write(tmp_path, "lora_config:\n  max_lora_rank: 64\n  max_loras: 4\n  max_cpu_loras: 4\n"
                             "  lora_target_modules: [attn_q, attn_k, attn_v, attn_dense, mlp_h_to_4h, mlp_gate,"
                             " mlp_4h_to_h]\n")
    plan = plan_of(pasted("--config", config, "--max_seq_len", "32768"))
    assert plan.memory.weights_bytes == 15_231_233_024 + 2_466_250_752
    assert plan.capacity.tokens == 1_027_072
    # without max_loras: PeftCacheConfig.device_cache_percent 0.02 of the free 69,132,662,088 B (after weights and
    # context) / (4,096 x 2) = 168,780 slots; q_proj and v_proj (attn_q, attn_v, attn_k added as missing):
    # 7,168 / 4,096 / 4,096, a page max(8 x 4 x 28, ceil(64 x 7,168 / 4,096)) = 896 slots: 189 pages = 1,387,266,048 B
    named = write(tmp_path, "enable_lora: true\nlora_config:\n  lora_target_modules: [q_proj, v_proj]\n", "hf.yaml")
    assert plan_of(pasted("--config", named)).memory.weights_bytes == 15_231_233_024 + 1_387_266_048


def test_lora_without_target_modules_is_refused(tmp_path):
    config = write(tmp_path, "enable_lora: true\n")
    with pytest.raises(KvplanError, match="takes the LoRA target modules from the adapters"):
        plan_of(pasted("--config", config))


def test_mamba_ssm_cache_dtype_sizes_the_states(tmp_path):
    # kv_cache_config.mamba_ssm_cache_dtype bfloat16 (validate_and_set_mamba_ssm_cache_dtype, model_loader.py) for
    # Nemotron-3-Nano-30B-A3B BF16, max_batch_size 64, on an H100 at 32K: 23 layers x (36,864 conv + 64 x 64 x 128
    # x 2 B SSM) = 24,965,120 B a request, 65 x that = 1,622,732,800 B of fixed cost; the memory of
    # tests/test_trtllm_rules.py's Mamba test, 18,247,303,237 B: (18,247,303,237 - 1,622,732,800) // 6,144
    # = 2,705,822 tokens -> 84,556 blocks = 2,705,792 tokens (float32 states, the config's: 2,450,656)
    nano = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
    config = write(tmp_path, "kv_cache_config:\n  mamba_ssm_cache_dtype: bfloat16\n  mamba_state_config:\n"
                             "    periodic_snapshot_interval: 256\n")
    dep = from_cli({"gpu": ("h100", "--gpu")}, [], None, ["trtllm-serve", str(nano), "--max_batch_size", "64",
                                                         "--max_seq_len", "32768", "--config", config], environ={})
    plan = plan_of(dep)
    assert plan.capacity.num_blocks == 84_556 and plan.capacity.tokens == 2_705_792
    assert any("mamba_state_config is accepted but not modelled" in note for note in plan.notes)
