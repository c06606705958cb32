"""ModelOpt's hf_quant_config.json, read beside config.json as vLLM 0.33.0 reads it: transformers_utils/config.py
get_config takes it as the quantization config only where config.json has no quantization_config (ModelOpt 0.29
and before wrote it apart), and model_arch_config_convertor.py _normalize_quantization_config names the method by
quant_algo: FP8, FP8_PER_CHANNEL_PER_TOKEN and FP8_PB_WO 'modelopt', NVFP4 'modelopt_fp4', MIXED_PRECISION
'modelopt_mixed'. A malformed file is one line naming the file and the key."""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import replace
from typing import Any

from kvplan.errors import KvplanError
from kvplan.models.model import Quantization

QUANT_FILE = "hf_quant_config.json"
METHODS = {"FP8": "modelopt", "FP8_PER_CHANNEL_PER_TOKEN": "modelopt", "FP8_PB_WO": "modelopt",
           "NVFP4": "modelopt_fp4", "MIXED_PRECISION": "modelopt_mixed"}
BITS = {"modelopt": 8, "modelopt_fp4": 4}
NVFP4_GROUP = 16  # modelopt.py ModelOptNvFp4Config.from_config: group_size 16 where none is given


def parse_quant_config(document: Any, where: str) -> Quantization:
    """The Quantization an hf_quant_config.json document names; where: the file, for errors."""
    if not isinstance(document, dict):
        raise KvplanError("expected a JSON object at the top level", where)
    section = document.get("quantization")
    if not isinstance(section, dict):
        raise KvplanError("'quantization' must be an object (ModelOpt writes quant_algo, kv_cache_quant_algo and "
                          "exclude_modules in it)", where)
    algo, excluded, group = _checked(section, "quantization", "exclude_modules", section.get("exclude_modules", []),
                                     where)
    kv_algo = section.get("kv_cache_quant_algo")
    if kv_algo is not None and not isinstance(kv_algo, str):
        raise KvplanError(f"quantization.kv_cache_quant_algo must be a string or null, got {kv_algo!r}", where)
    return _quantization(algo, kv_algo, excluded, group, QUANT_FILE, section, where)


def _checked(section: dict[str, Any], prefix: str, excluded_key: str, excluded: Any,
             where: str) -> tuple[str, list[str], int | None]:
    """quant_algo, the excluded modules and group_size, as both ModelOpt layouts spell them."""
    algo = section.get("quant_algo")
    if not isinstance(algo, str) or algo.upper() not in METHODS:
        raise KvplanError(f"{prefix}.quant_algo {algo!r} is not one of {', '.join(METHODS)}", where)
    if not isinstance(excluded, list) or not all(isinstance(name, str) for name in excluded):
        raise KvplanError(f"{prefix}.{excluded_key} must be a list of module names", where)
    group = section.get("group_size")
    if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group <= 0):
        raise KvplanError(f"{prefix}.group_size must be a positive integer, got {group!r}", where)
    return algo, excluded, group


def _quantization(algo: str, kv_algo: str | None, excluded: list[str], group: int | None,
                  source: str, section: dict[str, Any], where: str) -> Quantization:
    method = METHODS[algo.upper()]
    formats: tuple[tuple[int, str, str], ...] = ()
    if method == "modelopt_mixed":
        formats, group = mixed_formats(section.get("quantized_layers"), group, where)
    if method == "modelopt_fp4":
        group = group or NVFP4_GROUP
    return Quantization(method, BITS.get(method), group, tuple(excluded),
                        kv_algo.upper() if kv_algo else None, source, formats=formats)


