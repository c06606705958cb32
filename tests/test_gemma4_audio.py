"""Issue 20 item 4: Gemma 4's tower weights (kvplan/models/tower_params.py gemma4_audio, gemma4_vision), counted
module by module from the audio_config and vision_config as vLLM 0.33.0 gemma4_mm.py builds the towers
(transformers' Gemma4AudioModel and Gemma4VisionModel, each with its Gemma4MultimodalEmbedder), and vLLM's
_mark_tower_model skipping the audio tower by the audio limit alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.calibration import engines as calibration
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.errors import KvplanError
from kvplan.hardware import find_gpu
from kvplan.models.fields import ConfigFields
from kvplan.models.sources import read_local
from kvplan.models.tower_params import gemma4_audio
from kvplan.plan import GpuChoice

ROOT = Path(__file__).resolve().parents[1]

# The released E2B / E4B audio_config's fields (a stored copy of them: read_file id 71317172887, which checks a
# checkpoint's audio_config against these values); the Hub is unreachable, so the config is not read from there.
AUDIO = {"model_type": "gemma4_audio", "hidden_size": 1024, "num_hidden_layers": 12, "num_attention_heads": 8,
         "output_proj_dims": 1536, "subsampling_conv_channels": [128, 32], "conv_kernel_size": 5,
         "use_clipped_linears": True, "hidden_act": "silu", "rms_norm_eps": 1e-6}

# By hand, hidden 1,024, 8 heads of 128, channels 128 and 32, kernel 5, output 1,536:
SUBSAMPLE = 9 * 128 + 128 + 9 * 128 * 32 + 32 + 32 * 32 * 1024  # two 3x3 convs + their LayerNorms + input_proj
FEED_FORWARD = 1024 * 4096 + 4096 * 1024 + 2 * 1024  # ffw_layer_1, ffw_layer_2, pre and post norms
ATTENTION = 4 * 1024 * 1024 + 1024 * 1024 + 128  # q, k, v, relative_k_proj; post; per_dim_scale
LIGHT_CONV = 1024 * 2048 + 1024 * 1024 + 5 * 1024 + 2 * 1024  # linear_start, linear_end, depthwise, two norms
LAYER = 2 * FEED_FORWARD + ATTENTION + LIGHT_CONV + 3 * 1024 + 10 * 4  # three norms, ten clipped linears' bounds
TOWER = SUBSAMPLE + 12 * LAYER + 1024 * 1536 + 1536  # output_proj with its bias
assert (SUBSAMPLE, LAYER, TOWER) == (1_086_752, 25_180_328, 304_825_088)


def _config(tmp_path: Path, audio: dict | None = AUDIO, name: str = "with_audio") -> Path:
    # gemma-4-31b-it's config (engine-calibration Y13) with the E2B / E4B audio tower beside its vision tower
    config = json.loads((Path(calibration.MODELS) / "gemma-4-31b-it.json").read_text(encoding="utf-8"))
    if audio is not None:
        config["audio_config"] = audio
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _plan(path: Path, tp: int = 1, **knobs):
    gpu = find_gpu("h100")
    dep = Deployment(engine="vllm", engine_version="0.33.0", gpu=gpu.id, max_model_len=32768,
                     tensor_parallel_size=tp, **knobs)
    choice = GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, tp, gpu.compute_capability, gpu.fp8)
    return plan_deployment(read_local(path), dep, choice)


def test_audio_tower_counted_module_by_module():
    # embed_audio projects output_proj_dims to the text width: E2B's 1,536 text hidden gives 307,184,384, within
    # the "~300M" Google's Gemma 4 model card gives its audio encoder
    assert gemma4_audio(ConfigFields(AUDIO, "t"), 1536) == TOWER + 1536 * 1536 == 307_184_384
    # without clipped linears the 12 x 10 x 4 clipping scalars are not in the checkpoint
    assert gemma4_audio(ConfigFields({**AUDIO, "use_clipped_linears": False}, "t"), 1536) == 307_184_384 - 480
    # Gemma4AudioConfig's defaults are the released values
    assert gemma4_audio(ConfigFields({"model_type": "gemma4_audio"}, "t"), 1536) == 307_184_384


def test_audio_tower_adds_to_the_weights(tmp_path):
    with_audio, without = read_local(_config(tmp_path)), read_local(_config(tmp_path, None, "plain"))
    grown = TOWER + 1536 * 5376  # the 31B's text width: 313,082,624
    assert with_audio.params.total - without.params.total == grown == 313_082_624
    assert with_audio.params.vision - without.params.vision == grown == with_audio.tower.audio_params
    on = _plan(_config(tmp_path, name="on"))
    plain = _plan(_config(tmp_path, None, "off"))
    assert on.memory.weights_bytes - plain.memory.weights_bytes == grown * 2  # bfloat16


def test_audio_tower_skipped_by_its_own_limit(tmp_path):
    # gemma4_mm.py __init__: _mark_tower_model(vllm_config, {"image", "video"}) around the vision tower and
    # embed_vision, _mark_tower_model(vllm_config, "audio") around the audio tower and embed_audio; interfaces.py
    # skips a marked tower where every one of its modalities has a limit of 0
    path = _config(tmp_path)
    spec = read_local(path)
    vision = spec.params.vision - spec.tower.audio_params
    everything = _plan(path)
    audio_off = _plan(path, limit_mm_per_prompt={"audio": 0})
    vision_off = _plan(path, limit_mm_per_prompt={"image": 0, "video": 0})
    text_only = _plan(path, language_model_only=True)
    assert everything.memory.weights_bytes - audio_off.memory.weights_bytes == 313_082_624 * 2
    assert everything.memory.weights_bytes - vision_off.memory.weights_bytes == vision * 2
    assert everything.memory.weights_bytes - text_only.memory.weights_bytes == (vision + 313_082_624) * 2
    # the panel's note names what is not loaded: 626,165,248 B (0.58 GiB) for the audio tower alone
    assert any("tower not loaded" in note and "0.58 GiB less weights" in note for note in audio_off.notes)
    assert not any("tower not loaded" in note for note in everything.notes)


def test_vision_tower_counted_module_by_module():
    # gemma-4-31b-it's vision_config (Y13's config): hidden 1,152, MLP 4,304, 27 layers, 16 heads (and key-value
    # heads) of 72, patch 16, 10,240 positions, standardize, no clipped linears; text width 5,376
    embedder = 3 * 16 * 16 * 1152 + 2 * 10240 * 1152  # input_proj, position_embedding_table
    layer = 4 * 1152 * 16 * 72 + 2 * 72 + 3 * 1152 * 4304 + 4 * 1152  # q k v o, q_norm k_norm, gated MLP, 4 norms
    tower = embedder + 27 * layer + 2 * 1152 + 1152 * 5376  # std_bias, std_scale; embed_vision
    assert (layer, tower) == (20_187_792, 575_743_536)  # Google's model card: a ~550M vision encoder
    spec = read_local(Path(calibration.MODELS) / "gemma-4-31b-it.json")
    assert spec.params.vision == tower
    # gemma-4-26B-A4B's tower (the same vision_config, text width 2,816): a published GGUF of its projector,
    # mmproj-gemma-4-26b-a4b-it-f16.gguf, is 1,193,058,432 bytes (its model page, keyuan01/Gemma-4-26B-A4B-it-MixQ-
    # 13G-GGUF). llama.cpp writes 2-D weights in f16 and 1-D tensors in f32; with the 3-D position table in f32
    # too, the count leaves 22,464 bytes for the file's header and tensor index
    moe = read_local(ROOT / "tests" / "fixtures" / "configs" / "frontier" / "google__gemma-4-26B-A4B" / "config.json")
    assert moe.params.vision == tower - 1152 * 5376 + 1152 * 2816 == 572_794_416
    wide = 2 * 10240 * 1152 + 27 * (4 * 1152 + 2 * 72) + 2 * 1152  # position table, norms, std buffers: 4 B each
    assert 1_193_058_432 - (2 * moe.params.vision + 2 * wide) == 22_464
    # Y13's vLLM 0.23.0 log: "Model loading took 58.99 GiB". From its config the count gives 58.75 GiB (58.46 with
    # the tower estimated as a plain ViT, 0.29 GiB lower)
    entry = {entry["id"]: entry for entry in calibration.entries()}["Y13"]
    plan = calibration.vllm_plan(entry)
    assert 0 < entry["weights_gib"] * 2**30 - plan.memory.weights_bytes < 0.25 * 2**30


def test_towers_whole_on_every_tp_rank(tmp_path):
    # gemma4_mm.py builds both towers with AutoModel.from_config and recursive_replace_linear's "replicate" linears,
    # the embedders with ReplicatedLinear: at TP 2 each rank holds the whole 575,743,536 + 313,082,624 parameters
    path = _config(tmp_path)
    towers = (575_743_536 + 313_082_624) * 2
    assert _plan(path, 2).memory.weights_bytes - _plan(path, 2, language_model_only=True).memory.weights_bytes \
        == towers == 1_777_652_320
    assert _plan(path, 2).memory.weights_bytes - _plan(path, 2, limit_mm_per_prompt={"audio": 0}).memory.weights_bytes \
        == 313_082_624 * 2
    # whole on each rank, so the note's bytes are not divided by TP: 1,777,652,320 B = 1.66 GiB
    assert any("1.66 GiB less weights" in note for note in _plan(path, 2, language_model_only=True).notes)


def test_audio_config_of_an_uncounted_wrapper_is_refused():
    from kvplan.models.tower_params import audio

    with pytest.raises(KvplanError, match="audio_config"):
        audio(ConfigFields({"model_type": "gemma3n", "audio_config": {}}, "t"), 2048)
