"""The front doors from the command line, and the wrong answers a new user found (each failed before)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kvplan.units import GiB


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def plan_of(*args):
    split = args.index("--") if "--" in args else len(args)  # kvplan's own flags go before a pasted command
    result = run("estimate", *args[:split], "--json", *args[split:])
    assert result.returncode in (0, 1), result.stderr
    return result, json.loads(result.stdout)


def one_line_error(result, *fragments):
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == "" and "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_pasted_vllm_serve_equals_kvplan_flags():
    _, pasted = plan_of("--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "32768",
                        "-tp", "2", "--port", "8000", "--served-model-name", "qwen", "--trust-remote-code")
    _, flags = plan_of("--gpu", "h100", "--model", "Qwen/Qwen2.5-7B", "--max-model-len", "32768", "-tp", "2")
    assert pasted["capacity"] == flags["capacity"] and pasted["memory"] == flags["memory"]
    assert pasted["gpu"]["count"] == 2 and pasted["parallel"]["tensor"] == 2
    assert any(note.startswith("not memory-relevant: --port, --served-model-name, --trust-remote-code")
               for note in pasted["notes"])


def test_pasted_sglang_command_sets_the_engine():
    _, plan = plan_of("--gpu", "h100", "--", "python", "-m", "sglang.launch_server", "--model-path",
                      "Qwen/Qwen2.5-7B", "--tp-size", "2", "--mem-fraction-static", "0.8", "--context-length", "8192")
    assert plan["engine"]["name"] == "sglang" and plan["engine"]["gpu_memory_utilization"] == 0.8
    # SGLang, per rank: pool = free after load - free before load x (1 - 0.8). H100 total 85,018,877,624 B less the
    # 0.61 GiB CUDA context (654,982,512) = 84,363,895,112 B free before load; weights 7,615,616,512 params x 2 B /
    # TP 2 = 7,615,616,512 B; held back 84,363,895,112 x 0.2 = 16,872,779,022.4;
    # pool int(84,363,895,112 - 7,615,616,512 - 16,872,779,022.4) = 59,875,499,577 B in 1-token pages of
    # 2 x 28 layers x (4 KV heads / 2) x 128 x 2 B = 28,672 B
    assert plan["memory"]["weights_bytes"] == 7_615_616_512
    assert plan["memory"]["kv_cache_bytes"] == 59_875_499_577
    assert plan["capacity"]["num_blocks"] == 59_875_499_577 // 28_672 == 2_088_291


def test_config_file_and_explicit_flags(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-7B\nmax-model-len: 16384\ngpu_memory_utilization: 0.8\nport: 8000\n")
    _, plan = plan_of("--gpu", "h100", "--config", str(config), "--max-model-len", "8192")
    assert plan["engine"]["max_model_len"] == 8192  # the flag wins over the file
    assert plan["engine"]["gpu_memory_utilization"] == 0.8  # the file's value stays
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: Qwen/Qwen2.5-7B\nmax-num-seqs: -4\n")
    one_line_error(run("estimate", "--gpu", "h100", "--config", str(bad)), f"{bad}:2: max-num-seqs", "got -4")


def test_unknown_and_renamed_flags():
    one_line_error(run("estimate", "--gpu", "h100", "--model", "Qwen/Qwen2.5-7B", "--max-model-lne", "8192"),
                   "--max-model-lne", "did you mean --max-model-len")
    one_line_error(run("estimate", "--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen2.5-7B", "--weights-memory",
                       "10GB"), "--weights-memory", "kvplan's own flag")


def test_tensor_parallel_size_vllm_refuses():
    # Qwen2.5-7B: 28 attention heads divide by 7, but its 4 KV heads and 7 do not divide one another
    one_line_error(run("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "-tp", "7"), "-tp", "4 KV heads")
    # Llama-3.1-8B: 32 heads are not divisible by 3 (vLLM's own message)
    one_line_error(run("estimate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--tensor_parallel_size=3"),
                   "--tensor_parallel_size=3", "Total number of attention heads (32) must be divisible by tensor "
                   "parallel size (3).")


def test_kv_cache_memory_larger_than_the_gpu_does_not_fit():
    # RTX 3090: 23.56 GiB in all; 30 GiB of KV plus 14.19 GiB of weights cannot be allocated
    result, plan = plan_of("--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "8192",
                           "--kv-cache-memory-bytes", "30GiB")
    assert result.returncode == 1 and plan["capacity"]["fits"] is False
    assert "would fail to allocate" in plan["error"]


def test_ladder_and_longest_fit_never_exceed_max_model_len():
    # Qwen2.5-7B fits 8,192 tokens easily on an H100 (about 1.1M tokens of pool): the longest fit is 8,192,
    # not the pool's size, and rungs asked above 8,192 are shown at 8,192
    _, plan = plan_of("--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "8192",
                      "--context", "4K,8K,32K,128K")
    assert plan["capacity"]["max_model_len_that_fits"] == 8192
    assert [rung["context"] for rung in plan["capacity"]["ladder"]] == [4096, 8192]
    assert any("contexts above max_model_len 8,192" in note for note in plan["notes"])


def test_no_fp8_levers_without_fp8_hardware():
    # The README's case: Qwen2.5-7B at 131,072 tokens does not fit on an RTX 3090 (Ampere, no FP8 units)
    _, ampere = plan_of("--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090")
    assert ampere["levers"] and not any("fp8" in lever["flags"] for lever in ampere["levers"])
    # the same on an RTX 4090 (Ada, FP8) proposes the FP8 KV cache
    _, ada = plan_of("--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx4090")
    assert any(lever["flags"] == "--kv-cache-dtype fp8" for lever in ada["levers"])


def test_bfloat16_on_pre_ampere_gpus():
    # T4 (compute capability 7.5): a bfloat16 checkpoint is served in float16, as vLLM does
    _, plan = plan_of("--model", "Qwen/Qwen2.5-0.5B", "--gpu", "t4", "--max-model-len", "4096")
    assert plan["kv"]["dtype"] == "float16"
    assert any("no bfloat16" in note for note in plan["notes"])
    one_line_error(run("estimate", "--model", "Qwen/Qwen2.5-0.5B", "--gpu", "t4", "--dtype", "bfloat16"),
                   "--dtype", "compute capability of at least 8.0")


def test_quantization_checks():
    one_line_error(run("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "-q", "bogus"), "-q",
                   "invalid choice 'bogus'", "awq")
    one_line_error(run("estimate", "--model", "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "--gpu", "h100",
                       "-tp", "2", "--quantization", "awq"), "--quantization",
                   "does not match the quantization method specified in the `quantization` argument (awq)")


@pytest.mark.parametrize("config, fragment", [
    ('{"method": "eagle9"}', "unknown method 'eagle9'"),
    ('{"method": "ngram", "num_speculative_tokens": 0}', "positive integer"),
    ('{"method": "ngram"}', "required for the ngram method"),
    ('{"num_speculative_tokens": 3}', "needs a 'method'"),
])
def test_speculative_config_is_validated(config, fragment):
    one_line_error(run("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--speculative-config", config),
                   "--speculative-config", fragment)


def test_draft_model_is_counted_with_its_own_layers():
    common = ("--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--max-model-len", "8192")
    _, alone = plan_of(*common)
    _, drafted = plan_of(*common, "--speculative-config",
                         '{"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", '
                         '"num_speculative_tokens": 4}')
    # target: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token; the 1B draft adds its own
    # 16 layers x 2 x 8 KV heads x 64 head dim x 2 B = 32,768 B per token
    assert alone["kv"]["bytes_per_token"] == 131_072
    assert drafted["kv"]["bytes_per_token"] == 131_072 + 32_768
    # and its weights: Llama-3.2-1B's 1,235,814,400 parameters in bf16, tied embeddings counted once
    assert drafted["memory"]["weights_bytes"] - alone["memory"]["weights_bytes"] == 1_235_814_400 * 2


def test_engine_wording():
    for engine, line in (("vllm", "as vLLM logs 'GPU KV cache size'"),
                         ("sglang", "as SGLang logs 'KV Cache is allocated. #tokens: N'"),
                         ("trtllm", "as TensorRT-LLM logs 'Allocated ... GiB for max tokens in paged KV cache (N)'")):
        result = run("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "8192",
                     "--engine", engine)
        assert result.returncode == 0 and line in result.stdout, engine
        assert "None" not in result.stdout, engine
    sglang = run("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--engine", "sglang", "--max-model-len",
                 "8192")
    assert "mem_fraction_static" in sglang.stdout and "context_length 8,192" in sglang.stdout


def test_several_gpus_exit_0_only_when_every_gpu_fits():
    # Llama-3.1-8B at 131,072 tokens: 16 GiB of KV per request fits an H100 but not an RTX 3090
    result, plans = plan_of("--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100,rtx3090")
    assert [p["capacity"]["fits"] for p in plans] == [True, False] and result.returncode == 1
    result, plans = plan_of("--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100,h200")
    assert all(p["capacity"]["fits"] for p in plans) and result.returncode == 0


def test_version_module_and_schema():
    from kvplan import __version__

    assert run("--version").stdout == f"kvplan {__version__}\n"
    schema = json.loads(run("estimate", "--schema").stdout)
    assert "max_model_len" in schema["properties"]
    assert "--install-completion" in run("--help").stdout  # typer's shell completion is on


def test_sglang_names_typed_to_kvplan():
    # with --engine sglang, SGLang's own names work on kvplan's command line too
    _, plan = plan_of("--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--engine", "sglang", "--mem-fraction-static",
                      "0.8", "--context-length", "8K", "--chunked-prefill-size", "4096")
    assert (plan["engine"]["gpu_memory_utilization"], plan["engine"]["max_model_len"],
            plan["engine"]["max_num_batched_tokens"]) == (0.8, 8192, 4096)


def test_request_bytes_are_in_gib_in_the_error():
    # Llama-3.1-70B on one RTX 3090 cannot even hold its weights: no memory left for KV blocks
    result, plan = plan_of("--model", "meta-llama/Llama-3.1-70B", "--gpu", "rtx3090")
    assert result.returncode == 1 and "no memory is left for KV cache blocks" in plan["error"]
    assert plan["memory"]["kv_cache_bytes"] < 0 and plan["memory"]["total_bytes"] < 24 * GiB


def test_hf_overrides_change_the_config_read():
    # Qwen2.5-7B's config says max_position_embeddings 131,072; the override makes vLLM derive 4,096
    _, plan = plan_of("--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--hf-overrides",
                      '{"max_position_embeddings": 4096}')
    assert plan["engine"]["max_model_len"] == 4096
    # 14 of 28 layers: half the bytes per token (2 x 14 x 4 x 128 x 2 = 28,672)
    _, half = plan_of("--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "4096",
                      "--hf-overrides", '{"num_hidden_layers": 14}')
    assert half["kv"]["bytes_per_token"] == 28_672
    one_line_error(run("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--hf-overrides",
                       '{"num_hidden_layers": 0}'), "num_hidden_layers", "--hf-overrides")


def test_max_model_len_auto_is_the_longest_that_fits():
    # Qwen2.5-7B on an RTX 3090: 6,836 blocks of 16 tokens (tests/test_cli.py), less the null block the capacity check
    # leaves out from v0.29 (vLLM 0.29.0 v1/core/kv_cache_utils.py get_kv_cache_configs): 6,835 x 16 = 109,360 tokens
    for value in ("auto", "-1"):
        result, plan = plan_of("--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", value)
        assert result.returncode == 0 and plan["engine"]["max_model_len"] == 109_360 and plan["capacity"]["fits"]


def test_compilation_config_is_noted_not_dropped():
    _, plan = plan_of("--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "8192",
                      "--compilation-config", '{"cudagraph_capture_sizes": [1, 2, 4]}')
    assert any(note.startswith("compilation_config is accepted but not modelled") for note in plan["notes"])


def test_levers_are_spelled_for_their_engine():
    # A model at its full 131,072 tokens that does not fit one RTX 4090; each lever is a flag that engine's own
    # command line takes (SGLang: --tp-size, --context-length; trtllm-serve: underscores). Qwen2.5-7B for SGLang.
    _, sglang = plan_of("--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx4090", "--engine", "sglang")
    flags = [lever["flags"] for lever in sglang["levers"]]
    assert "--tp-size 2" in flags and any(f.startswith("--context-length ") for f in flags)
    # Llama-3.1-8B for TensorRT-LLM, far from fitting whatever its activations: weights 16,060,522,496 B plus one
    # request's KV 131,072 x 131,072 B = 33,240,391,680 B, beyond the 4090's 25,383,256,719 B
    _, trt = plan_of("--model", "meta-llama/Llama-3.1-8B", "--gpu", "rtx4090", "--engine", "trtllm")
    flags = [lever["flags"] for lever in trt["levers"]]
    assert "--tp_size 2" in flags and any(f.startswith("--max_seq_len ") for f in flags)


def test_what_a_new_user_pasted():
    # an unclosed quote, a name longer than a file name may be: one line, exit 2
    one_line_error(run("estimate", "--gpu", "h100", "--", "vllm serve Qwen/Qwen2.5-7B 'unterminated"),
                   "cannot split the command as a shell would")
    one_line_error(run("estimate", "--gpu", "h100", "--model", "a" * 5000), "not a usable path or model id")
    # shell around the command: comments, pipes, background, wrappers, a container image
    for command in ("nohup vllm serve Qwen/Qwen2.5-7B --max-model-len 8192 > log 2>&1 &",
                    "uv run vllm serve Qwen/Qwen2.5-7B --max-model-len 8192 | tee log  # serve it",
                    "docker run --gpus all -p 8000:8000 vllm/vllm-openai:latest --model Qwen/Qwen2.5-7B "
                    "--max-model-len 8192 && echo done"):
        result, plan = plan_of("--gpu", "h100", "--", command)
        assert result.returncode == 0 and plan["engine"]["max_model_len"] == 8192, command
    # the --json meant for kvplan, put after the pasted command
    one_line_error(run("estimate", "--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen2.5-7B", "--json"),
                   "--json", "put it before --")


def test_flags_by_engine_version_and_their_negations():
    # --swap-space was last in vLLM 0.17.1 (kvplan/engines/vllm/flags.py RENAMED): refused today, accepted for 0.11
    one_line_error(run("estimate", "--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen2.5-7B", "--swap-space", "4"),
                   "--swap-space", "gone from current vLLM")
    result, plan = plan_of("--gpu", "h100", "--vllm-version", "0.11", "--max-model-len", "8192", "--", "vllm",
                           "serve", "Qwen/Qwen2.5-7B", "--swap-space", "4", "--no-enable-chunked-prefill")
    assert result.returncode == 0 and any(note.startswith("--swap-space is deprecated or gone")
                                          for note in plan["notes"])


def test_sglang_and_trtllm_flags_of_their_own():
    # SGLang caps the pool at --max-total-tokens: 100,000 tokens in 1-token pages
    _, plan = plan_of("--gpu", "h100", "--", "python", "-m", "sglang.launch_server", "--model-path",
                      "Qwen/Qwen2.5-7B", "--max-total-tokens", "100000", "--json-model-override-args",
                      '{"max_position_embeddings": 8192}')
    assert plan["capacity"]["tokens"] == 100_000 and plan["engine"]["max_model_len"] == 8192
    result, plan = plan_of("--gpu", "h100", "--", "trtllm-serve", "Qwen/Qwen2.5-7B", "--backend", "pytorch",
                           "--ep_size", "1", "--max_seq_len", "8192")
    assert result.returncode == 0 and plan["engine"]["name"] == "trtllm"
    assert any(note.startswith("--ep-size is accepted but not modelled") for note in plan["notes"])


def test_vllm_memory_flags_it_models_now():
    common = ("--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "8192")
    _, eager = plan_of(*common, "-O0")
    assert eager["memory"]["cuda_graph_bytes"] == 0  # -O0 captures no CUDA graphs
    _, fixed = plan_of(*common, "--num-gpu-blocks-override", "1000")
    assert (fixed["capacity"]["num_blocks"], fixed["capacity"]["tokens"]) == (1000, 16_000)
    # SchedulerConfig: max_num_batched_tokens must be at least max_num_seqs (1024 on an H100)
    one_line_error(run("estimate", *common, "--max-num-batched-tokens", "512"), "--max-num-batched-tokens",
                   "max_num_batched_tokens (512) must be greater than or equal to max_num_seqs (1024).")
    _, dp = plan_of(*common, "-dp", "2", "-tp", "2")
    assert dp["parallel"] == {"tensor": 2, "pipeline": 1, "data": 2} and dp["gpu"]["count"] == 4


def test_overridden_values_are_noted(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-7B\nmax-model-len: 8192\n")
    _, plan = plan_of("--gpu", "h100", "--config", str(config), "--max-model-len", "4096")
    assert f"--max-model-len 4096 wins over {config}:2: max-model-len 8192" in plan["notes"]


def test_config_files_a_new_user_wrote(tmp_path):
    quoted = tmp_path / "quoted.yaml"
    quoted.write_text("model: Qwen/Qwen2.5-7B\nenforce-eager: maybe\n")
    one_line_error(run("estimate", "--gpu", "h100", "--config", str(quoted)), f"{quoted}:2: enforce-eager",
                   "expected true or false")
    twice = tmp_path / "twice.yaml"
    twice.write_text("model: Qwen/Qwen2.5-7B\nmodel: meta-llama/Llama-3.1-8B\n")
    one_line_error(run("estimate", "--gpu", "h100", "--config", str(twice)), "given twice (lines 1 and 2)")
    one_line_error(run("estimate", "--gpu", "h100", "--config", "/dev/zero"), "/dev/zero", "over 1,048,576 bytes")


def test_a_bad_dtype_in_the_config_is_blamed_on_the_config(tmp_path):
    config = json.loads((__import__("pathlib").Path(__file__).parent / "fixtures" / "configs"
                         / "Qwen__Qwen2.5-7B.json").read_text())
    config["torch_dtype"] = "int3"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    one_line_error(run("estimate", "--gpu", "h100", "--model", str(path)), f"{path}: torch_dtype",
                   "unknown dtype 'int3'")


@pytest.mark.parametrize("config, fragment", [
    ('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_mx": 4}', "did you mean 'prompt_lookup_max'"),
    ('{"method": "eagle", "num_speculative_tokens": 3}', "needs a draft 'model'"),
    ('{"method": "ngram", "num_speculative_tokens": 1000000000}', "up to 1024"),
])
def test_speculative_config_keys_and_bounds(config, fragment):
    one_line_error(run("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--speculative-config", config),
                   "--speculative-config", fragment)


def test_precedence_found_in_review(tmp_path):
    # the pasted command's own VAR=value beats the shell's environment, as a shell would run it
    env = {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1"}
    result = run("estimate", "--gpu", "h100", "--json", "--", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0", "vllm",
                 "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "8192", env=env)
    assert json.loads(result.stdout)["memory"]["cuda_graph_bytes"] == 0
    # vllm serve serves its positional model, whatever --model says
    _, plan = plan_of("--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen2.5-7B", "--model", "Qwen/Qwen2.5-14B",
                      "--max-model-len", "8192")
    assert plan["model"]["id"] == "Qwen/Qwen2.5-7B"
    assert any("Qwen/Qwen2.5-14B is ignored" in note for note in plan["notes"])
    # --engine that contradicts the pasted launcher would read one engine's flags with another's rules
    one_line_error(run("estimate", "--engine", "trtllm", "--gpu", "h100", "--", "python", "-m", "sglang.launch_server",
                       "--model-path", "Qwen/Qwen2.5-7B"), "--engine", "drop --engine")


def test_review_findings_on_files_and_overrides(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-7B\nmax-model-len: 8192\nport: 8000\nhost: 0.0.0.0\n"
                      "trust_remote_code: false\n")
    _, plan = plan_of("--gpu", "h100", "--config", str(config))
    # one line for the whole file; the false on/off flag is absent, not listed
    assert [n for n in plan["notes"] if n.startswith("not memory-relevant")] == ["not memory-relevant: --port, --host"]
    own = tmp_path / "own.yaml"
    own.write_text("model: Qwen/Qwen2.5-7B\nengine: sglang\n")  # vllm serve --config has no such key
    one_line_error(run("estimate", "--gpu", "h100", "--config", str(own)), "engine", "kvplan's own flag")
    # an override that breaks the config is blamed on --hf-overrides, not on the bundled spec file
    result = run("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--hf-overrides",
                 '{"num_hidden_layers": 10000000000}')
    one_line_error(result, "--hf-overrides: key 'num_hidden_layers'")
    assert "model_specs" not in result.stderr


def test_python_errors_name_python_keywords():
    import kvplan
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError, match=r"^max_model_len: must be within"):
        kvplan.Deployment(max_model_len=-5)
    with pytest.raises(KvplanError, match=r"^kvplan.estimate\(\): gpu_memory: '24' has no unit"):
        kvplan.estimate("Qwen/Qwen2.5-7B", gpu_memory="24")
    # vLLM's human_readable_int has T / t too; inf is not an integer (and not a traceback)
    assert kvplan.Deployment.from_vllm_args(["--num-gpu-blocks-override", "1T"]).num_gpu_blocks_override == 2**40
    one_line_error(run("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "infk"),
                   "--max-model-len", "expected an integer")


def test_another_engines_flag_says_which_engine_has_it():
    one_line_error(run("estimate", "--gpu", "h100", "--model", "Qwen/Qwen2.5-7B", "--mem-fraction-static", "0.8"),
                   "--mem-fraction-static: unknown vLLM flag", "(it is SGLang's: add --engine sglang)")
