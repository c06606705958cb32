"""The Deployment and its front doors: every door gives the same Deployment for the same set-up, vLLM's
spelling rules hold, and errors name what the user wrote."""

from __future__ import annotations

import json

import pytest

from kvplan.deployment import Deployment, knobs
from kvplan.deployment.config_file import read_config
from kvplan.deployment.front_doors import from_cli
from kvplan.deployment.launch import parse_command
from kvplan.deployment.schema import deployment_model, json_schema
from kvplan.deployment.values import coerce, draft_from_mapping
from kvplan.errors import KvplanError

# One set-up, the way each door writes it.
EXPECTED = Deployment(model="Qwen/Qwen2.5-7B", max_model_len=32768, tensor_parallel_size=2,
                      gpu_memory_utilization=0.85, enforce_eager=True, kv_cache_dtype="fp8")


def test_every_door_gives_the_same_deployment(tmp_path):
    serve = ["vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "32768", "-tp", "2",
             "--gpu-memory-utilization", "0.85", "--enforce-eager", "--kv-cache-dtype", "fp8"]
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-7B\nmax_model_len: 32768\ntensor-parallel-size: 2\n"
                      "gpu-memory-utilization: 0.85\nenforce-eager: true\nkv_cache_dtype: fp8\n")
    doors = {
        "pasted vllm serve": parse_command(serve).deployment(),
        "api_server module": parse_command(["python3", "-m", "vllm.entrypoints.openai.api_server", "--model",
                                            "Qwen/Qwen2.5-7B", "--max_model_len=32K", "--tensor_parallel_size=2",
                                            "--gpu-memory-utilization=0.85", "--enforce-eager",
                                            "--kv-cache-dtype=fp8"]).deployment(),
        "one pasted string": parse_command([" ".join(serve)]).deployment(),
        "from_vllm_args": Deployment.from_vllm_args(serve[3:] + ["--model", "Qwen/Qwen2.5-7B"]),
        "config file": read_config(str(config)).deployment(),
        "mapping": Deployment.from_mapping({"model": "Qwen/Qwen2.5-7B", "max_model_len": "32K",
                                            "tensor_parallel_size": 2, "gpu_memory_utilization": 0.85,
                                            "enforce_eager": True, "kv-cache-dtype": "fp8"}),
        "kvplan flags": from_cli({"model": ("Qwen/Qwen2.5-7B", "--model")},
                                 ["--max-model-len", "32K", "-tp", "2", "--gpu-memory-utilization", "0.85",
                                  "--enforce-eager", "--kv-cache-dtype", "fp8"], None, None, environ={}),
    }
    for door, dep in doors.items():
        assert dep == EXPECTED, door
    # the api_server form names no engine, `vllm serve` does; both are vLLM
    assert doors["pasted vllm serve"].origins["engine"].endswith("vllm serve")


@pytest.mark.parametrize("text, value", [
    ("32768", 32768), ("32K", 32 * 1024), ("32k", 32_000), ("25.6k", 25_600), ("1M", 2**20), ("2m", 2_000_000),
])
def test_human_readable_integers(text, value):
    # vLLM's human_readable_int: lower case is decimal (k = 10^3), upper case binary (K = 2^10)
    assert Deployment.from_vllm_args(["--max-model-len", text]).max_model_len == value


def test_booleans_json_and_short_forms():
    dep = Deployment.from_vllm_args(["--enforce-eager", "--no-enforce-eager", "-pp", "2", "-dp=2", "-q", "awq",
                                     "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}',
                                     "--hf-overrides", '{"max_position_embeddings": 4096}', "-cc", "3", "-O3"])
    assert dep.enforce_eager is False  # the later --no- form wins, as with argparse
    assert (dep.pipeline_parallel_size, dep.data_parallel_size, dep.quantization) == (2, 2, "awq")
    assert dep.speculative_config == {"method": "ngram", "num_speculative_tokens": 3}
    assert dep.hf_overrides == {"max_position_embeddings": 4096}
    assert dep.compilation_config == 3  # -cc takes a JSON object or a bare level
    assert dep.optimization_level == 3  # -O3 is --optimization-level 3 since vLLM 0.12
    assert dep.gpu_count == 1 * 2 * 2


