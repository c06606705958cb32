"""ModelOpt settings written inside config.json (issue 22): a quantization_config with quant_method 'modelopt',
quant_algo NVFP4 / FP8 / MIXED_PRECISION, kv_cache_scheme and ignore, read as hf_quant_config.json is read (vLLM
0.33.0 quantization/modelopt.py ModelOptQuantConfigBase.from_config, the flat branch; utils/torch_utils.py
get_kv_cache_quant_algo_string for kv_cache_dtype auto), so the weights are weighed in the format it names and the
KV cache is fp8 under auto. The configs are the published ones (tests/fixtures/configs/frontier/README.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kvplan.api import estimate
from kvplan.errors import KvplanError
from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource
from kvplan.models.sources import read_local, read_spec_file, spec_files
from kvplan.weights import weight_layout

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
MINIMAX = FRONTIER / "nvidia__MiniMax-M2.5-NVFP4"


def nvfp4(count: int) -> int:
    """Two 4-bit values a byte and one float8_e4m3fn scale per 16 (vLLM 0.33.0 modelopt.py KNvfp4Static)."""
    return count // 2 + count // 16


def inline(**changes) -> dict:
    data = json.loads((MINIMAX / "config.json").read_text())
    data["quantization_config"].update(changes)
    return data


def test_minimax_m25_nvfp4_config_json_is_modelopt_fp4():
    # config.json: quant_method "modelopt", quant_algo "NVFP4", kv_cache_scheme {dynamic false, num_bits 8, float},
    # 125 names under "ignore"; vLLM's NVFP4 override_quantization_method makes it modelopt_fp4, group_size 16
    quant = read_local(MINIMAX).quantization
    assert quant is not None
    assert (quant.method, quant.bits, quant.group_size) == ("modelopt_fp4", 4, 16)
    assert (quant.kv_cache_quant_algo, quant.source, len(quant.unquantized)) == ("FP8", "config.json", 125)


def test_minimax_m25_nvfp4_weight_bytes_by_hand():
    spec = read_local(MINIMAX)
    layout = weight_layout(spec, 2, "modelopt_fp4")
    # routed experts, NVFP4 in all 62 layers: 256 experts x 3 gated projections x 3,072 x 1,536
    experts = 256 * 3 * 3072 * 1536
    assert experts == 3_623_878_656
    assert layout.experts_per_layer == nvfp4(experts) == 2_038_431_744
    # 'model.layers.N.self_attn*' is in ignore for every layer: q (48 x 128), k, v (8 x 128 each), o at bfloat16;
    # the router (3,072 x 256, 'block_sparse_moe.gate', also ignored) and its e_score_correction_bias (256,
    # use_routing_bias), q_norm and k_norm over every head (6,144 and 1,024: vLLM 0.33.0 minimax_m2.py
    # MiniMaxText01RMSNormTP) and the two RMSNorms (2 x 3,072) too
    attention = 3072 * 6144 + 2 * 3072 * 1024 + 6144 * 3072
    assert attention == 44_040_192
    loose = 3072 * 256 + 256 + 6144 + 1024 + 2 * 3072
    dense = 62 * (attention + loose) * 2 + 3072 * 2  # and the final norm
    assert dense + 62 * nvfp4(experts) == 131_942_958_080
    assert layout.per_layer == 131_942_958_080 // 62  # the decoder spread evenly over its layers
    # lm_head is ignored too: bfloat16, 200,064 x 3,072 x 2
    assert layout.lm_head == 200064 * 3072 * 2


def test_minimax_m25_nvfp4_kv_is_fp8_under_auto():
    # 62 layers x 2 (K, V) x 8 KV heads x 128 x 1 byte
    plan = estimate(str(MINIMAX), gpu="b200", max_model_len=32768, tensor_parallel_size=4)
    assert (plan.kv_dtype, plan.kv_bytes) == ("fp8_e4m3", 1)
    assert any("the checkpoint's config.json names an FP8 KV cache" in note for note in plan.notes)
    assert estimate(str(MINIMAX), gpu="b200", max_model_len=32768, tensor_parallel_size=4,
                    engine="sglang").kv_dtype == "fp8_e4m3"
    assert estimate(str(MINIMAX), gpu="b200", max_model_len=32768, tensor_parallel_size=4,
                    engine_version="0.13.0").kv_dtype == "bfloat16"


@pytest.mark.parametrize(("scheme", "algo"), [
    ({"dynamic": False, "num_bits": 8, "type": "float"}, "FP8"),
    ({"dynamic": True, "num_bits": 8, "type": "float"}, None),  # torch_utils: dynamic must be False for fp8
    ({"dynamic": False, "num_bits": 4, "type": "float"}, "NVFP4"),
    ("fp8", "FP8"),
    (None, None),
])
def test_kv_cache_scheme_forms(scheme, algo):
    quant = parse_config(inline(kv_cache_scheme=scheme), "m", SpecSource("local", "m")).quantization
    assert quant is not None and quant.kv_cache_quant_algo == algo


def test_fp8_and_mixed_algos():
    fp8 = parse_config(inline(quant_algo="FP8"), "m", SpecSource("local", "m")).quantization
    assert fp8 is not None and (fp8.method, fp8.bits) == ("modelopt", 8)
    layers = {"model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"}}  # tests/test_modelopt_mixed.py weighs it
    mixed = parse_config(inline(quant_algo="MIXED_PRECISION", quantized_layers=layers), "m",
                         SpecSource("local", "m")).quantization
    assert mixed is not None and mixed.method == "modelopt_mixed"
    assert mixed.formats == ((0, "mixer", "FP8"),)


@pytest.mark.parametrize(("changes", "message"), [
    ({"quant_algo": "INT3"}, "quantization_config.quant_algo 'INT3' is not one of"),
    ({"ignore": "lm_head"}, "quantization_config.ignore must be a list"),
    ({"group_size": 0}, "quantization_config.group_size must be a positive integer"),
])
def test_malformed_inline_config_is_one_line(changes, message):
    with pytest.raises(KvplanError, match=message):
        parse_config(inline(**copy.deepcopy(changes)), "m", SpecSource("local", "m"))


def test_bundled_spec_keeps_its_modelopt_settings():
    # model_specs/nvidia__MiniMax-M2.5-NVFP4.json: the published config.json, quantization_config and all
    bundled = next(f for f in spec_files() if f.kind == "bundled" and f.path.name == "nvidia__MiniMax-M2.5-NVFP4.json")
    quant = read_spec_file(bundled).quantization
    assert quant is not None and (quant.method, quant.kv_cache_quant_algo) == ("modelopt_fp4", "FP8")
    plan = estimate("nvidia/MiniMax-M2.5-NVFP4", gpu="b200", max_model_len=32768, tensor_parallel_size=4)
    assert (plan.kv_dtype, plan.layout.bytes_per_token) == ("fp8_e4m3", 62 * 2 * 2 * 128)  # 8 KV heads / TP 4
