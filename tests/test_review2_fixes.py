"""Review fixes (kvplan issue #7): Nemotron-H's layers without experts, TensorRT-LLM's non-gated MLP activation,
vLLM's NemotronH SSM dtype by version, the Mamba-2 mixer's projection biases, the backend knob's messages."""

from __future__ import annotations

import json

import pytest

from kvplan import api
from kvplan.deployment import Deployment
from kvplan.engines.base import PlanInput
from kvplan.engines.sglang import budget as sglang
from kvplan.engines.trtllm import budget as trtllm
from kvplan.errors import KvplanError
from kvplan.models.families import family_of
from kvplan.models.fields import ConfigFields
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import Mamba2State
from kvplan.models.model import SpecSource
from kvplan.models.params import _Mixers
from kvplan.plan import GpuChoice

NEMOTRON_56B = "nvidia/Nemotron-H-56B-Base-8K"  # bundled; its config names no SSM cache dtype
NANO_30B = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"  # bundled; mamba_ssm_cache_dtype float32
H200 = GpuChoice("h200", "H200", 150_754_820_096, 1, "9.0")


def tiny_nemotron(pattern: str, **changes) -> dict:
    config = {"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], "hidden_size": 64,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": len(pattern),
              "vocab_size": 10, "intermediate_size": 128, "hybrid_override_pattern": pattern, "mamba_num_heads": 2,
              "mamba_head_dim": 8, "ssm_state_size": 4, "n_groups": 1, "conv_kernel": 4, "n_routed_experts": 4,
              "num_experts_per_tok": 2, "moe_intermediate_size": 32, "torch_dtype": "bfloat16"}
    return {**config, **changes}


# --- 1. Nemotron-H: layers without experts are not dense-MLP layers ---

def test_nemotron_mamba_and_attention_layers_have_no_mlp():
    # vLLM nemotron_h.py: 'E' experts, '-' a dense MLP, 'M' Mamba-2 only, '*' attention only
    spec = parse_config(tiny_nemotron("ME*-E"), "x", SpecSource("local", "config.json"))
    assert spec.moe is not None
    assert spec.moe.dense_layers == (3,)
    assert spec.moe.mlp_free_layers == (0, 2)
    assert spec.moe.expert_layer_count(5) == 2


def test_nano_30b_has_no_dense_layer():
    # its pattern has 23 'E', 23 'M', 6 '*' and no '-'
    moe = api.load_model(NANO_30B).moe
    assert moe is not None
    assert moe.dense_layers == ()
    assert len(moe.mlp_free_layers) == 29
    assert moe.expert_layer_count(52) == 23


# --- 2. TensorRT-LLM: the MLP's live intermediate copies follow the family's gate ---

@pytest.mark.parametrize("model_id, elements", [
    # gated (GatedMLP): 3 x 4,096 + 3 x 14,336
    ("meta-llama/Llama-3.1-8B", 55_296),
    # non-gated ReLU^2 (MLP: up output + activation): 3 x 8,192 + 2 x 32,768
    (NEMOTRON_56B, 90_112),
    # non-gated experts, no '-' layer: 3 x 2,688 + 6 routed x (2,688 + 2 x 1,856) + the shared 2 x 3,712
    (NANO_30B, 53_888),
])
def test_trtllm_mlp_activation_per_token(model_id, elements):
    assert trtllm.token_activation_elements(api.load_model(model_id), 1) == elements


def test_non_gated_families_take_two_copies():
    for model_type in ("gpt2", "phi", "bloom", "falcon", "nemotron_h"):
        assert family_of(model_type).gated_mlp is False, model_type


# --- 3. NemotronH's SSM dtype while --mamba-ssm-cache-dtype is auto, by vLLM version ---
# Nemotron-H-56B at TP 1, bf16 KV: 8 KV heads x 128 x 2 (K, V) x 2 B = 4,096 B a token, 65,536 B per 16 tokens.
# Its Mamba-2 state: conv 3 x (256 x 64 + 2 x 8 x 256) x 2 B = 122,880 B plus the SSM 256 x 64 x 256 elements.
# vLLM raises the attention block to 16 x cdiv(state page, 65,536).