def test_sglang_and_trtllm_commands_set_the_engine_and_read_their_names():
    sglang = parse_command(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-7B",
                            "--tp-size", "2", "--mem-fraction-static", "0.8", "--context-length", "8192",
                            "--chunked-prefill-size", "4096", "--max-running-requests", "64",
                            "--page-size", "16"]).deployment()
    assert (sglang.engine, sglang.tensor_parallel_size, sglang.gpu_memory_utilization) == ("sglang", 2, 0.8)
    assert (sglang.max_model_len, sglang.max_num_batched_tokens, sglang.max_num_seqs, sglang.block_size) == \
        (8192, 4096, 64, 16)
    trt = parse_command(["trtllm-serve", "Qwen/Qwen2.5-7B", "--tp_size", "4", "--max_seq_len", "16384",
                         "--kv_cache_free_gpu_memory_fraction", "0.7", "--max_batch_size", "32"]).deployment()
    assert (trt.engine, trt.model, trt.tensor_parallel_size, trt.max_model_len) == ("trtllm", "Qwen/Qwen2.5-7B", 4,
                                                                                     16384)
    assert (trt.gpu_memory_utilization, trt.max_num_seqs) == (0.7, 32)
    # the other engines' names are refused for vLLM, which does not have them
    with pytest.raises(KvplanError, match="--mem-fraction-static"):
        Deployment.from_vllm_args(["--mem-fraction-static", "0.8"])


def test_explicit_flags_win_over_the_config_file(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-7B\nmax-model-len: 8192\ntensor-parallel-size: 2\n")
    dep = from_cli({}, ["--max-model-len", "4096"], str(config), None, environ={})
    assert dep.max_model_len == 4096 and dep.tensor_parallel_size == 2
    assert dep.where("max_model_len") == "--max-model-len"
    assert dep.where("tensor_parallel_size") == f"{config}:3: tensor-parallel-size"


def test_errors_name_what_the_user_wrote(tmp_path):
    with pytest.raises(KvplanError) as raised:
        Deployment.from_vllm_args(["--max_model_len", "0"])
    assert str(raised.value).startswith("--max_model_len: ")
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-7B\n\ngpu_memory_utilization: 1.5\n")
    with pytest.raises(KvplanError) as raised:
        read_config(str(config)).deployment()
    assert str(raised.value) == f"{config}:3: gpu_memory_utilization: must be within (0, 1], got 1.5"
    with pytest.raises(KvplanError, match="did you mean --max-model-len"):
        Deployment.from_vllm_args(["--max-model-lenn", "8192"])
    with pytest.raises(KvplanError, match=r"^deployment: max_len: unknown knob; did you mean max-model-len"):
        Deployment.from_mapping({"max_len": 8192})
    # a rule checked in the core uses the user's spelling, never a flag they did not type
    assert Deployment.from_mapping({"max_model_len": 10}, "fleet.yaml").where("max_model_len") == \
        "fleet.yaml: max_model_len"


@pytest.mark.parametrize("text", [
    "model: [unclosed", "- a\n- b\n", "a: &x [*x, *x]\n", "\x00\x01", "model: x\n---\nmodel: y\n",
    "config: other.yaml\n",
])
def test_hostile_config_files_are_one_line(tmp_path, text):
    config = tmp_path / "serve.yaml"
    config.write_text(text)
    with pytest.raises(KvplanError) as raised:
        read_config(str(config)).deployment()
    assert "\n" not in str(raised.value) and str(config) in str(raised.value)


def test_yaml_alias_bomb_is_refused(tmp_path):
    # nine levels of nine aliases each expand to 9^9 = 387,420,489 values
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(9))}]" for i in range(1, 10)]
    config = tmp_path / "bomb.yaml"
    config.write_text("\n".join(lines) + "\n")
    with pytest.raises(KvplanError, match="expands to more than"):
        read_config(str(config))