# The per-module algorithms of a MIXED_PRECISION checkpoint that both engines load in a format: vLLM 0.33.0
# quantization/modelopt.py ModelOptMixedPrecisionConfig.get_quant_method (LINEAR_ALGOS, _BLOCK_FP8_MOE_ALGOS) and
# SGLang 0.5.23 srt/layers/quantization/modelopt_quant.py ModelOptMixedPrecisionConfig.get_quant_method. Any
# other (FP8_PER_CHANNEL_PER_TOKEN, which SGLang leaves unquantized there; vLLM's b12x block codecs) is refused.
MIXED_FORMATS = ("FP8", "FP8_PB_WO", "FP8_BLOCK_SCALES", "NVFP4", "W4A16_NVFP4", "MXFP8")
LM_HEAD = -1  # the layer index of lm_head's entry in Quantization.formats
# A decoder layer's module path: the text stack's prefix (bare 'layers.', 'model.', 'backbone.', the VL wrappers'
# 'language_model.model.' / 'model.language_model.'), the index, the module under it; MTP and tower stacks differ.
_LAYER_KEY = re.compile(r"^(?:model\.|backbone\.|language_model\.(?:model\.)?|model\.language_model\.)?"
                        r"layers\.(\d+)\.(.+)$")
MLP_BLOCKS = ("mlp", "ffn", "block_sparse_moe", "feed_forward")


def module_role(local: str) -> str:
    """The role (kvplan.models.model.LayerParams) of a module under 'layers.N.': routed experts ('...experts.E.w1',
    'ffn.experts'), the MLP outside them (shared experts, Nemotron's latent projections), else the mixer."""
    parts = local.split(".")
    if "experts" in parts:
        return "experts"
    if parts[0] in MLP_BLOCKS or any(p.startswith("shared_expert") for p in parts) or "latent_proj" in local:
        return "mlp"
    return "mixer"


def mixed_formats(layers: Any, group: int | None, where: str) -> tuple[tuple[tuple[int, str, str], ...], int]:
    """quantized_layers read as both engines read it (module path -> quant_algo; a module it does not name is
    unquantized), as (layer, role, algo) once each, lm_head as layer LM_HEAD; and the NVFP4 group size: the
    config's, else the first NVFP4 or W4A16_NVFP4 entry's, else 16 (vLLM 0.33.0 modelopt.py
    ModelOptMixedPrecisionConfig._from_config)."""
    if not isinstance(layers, dict) or not layers:
        raise KvplanError("quant_algo MIXED_PRECISION needs a non-empty 'quantized_layers' map of module names to "
                          "{quant_algo: ...} (vLLM and SGLang refuse it without one)", where)
    found: dict[tuple[int, str, str], None] = {}
    for name, info in layers.items():
        algo = info.get("quant_algo") if isinstance(info, dict) else None
        if not isinstance(algo, str):
            raise KvplanError(f"quantized_layers.{name} must be an object with a string quant_algo", where)
        algo = algo.upper()
        if group is None and algo in ("NVFP4", "W4A16_NVFP4"):
            group = info.get("group_size", NVFP4_GROUP)
        if name == "lm_head" or name.endswith(".lm_head"):
            found[(LM_HEAD, "lm_head", algo)] = None
        elif match := _LAYER_KEY.match(name):
            found[(int(match.group(1)), module_role(match.group(2)), algo)] = None
    group = NVFP4_GROUP if group is None else group
    if isinstance(group, bool) or not isinstance(group, int) or group <= 0:
        raise KvplanError(f"quantized_layers: group_size must be a positive integer, got {group!r}", where)
    return tuple(found), group


def unknown_formats(quant: Quantization | None) -> list[str]:
    """The algorithms a MIXED_PRECISION map names that kvplan does not weigh, sorted."""
    return sorted({algo for _, _, algo in quant.formats if algo not in MIXED_FORMATS}) if quant else []


