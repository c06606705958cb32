"""Issue 20 item 4, the last vLLM towers: the tower's own profiling peak (vLLM 0.33.0 profile_run encodes the dummy
batch through embed_multimodal before the decoder's dummy run, eagerly) for Qwen2-VL, InternVL and Qwen2-Audio's
audio tower (kvplan/engines/vllm/multimodal.py Qwen2VL, InternVL, Qwen2Audio tower_peak), derived by hand below from
the fixtures' config.json fields and the model files' forwards (qwen2_vl.py, intern_vit.py / internvl.py,
qwen2_audio.py with transformers' modeling_qwen2_audio.py).

Shapes: N positions on the rank, width h, intermediate i, TP split t (1 whole); bf16 (2 B). Every moment counts what
is alive at once in the eager forward: the batch's inputs, what earlier stages keep, the residual stream and the
widest intermediate. Qwen2-VL and InternViT run FlashAttention (MMEncoderAttention, head sizes 80 and 64 on an
H100), Qwen2-Audio's encoder torch SDPA's memory-efficient kernel (its additive padding mask rules out flash): no
S x S scores in any term."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conftest import tower_note as _tower_note

from kvplan.api import estimate
from kvplan.engines.vllm.multimodal import PROCESSORS, Item
from kvplan.models.sources import read_local
from kvplan.units import GiB

FIXTURES = Path(__file__).parent / "fixtures"
QWEN2_VL = str(FIXTURES / "qwen2vl" / "qwen2-vl-7b-instruct.json")
INTERNVL3 = str(FIXTURES / "internvl" / "internvl3-8b.json")
QWEN2_AUDIO = str(FIXTURES / "audio" / "qwen2-audio-7b-instruct.json")


def _plan(path: str, max_model_len: int = 32768, **knobs):
    return estimate(path, gpu="h100", engine="vllm", engine_version="0.33.0", max_model_len=max_model_len, **knobs)


def test_qwen2_vl_tower_is_read_from_embed_dim_and_mlp_ratio():
    # Qwen2VLVisionConfig: embed_dim 1,280 is the ViT's width, mlp_ratio 4 its MLP's 5,120 (int(dim * mlp_ratio) in
    # qwen2_vl.py Qwen2VisionBlock), hidden_size 3,584 the merger's output (Qwen2VisionPatchMerger d_model); kvplan
    # read hidden_size as the width (and no MLP), so the tower counted 4,948,955,648 parameters, not 675,759,104.
    spec = read_local(Path(QWEN2_VL))
    tower = spec.tower
    assert tower is not None
    assert (tower.hidden_size, tower.intermediate_size, tower.output_width) == (1280, 5120, 3584)
    # module by module (qwen2_vl.py): Conv3d 3 x 2 x 14^2 x 1,280 = 1,505,280; a block's two LayerNorms 4 x 1,280,
    # qkv 1,280 x 3,840 + 3,840, proj 1,280^2 + 1,280, fc1 1,280 x 5,120 + 5,120, fc2 5,120 x 1,280 + 1,280 =
    # 19,677,440, x 32; the merger's LayerNorm 2 x 1,280, 5,120^2 + 5,120 and 5,120 x 3,584 + 3,584
    block = 4 * 1280 + (1280 * 3840 + 3840) + (1280 * 1280 + 1280) + (1280 * 5120 + 5120) + (5120 * 1280 + 1280)
    visual = 3 * 2 * 14 * 14 * 1280 + 32 * block + 2 * 1280 + (5120 * 5120 + 5120) + (5120 * 3584 + 3584)
    assert spec.params.vision == visual == 675_759_104
    # with the Qwen2 text model (Qwen2-7B's 7,615,616,512, q / k / v biases) the Hub's safetensors total for
    # Qwen2-VL-7B-Instruct, 8,291,375,616 (as two stored copies quote it: read_file ids 12439498600, 70937807244)
    assert spec.params.total == 7_615_616_512 + visual == 8_291_375_616 and spec.params.exact


def test_qwen2_vl_7b_tower_by_hand():
    # Qwen2-VL-7B at 32K on an H100: the profile encodes one 32,768-token video (QwenVL: 12,845,056 max_pixels ->
    # a 128 x 128 merged grid, 4 frames in 2 temporal patches), N = 32,768 x 2^2 = 131,072 patches of 3 x 2 x 14^2 =
    # 1,176 values: pixel_values 131,072 x 1,176 x 2 B = 308,281,344 B.
    # Per patch (qwen2_vl.py): the attention holds x, norm1, qkv (3h), the cat of q and k (2h), its rotated copy
    # (2h), the attention output (h) and proj's (h): 11 x 1,280 = 14,080; the MLP holds x, the sum, norm2, fc1 (i)
    # and, vLLM compiling by default (custom ops off), QuickGELU's forward_native x * sigmoid(1.702 x): 1.702 x and
    # its sigmoid beside fc1's output, 3i: 3 x 1,280 + 3 x 5,120 = 19,200, the wider. Rotary cos / sin kept: 1,280
    # / 16 = 80. Tower: 308,281,344 + 131,072 x (19,200 + 80) x 2 = 5,362,417,664 B.
    assert 11 * 1280 < 3 * 1280 + 3 * 5120
    tower = 131072 * 1176 * 2 + 131072 * (3 * 1280 + 3 * 5120 + 80) * 2
    assert tower == 5_362_417_664
    plan = _plan(QWEN2_VL)
    note = _tower_note(plan)
    assert "profiled with 1 video item(s) of 32,768 tokens" in note
    assert "the tower's own run peaks at 4.99 GiB (5,362,417,664 B)" in note
    assert plan.memory.activation_bytes == tower  # above the decoder's run with the held outputs and inputs


def test_qwen2_vl_eager_quick_gelu_is_one_kernel_output():
    # --enforce-eager: QuickGELU's custom op runs its gelu_quick kernel into one new tensor, so the MLP holds
    # 3 x 1,280 + 2 x 5,120 = 14,080 values a patch, the attention's 14,080 too:
    # 308,281,344 + 131,072 x (14,080 + 80) x 2 = 4,020,240,384 B.
    tower = 131072 * 1176 * 2 + 131072 * (3 * 1280 + 2 * 5120 + 80) * 2
    assert tower == 4_020_240_384
    assert "the tower's own run peaks at 3.74 GiB (4,020,240,384 B)" in _tower_note(_plan(QWEN2_VL,
                                                                                          enforce_eager=True))


def test_qwen2_vl_tower_split_over_tp_all_gathers_qkv_and_under_data_mode():
    # TP 2 ('weights'): qkv (3 x 640), the q / k cat and its rotated copy (4 x 640), the attention output (640)
    # are halved, but split_qkv all-gathers qkv (tensor_model_parallel_all_gather: 3 x 1,280, kept while q, k, v
    # view it): 2 x 1,280 + 3 x 640 + 3 x 1,280 + 5 x 640 + 1,280 = 12,800 a patch; the gather's own moment (its
    # buffer and reshaped copy, 6 x 1,280, beside x, norm1 and qkv) 12,160; the MLP 3 x 1,280 + 3 x 2,560 = 11,520.
    # 308,281,344 + 131,072 x (12,800 + 80) x 2 = 3,684,696,064 B.
    attention = 2 * 1280 + 3 * 640 + 3 * 1280 + 5 * 640 + 1280
    assert (attention, 2 * 1280 + 3 * 640 + 6 * 1280, 3 * 1280 + 3 * 2560) == (12_800, 12_160, 11_520)
    tower = 131072 * 1176 * 2 + 131072 * (attention + 80) * 2
    assert tower == 3_684_696_064
    assert "the tower's own run peaks at 3.43 GiB (3,684,696,064 B)" in _tower_note(
        _plan(QWEN2_VL, tensor_parallel_size=2))
    # --mm-encoder-tp-mode data (Qwen2VLForConditionalGeneration supports it): the one video runs whole on one rank
    # (run_dp_sharded_mrope_vision_model), beside the torch.cat copy of its pixels:
    # 2 x 308,281,344 + 131,072 x 19,280 x 2 = 5,670,699,008 B.
    data = 2 * 131072 * 1176 * 2 + 131072 * 19280 * 2
    assert data == 5_670_699_008
    assert "the tower's own run peaks at 5.28 GiB (5,670,699,008 B)" in _tower_note(
        _plan(QWEN2_VL, tensor_parallel_size=2, mm_encoder_tp_mode="data"))


def test_internvl3_8b_tower_by_hand():
    # InternVL3-8B (InternViT-300M: hidden 1,024, intermediate 4,096, 24 layers, 16 heads, 448 px tiles of 14 px
    # patches, layer_norm, no qk_normalization) at 32K on an H100: the video (qwen2's tokenizer has the video token)
    # of (32,768 - 3,328) // 256 = 115 one-tile frames, 29,440 tokens, outgrows the 13-tile image (3,328).
    # A tile is (448 / 14)^2 + 1 = 1,025 tokens (the class token); pixel_values_flat 115 x 3 x 448^2 x 2 B =
    # 138,485,760 B. Per token (intern_vit.py): InternVisionModel keeps the embeddings (h) through the encoder; from
    # the second layer on the loop holds the layer's input (h); the attention adds norm1 (h), qkv (3h), the
    # FlashAttention output (h) and proj's (h): 7 x 1,024 = 7,168; the MLP adds the sum, norm2 and fc1 with its
    # GELU: 3 x 1,024 + 2 x 4,096 = 11,264. 138,485,760 + 115 x 1,025 x (1,024 + 11,264) x 2 = 3,035,381,760 B.
    tower = 115 * 3 * 448 * 448 * 2 + 115 * 1025 * (1024 + 3 * 1024 + 2 * 4096) * 2
    assert tower == 3_035_381_760
    plan = _plan(INTERNVL3)
    note = _tower_note(plan)
    assert "profiled with 1 video item(s) of 29,440 tokens" in note
    assert "the tower's own run peaks at 2.83 GiB (3,035,381,760 B)" in note
    assert plan.memory.activation_bytes > tower  # the decoder's run with the held outputs stays the peak


def test_internvl3_8b_tower_over_tp2_and_under_data_mode():
    # TP 2: qkv, the attention output and fc1 are halved (16 heads divide over 2): attention 3 x 1,024 + 4 x 512 =
    # 5,120, MLP 3 x 1,024 + 2 x 2,048 = 7,168 beside the embeddings' 1,024:
    # 138,485,760 + 117,875 x 8,192 x 2 = 2,069,749,760 B.
    split = 138_485_760 + 115 * 1025 * (1024 + 3 * 1024 + 2 * 2048) * 2
    assert split == 2_069_749_760
    assert "the tower's own run peaks at 1.93 GiB (2,069,749,760 B)" in _tower_note(
        _plan(INTERNVL3, tensor_parallel_size=2))
    # --mm-encoder-tp-mode data (InternVLChatModel supports it): every rank makes the embeddings of all 115 tiles,
    # run_dp_sharded_vision_model pads them to 116 (F.pad, a copy) and the rank runs 58 tiles whole:
    # 138,485,760 + (115 + 116) x 1,025 x 1,024 x 2 + 58 x 1,025 x 11,264 x 2 = 1,962,690,560 B.
    data = 138_485_760 + (115 + 116) * 1025 * 1024 * 2 + 58 * 1025 * 11264 * 2
    assert data == 1_962_690_560
    assert "the tower's own run peaks at 1.83 GiB (1,962,690,560 B)" in _tower_note(
        _plan(INTERNVL3, tensor_parallel_size=2, mm_encoder_tp_mode="data"))


def test_internvl_tower_without_its_norm_fields_is_not_derived():
    # the trimmed shape config leaves norm_type and qk_normalization out: InternVisionConfig's defaults are
    # InternViT-6B's rms_norm and qk_normalization, whose forward is not derived, so the note says so
    plan = _plan(str(FIXTURES / "internvl" / "internvl3-8b-shape.json"))
    notes = [note for note in plan.notes if note.startswith("multimodal encoder")]
    assert notes and "the tower's own run is not modelled for this family" in notes[0]


def test_qwen2_audio_encoder_profile_by_hand():
    # Qwen2-Audio-7B-Instruct at 8,192 on an H100: an audio item takes 750 tokens (30 s of 16 kHz over hop 160 =
    # 3,000 mel frames, (3,000 - 1) // 2 + 1 = 1,500, (1,500 - 2) // 2 + 1 = 750); the budget (max_num_batched_tokens
    # 8,192) holds 10. Each item: input_features 128 x 3,000 x 2 B and the int32 feature_attention_mask 3,000 x 4 B
    # = 780,000 B; the encoder runs 1,500 positions of d_model 1,280: it keeps inputs_embeds and the layer's input
    # (2 x 1,280); the attention adds the norm, query, key, value, SDPA's output and out_proj's (6 x 1,280: 10,240
    # in all); the MLP adds the sum, final_layer_norm and fc1 with its GELU (2 x 1,280 + 2 x 5,120: 15,360 in all).
    # 10 x 780,000 + 10 x 1,500 x 15,360 x 2 = 468,600,000 B.
    assert 8 * 1280 < 4 * 1280 + 2 * 5120
    tower = 10 * (128 * 3000 * 2 + 3000 * 4) + 10 * 1500 * (4 * 1280 + 2 * 5120) * 2
    assert tower == 468_600_000
    plan = _plan(QWEN2_AUDIO, max_model_len=8192)
    note = _tower_note(plan)
    assert "cache budget 8,192 tokens, profiled with 10 audio item(s) of 750 tokens" in note
    assert "the tower's own run peaks at 0.44 GiB (468,600,000 B)" in note
    # held through the decoder's run: 10 x (750 x 4,096 x 2 + 780,000) = 69,240,000 B, 0.06 GiB
    assert "add 0.06 GiB to the decoder's profiled peak" in note
    # a 1 s dummy (limit_mm_per_prompt audio length 16,000 samples) leaves the mask 100 ones, 50, then 25
    # embeddings an item: 10 x (750 - 25) x 4,096 x 2 = 59,392,000 B fewer held (the tower still runs 1,500 positions)
    short = _plan(QWEN2_AUDIO, max_model_len=8192, limit_mm_per_prompt={"audio": {"count": 999, "length": 16000}})
    assert "the tower's own run peaks at 0.44 GiB (468,600,000 B)" in _tower_note(short)
    assert plan.memory.activation_bytes - short.memory.activation_bytes == 10 * 725 * 4096 * 2 == 59_392_000


def test_qwen2_audio_tower_whole_on_each_tp_rank_and_skipped_without_audio():
    # qwen2_audio.py builds transformers' Qwen2AudioEncoder and an nn.Linear projector: no TP split, so at TP 2 a
    # rank holds the text model's half and the whole tower; TP 1 less TP 2 is half the text model's bytes,
    # 7,754,878,976 parameters x 2 B / 2 (tests/test_audio_towers_issue20.py)
    one, two = _plan(QWEN2_AUDIO, max_model_len=8192), _plan(QWEN2_AUDIO, max_model_len=8192, tensor_parallel_size=2)
    assert one.memory.weights_bytes - two.memory.weights_bytes == 7_754_878_976
    # --limit-mm-per-prompt '{"audio": 0}': _mark_tower_model(vllm_config, "audio") skips the tower, 642,215,936
    # parameters x 2 B fewer, and no encoder profile
    off = _plan(QWEN2_AUDIO, max_model_len=8192, limit_mm_per_prompt={"audio": 0})
    assert one.memory.weights_bytes - off.memory.weights_bytes == 642_215_936 * 2
    assert not any(note.startswith("multimodal encoder") for note in off.notes)


def test_the_attention_moment_wins_where_the_mlp_is_narrow():
    # made-up narrow MLPs on the real towers, so each attention moment is the widest:
    # InternViT with intermediate 1,024: the MLP's 3 x 1,024 + 2 x 1,024 = 5,120 a token under the attention's
    # layer input, norm1, qkv, attention output and proj (7 x 1,024 = 7,168), beside the embeddings' 1,024.
    internvl = read_local(Path(INTERNVL3)).tower
    assert internvl is not None
    item = Item(256, 256, 3 * 448 * 448, frames=1, patches=1025)
    peak = PROCESSORS["InternVLChatModel"].tower_peak(replace(internvl, intermediate_size=1024), item, 1, 2,
                                                     80 * GiB, None)
    assert peak == 3 * 448 * 448 * 2 + 1025 * (1024 + 7 * 1024) * 2
    # Qwen2-Audio's encoder with encoder_ffn_dim 1,280: the MLP's 4 x 1,280 + 2 x 1,280 = 7,680 under the
    # attention's 8 x 1,280 = 10,240 a position.
    audio = read_local(Path(QWEN2_AUDIO)).tower
    assert audio is not None and audio.audio_encoder is not None
    narrow = replace(audio, audio_encoder=replace(audio.audio_encoder, inner=1280))
    item = Item(750, 750, 128 * 3000, 3000 * 4, patches=1500)
    peak = PROCESSORS["Qwen2AudioForConditionalGeneration"].tower_peak(narrow, item, 1, 2, 80 * GiB, None)
    assert peak == 128 * 3000 * 2 + 3000 * 4 + 1500 * 8 * 1280 * 2
