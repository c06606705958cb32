"""vLLM's multimodal encoder budget and what its profiling run adds to the peak, as the 0.33.0 wheel computes them
(the same rules in 0.23.0, whose gemma-4-31b-it log engine-calibration Y13 replays).

MultiModalBudget (multimodal/encoder_budget.py) asks the model's processor for the most tokens one item of each
enabled modality can take (get_mm_max_tokens_per_item; a modality is enabled while its --limit-mm-per-prompt
count, 999 where unnamed (config/multimodal.py get_limit_per_prompt), is above 0; --language-model-only sets every
count to 0). compute_mm_encoder_budget (v1/core/encoder_cache_manager.py) makes the budget the larger of
max_num_batched_tokens (SchedulerConfig's max_num_encoder_input_tokens and encoder_cache_size) and the largest
item. profile_run (v1/worker/gpu_model_runner.py) then encodes the modality with the most tokens per item (ties
to the later name in 0.23.0 and 0.33.0; 0.11.0's v1/worker/utils.py took the first, image), as many items as
_get_max_items allows: budget // tokens per item, at most max_num_seqs x the items one prompt holds (its limit,
and max_model_len // tokens per item, at least 1), at least 1; and it keeps their outputs in the encoder cache while
the decoder's dummy run measures its own peak, so they add to it. The tower's own transient runs before that and is
freed; it is not modelled (the note says so)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.models.model import ModelSpec
from kvplan.models.towers import VisionTower
from kvplan.units import GiB

UNNAMED_LIMIT = 999  # config/multimodal.py get_limit_per_prompt: a modality --limit-mm-per-prompt leaves out
DUMMY_SIZE_KEYS = ("num_frames", "width", "height")  # a modality's dummy-item options beside its count
MAX_PIXELS = 2**32  # a 65,536 x 65,536 image; kvplan refuses more rather than search a grid that large


def scoped(kwargs: dict[str, Any], scope: str) -> dict[str, Any]:
    """mm_processor_kwargs' images_kwargs / videos_kwargs object, empty where not given."""
    value = kwargs.get(scope) or {}
    if not isinstance(value, dict):
        raise KvplanError(f"{scope}: expected a JSON object, got {value!r:.40}", "--mm-processor-kwargs")
    return value


@dataclass(frozen=True)
class Item:
    """One modality's largest item: the tokens it takes in the prompt and the embeddings the encoder returns."""

    tokens: int
    embeds: int


class Processor:
    """A family's processor (vLLM's <Model>ProcessingInfo): the largest item of each modality it supports."""

    modalities: tuple[str, ...] = ("image", "video")  # those its vision tower serves
    encoder_tp_data: bool = False  # the model class's supports_encoder_tp_data (--mm-encoder-tp-mode data)

    def prefix_lm(self, tower: VisionTower) -> bool:
        """Whether vLLM forces --disable-chunked-mm-input (platforms/cuda.py, for a model_config.is_mm_prefix_lm:
        transformers_utils/model_arch_config_convertor.py), so one item must fit max_num_batched_tokens."""
        return False

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        raise NotImplementedError


class Gemma3(Processor):
    """model_executor/models/gemma3_mm.py: images only, mm_tokens_per_image soft tokens each (Gemma3Config's
    default 256) without pan-and-scan (its image processor's default; with it, more crops, not modelled)."""

    modalities = ("image",)

    def prefix_lm(self, tower: VisionTower) -> bool:
        return True  # gemma3 is in MM_PREFIX_LM_MODELS

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        tokens = tower.tokens_per_image or 256
        return {"image": Item(tokens, tokens)}


GEMMA4_SOFT_TOKENS = (70, 140, 280, 560, 1120)  # gemma4_mm.py _SUPPORTED_SOFT_TOKENS
GEMMA4_FRAME_TOKENS = 70  # _VIDEO_MAX_SOFT_TOKENS: soft tokens per video frame
GEMMA4_FRAME_TEXT = 2 + 6  # boi, eoi and about six timestamp tokens around each frame
GEMMA4_FRAMES = 32  # _VIDEO_MAX_FRAMES