def check_formats(quant: Quantization | None, allow_unmodelled: bool, where: str) -> list[str]:
    """Refuse a MIXED_PRECISION map naming an algorithm kvplan does not weigh, naming it; with allow_unmodelled,
    the note that those modules are counted at the model dtype."""
    unknown = unknown_formats(quant)
    if quant is None or not unknown:
        return []
    named = ", ".join(unknown)
    if not allow_unmodelled:
        raise KvplanError(f"{quant.source} quantized_layers names quant_algo {named}, which kvplan does not model "
                          f"(it weighs {', '.join(MIXED_FORMATS)}); --allow-unmodelled counts those modules at the "
                          "model dtype", where)
    return [f"{quant.source} quantized_layers: quant_algo {named} not modelled; those modules counted at the model "
            "dtype"]


def hybrid_moe_format(section: dict[str, Any]) -> str | None:
    """'nvfp4' for ModelOpt's hybrid fp8 checkpoint (quant_method fp8, quant_algo MIXED_PRECISION, moe_quant_algo
    NVFP4: nvidia/DeepSeek-V4-*-NVFP4), whose routed experts both engines load as NVFP4 beside the block FP8 of
    the rest: vLLM 0.33.0 models/deepseek_v4/quant_config.py DeepseekV4FP8Config.get_quant_method (where
    expert_dtype is fp4), SGLang 0.5.23 configs/model_config.py nvfp4_moe_meta. None otherwise."""
    hybrid = str(section.get("quant_algo", "")).upper() == "MIXED_PRECISION"
    return "nvfp4" if hybrid and str(section.get("moe_quant_algo", "")).upper() == "NVFP4" else None


