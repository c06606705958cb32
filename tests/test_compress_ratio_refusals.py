"""A DeepSeek-V4 compress ratio an engine does not take is refused naming the engine planned (it used to cite
vLLM's compressor whatever the engine): vLLM 0.33.0's compressor takes 4 and 128 (kvplan's layer model);
SGLang 0.5.23 mem_cache/deepseek_v4_memory_pool.py collect_sources_by_ratio takes 0, 1, 2, 4 and 128 (2 is
not modelled by kvplan); TensorRT-LLM's DeepSeek-V4 metadata 0/1, 4 and 128 (engines/trtllm/deepseek_v4.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvplan
from kvplan.errors import KvplanError

FLASH = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "deepseek-ai__DeepSeek-V4-Flash"


def _with_ratio(tmp_path: Path, ratio: int) -> str:
    config = json.loads((FLASH / "config.json").read_text())
    config["compress_ratios"][2] = ratio  # Flash's third layer is a ratio-4 one
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


@pytest.mark.parametrize(("engine", "ratio", "named"), [
    ("vllm", 8, "not one vLLM 0.33.0's compressor takes (4 or 128)"),
    ("sglang", 8, "not one SGLang 0.5.23's DeepSeek-V4 pools take (0, 1, 2, 4 or 128"),
    ("sglang", 2, "SGLang 0.5.23 takes a ratio of 2 (kv-source layers, collect_sources_by_ratio), which kvplan "
                  "does not model"),
    ("trtllm", 8, "TensorRT-LLM's DeepSeek-V4 metadata takes ratios 0/1, 4 and 128, not 8"),
    ("trtllm", 2, "TensorRT-LLM's DeepSeek-V4 metadata takes ratios 0/1, 4 and 128, not 2")])
def test_the_refusal_names_the_engine_planned(tmp_path, engine, ratio, named):
    with pytest.raises(KvplanError) as error:
        kvplan.estimate(_with_ratio(tmp_path, ratio), gpu="h200", tensor_parallel_size=8, engine=engine,
                        kv_cache_memory_bytes=40 << 30)
    assert named in str(error.value)
    others = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
    assert not any(label in str(error.value) for key, label in others.items() if key != engine)
