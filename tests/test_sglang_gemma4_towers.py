"""SGLang's towers on each TP rank (kvplan/engines/sglang/towers.py), module by module as SGLang 0.5.23 builds them:
Gemma 4's encoder layers on parallel linears split over TP, the rest whole (srt/models/gemma4_mm.py,
gemma4_vision.py, gemma4_audio.py, layers/clippable_linear.py); Qwen2-Audio's transformers modules whole
(srt/models/qwen2_audio.py). vLLM 0.33.0 keeps Gemma 4's towers whole on every rank (tests/test_gemma4_audio.py)."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.calibration import engines as calibration
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.hardware import find_gpu
from kvplan.models.sources import read_local
from kvplan.plan import GpuChoice

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# the released E2B / E4B audio_config, as tests/test_gemma4_audio.py takes it (Gemma4AudioConfig's defaults)
AUDIO = {"model_type": "gemma4_audio", "hidden_size": 1024, "num_hidden_layers": 12, "num_attention_heads": 8,
         "output_proj_dims": 1536, "subsampling_conv_channels": [128, 32], "conv_kernel_size": 5,
         "use_clipped_linears": True}

# kvplan's counts for gemma-4-31b-it (tests/test_gemma4_audio.py): vision 575,743,536, the E2B audio tower on its
# 5,376 text width 313,082,624. By hand, what SGLang splits over TP:
# vision (hidden 1,152, MLP 4,304, 27 layers, 16 heads and 16 KV heads of 72): per layer the fused qkv
# 1,152 x 48 x 72, o_proj 1,152 x 1,152, gate_up 1,152 x 2 x 4,304, down_proj 4,304 x 1,152
VISION_SPLIT = 27 * (1152 * 48 * 72 + 1152 * 1152 + 1152 * 2 * 4304 + 4304 * 1152)
# whole: input_proj 768 x 1,152, the 2 x 10,240 x 1,152 position table, per layer q_norm and k_norm (72 each) and
# four norms (1,152 each), std_bias and std_scale, embed_vision 1,152 x 5,376
VISION_WHOLE = 768 * 1152 + 2 * 10240 * 1152 + 27 * (2 * 72 + 4 * 1152) + 2 * 1152 + 1152 * 5376
# audio (hidden 1,024, 12 layers, kernel 5): per layer ffw_layer_1 and ffw_layer_2 in both feed-forwards, pos_proj,
# the fused qkv and post, linear_start (1,024 -> 2 x 1,024), the depthwise conv (1,024 x 5) and conv_norm (1,024)
# built 1,024 / TP wide, linear_end; the subsampler's input_proj_linear (32 x 32 -> 1,024), output_proj's weight
AUDIO_LAYER_SPLIT = (2 * (1024 * 4096 + 4096 * 1024) + 1024 * 1024 + 1024 * 3072 + 1024 * 1024
                     + 1024 * 2048 + 5 * 1024 + 1024 + 1024 * 1024)
AUDIO_SPLIT = 12 * AUDIO_LAYER_SPLIT + 1024 * 1024 + 1024 * 1536
# whole: the two Conv2d (1 -> 128 -> 32, 3 x 3) and their LayerNorms, per layer eight norms, per_dim_scale (128) and
# the 40 clip bounds, output_proj's bias (1,536), embed_audio 1,536 x 5,376
AUDIO_WHOLE = (9 * 128 + 128 + 9 * 128 * 32 + 32 + 12 * (8 * 1024 + 128 + 40) + 1536 + 1536 * 5376)
assert (VISION_SPLIT, VISION_WHOLE, VISION_SPLIT + VISION_WHOLE) == (544_942_080, 30_801_456, 575_743_536)
assert (AUDIO_SPLIT, AUDIO_WHOLE, AUDIO_SPLIT + AUDIO_WHOLE) == (304_685_056, 8_397_568, 313_082_624)


def _config(tmp_path: Path, name: str, vision: bool = True, audio: bool = False) -> Path:
    config = json.loads((Path(calibration.MODELS) / "gemma-4-31b-it.json").read_text(encoding="utf-8"))
    if not vision:
        del config["vision_config"]
    if audio:
        config["audio_config"] = AUDIO
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _weights(path: Path, tp: int, engine: str = "sglang") -> int:
    gpu = find_gpu("h100")
    dep = Deployment(engine=engine, gpu=gpu.id, max_model_len=8192, tensor_parallel_size=tp,
                     engine_version="0.33.0" if engine == "vllm" else None)
    return plan_deployment(read_local(path), dep, GpuChoice.of(gpu, tp)).memory.weights_bytes


def test_gemma4_vision_tower_per_rank_at_tp2(tmp_path):
    with_vision, text = _config(tmp_path, "vision"), _config(tmp_path, "text", vision=False)
    assert read_local(with_vision).params.vision == VISION_SPLIT + VISION_WHOLE
    # bfloat16: each rank holds half the split part and the whole rest, 303,272,496 parameters
    assert _weights(with_vision, 2) - _weights(text, 2) == (VISION_SPLIT // 2 + VISION_WHOLE) * 2 == 606_544_992
    # at TP 1 the whole tower
    assert _weights(with_vision, 1) - _weights(text, 1) == 575_743_536 * 2
    # vLLM 0.33.0 keeps it whole on each rank (multimodal.py Gemma4.whole_tower)
    assert _weights(with_vision, 2, "vllm") - _weights(text, 2, "vllm") == 575_743_536 * 2


def test_gemma4_vision_and_audio_towers_per_rank_at_tp2(tmp_path):
    both, text = _config(tmp_path, "both", audio=True), _config(tmp_path, "text", vision=False)
    assert read_local(both).params.vision == 575_743_536 + 313_082_624
    held = (VISION_SPLIT + AUDIO_SPLIT) // 2 + VISION_WHOLE + AUDIO_WHOLE  # 464,012,592 parameters
    assert _weights(both, 2) - _weights(text, 2) == held * 2 == 928_025_184
    gpu = find_gpu("h100")
    plan = plan_deployment(read_local(both), Deployment(engine="sglang", gpu=gpu.id, max_model_len=32768,
                                                        tensor_parallel_size=2), GpuChoice.of(gpu, 2))
    assert ("towers: 0.86 GiB of their 1.66 GiB on each rank, 849,627,136 of 888,826,160 parameters split over "
            "TP 2") in " ".join(plan.notes)


def test_qwen2_audio_tower_whole_on_each_rank(tmp_path):
    # srt/models/qwen2_audio.py builds transformers' Qwen2AudioEncoder and projector: 642,215,936 parameters whole
    # on each rank beside half the 7,754,878,976 of the text model (tests/test_audio_towers_issue20.py)
    path = FIXTURES / "audio" / "qwen2-audio-7b-instruct.json"
    assert _weights(path, 2) == 7_754_878_976 * 2 // 2 + 642_215_936 * 2
    assert _weights(path, 1) == (7_754_878_976 + 642_215_936) * 2
    # no vision_config: arg_groups/memory_hook.py adjust_mem_fraction_for_vlm leaves the default fraction as it is,
    # so the plan does not say a vision tower's lowering was left out
    gpu = find_gpu("h100")
    plan = plan_deployment(read_local(path), Deployment(engine="sglang", gpu=gpu.id, max_model_len=8192),
                           GpuChoice.of(gpu, 1))
    assert not any(note.startswith("vision tower:") for note in plan.notes)
    assert any(note.startswith("multimodal model: 100 MiB") for note in plan.notes)


def test_qwen2_audio_tower_on_every_pipeline_stage():
    # qwen2_audio.py builds the tower in __init__ with no pipeline-stage guard (gemma4_mm.py builds its towers on the
    # first PP rank only): at PP 2 both stages hold its 1,284,431,872 B beside their half of the text model
    gpu = find_gpu("h100")
    path = FIXTURES / "audio" / "qwen2-audio-7b-instruct.json"
    plan = plan_deployment(read_local(path), Deployment(engine="sglang", gpu=gpu.id, max_model_len=8192,
                                                        pipeline_parallel_size=2), GpuChoice.of(gpu, 2))
    # weights.weight_layout spreads the final norm over the 32 decoder layers: each stage 16 of them, one of the
    # embedding and the untied lm_head
    text_stage = (7_754_878_976 - 2 * 156032 * 4096) * 2 // 32 * 16 + 156032 * 4096 * 2
    assert [memory.weights_bytes for memory in plan.stage_memories] == [text_stage + 642_215_936 * 2] * 2
    assert any(note.startswith("towers: 1.20 GiB of their 1.20 GiB on each rank (on every pipeline stage)")
               for note in plan.notes)