def is_excluded(excluded: tuple[str, ...], name: str) -> bool:
    """Whether exclude_modules names module `name` ('lm_head') exactly or by wildcard."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in _patterns(excluded))


INLINE_SOURCE = "config.json"


def is_inline(section: dict[str, Any]) -> bool:
    """config.json's quantization_config is ModelOpt's own where its quant_method starts with 'modelopt' (vLLM
    0.33.0 modelopt.py ModelOptQuantConfigBase._extract_modelopt_quant_algo)."""
    method = section.get("quant_method")
    return isinstance(method, str) and method.lower().startswith("modelopt")


def inline_kv_algo(section: dict[str, Any]) -> str | None:
    """The KV cache algorithm of an inline ModelOpt config: kv_cache_scheme, else kv_cache_quant_algo (vLLM 0.33.0
    utils/torch_utils.py get_kv_cache_quant_algo_string, which decides kv_cache_dtype auto: a scheme of static
    8-bit floats is fp8, of 4-bit floats nvfp4)."""
    scheme = section.get("kv_cache_scheme") or section.get("kv_cache_quant_algo")
    if isinstance(scheme, dict):
        if scheme.get("type") == "float" and scheme.get("num_bits") == 8 and scheme.get("dynamic") is False:
            return "FP8"
        return "NVFP4" if scheme.get("type") == "float" and scheme.get("num_bits") == 4 else None
    return scheme if isinstance(scheme, str) else None


def parse_inline_config(section: dict[str, Any], where: str) -> Quantization:
    """config.json's quantization_config as ModelOpt 0.29+ writes it (quant_method 'modelopt', quant_algo,
    kv_cache_scheme, ignore), read as vLLM 0.33.0 reads it: modelopt.py ModelOptQuantConfigBase.from_config's flat
    branch (exclude_modules from 'ignore' or 'exclude_modules', group_size from the top, 16 for NVFP4 where none
    is given) and each config's override_quantization_method (quant_algo FP8 'modelopt', NVFP4 'modelopt_fp4',
    MIXED_PRECISION 'modelopt_mixed'); so the weights and the KV dtype under auto follow as for
    hf_quant_config.json. where: the config, for errors."""
    algo, excluded, group = _checked(section, "quantization_config", "ignore",
                                     section.get("ignore", section.get("exclude_modules", [])), where)
    quant = _quantization(algo, inline_kv_algo(section), excluded, group, INLINE_SOURCE, section, where)
    return replace(quant, kv_cache_scheme=unread_kv_scheme(section))


def unread_kv_scheme(section: dict[str, Any]) -> str | None:
    """A kv_cache_scheme object that is neither 8-bit nor 4-bit float, as sorted JSON, so the plan's note can say
    what each engine makes of it: no KV cache quantization in vLLM 0.33.0 (modelopt.py
    ModelOptQuantConfigBase.from_config: kv_cache_quant_method None), TensorRT-LLM (quantization/modelopt_config.py
    parse_modelopt_quant_config, _read_flat -> _kv_cache_scheme_to_algo None) and SGLang 0.5.23
    (srt/layers/quantization/modelopt_quant.py: no FP8 / NVFP4). None where it is one of those or not an object."""
    scheme = section.get("kv_cache_scheme")
    if not isinstance(scheme, dict) or (scheme.get("type") == "float" and scheme.get("num_bits") in (8, 4)):
        return None
    return json.dumps(scheme, sort_keys=True)


def _patterns(excluded: tuple[str, ...]) -> list[str]:
    """ModelOpt's 'module_path*' means module_path and everything under it, not module_path7 (vLLM 0.33.0
    modelopt.py apply_vllm_mapper splits it into 'module_path' and 'module_path.*')."""
    patterns = []
    for name in excluded:
        if len(name) >= 2 and name.endswith("*") and name[-2] != ".":
            patterns += [name[:-1], name[:-1] + ".*"]
        else:
            patterns.append(name)
    return patterns


# Representative names of each role's linear modules in one decoder layer, after 'layers.N.', across the
# families' module trees (Llama/Qwen self_attn and mlp, DeepSeek/GLM/Kimi MLA and shared_experts, Nemotron-H
# mixer, Qwen3.5 linear_attn, MiniMax block_sparse_moe, DeepSeek-V4 attn and ffn).
ROLE_NAMES = {
    "mixer": ("self_attn.q_proj", "self_attn.qkv_proj", "self_attn.o_proj", "self_attn.q_a_proj",
              "self_attn.kv_a_proj_with_mqa", "self_attn.kv_b_proj", "mixer.in_proj", "mixer.out_proj",
              "mixer.q_proj", "mixer.k_proj", "mixer.v_proj", "mixer.o_proj", "linear_attn.in_proj_qkvz",
              "linear_attn.out_proj", "attn.wq_a", "attn.wo_a"),
    "mlp": ("mlp.gate_proj", "mlp.down_proj", "mlp.shared_experts.gate_proj", "mlp.shared_expert.gate_proj",
            "mixer.shared_experts.up_proj", "mixer.fc1_latent_proj", "block_sparse_moe.shared_experts.gate_proj",
            "ffn.shared_experts.w1"),
    "experts": ("mlp.experts.0.gate_proj", "mixer.experts.0.up_proj", "block_sparse_moe.experts.0.w1",
                "ffn.experts.0.w1", "mlp.experts.gate_up_proj"),
}


def excluded_roles(excluded: tuple[str, ...], layer: int) -> frozenset[str]:
    """Which of decoder layer `layer`'s roles (mixer, mlp, experts) exclude_modules keeps unquantized. A role is
    excluded when any of its linear modules is (vLLM 0.33.0 is_layer_excluded: the exact name, a substring, or
    a wildcard); a whole role is then weighed at the model dtype."""
    found = set()
    for pattern in _patterns(excluded):
        rest = pattern.split("layers.", 1)[1] if "layers." in pattern else None
        for role, names in ROLE_NAMES.items():
            for name in names:
                local = f"{layer}.{name}"
                if rest is not None:
                    hit = fnmatch.fnmatchcase(local, rest) or (not _wild(rest) and (local + ".").startswith(
                        rest + "."))
                else:  # a pattern for every layer ('*.attn.*', '*.mlp.shared_expert.*')
                    hit = _wild(pattern) and fnmatch.fnmatchcase(f"model.layers.{local}", pattern)
                if hit:
                    found.add(role)
                    break
    return frozenset(found)


def _wild(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")