# Samples per knob kind, valid and not: the fast validator (values.coerce) and the pydantic model check type,
# range and choices each in their own code, from the same declaration; they must give the same verdict and value.
SAMPLES = {
    "int": [1, 16, "32K", "25.6k", 0, -3, 2**40, "abc", 1.5, 3.0, True, None, "infk", "-1", "auto", -1],
    "size": [0, 2**30, "24GiB", "24GB", "24G", "12", -1, "lots", 1.5, 3.0, True, None],
    "float": [0.5, 1, 0, 1.5, "0.9", "nan", float("inf"), "x", True, None, "1e-3"],
    "str": ["auto", "fp8", "bfloat16", "BFLOAT16", "float16", "awq", "vllm", "sglang", "bogus", 3, None, " x "],
    "bool": [True, False, "true", "no", "t", "maybe", 2, 1, 0, "1", None],
    "json": [{"method": "ngram"}, '{"a": 1}', "[1, 2]", "{oops", 3, "3", None],
}


@pytest.mark.parametrize("knob", knobs(), ids=lambda k: k.name)
def test_fast_validator_and_pydantic_model_agree(knob):
    from pydantic import ValidationError

    model = deployment_model()
    for sample in SAMPLES[knob.kind]:
        try:
            fast_ok, fast = True, coerce(knob, sample, knob.name)
        except KvplanError:
            fast_ok, fast = False, None
        try:
            slow_ok, slow = True, getattr(model(**{knob.name: sample}), knob.name)
        except ValidationError:
            slow_ok, slow = False, None
        assert fast_ok == slow_ok, (knob.name, sample)
        assert fast == slow and type(fast) is type(slow), (knob.name, sample)


def test_schema_lists_every_knob_with_its_rules():
    schema = json_schema()
    assert set(schema["properties"]) == {knob.name for knob in knobs()}
    assert schema["additionalProperties"] is False
    util = schema["properties"]["gpu_memory_utilization"]
    assert util["anyOf"][0] == {"exclusiveMinimum": 0, "maximum": 1, "type": "number"}
    assert "mem-fraction-static (sglang)" in util["x-spellings"]
    json.dumps(schema)


def test_mapping_spellings_follow_the_engine():
    sglang = draft_from_mapping({"engine": "sglang", "mem_fraction_static": 0.8}, "fleet.yaml").deployment()
    assert sglang.gpu_memory_utilization == 0.8
    with pytest.raises(KvplanError, match="unknown knob"):
        draft_from_mapping({"mem_fraction_static": 0.8}, "fleet.yaml")  # vLLM has no such knob


def test_prefixes_and_dotted_json_keys_as_vllm_parses_them():
    # argparse's allow_abbrev is on in vLLM's FlexibleArgumentParser: a unique prefix names its flag
    dep = Deployment.from_vllm_args(["--max-num-batched-token", "4096", "--gpu-memory-util", "0.8",
                                     "--speculative-config.method", "ngram",
                                     "--speculative-config.num_speculative_tokens", "3"])
    assert (dep.max_num_batched_tokens, dep.gpu_memory_utilization) == (4096, 0.8)
    # dotted keys merge into the JSON object; underscores after the dot are kept as written
    assert dep.speculative_config == {"method": "ngram", "num_speculative_tokens": 3}
    with pytest.raises(KvplanError, match="ambiguous option: could match .*--max-num-seqs"):
        Deployment.from_vllm_args(["--max-num", "4"])


def test_inert_noted_and_renamed_flags_are_accepted_with_notes():
    dep = Deployment.from_vllm_args(["--port", "8000", "--host=0.0.0.0", "--served-model-name", "a", "b",
                                     "--enable-prefix-caching", "--offload-group-size", "4", "--max-num-seqs", "8"])
    assert dep.max_num_seqs == 8  # the list-valued --served-model-name did not swallow later flags
    assert "not memory-relevant: --port, --host, --served-model-name" in dep.notes
    assert dep.enable_prefix_caching is True  # modelled: a hybrid's state blocks (issue 18 section 2.8)
    assert any(note.startswith("--offload-group-size is accepted but not modelled") for note in dep.notes)
    assert Deployment.from_vllm_args(["--cpu-offload-gb", "4"]).cpu_offload_gb == 4  # modelled (issue 20)


