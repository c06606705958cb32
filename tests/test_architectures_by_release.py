"""A plan for an architecture the chosen engine release does not register is refused by name (issue 18 section 5,
issue 22 item 3). Each expected range is read in the release wheels named (their model registries), not taken from
the data file under test: vLLM's vllm/model_executor/models/registry.py, SGLang's srt/models/*.py EntryClass."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from kvplan.api import load_model
from kvplan.deployment.front_doors import from_cli
from kvplan.engines.vllm.releases import COVERED
from kvplan.errors import KvplanError

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
# ibm-ai-platform/Bamba-9B's geometry as tests/test_hybrid_params.py quotes it
BAMBA = {"architectures": ["BambaForCausalLM"], "model_type": "bamba", "num_hidden_layers": 32,
         "num_attention_heads": 32, "hidden_size": 4096, "mamba_d_state": 128, "attn_layer_indices": [9, 18, 27],
         "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "mamba_n_heads": 128,
         "mamba_d_head": 64, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16", "max_position_embeddings": 4096}


def plan_of(model: str, version: str, engine: str = "vllm", *flags: str) -> Any:
    from kvplan.api import estimates

    own = {"model": (model, "--model"), "gpu": ("h100", "--gpu"), "engine": (engine, "--engine"),
           "engine_version": (version, "--engine-version")}
    return estimates(from_cli(own, ["--max-model-len", "4096", *flags], None, None, environ={}))[0].plan


@pytest.fixture
def bamba(tmp_path: Path) -> str:
    (tmp_path / "config.json").write_text(json.dumps(BAMBA))
    return str(tmp_path)


def test_bamba_is_refused_after_vllm_dropped_it(bamba: str) -> None:
    # vllm-0.24.0-cp38-abi3-manylinux_2_28_x86_64.whl registry.py: BambaForCausalLM only in
    # _PREVIOUSLY_SUPPORTED_MODELS ("0.23.0"); vllm-0.7.3-cp38-abi3-manylinux1_x86_64.whl's _TEXT_GENERATION_MODELS is
    # the first with it (0.7.2's has none), vllm-0.23.0-2-cp38-abi3-manylinux_2_28_x86_64.whl the last
    for version in ("0.33.0", "0.24.0", "0.7.2"):
        with pytest.raises(KvplanError, match=rf"vLLM {version} does not register BambaForCausalLM \(registered "
                                              r"0\.7\.3-0\.23\.0\)"):
            plan_of(bamba, version)
    for version in ("0.22.0", "0.23.0", "0.7.3"):
        assert plan_of(bamba, version).capacity.tokens > 0


def test_the_refusal_is_one_line_and_exit_2(bamba: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "estimate", "--model", bamba, "--gpu", "h100", "--max-model-len", "4096",
                           "--vllm-version", "0.33.0")
    assert code == 2
    assert err.strip().count("\n") == 0 and "vLLM 0.33.0 does not register BambaForCausalLM" in err


def test_allow_unmodelled_plans_it_with_a_note(bamba: str) -> None:
    plan = plan_of(bamba, "0.33.0", "vllm", "--allow-unmodelled")
    assert any(note.startswith("vLLM 0.33.0 does not register BambaForCausalLM (registered 0.7.3-0.23.0)")
               for note in plan.notes)


@pytest.mark.parametrize(("flags", "registry"), [
    ((), "PyTorch backend does not register BambaForCausalLM (its tensorrt_llm/_torch/models/_arch_index.py at "
         "065ff9e9, applied to 1.2.1)"),
    (("--backend", "tensorrt"), "TensorRT engine backend does not register BambaForCausalLM (its "
                                "tensorrt_llm/models/__init__.py MODEL_MAP at 02267d3d, applied to 1.2.1")])
def test_tensorrt_llm_refuses_bamba_on_both_backends(bamba: str, flags: tuple[str, ...], registry: str) -> None:
    # neither stored registry names BambaForCausalLM: _arch_index.py's MODEL_ARCH_TO_MODULE at 065ff9e9 (the
    # PyTorch backend) and models/__init__.py's MODEL_MAP at 02267d3d (kvplan/engines/trtllm/data/architectures.json)
    data = json.loads((Path(__file__).parent.parent / "kvplan/engines/trtllm/data/architectures.json").read_text())
    assert not any("Bamba" in name for name in json.dumps(data).split('"'))
    with pytest.raises(KvplanError, match=f"TensorRT-LLM's {re.escape(registry)}") as refused:
        plan_of(bamba, "1.2.1", "trtllm", *flags)
    # what fails at start-up is the backend's own table: the PyTorch backend's AutoModelForCausalLM
    # (_torch/models/modeling_auto.py), the engine backend's missing MODEL_MAP key
    said = str(refused.value)
    assert ("AutoModelForCausalLM" in said) == (not flags) and ("no MODEL_MAP key" in said) == bool(flags)
    # --allow-unmodelled plans it with the refusal as a note (no tokens at max_batch_size 2048 on one H100: the
    # Mamba states' fixed cost, a note of the plan's own)
    noted = plan_of(bamba, "1.2.1", "trtllm", *flags, "--allow-unmodelled")
    assert any(note.startswith(f"TensorRT-LLM's {registry}") for note in noted.notes)


def test_a_config_without_architectures_is_not_checked(tmp_path: Path) -> None:
    # both engines refuse or fall back only on the names config.json gives; kvplan names such a config by its
    # model_type, which no registry holds
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in BAMBA.items() if k != "architectures"}))
    assert plan_of(str(tmp_path), "0.33.0").capacity.tokens > 0


def test_qwen2_is_registered_by_every_covered_vllm_release() -> None:
    # Qwen2ForCausalLM is in the registry of every wheel from vllm-0.6.0-cp38-abi3-manylinux1_x86_64.whl
    # (models/registry.py _MODELS) to vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl (_TEXT_GENERATION_MODELS)
    from kvplan.engines.vllm.architectures import REGISTRIES

    assert [v for v in COVERED if REGISTRIES.unregistered("Qwen2ForCausalLM", v)] == []
    for version in (COVERED[0], "0.22", COVERED[-1]):
        assert plan_of("Qwen/Qwen2.5-7B", version).capacity.tokens > 0


def test_deepseek_v4_before_vllm_registered_it() -> None:
    # vllm-0.20.0-cp38-abi3-manylinux_2_35_x86_64.whl registry.py: "DeepseekV4ForCausalLM": ("deepseek_v4", ...) in
    # _TEXT_GENERATION_MODELS; vllm-0.19.0-cp38-abi3-manylinux_2_31_x86_64.whl has no such key
    flash = str(FRONTIER / "deepseek-ai__DeepSeek-V4-Flash")
    with pytest.raises(KvplanError, match=r"vLLM 0\.19\.0 does not register DeepseekV4ForCausalLM \(registered "
                                          r"0\.20\.0-0\.33\.0\)"):
        plan_of(flash, "0.19.0")
    from kvplan.engines.vllm.architectures import REGISTRIES

    assert REGISTRIES.unregistered("DeepseekV4ForCausalLM", "0.20.0") is None


def test_sglang_by_release() -> None:
    # sglang-0.5.12 wheel srt/models/deepseek_v4.py: EntryClass = [DeepseekV4ForCausalLM]; sglang-0.5.11's
    # srt/models has no deepseek_v4.py. SGLang serves an unregistered name with TransformersForCausalLM
    # (registry.py _normalize_archs), not with the class kvplan models.
    flash = str(FRONTIER / "deepseek-ai__DeepSeek-V4-Flash")
    with pytest.raises(KvplanError, match=r"SGLang 0\.5\.11 does not register DeepseekV4ForCausalLM \(registered "
                                          r"0\.5\.12-0\.5\.23\).*Transformers backend"):
        plan_of(flash, "0.5.11", "sglang")
    # Qwen2ForCausalLM: srt/models/qwen2.py EntryClass in sglang-0.4.6-py3-none-any.whl through
    # sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl
    assert plan_of("Qwen/Qwen2.5-7B", "0.4.6", "sglang").capacity.tokens > 0
    # JambaForCausalLM: no srt/models module of sglang 0.4.6-0.5.23 names it in an EntryClass
    from kvplan.engines.sglang.architectures import REGISTRIES

    assert REGISTRIES.unregistered("JambaForCausalLM", "0.5.23") == (
        "SGLang 0.5.23 does not register JambaForCausalLM (nor does any release from 0.4.6 to 0.5.23)")


# TensorRT-LLM: the PyTorch backend's registered names, from the stored NVIDIA/TensorRT-LLM sources (no wheel on
# PyPI): tensorrt_llm/_torch/models/_arch_index.py MODEL_ARCH_TO_MODULE at commit 065ff9e9 (read_file id
# 57385838927), the static index of the modeling_*.py @register_auto_model names. An unregistered name makes
# _torch/models/modeling_auto.py AutoModelForCausalLM.from_config raise "Unknown architecture for
# AutoModelForCausalLM".
def zamba2_config(tmp_path: Path) -> str:
    from test_zamba2 import ZAMBA2_2_7B

    (tmp_path / "config.json").write_text(json.dumps(ZAMBA2_2_7B))
    return str(tmp_path)


def test_zamba2_is_refused_on_tensorrt_llm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # no Zamba2 entry in _arch_index.py at 065ff9e9 and no @register_auto_model("Zamba2...") in any stored
    # NVIDIA/TensorRT-LLM modeling file; vLLM 0.33.0 registers it (models/registry.py)
    zamba2 = zamba2_config(tmp_path)
    with pytest.raises(KvplanError, match=r"TensorRT-LLM's PyTorch backend does not register Zamba2ForCausalLM "
                                          r"\(its tensorrt_llm/_torch/models/_arch_index\.py at 065ff9e9.*"
                                          r"Unknown architecture"):
        plan_of(zamba2, "1.2.1", "trtllm")
    code, _, err = run_cli(capsys, "estimate", "--model", zamba2, "--gpu", "h100", "--max-model-len", "4096",
                           "--engine", "trtllm")
    assert code == 2 and err.strip().count("\n") == 0 and "does not register Zamba2ForCausalLM" in err
    noted = plan_of(zamba2, "1.2.1", "trtllm", "--allow-unmodelled")
    assert any("does not register Zamba2ForCausalLM" in note for note in noted.notes)
    assert plan_of(zamba2, "0.33.0").capacity.tokens > 0


def test_the_tensorrt_engine_backend_has_its_own_table(tmp_path: Path) -> None:
    # --backend tensorrt builds from tensorrt_llm/models/__init__.py MODEL_MAP (stored copy at 02267d3d, read_file
    # id 9287858746): no Zamba2 key there either; DeepseekV2ForCausalLM and FalconForCausalLM are keys there
    # although the PyTorch backend's index lacks them
    with pytest.raises(KvplanError, match=r"TensorRT-LLM's TensorRT engine backend does not register "
                                          r"Zamba2ForCausalLM \(its tensorrt_llm/models/__init__\.py MODEL_MAP at "
                                          r"02267d3d"):
        plan_of(zamba2_config(tmp_path), "1.2.1", "trtllm", "--backend", "tensorrt")
    lite = plan_of("deepseek-ai/DeepSeek-V2-Lite", "1.2.1", "trtllm", "--backend", "trt")
    assert not any("does not register" in note for note in lite.notes)
    with pytest.raises(KvplanError, match="PyTorch backend does not register DeepseekV2ForCausalLM"):
        plan_of("deepseek-ai/DeepSeek-V2-Lite", "1.2.1", "trtllm")
    from kvplan.engines.trtllm.architectures import REGISTRIES

    assert {"FalconForCausalLM", "Gemma2ForCausalLM", "DeepseekV2ForCausalLM"} <= set(
        REGISTRIES.data()["engine_backend"]["architectures"])
    # 'Qwen3MoeForCausalLM': QWenForCausalLM is a key of another stored copy of that file (read_file id 820782731)
    # and not of 02267d3d's: kept, since the stored versions cannot be ordered
    assert REGISTRIES.refusal(load_model("Qwen/Qwen3-30B-A3B"), replace_backend("tensorrt"), "1.2.1") is None


def replace_backend(backend: str) -> Any:
    from kvplan.deployment import Deployment

    return Deployment.from_mapping({"gpu": "h100", "engine": "trtllm", "backend": backend})


@pytest.mark.parametrize(("model", "architecture", "module"), [
    # _arch_index.py at 065ff9e9: architecture -> module; the decorator in the module's stored copy (read_file id)
    ("Qwen/Qwen2.5-7B", "Qwen2ForCausalLM", "modeling_qwen"),  # id 897439166
    ("meta-llama/Llama-3.1-8B", "LlamaForCausalLM", "modeling_llama"),  # id 3642749976
    ("deepseek-ai/DeepSeek-V3", "DeepseekV3ForCausalLM", "modeling_deepseekv3"),  # id 3518086746
    ("nvidia/Nemotron-H-56B-Base-8K", "NemotronHForCausalLM", "modeling_nemotron_h"),  # id 51772101214
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen3NextForCausalLM", "modeling_qwen3_next"),  # id 750924321
])
def test_tensorrt_llm_registers(model: str, architecture: str, module: str) -> None:
    data = json.loads((Path(__file__).parent.parent / "kvplan/engines/trtllm/data/architectures.json").read_text())
    assert data["provided_by"][architecture] == f"tensorrt_llm/_torch/models/{module}.py"
    plan = plan_of(model, "1.2.1", "trtllm")  # planned, not refused (the larger ones do not fit one H100)
    assert plan.capacity.blocks_per_request > 0 and not any("does not register" in note for note in plan.notes)


def test_bundled_models_tensorrt_llm_lacks() -> None:
    # the stored index has DeepseekV3ForCausalLM / DeepseekV32ForCausalLM but no DeepseekV2ForCausalLM (that one
    # is the TensorRT engine backend's, models/__init__.py MODEL_MAP), nor Gemma2ForCausalLM, FalconForCausalLM,
    # FalconH1ForCausalLM, JambaForCausalLM; MiMoV2FlashForCausalLM is registered only in a fork's copy
    # (WeiHaocheng/TensorRT-LLM modeling_mimo_v2_flash.py), not NVIDIA's
    from kvplan.engines.trtllm.architectures import REGISTRIES

    for name in ("DeepseekV2ForCausalLM", "Gemma2ForCausalLM", "FalconForCausalLM", "FalconH1ForCausalLM",
                 "JambaForCausalLM", "MiMoV2FlashForCausalLM"):
        assert REGISTRIES.unregistered(name, "1.2.1") is not None, name
    for name in ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "Gemma3ForCausalLM", "MixtralForCausalLM"):
        assert REGISTRIES.unregistered(name, "1.2.0") is None, name
    # names the index at 065ff9e9 lacks, decorated in NVIDIA's stored modeling files of other commits:
    # modeling_qwen4_exp.py at 02746c52 (read_file id 57786742698), modeling_deepseekv41.py at f8ad1603 (70382673224)
    data = REGISTRIES.data()
    assert (data["read_at"]["Qwen4ExpForCausalLM"], data["read_at"]["DeepseekV41ForCausalLM"]) == ("02746c52",
                                                                                                   "f8ad1603")
    assert REGISTRIES.unregistered("Qwen4ExpForCausalLM", "1.2.1") is None
