"""Issue 20 item 4: InternVL's --mm-processor-kwargs (min_dynamic_patch, max_dynamic_patch, dynamic_image_size,
use_thumbnail, image_size) as vLLM 0.33.0's InternVLProcessingInfo.get_image_processor takes them over the
config's (kvplan/engines/vllm/multimodal.py internvl_tiles): the dummy image's tiles, the encoder budget and the
items profiled, derived by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.errors import KvplanError
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice

# InternVL3-8B's shape, written for these tests (the Hub is unreachable; not the published file): InternViT at
# 448 px, patch 14, downsample 0.5, up to 12 dynamic tiles with a thumbnail; a qwen2 text model, whose tokenizer has
# the video token
CONFIG = json.loads((Path(__file__).parent / "fixtures" / "internvl" / "internvl3-8b-shape.json").read_text())
TILE = (448 // 14) ** 2 // 4  # 256 tokens a tile: image_seq_length = (image_size / patch)^2 x downsample_ratio^2
WIDTH = 3584 * 2  # one embedding handed to the text model, bfloat16


@pytest.fixture()
def model(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG), encoding="utf-8")
    return resolve(str(path))


def _plan(model, kwargs, **knobs):
    gpu = find_gpu("h100")
    dep = Deployment(engine="vllm", engine_version="0.33.0", gpu=gpu.id, max_model_len=32768,
                     mm_processor_kwargs=kwargs, **knobs)
    return plan_deployment(model, dep, GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, 1, gpu.compute_capability,
                                                 gpu.fp8))


def _images(model, kwargs):
    return _plan(model, kwargs, limit_mm_per_prompt={"video": 0})


def test_config_tiles_without_kwargs(model):
    # 12 tiles and the thumbnail: 13 x 256 = 3,328 tokens; budget max(8,192, 3,328), 8,192 // 3,328 = 2 items;
    # Model Runner V2 holds their outputs only
    plan = _images(model, None)
    assert plan.engine.encoder_cache_tokens == 8192
    assert plan.memory.encoder_bytes == 2 * 13 * TILE * WIDTH == 47_710_208


def test_max_dynamic_patch_changes_the_dummy_and_the_budget(model):
    # max_dynamic_patch 6: 6 + 1 thumbnail = 7 tiles, 1,792 tokens; 8,192 // 1,792 = 4 items
    six = _images(model, {"max_dynamic_patch": 6})
    assert any("4 image item(s) of 1,792 tokens" in note for note in six.notes)
    assert six.memory.encoder_bytes == 4 * 7 * TILE * WIDTH == 51_380_224
    # max_dynamic_patch 40: 41 x 256 = 10,496 tokens, above the batched tokens, so the budget is the item
    forty = _images(model, {"max_dynamic_patch": 40})
    assert forty.engine.encoder_cache_tokens == 41 * TILE == 10_496
    # video follows: frames of one tile beside one largest image, (32,768 - 1,792) // 256 = 121, 30,976 tokens
    video = _plan(model, {"max_dynamic_patch": 6})
    assert video.engine.encoder_cache_tokens == 121 * TILE == 30_976


def test_thumbnail_and_dynamic_size_switches(model):
    # use_thumbnail false: 12 tiles, 3,072 tokens, still 2 items
    assert _images(model, {"use_thumbnail": False}).memory.encoder_bytes == 2 * 12 * TILE * WIDTH
    # dynamic_image_size false: min = max = 1 tile, no thumbnail beside one tile: 256 tokens, 8,192 // 256 = 32 items
    single = _images(model, {"dynamic_image_size": False})
    assert any("32 image item(s) of 256 tokens" in note for note in single.notes)
    assert single.memory.encoder_bytes == 32 * TILE * WIDTH == 58_720_256


def test_min_above_max(model):
    # min 13 over max 12 with the thumbnail: the grids tried are those of 13 tiles, and none of 13..12 to fit them
    # to, so each is one tile (find_closest_aspect_ratio's (1, 1)): 256 tokens
    assert any("of 256 tokens" in note for note in _images(model, {"min_dynamic_patch": 13}).notes)
    # min 14: no grid tried at all (vLLM's ValueError in get_image_size_with_most_features)
    with pytest.raises(KvplanError, match="min_dynamic_patch 14 is above max_dynamic_patch 12"):
        _images(model, {"min_dynamic_patch": 14})


def test_image_size_kwarg_resizes_the_tile(model):
    # image_size 224: (224 / 14)^2 / 4 = 64 tokens a tile, 13 x 64 = 832 an image; pixel values 13 x 3 x 224^2
    # under Model Runner V1 beside the outputs; 8,192 // 832 = 9 items
    plan = _images(model, {"image_size": 224})
    assert any("9 image item(s) of 832 tokens" in note for note in plan.notes)
    v1 = _plan(model, {"image_size": 224}, limit_mm_per_prompt={"video": 0}, v2_model_runner=False)
    assert v1.memory.encoder_bytes == 9 * (832 * WIDTH + 13 * 3 * 224 * 224 * 2) == 88_897_536


@pytest.mark.parametrize("kwargs", [{"max_dynamic_patch": 0}, {"min_dynamic_patch": True},
                                    {"use_thumbnail": "yes"}, {"max_dynamic_patch": 10**5}])
def test_bad_kwargs_are_one_line_errors(model, kwargs):
    with pytest.raises(KvplanError):
        _images(model, kwargs)
