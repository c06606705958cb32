"""Issue 20: an audio tower beside no vision tower is counted on its own (kvplan/models/params.py _towers,
tower_params.qwen2_audio), module by module as vLLM 0.33.0 qwen2_audio.py builds it; a sparse qwen2 text_config takes
Qwen2Config's defaults (models/subconfigs.py); what is not counted or not modelled says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.calibration import engines as calibration
from kvplan.errors import KvplanError
from kvplan.models.fields import ConfigFields
from kvplan.models.sources import read_local
from kvplan.models.tower_params import qwen2_audio

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "audio"
QWEN2_AUDIO = FIXTURES / "qwen2-audio-7b-instruct.json"

# By hand, Qwen2-Audio's audio_config: d_model 1,280, 32 encoder layers, encoder_ffn_dim 5,120, 128 mel bins, 1,500
# source positions; the text width 4,096 (Qwen2Config's default: the config's text_config leaves hidden_size out)
CONVS = (128 * 3 * 1280 + 1280) + (1280 * 3 * 1280 + 1280)  # conv1, conv2 with biases
POSITIONS = 1500 * 1280  # embed_positions
LAYER = (3 * (1280 * 1280 + 1280) + 1280 * 1280  # q, v, out_proj with biases; k_proj without
         + (1280 * 5120 + 5120) + (5120 * 1280 + 1280)  # fc1, fc2
         + 2 * 2 * 1280)  # self_attn_layer_norm, final_layer_norm (weight and bias)
ENCODER = CONVS + POSITIONS + 32 * LAYER + 2 * 1280  # the closing layer_norm
PROJECTOR = 1280 * 4096 + 4096  # multi_modal_projector.linear
AUDIO = ENCODER + PROJECTOR
# the Qwen2 text model: 32 layers of width 4,096, 32 heads and 32 KV heads of 128, MLP 11,008, vocabulary 156,032,
# lm_head untied (Qwen2Config's defaults), q, k and v with biases
TEXT_LAYER = 3 * (4096 * 4096 + 4096) + 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096
TEXT = 2 * 156032 * 4096 + 32 * TEXT_LAYER + 4096
# Qwen2-Audio-7B / -Instruct: 8,397,094,912 parameters, the safetensors total the Hugging Face API gives (a stored
# register of the Qwen releases, read_file id 57698538954, "exact safetensors.total figure from the Hugging Face API")
PUBLISHED = 8_397_094_912
assert (LAYER, AUDIO, TEXT) == (19_676_160, 642_215_936, 7_754_878_976)
assert AUDIO + TEXT == PUBLISHED


def test_qwen2_audio_tower_counted_module_by_module():
    audio = json.loads(QWEN2_AUDIO.read_text(encoding="utf-8"))["audio_config"]
    assert qwen2_audio(ConfigFields(audio, "t"), 4096) == AUDIO == 642_215_936
    # Qwen2AudioEncoderConfig's defaults are the released sizes
    assert qwen2_audio(ConfigFields({"model_type": "qwen2_audio_encoder"}, "t"), 4096) == AUDIO


def test_audio_tower_without_vision_config_counts_to_the_published_total():
    spec = read_local(QWEN2_AUDIO)
    assert spec.params.total == PUBLISHED
    assert spec.params.exact
    assert spec.params.vision == AUDIO  # the towers' parameters, kept at the model dtype like a vision tower's
    # no vision tower: the spec's tower is the audio encoder alone (models/towers.py audio_tower), for vLLM's
    # Qwen2-Audio processor to profile
    assert spec.tower is not None and not spec.tower.has_vision and spec.tower.audio_encoder is not None


def test_sparse_text_config_takes_qwen2_defaults():
    # transformers Qwen2AudioConfig builds text_config as Qwen2Config(**text_config): the published text_config
    # gives intermediate_size, vocab_size, max_position_embeddings and sliding_window 32,768, not hidden_size, the
    # layer or head counts (Qwen2Config: 4,096, 32, 32 and 32 KV heads) nor use_sliding_window (false, so
    # __post_init__ drops sliding_window: every layer full attention)
    spec = read_local(QWEN2_AUDIO)
    assert (spec.num_layers, spec.hidden_size, spec.num_attention_heads, spec.intermediate_size) == (32, 4096, 32,
                                                                                                   11008)
    assert {(layer.kind, layer.kv_heads, layer.head_dim) for layer in spec.layers} == {("full", 32, 128)}
    assert spec.max_context == 8192 and spec.vocab_size == 156032 and not spec.tie_word_embeddings


def test_vllm_layout_of_an_audio_only_tower_is_named():
    # vLLM 0.33.0 qwen2_audio.py: Qwen2AudioEncoder and the projector are plain modules, whole on each TP rank;
    # multimodal.py's Qwen2Audio processor holds it so and profiles it (tests/test_tower_peak_issue20_more.py)
    notes = read_local(QWEN2_AUDIO).notes
    assert any(note.startswith("audio tower counted (642,215,936 parameters, no vision tower)")
               and "encoder profiling" in note and "whole on each TP rank" in note for note in notes)


def test_gemma4_audio_config_without_vision_config_is_refused(tmp_path):
    # vLLM 0.33.0 gemma4_mm.py __init__ builds AutoModel.from_config(config.vision_config) with no None check, and
    # SGLang 0.5.23 gemma4_mm.py Gemma4VisionEncoder(config=config.vision_config) likewise: neither loads it
    config = json.loads((Path(calibration.MODELS) / "gemma-4-31b-it.json").read_text(encoding="utf-8"))
    del config["vision_config"]
    config["audio_config"] = {"model_type": "gemma4_audio"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(KvplanError, match="vision_config.*missing beside audio_config"):
        read_local(path)


def test_omni_thinker_towers_are_named_not_counted():
    # Qwen2.5-Omni keeps its towers' sub-configs inside thinker_config (vLLM 0.33.0 qwen2_5_omni_thinker.py builds
    # an audio and a vision tower from them): not counted, and the count says so
    spec = read_local(FIXTURES / "qwen2.5-omni-7b-thinker-trimmed.json")
    assert spec.params.vision == 0 and not spec.params.exact
    assert any("thinker's towers (thinker_config.audio_config, thinker_config.vision_config) are not counted"
               in note for note in spec.notes)


def test_uncounted_audio_wrapper_is_still_refused():
    from kvplan.models.tower_params import audio_alone

    # Gemma 3n's USM audio tower beside its MobileNet vision tower is not counted: refused, never left out
    with pytest.raises(KvplanError, match="audio_config"):
        audio_alone(ConfigFields({"model_type": "gemma3n", "audio_config": {}}, "t"), 2048)


def test_towers_under_other_sub_config_names_are_named_not_counted():
    # Granite Speech: vLLM 0.33.0 granite_speech.py builds GraniteSpeechCTCEncoder(config.encoder_config) and a
    # Q-Former projector from config.projector_config; neither is counted, and the count says so
    spec = read_local(FIXTURES / "granite-speech-upstream-shape.json")
    assert spec.params.vision == 0 and not spec.params.exact
    assert any("the towers of encoder_config, projector_config are not counted" in note for note in spec.notes)