@pytest.mark.parametrize("version, block", [
    ("0.12.0", 2_080),  # the general rule: SSM as the conv state, 8,388,608 + 122,880 = 8,511,488 -> 16 x 130
    ("0.13.0", 2_080),  # vllm#29978: the config's, else float16: the same 2 B
    ("0.19.0", 2_080),
    ("0.20.0", 4_128),  # vllm#39032: else float32: 16,777,216 + 122,880 = 16,900,096 -> 16 x 258
    ("0.29.0", 4_128),
])
def test_vllm_nemotron_h_ssm_default_by_version(version, block):
    plan = api.estimate(NEMOTRON_56B, gpu="h200", engine_version=version, max_model_len=8192)
    assert plan.engine.block_size == block


@pytest.mark.parametrize("config_dtype, version, block", [
    # a tiny Nemotron-H ('M*'): attention 2 KV heads x 16 x 2 x 2 B = 128 B a token, 2,048 B per 16 tokens; the
    # Mamba-2 state: conv 3 x (128 + 2 x 128) x 2 B = 2,304 B plus the SSM 2 x 64 x 128 = 16,384 elements
    (None, "0.19.0", 288),  # float16: 32,768 + 2,304 = 35,072 B -> 16 x cdiv(35,072, 2,048) = 16 x 18
    (None, "0.20.0", 544),  # float32: 65,536 + 2,304 = 67,840 B -> 16 x 34
    ("float32", "0.12.0", 288),  # before vllm#29978 the config's mamba_ssm_cache_dtype is not read
    ("float32", "0.13.0", 544),  # from it on, the config's dtype wins over the fallback
    ("bfloat16", "0.20.0", 288),
])
def test_vllm_nemotron_h_config_dtype_by_version(tmp_path, config_dtype, version, block):
    config = tiny_nemotron("M*", mamba_head_dim=64, ssm_state_size=128)
    for key in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"):
        del config[key]
    if config_dtype:
        config["mamba_ssm_cache_dtype"] = config_dtype
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    plan = api.estimate(str(path), gpu="h200", engine_version=version, max_model_len=2048)
    assert plan.engine.block_size == block


def test_sglang_keeps_float32_for_nemotron_h():
    # SGLang's server_args mamba_ssm_dtype default float32: 54 Mamba layers x (122,880 + 16,777,216) B
    target = PlanInput(api.load_model(NEMOTRON_56B), Deployment(engine="sglang"), H200)
    assert sglang.state_bytes_per_request(target) == 912_605_184


# --- 4. the Mamba-2 mixer's projection biases ---

def test_mamba2_mixer_with_projection_bias():
    # hidden 64, 2 heads of 8 (inner 16), 1 group, state 4, kernel 4: conv channels 16 + 2 x 4 = 24,
    # in_proj out 16 + 24 + 2 = 42. Without bias: 64 x 42 + 24 x 4 + 24 (conv bias) + 3 x 2 + 16 (norm)
    # + 16 x 64 = 3,854; use_bias adds in_proj's 42 and out_proj's 64: 3,960.
    state = Mamba2State(16, 2, 8, 1, 4, 4)
    for biased, expected in ((False, 3_854), (True, 3_960)):
        lm = ConfigFields(tiny_nemotron("M", use_bias=biased), "x")
        assert _Mixers(lm, family_of("nemotron_h"), 64, 4, 128).mamba2_mixer(state) == expected


# --- 5. the backend knob ---

def test_autodeploy_backend_is_named_as_not_modelled():
    with pytest.raises(KvplanError, match="^x: backend: kvplan does not model TensorRT-LLM.s _autodeploy backend$") as error:
        Deployment.from_mapping({"engine": "trtllm", "backend": "_autodeploy"}, "x")
    assert error.value.where == "x: backend"


def test_api_backend_without_trtllm_names_tensorrt_llm():
    with pytest.raises(KvplanError, match=r"unknown knob of vLLM \(it is TensorRT-LLM's: set engine to trtllm\)"):
        api.estimate("meta-llama/Llama-3.1-8B", gpu="h100", backend="tensorrt")
