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
and max_model_len // tokens per item, at least 1), at least 1. Through the decoder's dummy run it keeps the items'
outputs in the encoder cache and their inputs on the GPU (its batched_dummy_mm_inputs, floating tensors in the model
dtype: multimodal/processing/context.py _postprocess_output), so both add to the decoder's peak; profile_run holds them
so in 0.19.0, 0.20.0 and 0.22.0 too, as the v0.19 Gemma 3 logs confirm (tests/test_multimodal_v019.py). The tower's own run
comes first and is freed; the profiled peak is the larger of the two phases (torch's allocated peak over the whole
profile_run, v1/worker/gpu_worker.py determine_available_memory). The tower's phase is derived for Gemma 4, Gemma 3
(SigLIP), Qwen2-VL, Qwen2.5-VL, Qwen3-VL / Qwen3.5, Llama 4, InternVL (InternViT-300M's layout) and Qwen2-Audio's
audio tower (each Processor's tower_peak).

How the vision towers' peaks are read (vLLM 0.33.0; 0.19.0's siglip.py, qwen2_5_vl.py, qwen3_vl.py and mllama4.py
run the same forwards): profile_run calls embed_multimodal on the whole batch at once, eagerly
(CompilationConfig.compile_mm_encoder False by default), under inference mode, so a tensor lives while a Python
name or an nn.Module call's arguments hold it. Their MMEncoderAttention picks FLASH_ATTN on CUDA at SM 8.0 and
above for head sizes that are multiples of 8 up to 256 (platforms/cuda.py get_vit_attn_backend,
v1/attention/backends/flash_attn.py supports_head_size: SigLIP's 72, Qwen2.5-VL's 80, Qwen3-VL's 72, Llama 4's 88),
and flash_attn_maxseqlen_wrapper (v1/attention/ops/vit_attn_wrappers.py) allocates only its output beside q, k, v:
no S x S scores (nor does TORCH_SDPA's fused kernel). Its float32 log-sum-exp (heads x 4 B a patch, under 0.5 % of
a patch's bytes) and the index tensors (cu_seqlens, window indexes: under 8 B a patch) are left out. Split over
TP ('weights' mode) the qkv, attention and MLP intermediates are 1/TP a rank, the residual stream and each linear's
output whole; under --mm-encoder-tp-mode data a rank runs its share of the batch whole (run_dp_sharded_*)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvplan.deployment import Deployment
from kvplan.engines.vllm.releases import (
    OUTPUTS_PADDED_TO_BUDGET_FROM,
    OUTPUTS_PADDED_TO_ITEM_FROM,
    OUTPUTS_UNPADDED_FROM,
)
from kvplan.errors import KvplanError
from kvplan.models.model import ModelSpec
from kvplan.models.towers import Tiling, VisionTower
from kvplan.units import GiB

UNNAMED_LIMIT = 999  # config/multimodal.py get_limit_per_prompt: a modality --limit-mm-per-prompt leaves out
DUMMY_SIZE_KEYS = ("num_frames", "width", "height", "length")  # a modality's dummy-item options beside its count
MAX_PIXELS = 2**32  # a 65,536 x 65,536 image; kvplan refuses more rather than search a grid that large


def scoped(kwargs: dict[str, Any], scope: str) -> dict[str, Any]:
    """mm_processor_kwargs' images_kwargs / videos_kwargs object, empty where not given."""
    value = kwargs.get(scope) or {}
    if not isinstance(value, dict):
        raise KvplanError(f"{scope}: expected a JSON object, got {value!r:.40}", "--mm-processor-kwargs")
    return value


@dataclass(frozen=True)
class Item:
    """One modality's largest item: the tokens it takes in the prompt, the embeddings the encoder returns for the
    profile's dummy item, and that item's inputs on the GPU: floating values (in the model dtype) and integer bytes.
    frames x patches is what the tower encodes, one sequence of patches (padding included) a frame."""

    tokens: int
    embeds: int
    pixels: int = 0
    index_bytes: int = 0
    frames: int = 1
    patches: int = 0


class Processor:
    """A family's processor (vLLM's <Model>ProcessingInfo): the largest item of each modality it supports."""

    modalities: tuple[str, ...] = ("image", "video")  # those its vision tower serves
    encoder_tp_data: bool = False  # the model class's supports_encoder_tp_data (--mm-encoder-tp-mode data)
    whole_tower: bool = False  # its towers are built unsharded, whole on every TP rank, whatever the mode
    # the --mm-processor-kwargs keys items() reads ("images_kwargs.max_pixels": under that scope); any other key
    # is named in a note (unread_kwargs): vLLM hands it to the processor, the plan does not follow it
    kwargs_read: tuple[str, ...] = ()

    def prefix_lm(self, tower: VisionTower) -> bool:
        """Whether vLLM forces --disable-chunked-mm-input (platforms/cuda.py, for a model_config.is_mm_prefix_lm:
        transformers_utils/model_arch_config_convertor.py), so one item must fit max_num_batched_tokens."""
        return False

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        raise NotImplementedError

    def tower_peak(self, tower: VisionTower, item: Item, batch: int, dtype_bytes: int, total_bytes: int,
                   free_bytes: int | None, *, split: int = 1, ranks: int = 1,
                   compiled: bool = True) -> int:
        """The tower's own peak on one rank while it encodes the profile's batch (inputs included); 0 where not
        derived. split: the TP ranks its layers are split over ('weights' mode; 1 where built whole); ranks: those
        the batch is shared out over (--mm-encoder-tp-mode data; 1 otherwise); compiled: whether vLLM compiles the
        decoder (torch.compile with inductor: neither --enforce-eager nor -O0), which turns its custom ops off and
        its IR ops to their native implementations, in the eager tower too (config/vllm.py custom_ops 'none',
        platforms/cuda.py get_default_ir_op_priority ['native'])."""
        return 0


def _share(count: int, ranks: int) -> int:
    """The most items (or tiles) one rank encodes under --mm-encoder-tp-mode data: an even share rounded up
    (vision.py run_dp_sharded_vision_model pads the batch to ranks x ceil(count / ranks); with items of one size
    get_load_balance_assignment's greedy fill gives no rank more than that)."""
    return -(-count // ranks)


class Gemma3(Processor):
    """model_executor/models/gemma3_mm.py: images only, mm_tokens_per_image soft tokens each (Gemma3Config's
    default 256) without pan-and-scan (its image processor's default; with it, more crops, not modelled)."""

    modalities = ("image",)

    def prefix_lm(self, tower: VisionTower) -> bool:
        return True  # gemma3 is in MM_PREFIX_LM_MODELS

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        tokens = tower.tokens_per_image or 256
        # the dummy is one native-size image (get_image_size_with_most_features); num_patches stays on the CPU;
        # SigLIP encodes it as (image_size / patch_size)^2 patches (siglip.py SiglipVisionEmbeddings)
        return {"image": Item(tokens, tokens, tower.channels * tower.image_size ** 2,
                              patches=(tower.image_size // tower.patch_size) ** 2)}

    def tower_peak(self, tower: VisionTower, item: Item, batch: int, dtype_bytes: int, total_bytes: int,
                   free_bytes: int | None, *, split: int = 1, ranks: int = 1,
                   compiled: bool = True) -> int:
        """gemma3_mm.py _process_image_input runs SiglipVisionModel (siglip.py) over the batch's N = batch x
        patches patches, then the projector. SiglipVisionTransformer.forward keeps the patch embeddings
        (hidden_states, and SiglipEncoder.forward's hidden_states_pool) through the encoder, and from the second
        layer on SiglipEncoder's loop holds the layer's input beside them. In SiglipEncoderLayer.forward the
        attention holds layer_norm1's output, qkv_proj's (3 x hidden / TP), the FlashAttention output (hidden /
        TP) and out_proj's (hidden), added in place to the residual; the MLP holds the attention's sum (residual),
        layer_norm2's output, and fc1's output (intermediate / TP) with its gelu (nn.GELU, out of place,
        activation.py _get_gelu_pytorch_tanh), then the gelu and fc2's output (hidden). The widest of these,
        in the model dtype, on the batch's pixel_values; the projector after it (avg-pooled to 256 rows an
        image) holds less."""
        if not (tower.hidden_size and tower.intermediate_size and item.patches):
            return 0
        hidden, part, inner = tower.hidden_size, tower.hidden_size // split, tower.intermediate_size // split
        kept = 2 * hidden  # the patch embeddings and the layer's input
        attention = kept + hidden + 3 * part + part + hidden
        mlp = kept + 2 * hidden + max(2 * inner, inner + hidden)
        return batch * item.pixels * dtype_bytes + batch * item.patches * max(attention, mlp) * dtype_bytes


GEMMA4_SOFT_TOKENS = (70, 140, 280, 560, 1120)  # gemma4_mm.py _SUPPORTED_SOFT_TOKENS
GEMMA4_FRAME_TOKENS = 70  # _VIDEO_MAX_SOFT_TOKENS: soft tokens per video frame
GEMMA4_FRAME_TEXT = 2 + 6  # boi, eoi and about six timestamp tokens around each frame
GEMMA4_FRAMES = 32  # _VIDEO_MAX_FRAMES
GEMMA4_DUMMY_SIDE = 224  # Gemma4DummyInputsBuilder: the image processor has no size, so 224 x 224 dummies
INDEX = 8  # one int64 value
GEMMA4_AUDIO_TOKENS = 750  # transformers processing_gemma4.py Gemma4Processor audio_seq_length
GEMMA4_AUDIO_RATE, GEMMA4_AUDIO_SAMPLES, GEMMA4_MEL_BINS = 16_000, 512, 128  # feature_extraction_gemma4.py defaults


class Gemma4(Processor):
    """model_executor/models/gemma4_mm.py get_mm_max_tokens_per_item: an image takes default_output_length soft
    tokens (or mm_processor_kwargs max_soft_tokens, one of 70...1120); a video 32 frames (fewer where
    limit_mm_per_prompt's video num_frames says so) of 70 soft tokens and 8 text tokens each. The dummy items are
    224 x 224 (a smaller width / height in limit_mm_per_prompt wins), which _compute_num_soft_tokens gives fewer
    soft tokens than the maximum (64 a frame, 256 an image); their patches are padded to soft tokens x
    pooling_kernel_size^2 (transformers Gemma4ImageProcessor), with int64 (x, y) positions beside them."""

    # Gemma4ForConditionalGeneration builds its towers with AutoModel.from_config, whose nn.Linear layers
    # recursive_replace_linear (transformers/utils.py) turns into "replicate" linears (0.23.0, 0.33.0; plain
    # nn.Linear in 0.19.0), and its embedders' projections are ReplicatedLinear: no TP split
    whole_tower = True
    kwargs_read = ("max_soft_tokens", "images_kwargs.max_soft_tokens", "audio_seq_length")

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
        items = {"image": self._item(tower, image, 1, image, limits.get("image")),
                 "video": self._item(tower, GEMMA4_FRAME_TOKENS, frames,
                                     frames * (GEMMA4_FRAME_TOKENS + GEMMA4_FRAME_TEXT), video)}
        if tower.has_audio:
            items["audio"] = self._audio(kwargs, limits.get("audio"))
        return items

    @staticmethod
    def _audio(kwargs: dict[str, Any], dummy: Any) -> Item:
        """An audio item takes the processor's audio_seq_length tokens (get_mm_max_tokens_per_item; transformers
        Gemma4Processor's default 750, which the released processor_config.json keeps), while the dummy is
        fft_length = 2^ceil(log2(320)) = 512 samples of 16 kHz (_dummy_audio_num_samples; Gemma4AudioFeatureExtractor),
        a shorter length in limit_mm_per_prompt winning: its mel frames and the tokens two stride-2 convolutions
        leave of them (_compute_audio_num_tokens), with 128 mel bins a frame and a bool mask beside them."""
        tokens = kwargs.get("audio_seq_length", GEMMA4_AUDIO_TOKENS)
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
            raise KvplanError(f"audio_seq_length must be a positive integer, got {tokens!r:.40}",
                              "--mm-processor-kwargs")
        length = GEMMA4_AUDIO_SAMPLES
        if isinstance(dummy, dict) and isinstance(dummy.get("length"), int) and dummy["length"] > 0:
            length = min(length, dummy["length"])
        frame, hop = GEMMA4_AUDIO_RATE * 20 // 1000, GEMMA4_AUDIO_RATE * 10 // 1000
        frames = max(0, (length + frame // 2 - (frame + 1)) // hop + 1)
        embeds = frames
        for _ in range(2):
            embeds = (embeds + 2 - 3) // 2 + 1 if embeds > 0 else 0
        return Item(tokens, min(embeds, tokens), frames * GEMMA4_MEL_BINS, frames)

    @staticmethod
    def _item(tower: VisionTower, soft: int, frames: int, tokens: int, dummy: Any) -> Item:
        side = GEMMA4_DUMMY_SIDE
        width = min(side, dummy.get("width") or side) if isinstance(dummy, dict) else side
        height = min(side, dummy.get("height") or side) if isinstance(dummy, dict) else side
        pool = tower.pooling_kernel_size
        patches = soft * pool * pool
        # _compute_num_soft_tokens: the largest grid of patch x pool sides that keeps the aspect within the patches
        unit, scale = tower.patch_size * pool, math.sqrt(patches / ((height / tower.patch_size) *
                                                                   (width / tower.patch_size)))
        sides = [max(unit, math.floor(length * scale / unit) * unit) for length in (height, width)]
        embeds = min(sides[0] // tower.patch_size * (sides[1] // tower.patch_size) // pool ** 2, soft)
        values = tower.channels * tower.patch_size ** 2
        return Item(tokens, frames * embeds, frames * patches * values, frames * patches * 2 * INDEX, frames, patches)

    def tower_peak(self, tower: VisionTower, item: Item, batch: int, dtype_bytes: int, total_bytes: int,
                   free_bytes: int | None, *, split: int = 1, ranks: int = 1,
                   compiled: bool = True) -> int:
        """gemma4_mm.py _process_image_input / _process_video_input with transformers' Gemma4VisionModel (5.10 to
        5.18; its F.embedding position lookup, not the F.one_hot that _encoder_chunk budgets for). The frames go
        through the tower in chunks of min(free // 2, total // 10) // (patches x 4 x position_embedding_size x 8)
        (_encoder_chunk). Inside a chunk of c frames of S patches the largest moment is an encoder layer's MLP:
        the residual stream, its pre-feed-forward norm, and gelu(gate), up and their product (3 x intermediate)
        at once, beside the chunk's patch embeddings (held by the caller), its S x S bool attention mask and the
        cos / sin tables of head_dim each, all in the model dtype; earlier chunks' last hidden states (S x hidden
        a frame) stay for the pooler, and the whole batch's inputs stay throughout."""
        if not (tower.hidden_size and tower.intermediate_size and tower.position_embedding_size and item.patches):
            return 0
        frames, patches = batch * item.frames, item.patches
        limit = total_bytes // 10 if free_bytes is None else min(free_bytes // 2, total_bytes // 10)
        chunk = min(frames, max(1, limit // (patches * 4 * tower.position_embedding_size * 8)))
        inputs = batch * (item.pixels * dtype_bytes + item.index_bytes)
        hidden = patches * tower.hidden_size * dtype_bytes
        per_frame = (3 * hidden + 3 * patches * tower.intermediate_size * dtype_bytes + patches * patches
                     + 2 * patches * (tower.head_dim or tower.hidden_size) * dtype_bytes)
        # the last full chunk or the remainder after it holds the most (earlier chunks keep fewer hidden states)
        full, rest = divmod(frames, chunk)
        last_full = inputs + (full - 1) * chunk * hidden + chunk * per_frame if full else 0
        return max(last_full, inputs + full * chunk * hidden + rest * per_frame if rest else 0)


LLAMA4_MAX_PATCHES = 16  # Llama4ImageProcessor max_patches (the checkpoints' preprocessor_config.json)


class Llama4(Processor):
    """model_executor/models/mllama4.py: images only, no maximum of its own, so MultiModalBudget counts the
    embeddings of its dummy image (get_mm_max_toks_per_item): an image of max_patches tiles in a column
    (get_image_size_with_most_features, 16:1), each tile (image_size / patch)^2 / pixel-shuffle patches
    (get_patch_per_chunk), plus the global tile a many-tile image gets (transformers Llama4Processor)."""

    modalities = ("image",)
    kwargs_read = ("max_patches", "images_kwargs.max_patches")
    encoder_tp_data = True  # mllama4.py Llama4ForConditionalGeneration

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        tiles = kwargs.get("max_patches", scoped(kwargs, "images_kwargs").get("max_patches", LLAMA4_MAX_PATCHES))
        if not isinstance(tiles, int) or isinstance(tiles, bool) or tiles < 1:
            raise KvplanError(f"max_patches must be a positive integer, got {tiles!r:.40}", "--mm-processor-kwargs")
        per_tile = (tower.image_size // tower.patch_size) ** 2 // tower.shuffle_factor
        tiles += 1 if tiles > 1 else 0
        # pixel_values: one image_size square a tile (patches_per_image and aspect_ratios stay on the CPU); the
        # tower encodes a tile as its (image_size / patch)^2 patches and a class token (Llama4VisionModel.forward)
        return {"image": Item(tiles * per_tile, tiles * per_tile, tiles * tower.channels * tower.image_size ** 2,
                              frames=tiles, patches=(tower.image_size // tower.patch_size) ** 2 + 1)}

    def tower_peak(self, tower: VisionTower, item: Item, batch: int, dtype_bytes: int, total_bytes: int,
                   free_bytes: int | None, *, split: int = 1, ranks: int = 1,
                   compiled: bool = True) -> int:
        """mllama4.py encode_image_chunks runs Llama4VisionModel over the batch's tiles (under
        --mm-encoder-tp-mode data each rank its share of them, run_dp_sharded_vision_model keeping a padded copy of
        all the tiles' pixels beside the inputs). Llama4VisionModel.forward holds layernorm_pre's output, the
        encoder's input, through the encoder, and from the second layer on Llama4VisionEncoder's loop holds the
        layer's input beside it. The attention's widest moment is its rotary embedding
        (rotary_embedding/llama4_vision_rope.py Llama4VisionRotaryEmbedding.forward_native): beside
        input_layernorm's output and qkv_proj's (3 x hidden / TP) it holds float32 copies of q and k and their
        complex64 products with the frequencies (4 x hidden / TP x 4 B) and the q and k it returns in the model
        dtype (2 x hidden / TP); the FlashAttention call after it holds less. The MLP holds the layer's input,
        the attention's sum, post_attention_layernorm's output, and fc1's output (intermediate / TP) with its
        nn.GELU, then the gelu and fc2's output (hidden). The vision adapter's pixel shuffle and the projector
        after it hold less."""
        if not (tower.hidden_size and tower.intermediate_size and item.patches):
            return 0
        tiles = _share(batch * item.frames, ranks)
        padded = tiles * ranks * (item.pixels // item.frames) * dtype_bytes if ranks > 1 else 0
        hidden, part, inner = tower.hidden_size, tower.hidden_size // split, tower.intermediate_size // split
        kept = 2 * hidden * dtype_bytes  # the encoder's input and the layer's input
        attention = kept + (hidden + 3 * part + 2 * part) * dtype_bytes + 4 * part * 4
        mlp = kept + (2 * hidden + max(2 * inner, inner + hidden)) * dtype_bytes
        return batch * item.pixels * dtype_bytes + padded + tiles * item.patches * max(attention, mlp)


# internvl.py ctx_video_token: the text model types whose video token InternVL looks up in the tokenizer; each of
# their tokenizers carries it (Qwen2's added tokens hold <|video_pad|> 151656, o200k_harmony <|reserved_200000|>)
INTERNVL_VIDEO_TEXT = frozenset({"qwen2", "qwen3", "qwen3_moe", "gpt_oss"})


class InternVL(Processor):
    """model_executor/models/internvl.py (0.33.0) InternVLProcessingInfo, which gives no maximum of its own, so
    MultiModalBudget counts its dummies' embeddings: an image of the most tiles (get_image_size_with_most_features)
    of (image_size / patch)^2 / (1 / downsample_ratio^2) tokens each (image_seq_length); video only where the text
    model's tokenizer has the video token (ctx_video_token), a dummy of image_size frames of one tile each, as many
    as max_model_len holds beside one largest image where images are on (get_num_frames_with_most_features), at
    least 1. The dummy's pixel_values_flat: 3 x image_size^2 values a tile (image_num_patches stays on the CPU)."""

    encoder_tp_data = True  # InternVLChatModel
    kwargs_read = ("image_size", "min_dynamic_patch", "max_dynamic_patch", "dynamic_image_size", "use_thumbnail")

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        side = _internvl_value(kwargs, "image_size", tower.image_size, int)
        per_tile = (side // tower.patch_size) ** 2 // tower.shuffle_factor
        if per_tile < 1:
            raise KvplanError(f"an InternVL tile holds (image_size {side} // patch_size "
                              f"{tower.patch_size})^2 / {tower.shuffle_factor} (1 / downsample_ratio^2) = 0 tokens; "
                              "check vision_config and downsample_ratio")
        tile = tower.channels * side ** 2
        tiles = internvl_tiles(tower.tiling or Tiling(), kwargs)
        image = tiles * per_tile
        # InternViT encodes a tile as its (side / patch)^2 patches and the class token (InternVisionEmbeddings)
        patches = (side // tower.patch_size) ** 2 + 1
        items = {"image": Item(image, image, tiles * tile, frames=tiles, patches=patches)}
        if tower.text_type in INTERNVL_VIDEO_TEXT:
            beside = image if count(limits, "image", False) > 0 else 0
            frames = max((max_model_len - beside) // per_tile, 1)
            video = limits.get("video")
            if isinstance(video, dict) and isinstance(video.get("num_frames"), int):
                frames = min(frames, video["num_frames"])
            items["video"] = Item(frames * per_tile, frames * per_tile, frames * tile, frames=frames,
                                  patches=patches)
        return items

    def tower_peak(self, tower: VisionTower, item: Item, batch: int, dtype_bytes: int, total_bytes: int,
                   free_bytes: int | None, *, split: int = 1, ranks: int = 1,
                   compiled: bool = True) -> int:
        """internvl.py extract_feature runs InternVisionModel (intern_vit.py) over the batch's tiles, S = (side /
        patch)^2 + 1 tokens each (images and video frames alike). InternVisionEmbeddings.forward holds the patch
        embeddings, their torch.cat with the class token and the sum with the position table at once; the
        model's forward keeps that sum (the encoder's input) through the encoder, and from the second layer on
        InternVisionEncoder's loop holds the layer's input beside it. In InternVisionEncoderLayer.forward (eager:
        compile_mm_encoder is off, so support_torch_compile leaves it alone) the attention holds norm1's output,
        qkv's (3 x hidden / TP, chunked into views), the MMEncoderAttention output (hidden / TP: FlashAttention
        for head size 64, q, k and v viewed, not copied) and proj's (hidden); the MLP holds the attention's sum,
        norm2's output and fc1's output (intermediate / TP) with its GELU (F.gelu, out of place, compiled or not),
        then the GELU and fc2's output. InternParallelAttention runs whole where the heads do not divide over
        TP (InternVLChatModel passes no num_dummy_heads, so InternViT-6B's 25 heads are not padded: that is
        nvlm_d.py's 7). Under --mm-encoder-tp-mode data the embeddings of all the tiles are made on every rank
        and run_dp_sharded_vision_model pads them (F.pad: a copy) before a rank runs its share of the encoder.
        The pixel shuffle and mlp1 after it hold less (at most three copies of S - 1 hidden a tile).
        norm_type picks norm1 / norm2 (NORM2FN: nn.LayerNorm or RMSNorm, INTERNVL_NORMS); qk_normalization
        adds InternParallelAttention._apply_qk_norm (RMSNorm over all heads' q and k, qk_norm_moments). A config
        that leaves either out is not derived (InternVisionConfig's defaults come from the checkpoint's own
        configuration file, which kvplan does not read)."""
        norm = INTERNVL_NORMS.get(tower.norm_type)
        if not (tower.hidden_size and tower.intermediate_size and item.patches and tower.depth > 1
                and norm is not None and tower.qk_normalization is not None):
            return 0
        tiles = batch * item.frames
        share = _share(tiles, ranks)
        hidden, inner = tower.hidden_size, tower.intermediate_size // split
        heads = tower.num_heads or 1
        ways = split if heads % split == 0 else 1  # InternParallelAttention's TP
        part = hidden // ways
        tokens = item.patches
        width = dtype_bytes
        pixels = batch * item.pixels * dtype_bytes
        embeddings = tiles * tokens * hidden * width
        padded = share * ranks * tokens * hidden * width if ranks > 1 else 0
        embed = tiles * (3 * tokens - 1) * hidden * width  # the patch embeddings, their cat and the positions' sum
        # a token's bytes beside the embeddings: the layer's input is held throughout
        first = hidden * width + norm.extra(hidden, width, compiled)  # norm1's run
        qkv = (2 * hidden + 3 * part) * width  # the layer's input, norm1's output, qkv's
        held, qk = (qk_norm_moments(qkv, hidden, part, ways, width, compiled) if tower.qk_normalization
                    else (0, 0))
        attention = qkv + held + part * width + hidden * width  # the attention output and proj's
        second = 2 * hidden * width + norm.extra(hidden, width, compiled)  # the sum beside norm2's run
        mlp = (3 * hidden + max(2 * inner, inner + hidden)) * width  # the input, the sum, norm2, fc1 / GELU / fc2
        layers = embeddings + padded + share * tokens * max(first, qk, attention, second, mlp)
        return pixels + max(embed, layers)


class NormRun:
    """A norm's run in an eager forward: the bytes it holds beside its input (its output included)."""

    def extra(self, width: int, dtype_bytes: int, compiled: bool) -> int:
        raise NotImplementedError


class LayerNormRun(NormRun):
    """nn.LayerNorm (InternViT's norm_type layer_norm): one output tensor beside its input."""

    def extra(self, width: int, dtype_bytes: int, compiled: bool) -> int:
        return width * dtype_bytes


class RmsNormRun(NormRun):
    """vLLM 0.33.0 RMSNorm (model_executor/layers/layernorm.py) dispatches to the IR op rms_norm, whose priority
    platforms/cuda.py get_default_ir_op_priority sets: ['native'] where vLLM compiles (Inductor), ['vllm_c',
    'native'] otherwise. The vllm_c kernel (kernels/vllm_c.py, for no variance_size override and the weight in
    the input's dtype, as InternViT's norms without dummy heads are) writes one output. The native form
    (ir/ops/layernorm.py rms_norm, run eagerly) holds beside its input a float32 copy (x_var keeps it alive), the
    float32 x * rsqrt, its cast to the weight's dtype (the model dtype) and the product with the weight: 4 + 4 +
    2 + 2 bytes a value in 16-bit dtypes (in float32 the casts are the tensors themselves: 4 + 4)."""

    def extra(self, width: int, dtype_bytes: int, compiled: bool) -> int:
        if not compiled:
            return width * dtype_bytes
        float32 = 4
        casts = 0 if dtype_bytes == float32 else width * (float32 + dtype_bytes)
        return casts + width * (float32 + dtype_bytes)


INTERNVL_NORMS: dict[str, NormRun] = {"layer_norm": LayerNormRun(), "rms_norm": RmsNormRun()}  # intern_vit.py NORM2FN


def qk_norm_moments(base: int, hidden: int, part: int, ways: int, dtype_bytes: int,
                    compiled: bool) -> tuple[int, int]:
    """intern_vit.py InternParallelAttention._apply_qk_norm (qk_normalization), beside base (a token's layer
    input, norm1's output and qkv's): q_norm and k_norm are RMSNorm over all heads' width (dummy_dim = hidden,
    var_hidden_size the same, so no variance override). Whole (ways 1) each normalises its qkv view in turn
    and keeps its output (hidden / TP). Split over TP, q.contiguous() is all-gathered (GroupCoordinator
    all_gather: the gather's buffer and its reshaped copy, hidden each), then k's beside the gathered q; both
    norms run over the whole width with both gathered tensors held, and split_tensor_along_last_dim keeps the
    rank's views of the whole normalised q and k. Returns (what stays held for the attention, the widest
    moment)."""
    norm = RmsNormRun()
    if ways == 1:
        widest = base + part * dtype_bytes + norm.extra(part, dtype_bytes, compiled)  # k_norm beside q's
        return 2 * part * dtype_bytes, widest
    gather = (part + 2 * hidden) * dtype_bytes  # the contiguous copy, the buffer and its reshaped copy
    widest = max(base + hidden * dtype_bytes + gather,  # k's gather beside the gathered q
                 base + 2 * hidden * dtype_bytes + norm.extra(hidden, dtype_bytes, compiled))
    return 2 * hidden * dtype_bytes, widest


INTERNVL_MOST_TILES = 4096  # kvplan's bound on max_dynamic_patch, as for the config's (models/fields.py)
INTERNVL_MOST_VALUE = 10**6  # on any integer given: models/fields.py's bound on a config's image_size


def _internvl_value(kwargs: dict[str, Any], key: str, default: Any, kind: type) -> Any:
    """A top-level --mm-processor-kwargs value InternVLProcessingInfo.get_image_processor takes over the config's
    (its kwargs.setdefault; InternVLChatImageProcessor takes no images_kwargs scope)."""
    value = kwargs.get(key, default)
    if kind is bool and not isinstance(value, bool):
        raise KvplanError(f"{key} must be true or false, got {value!r:.40}", "--mm-processor-kwargs")
    if kind is int and (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= INTERNVL_MOST_VALUE):
        # the bound said as well: 'must be a positive integer, got 100000000' named none of it
        raise KvplanError(f"{key} must be an integer from 1 to {INTERNVL_MOST_VALUE:,}, got {value!r:.40}",
                          "--mm-processor-kwargs")
    return value


def internvl_tiles(tiling: Tiling, kwargs: dict[str, Any]) -> int:
    """The tiles of InternVL's largest dummy image (vLLM 0.33.0 transformers_utils/processors/internvl.py with
    model_executor/models/internvl.py). min/max_dynamic_patch, dynamic_image_size and use_thumbnail come from
    the config unless --mm-processor-kwargs names them. resolve_internvl_min_max_num keeps min..max tiles where
    the image size is dynamic (1..1 otherwise); get_image_size_with_most_features tries every grid of
    min..max tiles (max + 1 with a thumbnail beside more than one) and get_num_image_tokens fits each to the
    closest grid of min..max tiles, so the most is max tiles, plus the thumbnail (calculate_internvl_targets)
    where that is more than one. A min above max leaves no grid to fit to, so each tried grid is one tile
    (find_closest_aspect_ratio's (1, 1)); where none is tried vLLM stops with a ValueError."""
    low = _internvl_value(kwargs, "min_dynamic_patch", tiling.min_patches, int)
    high = _internvl_value(kwargs, "max_dynamic_patch", tiling.max_patches, int)
    dynamic = _internvl_value(kwargs, "dynamic_image_size", tiling.dynamic, bool)
    thumbnail = _internvl_value(kwargs, "use_thumbnail", tiling.thumbnail, bool)
    if high > INTERNVL_MOST_TILES:
        raise KvplanError(f"max_dynamic_patch {high:,} is above the {INTERNVL_MOST_TILES:,} kvplan plans for",
                          "--mm-processor-kwargs")
    low, high = (low, high) if dynamic else (1, 1)
    tried = high + (1 if thumbnail and high != 1 else 0)
    if low > tried:
        raise KvplanError(f"min_dynamic_patch {low} is above max_dynamic_patch {high}: vLLM finds no image size "
                          "to profile with", "--mm-processor-kwargs")
    if low > high:
        return 1
    return high + (1 if thumbnail and high != 1 else 0)


QWEN2_VL_MAX_FRAMES = 14  # qwen2_vl.py _MAX_FRAMES_PER_VIDEO
QWEN_ASPECT = 200  # the most elongated grid get_image_size_with_most_features tries
# the Qwen-VL vision configs' defaults where config.json leaves them out (transformers Qwen2VLVisionConfig,
# Qwen2_5_VLVisionConfig, Qwen3VLVisionConfig: spatial_merge_size 2, temporal_patch_size 2)
QWEN_MERGE, QWEN_TEMPORAL = 2, 2
QWEN_HEADS = 16  # num_heads where left out: Qwen2_5_VLVisionConfig's, Qwen3VLVisionConfig's and Qwen3_5VisionConfig's


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
    kwargs_read: tuple[str, ...] = ("size", "max_pixels", "images_kwargs.size", "images_kwargs.max_pixels")  # _pixels

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
        # counted no further than the 14 frames taken: the count up to max_model_len went on for every frame it
        # holds (2 G tokens of a config's max_position_embeddings over a 1-token grid: minutes), the answer the same
        while frames < QWEN2_VL_MAX_FRAMES and tokens(frames + 1) <= max_model_len:
            frames += 1
        return tokens(max(min(frames, QWEN2_VL_MAX_FRAMES), 1))

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        image, video = self.image_tokens(tower, kwargs), self.video_tokens(tower, kwargs, max_model_len)
        # pixel_values(_videos): merge^2 patches a token, channels x temporal_patch_size x patch^2 values a patch
        # (transformers Qwen2VLImageProcessor); image_grid_thw / video_grid_thw stay on the CPU
        merge = (tower.merge_size or QWEN_MERGE) ** 2
        patch = merge * tower.channels * (tower.temporal_patch_size or QWEN_TEMPORAL) * tower.patch_size ** 2
        return {"image": Item(image, image, image * patch, patches=image * merge),
                "video": Item(video, video, video * patch, patches=video * merge)}

    @staticmethod
    def _on_rank(item: Item, batch: int, dtype_bytes: int, ranks: int) -> tuple[int, int]:
        """The patches one rank encodes and the inputs it holds: the batch's pixel values, and under
        --mm-encoder-tp-mode data the copy of its share that run_dp_sharded_mrope_vision_model concatenates."""
        items = _share(batch, ranks) if ranks > 1 else batch
        inputs = batch * item.pixels * dtype_bytes + (items * item.pixels * dtype_bytes if ranks > 1 else 0)
        return items * item.patches, inputs

    @staticmethod
    def _rotary(tower: VisionTower) -> int:
        """The rotary cos and sin tables the tower keeps through its blocks: head_dim / 2 values a patch each
        (rotary_pos_emb_thw / rot_pos_emb index get_cos_sin's cache, in the model dtype, by (h, w) position)."""
        return tower.hidden_size // (tower.num_heads or QWEN_HEADS)


class Qwen2VL(QwenVL):
    """Qwen2-VL: QwenVL's processor before qwen2_vl.py's Qwen2VisionTransformer."""

    def tower_peak(self, tower: VisionTower, item: Item, batch: int, dtype_bytes: int, total_bytes: int,
                   free_bytes: int | None, *, split: int = 1, ranks: int = 1,
                   compiled: bool = True) -> int:
        """qwen2_vl.py _process_image_input / _process_video_input run Qwen2VisionTransformer over all the batch's
        patches (N = tokens x spatial_merge_size^2 an item; hidden is vision_config embed_dim, intermediate
        int(embed_dim x mlp_ratio)). Through its blocks it keeps the rotary cos / sin (rot_pos_emb: head_dim /
        2 values a patch each). Each Qwen2VisionBlock holds its input x (the tower's loop holds it too) and
        norm1's output (nn.LayerNorm); Qwen2VisionAttention.forward holds qkv's output (3 x hidden / TP), the
        torch.cat of q and k (2 x hidden / TP) and its rotated copy (ApplyRotaryEmb, enforce-enabled: vllm_flash_attn
        apply_rotary_emb, out of place), the FlashAttention output (hidden / TP; the rearranged context of a
        one-item batch is a view) and proj's (hidden). Split over TP, split_qkv all-gathers qkv first
        (tensor_model_parallel_all_gather: the gathered buffer and the copy its movedim / reshape makes, 3 x hidden
        each, the copy kept while q, k and v view it). The MLP holds x, the attention's sum, norm2's output and
        fc1's output (intermediate / TP) with QuickGELU's: compiled (custom ops off: forward_native, x *
        sigmoid(1.702 x)) two more intermediates at once, eager (its gelu_quick kernel) one; then the activation
        and fc2's output. The merger after the blocks holds less."""
        if not (tower.hidden_size and tower.intermediate_size and item.patches):
            return 0
        patches, inputs = self._on_rank(item, batch, dtype_bytes, ranks)
        hidden, part, inner = tower.hidden_size, tower.hidden_size // split, tower.intermediate_size // split
        gathered = 3 * hidden if split > 1 else 0  # split_qkv's all-gathered qkv, kept through the attention
        attention = 2 * hidden + 3 * part + gathered + 2 * part + 2 * part + part + hidden
        gather = 2 * hidden + 3 * part + 2 * gathered  # the all-gather's buffer beside its reshaped copy
        mlp = 3 * hidden + max((3 if compiled else 2) * inner, inner + hidden)
        return inputs + patches * (max(attention, gather, mlp) + self._rotary(tower)) * dtype_bytes


class Qwen25VL(QwenVL):
    """Qwen2.5-VL: Qwen2-VL's processor (QwenVL) before qwen2_5_vl.py's Qwen2_5_VisionTransformer."""

    def tower_peak(self, tower: VisionTower, item: Item, batch: int, dtype_bytes: int, total_bytes: int,
                   free_bytes: int | None, *, split: int = 1, ranks: int = 1,
                   compiled: bool = True) -> int:
        """qwen2_5_vl.py _process_image_input / _process_video_input run Qwen2_5_VisionTransformer over all the
        batch's patches (N = tokens x spatial_merge_size^2 an item). Through its blocks it keeps the rotary cos /
        sin; each Qwen2_5_VisionBlock (window and full attention alike under FlashAttention) holds its input x
        and norm1's output, and Qwen2_5_VisionAttention.forward qkv's output (3 x hidden / TP), the contiguous q,
        k (2 x hidden / TP) and their rotated copy (ApplyRotaryEmb, vllm_flash_attn apply_rotary_emb, out of
        place: 2 x hidden / TP), the FlashAttention output (hidden / TP) and proj's (hidden). norm2 (RMSNorm) adds
        and normalises in place (kernels/vllm_c.py fused_add_rms_norm, inplace=True), so the MLP holds x and
        x_attn, gate_up_proj's output (2 x intermediate / TP) while SiluAndMul's (intermediate / TP) and
        down_proj's (hidden) are made. That in-place kernel is the IR op's choice only where vLLM does not compile
        (--enforce-eager, -O0: ['vllm_c', 'native']); compiling, the priority is ['native'] (ir/ops/layernorm.py
        fused_add_rms_norm, run eagerly: RMSNorm is not compile_native), which returns a new normed x and a new
        residual, so the MLP holds two hidden more (and the norm's own float32 moment, 9 x hidden, is narrower).
        SiluAndMul is one output either way (its CUDA kernel, or its compiled native form). The merger after the
        blocks holds less."""
        if not (tower.hidden_size and tower.intermediate_size and item.patches):
            return 0
        patches, inputs = self._on_rank(item, batch, dtype_bytes, ranks)
        hidden, part, inner = tower.hidden_size, tower.hidden_size // split, tower.intermediate_size // split
        attention = 2 * hidden + 3 * part + 2 * part + 2 * part + part + hidden
        norm2 = 2 * hidden if compiled else 0  # the native fused_add_rms_norm's new normed x and residual
        mlp = 2 * hidden + norm2 + 2 * inner + inner + hidden
        return inputs + patches * (max(attention, mlp) + self._rotary(tower)) * dtype_bytes


class Qwen3VL(QwenVL):
    """model_executor/models/qwen3_vl.py Qwen3VLProcessingInfo (Qwen3-VL, Qwen3.5): images as Qwen2-VL's with
    size.longest_edge 16,777,216 (Qwen3-VL's preprocessor_config.json); a video is the two-frame grid of the
    video processor's longest_edge (25,165,824, video_preprocessor_config.json) over temporal_patch_size."""

    default_pixels = 16_777_216
    video_pixels = 25_165_824
    kwargs_read = (*QwenVL.kwargs_read, "videos_kwargs.size", "videos_kwargs.max_pixels")  # and video_tokens

    def video_tokens(self, tower: VisionTower, kwargs: dict[str, Any], max_model_len: int) -> int:
        pixels = _pixels({"videos_kwargs": scoped(kwargs, "videos_kwargs")}, "videos_kwargs", self.video_pixels)
        return _grid_tokens(pixels // (tower.temporal_patch_size or QWEN_TEMPORAL), self.unit(tower))

    def tower_peak(self, tower: VisionTower, item: Item, batch: int, dtype_bytes: int, total_bytes: int,
                   free_bytes: int | None, *, split: int = 1, ranks: int = 1,
                   compiled: bool = True) -> int:
        """qwen3_vl.py Qwen3_VisionTransformer.forward over all the batch's patches (N = tokens x
        spatial_merge_size^2 an item; Qwen3.5's qwen3_5.py builds the same class). Through the blocks its
        encoder_metadata keeps the interpolated position embeddings (pos_embeds, hidden a patch) and the rotary
        cos / sin, and the deepstack mergers' outputs (out_hidden_size a merged token) pile up: at the last block
        every deepstack_visual_indexes layer before it has left one. In Qwen3_VisionBlock.forward the tower's
        loop holds the block's input throughout; the attention (Qwen2_5_VisionAttention, as Qwen2.5-VL's) holds
        norm1's output, qkv's (3 x hidden / TP), the contiguous and the rotated q, k (2 x 2 x hidden / TP), the
        FlashAttention output (hidden / TP) and proj's (hidden); the MLP holds the attention's sum, norm2's output
        (LayerNorm), linear_fc1's output (intermediate / TP) with its activation, then the activation and
        linear_fc2's output. After the blocks the merger (norm, linear_fc1 and its GELU at 4 x hidden a merged
        token) and the torch.cat of its output with the deepstack outputs: whichever of these moments is widest."""
        if not (tower.hidden_size and tower.intermediate_size and item.patches):
            return 0
        patches, inputs = self._on_rank(item, batch, dtype_bytes, ranks)
        hidden, part, inner = tower.hidden_size, tower.hidden_size // split, tower.intermediate_size // split
        merge = (tower.merge_size or QWEN_MERGE) ** 2
        levels = len(tower.deepstack)
        out = tower.output_width // (1 + levels)  # out_hidden_size
        kept = hidden + self._rotary(tower)  # pos_embeds, cos / sin
        before_last = sum(1 for index in tower.deepstack if index < tower.depth - 1)
        attention = 2 * hidden + 3 * part + 4 * part + part + hidden
        mlp = 3 * hidden + max(2 * inner, inner + hidden)
        blocks = max(attention, mlp) + before_last * out // merge
        merger = 2 * hidden + max(2 * part, part + out // merge) + levels * out // merge
        concat = 2 * (1 + levels) * out // merge
        return inputs + patches * (kept + max(blocks, merger, concat)) * dtype_bytes


QWEN2_AUDIO_SECONDS, QWEN2_AUDIO_RATE, QWEN2_AUDIO_HOP = 30, 16_000, 160  # WhisperFeatureExtractor (Qwen2-Audio's)
MASK_BYTES = 4  # feature_attention_mask: int32 (feature_extraction_sequence_utils.py pad)


class Qwen2Audio(Processor):
    """model_executor/models/qwen2_audio.py Qwen2AudioProcessingInfo: audio only. get_mm_max_tokens_per_item takes
    the feature extractor's chunk_length (30 s, at most 30) of 16 kHz samples, audio_len // hop_length (160) =
    3,000 mel frames, and the tokens the two stride-2 steps leave (_get_feat_extract_output_lengths: 1,500, then
    750). The dummy (Qwen2AudioDummyInputsBuilder) is chunk_length x sampling_rate samples (a shorter length in
    limit_mm_per_prompt winning), padded to the 3,000 frames and truncated there (the processor's max_length
    padding, truncation=True): input_features num_mel_bins x 3,000 in the model dtype and the int32
    feature_attention_mask of 3,000, whose ones give the item's embeddings. Qwen2AudioForConditionalGeneration
    builds transformers' Qwen2AudioEncoder and an nn.Linear projector, whole on every TP rank, and has no
    supports_encoder_tp_data."""

    modalities = ("audio",)
    whole_tower = True

    def items(self, tower: VisionTower, kwargs: dict[str, Any], limits: dict[str, Any],
              max_model_len: int) -> dict[str, Item]:
        encoder = tower.audio_encoder
        if encoder is None:
            return {}
        samples = QWEN2_AUDIO_SECONDS * QWEN2_AUDIO_RATE
        frames = samples // QWEN2_AUDIO_HOP
        tokens = self._tokens(frames)
        dummy = limits.get("audio")
        length = samples
        if isinstance(dummy, dict) and isinstance(dummy.get("length"), int):
            length = min(length, dummy["length"])
        embeds = self._tokens(-(-length // QWEN2_AUDIO_HOP))  # the mask's ones: the samples' frames, rounded up
        return {"audio": Item(tokens, embeds, encoder.mel_bins * frames, frames * MASK_BYTES,
                              patches=encoder.positions)}

    @staticmethod
    def _tokens(frames: int) -> int:
        """qwen2_audio.py _get_feat_extract_output_lengths: (frames - 1) // 2 + 1, then (that - 2) // 2 + 1."""
        return ((frames - 1) // 2 + 1 - 2) // 2 + 1

    def tower_peak(self, tower: VisionTower, item: Item, batch: int, dtype_bytes: int, total_bytes: int,
                   free_bytes: int | None, *, split: int = 1, ranks: int = 1,
                   compiled: bool = True) -> int:
        """qwen2_audio.py _process_audio_input runs Qwen2AudioEncoder (transformers 5.16-5.20
        modeling_qwen2_audio.py, the releases vLLM 0.33.0 pins) over the batch's items, max_source_positions
        positions each after the convolutions, eagerly and whole on the rank. Its attention is SDPA
        (PreTrainedModel's default, get_correct_attn_implementation: vLLM sets no _attn_implementation for it);
        with the additive (batch, 1, 1, positions) padding mask torch's SDPA runs the memory-efficient kernel,
        which makes no positions x positions scores (eager attention would). The encoder's forward keeps
        inputs_embeds (the convolutions' GELU output) through its layers and its loop holds the layer's input;
        in Qwen2AudioEncoderLayer.forward the attention holds self_attn_layer_norm's output, query, key and value
        (each projected, then made contiguous by _shape), SDPA's output and out_proj's, d_model each; the MLP
        holds the attention's sum, final_layer_norm's output and fc1's output (encoder_ffn_dim) with its GELU
        (F.gelu), then the GELU and fc2's output. The convolutions before (at most 4 x d_model a position, the
        first over twice the positions) and the pooler, layer norm and projector after hold less."""
        encoder = tower.audio_encoder
        if encoder is None or not item.patches:
            return 0
        width, inner = encoder.width, encoder.inner
        kept = 2 * width  # inputs_embeds and the layer's input
        attention = kept + 6 * width  # the norm, query, key, value, SDPA's output, out_proj's
        mlp = kept + 2 * width + max(2 * inner, inner + width)  # the sum, the norm, fc1 / GELU / fc2
        inputs = batch * (item.pixels * dtype_bytes + item.index_bytes)
        return inputs + batch * item.patches * max(attention, mlp) * dtype_bytes


# vLLM's model registry (model_executor/models/registry.py) picks the processor by the config's architecture
PROCESSORS: dict[str, Processor] = {
    "Gemma3ForConditionalGeneration": Gemma3(),
    "Gemma4ForConditionalGeneration": Gemma4(),
    "InternVLChatModel": InternVL(),
    "Llama4ForConditionalGeneration": Llama4(),
    "Qwen2AudioForConditionalGeneration": Qwen2Audio(),
    "Qwen2VLForConditionalGeneration": Qwen2VL(),
    "Qwen2_5_VLForConditionalGeneration": Qwen25VL(),
    "Qwen3VLForConditionalGeneration": Qwen3VL(),
    "Qwen3VLMoeForConditionalGeneration": Qwen3VL(),
    "Qwen3_5ForConditionalGeneration": Qwen3VL(),
    "Qwen3_5MoeForConditionalGeneration": Qwen3VL(),
}


@dataclass(frozen=True)
class EncoderProfile:
    """What vLLM's encoder profiling does on one rank: the budget it logs, the items it encodes, the encoder
    outputs and inputs it holds through the decoder's dummy run (held_bytes), and the tower's own peak before it
    (tower_bytes, inputs included; 0 where not derived)."""

    budget: int
    modality: str
    items: int
    tokens_per_item: int
    held_bytes: int
    skipped: bool  # --skip-mm-profiling: the budget stands, nothing is encoded
    tower_bytes: int = 0

    def peak(self, decoder_bytes: int) -> int:
        """The profiled peak: the decoder's run with the held bytes, or the tower's run where that is larger."""
        return max(decoder_bytes + self.held_bytes, self.tower_bytes)

    def note(self) -> str:
        if self.skipped:
            return (f"multimodal encoder: cache budget {self.budget:,} tokens; --skip-mm-profiling: no encoder run "
                    "in the profile (the peak is the text model's)")
        tower = (f"the tower's own run peaks at {self.tower_bytes / GiB:.2f} GiB ({self.tower_bytes:,} B)"
                 if self.tower_bytes
                 else "the tower's own run is not modelled for this family")
        return (f"multimodal encoder: cache budget {self.budget:,} tokens, profiled with {self.items} {self.modality} "
                f"item(s) of {self.tokens_per_item:,} tokens; their outputs (and under Model Runner V1 their inputs) "
                f"add {self.held_bytes / GiB:.2f} GiB to the decoder's profiled peak; {tower} (vLLM 0.33.0 "
                "profile_run)")


def unread_kwargs(spec: ModelSpec, dep: Deployment) -> list[str]:
    """The --mm-processor-kwargs keys the family's Processor does not read (Processor.kwargs_read; every key where
    the family's processor is not modelled), a scope's as "images_kwargs.key": Gemma 3's do_pan_and_scan, for
    one, gives vLLM's profile more crops an image (gemma3_mm.py get_num_crops) and passed in silence."""
    processor = PROCESSORS.get(spec.architecture)
    read = set(processor.kwargs_read) if processor else set()
    unread: list[str] = []
    for key, value in (dep.mm_processor_kwargs or {}).items():
        if key in ("images_kwargs", "videos_kwargs", "audio_kwargs") and isinstance(value, dict):
            unread += [f"{key}.{inner}" for inner in value if f"{key}.{inner}" not in read]
        elif key not in read:
            unread.append(key)
    return unread


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


def skipped_params(spec: ModelSpec, dep: Deployment) -> int:
    """model_executor/models/interfaces.py _mark_tower_model: a tower whose modalities all have a limit of 0
    (--limit-mm-per-prompt, --language-model-only) is not built, so its weights are not loaded. gemma4_mm.py
    marks the vision tower with image and video and the audio tower (with embed_audio) with audio alone, so
    each goes by its own limits; the parameters of those not built (params.vision holds both)."""
    if spec.tower is None or not spec.params.vision:
        return 0
    processor = PROCESSORS.get(spec.architecture)
    modalities = processor.modalities if processor else ("image", "video")
    given = limits(dep)

    def off(names: tuple[str, ...]) -> bool:
        return all(count(given, m, bool(dep.language_model_only)) == 0 for m in names)

    audio = spec.tower.audio_params
    return (spec.params.vision - audio if off(modalities) else 0) + (audio if audio and off(("audio",)) else 0)


def tower_skipped(spec: ModelSpec, dep: Deployment) -> bool:
    """Whether no tower is built (skipped_params)."""
    return bool(spec.params.vision) and skipped_params(spec, dep) == spec.params.vision


def _whole(spec: ModelSpec, dep: Deployment) -> bool:
    """Whether a rank holds the towers whole: --mm-encoder-tp-mode data, or Processor.whole_tower."""
    processor = PROCESSORS.get(spec.architecture)
    return bool(tower_replicated(spec, dep) or (processor and processor.whole_tower))


def skipped_bytes(spec: ModelSpec, dep: Deployment, tower_bytes: int) -> int:
    """The bytes of the towers vLLM does not build (skipped_params) on one rank of the first stage."""
    skipped = tower_bytes * skipped_params(spec, dep) // spec.params.vision if spec.params.vision else 0
    return skipped if _whole(spec, dep) else skipped // dep.tensor_parallel_size


def stage_tower_bytes(spec: ModelSpec, dep: Deployment, tower_bytes: int, first: bool, v2: bool) -> int:
    """What one rank of a pipeline stage holds of the vision tower beyond common.stage_weights' share (the
    tower split over TP on the first stage). Each stage builds the whole wrapper model, make_layers
    (model_executor/models/utils.py) splitting only the decoder layers, and interfaces.py _mark_tower_model
    (0.33.0) skips the tower on every stage where all its modalities are off, and under Model Runner V2 on the
    stages after the first (V2 encodes on the first stage only); 0.23.0's V1 builds it on every stage.
    --mm-encoder-tp-mode data, or a family whose towers are never sharded (Processor.whole_tower), keeps it
    whole on each rank that builds it. A tower of several (Gemma 4's vision and audio) is built in the part
    skipped_params leaves."""
    share = tower_bytes // dep.tensor_parallel_size
    kept = tower_bytes - tower_bytes * skipped_params(spec, dep) // spec.params.vision
    built = kept if first or not v2 else 0
    held = built if _whole(spec, dep) else built // dep.tensor_parallel_size
    return held - (share if first else 0)


def held_rows(item: Item, budget: int, release: tuple[int, int] | None) -> int:
    """The rows of one item's encoder output that the encoder cache holds through the decoder's dummy run: padded
    to the budget in 0.11, to the item's tokens in 0.12, as returned otherwise (releases.py)."""
    if release is None or release >= OUTPUTS_UNPADDED_FROM or release < OUTPUTS_PADDED_TO_BUDGET_FROM:
        return item.embeds
    return max(item.embeds, item.tokens if release >= OUTPUTS_PADDED_TO_ITEM_FROM else budget)


def encoder_profile(spec: ModelSpec, dep: Deployment, max_model_len: int, max_num_seqs: int,
                    max_num_batched_tokens: int, dtype_bytes: int, total_bytes: int = 0,
                    free_bytes: int | None = None, v2: bool = False,
                    release: tuple[int, int] | None = None) -> EncoderProfile | None:
    """None for a text model, a family whose processor is not modelled, or every modality turned off. total_bytes
    and free_bytes: the GPU's memory and what is free when the tower runs (None: more than a fifth of it). v2:
    Model Runner V2, whose encoder_runner.py execute_mm_encoder moves the inputs to the GPU and drops them on
    return, so only the outputs are held through the decoder's run. release: vLLM's (None: the newest), which
    says how many rows of each output the encoder cache holds (held_rows)."""
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
    inputs = 0 if v2 else item.pixels * dtype_bytes + item.index_bytes
    held = batch * (held_rows(item, budget, release) * spec.tower.output_width * dtype_bytes + inputs)
    if dep.skip_mm_profiling:
        return EncoderProfile(budget, modality, batch, item.tokens, 0, True)
    data = bool(tower_replicated(spec, dep))
    tp = dep.tensor_parallel_size
    split = 1 if data or processor.whole_tower else tp
    compiled = not (dep.enforce_eager or dep.optimization_level == 0)  # config/vllm.py: CompilationMode.NONE
    return EncoderProfile(budget, modality, batch, item.tokens, held, False,
                          processor.tower_peak(spec.tower, item, batch, dtype_bytes, total_bytes, free_bytes,
                                               split=split, ranks=tp if data else 1, compiled=compiled))