class Gemma4(Processor):
    """model_executor/models/gemma4_mm.py get_mm_max_tokens_per_item: an image takes default_output_length soft
    tokens (or mm_processor_kwargs max_soft_tokens, one of 70...1120); a video 32 frames (fewer where
    limit_mm_per_prompt's video num_frames says so) of 70 soft tokens and 8 text tokens each."""

    def prefix_lm(self, tower: VisionTower) -> bool:
        return tower.bidirectional  # Gemma4ModelArchConfigConvertor: use_bidirectional_attention "vision"

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        soft = kwargs.get("max_soft_tokens", scoped(kwargs, "images_kwargs").get("max_soft_tokens"))
        image = soft if soft in GEMMA4_SOFT_TOKENS else (tower.tokens_per_image or 280)
        video = limits.get("video")
        frames = GEMMA4_FRAMES
        if isinstance(video, dict) and isinstance(video.get("num_frames"), int):
            frames = min(frames, video["num_frames"])
        return {"image": Item(image, image),
                "video": Item(frames * (GEMMA4_FRAME_TOKENS + GEMMA4_FRAME_TEXT), frames * GEMMA4_FRAME_TOKENS)}


LLAMA4_MAX_PATCHES = 16  # Llama4ImageProcessor max_patches (the checkpoints' preprocessor_config.json)