def test_pasted_commands_are_spelled_as_their_engine_requires():
    # SGLang's argparse has dashes only; trtllm-serve's click options are underscores (flags_*.py cite both)
    with pytest.raises(KvplanError, match="SGLang spells its flags with dashes: --mem-fraction-static"):
        parse_command(["python", "-m", "sglang.launch_server", "--model-path", "m", "--mem_fraction_static", "0.8"])
    with pytest.raises(KvplanError, match="TensorRT-LLM spells this flag --tp_size"):
        parse_command(["trtllm-serve", "m", "--tp-size", "2"])
    # vLLM's real alias of the utilization flag
    assert parse_command(["vllm", "serve", "m", "--device-memory-utilization", "0.7"]).deployment() \
        .gpu_memory_utilization == 0.7


def test_a_config_key_without_a_value_is_refused(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-7B\nmax-model-len:\n")
    with pytest.raises(KvplanError, match=r"serve.yaml:2: max-model-len: has no value"):
        read_config(str(config))


@pytest.mark.parametrize(("value", "on"), [("1", True), ("0", False), ("2", True), ("-1", True), ("00", False)])
def test_vllm_switches_are_read_as_integers(value, on):
    # vLLM 0.33.0 envs.py: VLLM_USE_FLASHINFER_SAMPLER = bool(int(value)) (VLLM_USE_V2_MODEL_RUNNER through
    # maybe_convert_bool, the same): any integer, nonzero on; from the shell and in front of a pasted command alike
    shell = from_cli({}, ["--model", "Qwen/Qwen2.5-7B"], None, None, environ={"VLLM_USE_FLASHINFER_SAMPLER": value})
    pasted = from_cli({}, [], None, [f"VLLM_USE_V2_MODEL_RUNNER={value}", "vllm", "serve", "Qwen/Qwen2.5-7B"],
                      environ={})
    assert (shell.flashinfer_sampler, pasted.v2_model_runner) == (on, on)


@pytest.mark.parametrize("value", ["true", "yes", "on", "1.0"])
def test_a_vllm_switch_that_is_no_integer_is_refused(value):
    # int('true') raises in envs.py, so vLLM stops at start-up
    with pytest.raises(KvplanError, match="VLLM_USE_FLASHINFER_SAMPLER: vLLM reads it as an integer"):
        from_cli({}, [], None, [f"VLLM_USE_FLASHINFER_SAMPLER={value}", "vllm", "serve", "Qwen/Qwen2.5-7B"],
                 environ={})


@pytest.mark.parametrize("variable", ["VLLM_USE_FLASHINFER_SAMPLER", "VLLM_USE_V2_MODEL_RUNNER",
                                      "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS",
                                      "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"])
def test_an_empty_vllm_switch_is_refused_wherever_it_is_set(variable):
    # vLLM 0.33.0 envs.py reads each of kvplan's four as bool(int(value)) (maybe_convert_bool for the V2 runner's,
    # int(os.getenv(..., "1")) for the two defaulting on): set but empty, int('') raises, and enable_envs_cache
    # reads every variable once the engine core starts, so vLLM stops. The shell's environment used to pass it over.
    with pytest.raises(KvplanError, match=f"{variable}: set but empty"):
        from_cli({}, ["--model", "Qwen/Qwen2.5-7B"], None, None, environ={variable: ""})
    with pytest.raises(KvplanError, match=f"{variable}: set but empty"):
        from_cli({}, [], None, [f"{variable}=", "vllm", "serve", "Qwen/Qwen2.5-7B"], environ={})


def test_an_empty_lmcache_variable_in_the_shell_is_still_passed_over():
    # LMCache's variables are not vLLM's envs.py: an empty one in the shell is not read (as before)
    dep = from_cli({}, ["--model", "Qwen/Qwen2.5-7B"], None, None, environ={"LMCACHE_CHUNK_SIZE": ""})
    assert dep.lmcache_chunk_size is None