class Llama4(Processor):
    """model_executor/models/mllama4.py: images only, no maximum of its own, so MultiModalBudget counts the
    embeddings of its dummy image (get_mm_max_toks_per_item): an image of max_patches tiles in a column
    (get_image_size_with_most_features, 16:1), each tile (image_size / patch)^2 / pixel-shuffle patches
    (get_patch_per_chunk), plus the global tile a many-tile image gets (transformers Llama4Processor)."""

    modalities = ("image",)
    encoder_tp_data = True  # mllama4.py Llama4ForConditionalGeneration

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        tiles = kwargs.get("max_patches", scoped(kwargs, "images_kwargs").get("max_patches", LLAMA4_MAX_PATCHES))
        if not isinstance(tiles, int) or isinstance(tiles, bool) or tiles < 1:
            raise KvplanError(f"max_patches must be a positive integer, got {tiles!r:.40}", "--mm-processor-kwargs")
        per_tile = (tower.image_size // tower.patch_size) ** 2 // tower.shuffle_factor
        tokens = (tiles + (1 if tiles > 1 else 0)) * per_tile
        return {"image": Item(tokens, tokens)}


QWEN2_VL_MAX_FRAMES = 14  # qwen2_vl.py _MAX_FRAMES_PER_VIDEO
QWEN_ASPECT = 200  # the most elongated grid get_image_size_with_most_features tries
# the Qwen-VL vision configs' defaults where config.json leaves them out (transformers Qwen2VLVisionConfig,
# Qwen2_5_VLVisionConfig, Qwen3VLVisionConfig: spatial_merge_size 2, temporal_patch_size 2)
QWEN_MERGE, QWEN_TEMPORAL = 2, 2


def _grid_tokens(max_pixels: int, unit: int) -> int:
    """qwen2_vl.py get_image_size_with_most_features: the most merged patches max_pixels holds, as the first grid
    (from the most patches down) whose closest factor pair is no more elongated than 200:1."""
    for seq in range(max_pixels // (unit * unit), 0, -1):
        short = next(d for d in range(math.isqrt(seq), 0, -1) if seq % d == 0)
        if seq // short / short <= QWEN_ASPECT:
            return seq
    return 1


def _pixels(kwargs: dict[str, Any], scope: str, default: int) -> int:
    """qwen2_vl.py _get_vision_size: size.longest_edge, then max_pixels, override the processor's default, at
    the top of mm_processor_kwargs or under images_kwargs / videos_kwargs."""
    value: Any = default
    for source in (kwargs, scoped(kwargs, scope)):
        size = source.get("size") or {}
        value = size.get("longest_edge", value) if isinstance(size, dict) else value
        value = source.get("max_pixels", value)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_PIXELS:
        raise KvplanError(f"max_pixels must be an integer from 1 to {MAX_PIXELS:,}, got {value!r:.40}",
                          "--mm-processor-kwargs")
    return value


class QwenVL(Processor):
    """model_executor/models/qwen2_vl.py Qwen2VLProcessingInfo (Qwen2-VL, Qwen2.5-VL): an image is the grid of
    merged patches (patch x spatial_merge_size pixels a side) that max_pixels holds, 12,845,056 by default
    (Qwen2VLImageProcessor; Qwen2.5-VL's preprocessor_config.json); a video repeats that grid once per
    temporal_patch_size frames, for as many frames (up to 14) as max_model_len holds, at least one."""

    default_pixels = 12_845_056
    encoder_tp_data = True  # qwen2_vl.py, qwen2_5_vl.py, qwen3_vl.py (and Qwen3.5's subclasses)

    def image_tokens(self, tower: VisionTower, kwargs: dict[str, Any]) -> int:
        return _grid_tokens(_pixels(kwargs, "images_kwargs", self.default_pixels), self.unit(tower))

    @staticmethod
    def unit(tower: VisionTower) -> int:
        return tower.patch_size * (tower.merge_size or QWEN_MERGE)

    def video_tokens(self, tower: VisionTower, kwargs: dict[str, Any], max_model_len: int) -> int:
        grid, step = self.image_tokens(tower, kwargs), tower.temporal_patch_size or QWEN_TEMPORAL

        def tokens(frames: int) -> int:
            return max(-(-frames // step), 1) * grid

        frames = 1
        while tokens(frames + 1) <= max_model_len:
            frames += 1
        return tokens(max(min(frames, QWEN2_VL_MAX_FRAMES), 1))

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        image, video = self.image_tokens(tower, kwargs), self.video_tokens(tower, kwargs, max_model_len)
        return {"image": Item(image, image), "video": Item(video, video)}


class Qwen3VL(QwenVL):
    """model_executor/models/qwen3_vl.py Qwen3VLProcessingInfo (Qwen3-VL, Qwen3.5): images as Qwen2-VL's with
    size.longest_edge 16,777,216 (Qwen3-VL's preprocessor_config.json); a video is the two-frame grid of the
    video processor's longest_edge (25,165,824, video_preprocessor_config.json) over temporal_patch_size."""

    default_pixels = 16_777_216
    video_pixels = 25_165_824

    def video_tokens(self, tower: VisionTower, kwargs: dict[str, Any], max_model_len: int) -> int:
        pixels = _pixels({"videos_kwargs": scoped(kwargs, "videos_kwargs")}, "videos_kwargs", self.video_pixels)
        return _grid_tokens(pixels // (tower.temporal_patch_size or QWEN_TEMPORAL), self.unit(tower))


# vLLM's model registry (model_executor/models/registry.py) picks the processor by the config's architecture
PROCESSORS: dict[str, Processor] = {
    "Gemma3ForConditionalGeneration": Gemma3(),
    "Gemma4ForConditionalGeneration": Gemma4(),
    "Llama4ForConditionalGeneration": Llama4(),
    "Qwen2VLForConditionalGeneration": QwenVL(),
    "Qwen2_5_VLForConditionalGeneration": QwenVL(),
    "Qwen3VLForConditionalGeneration": Qwen3VL(),
    "Qwen3VLMoeForConditionalGeneration": Qwen3VL(),
    "Qwen3_5ForConditionalGeneration": Qwen3VL(),
    "Qwen3_5MoeForConditionalGeneration": Qwen3VL(),
}


@dataclass(frozen=True)
class EncoderProfile:
    """What vLLM's encoder profiling does on one rank: the budget it logs, the items it encodes, and the encoder
    outputs it holds through the decoder's dummy run (bytes added to the profiled peak)."""

    budget: int
    modality: str
    items: int
    tokens_per_item: int
    held_bytes: int
    skipped: bool  # --skip-mm-profiling: the budget stands, nothing is encoded

    def note(self) -> str:
        if self.skipped:
            return (f"multimodal encoder: cache budget {self.budget:,} tokens; --skip-mm-profiling: no encoder run "
                    "in the profile (the peak is the text model's)")
        return (f"multimodal encoder: cache budget {self.budget:,} tokens, profiled with {self.items} {self.modality} "
                f"item(s) of {self.tokens_per_item:,} tokens; their outputs add {self.held_bytes / GiB:.2f} GiB to "
                "the profiled peak (vLLM 0.33.0 profile_run; the tower's own transient is not modelled)")


def limits(dep: Deployment) -> dict[str, Any]:
    """--limit-mm-per-prompt as vLLM reads it: a count, or an object with a count (and dummy-item options)."""
    given = dep.limit_mm_per_prompt or {}
    for modality, value in given.items():
        count = value.get("count", UNNAMED_LIMIT) if isinstance(value, dict) else value
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise KvplanError(f"{modality}: the count must be an integer >= 0, got {count!r:.40}",
                              dep.where("limit_mm_per_prompt"))
        for key in DUMMY_SIZE_KEYS:
            size = value.get(key, 1) if isinstance(value, dict) else 1
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise KvplanError(f"{modality}: {key} must be a positive integer, got {size!r:.40}",
                                  dep.where("limit_mm_per_prompt"))
    return given


def count(given: dict[str, Any], modality: str, language_only: bool) -> int:
    if language_only:
        return 0
    value = given.get(modality, UNNAMED_LIMIT)
    return int(value.get("count", UNNAMED_LIMIT) if isinstance(value, dict) else value)


def tower_replicated(spec: ModelSpec, dep: Deployment) -> bool | None:
    """--mm-encoder-tp-mode data: the whole tower on every TP rank where the model class supports it (True), the
    'weights' split it falls back to where not (False, config/model.py warns); None where the mode is 'weights'."""
    if dep.mm_encoder_tp_mode != "data" or spec.tower is None or tower_skipped(spec, dep):
        return None
    processor = PROCESSORS.get(spec.architecture)
    return bool(processor and processor.encoder_tp_data)


def tower_skipped(spec: ModelSpec, dep: Deployment) -> bool:
    """model_executor/models/interfaces.py _mark_tower_model: a tower whose modalities all have a limit of 0
    (--limit-mm-per-prompt, --language-model-only) is not built, so its weights are not loaded."""
    if spec.tower is None or not spec.params.vision:
        return False
    processor = PROCESSORS.get(spec.architecture)
    modalities = processor.modalities if processor else ("image", "video")
    given = limits(dep)
    return all(count(given, m, bool(dep.language_model_only)) == 0 for m in modalities)


def encoder_profile(spec: ModelSpec, dep: Deployment, max_model_len: int, max_num_seqs: int,
                    max_num_batched_tokens: int, dtype_bytes: int) -> EncoderProfile | None:
    """None for a text model, a family whose processor is not modelled, or every modality turned off."""
    processor = PROCESSORS.get(spec.architecture)
    if spec.tower is None or processor is None:
        return None
    given = limits(dep)
    items = processor.items(spec.tower, dep.mm_processor_kwargs or {}, given, max_model_len)
    enabled = {m: item for m, item in items.items() if count(given, m, bool(dep.language_model_only)) > 0}
    if not enabled:
        return None
    modality, item = max(enabled.items(), key=lambda pair: (pair[1].tokens, pair[0]))
    if processor.prefix_lm(spec.tower) and item.tokens > max_num_batched_tokens:
        # compute_mm_encoder_budget's own refusal (v1/core/encoder_cache_manager.py)
        raise KvplanError(f"Chunked MM input disabled but max_tokens_per_mm_item ({item.tokens}) is larger than "
                          f"max_num_batched_tokens ({max_num_batched_tokens}). Please increase "
                          "max_num_batched_tokens.", dep.where("max_num_batched_tokens"))
    budget = max(max_num_batched_tokens, item.tokens)
    per_prompt = max(1, min(count(given, modality, False), max_model_len // item.tokens))
    seqs = max_num_seqs if dep.enable_chunked_prefill is not False else min(
        max_num_seqs, max_num_batched_tokens // item.tokens)
    batch = max(1, min(budget // item.tokens, seqs * per_prompt))
    held = batch * item.embeds * spec.tower.output_width * dtype_bytes
    skipped = bool(dep.skip_mm_profiling)
    return EncoderProfile(budget, modality, batch, item.tokens, 0 if skipped else held, skipped)
