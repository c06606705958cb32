"""Issue 20 item 4: the vision tower's own profiling peak as vLLM 0.33.0 computes it (profile_run encodes the dummy
batch through embed_multimodal before the decoder's dummy run) for Gemma 3 (SigLIP), Qwen2.5-VL, Qwen3-VL / Qwen3.5
and Llama 4 (kvplan/engines/vllm/multimodal.py, each Processor's tower_peak), derived by hand below from the
bundled config.json fields and the model files' forwards, and checked against the v0.19 Gemma 3 and Llama 4 logs.

Shapes: N patches on the rank, hidden h, intermediate i, TP split t (1 whole); bf16 (2 B) unless said. Every moment
counts what is alive at once in the eager forward: the batch's pixel_values, what earlier stages keep, the
residual stream and the widest intermediate. FlashAttention (the ViT backend on an H100 for these head sizes) holds
no S x S scores, so no term has one."""

from __future__ import annotations

from dataclasses import replace

from conftest import tower_note as _tower_note

from kvplan.api import estimate
from kvplan.calibration import vllm as calibration
from kvplan.engines.vllm.multimodal import PROCESSORS, Item
from kvplan.models.sources import resolve
from kvplan.units import GiB

C17 = {entry["id"]: entry for entry in calibration.entries()}["C17"]
L14 = {entry["id"]: entry for entry in calibration.entries()}["L14"]


def _qwen_vl(**knobs):
    return estimate("Qwen/Qwen2.5-VL-7B-Instruct", gpu="h100", engine="vllm", engine_version="0.33.0",
                    max_model_len=32768, **knobs)


def test_qwen2_5_vl_7b_tower_is_the_profiled_peak_by_hand():
    # Qwen2.5-VL-7B (vision_config: hidden 1,280, intermediate 3,420, 16 heads, patch 14, temporal 2, merge 2) at
    # 32K on an H100: the profile encodes one 32,768-token video (4 frames of the 128 x 128-token grid that
    # max_pixels 12,845,056 gives, two temporal patches), N = 32,768 x 2^2 = 131,072 patches of 3 x 2 x 14^2 =
    # 1,176 values: pixel_values 131,072 x 1,176 x 2 B = 308,281,344 B.
    # Per patch, in values (qwen2_5_vl.py Qwen2_5_VisionBlock): the attention holds x, norm1, qkv (3h), the
    # contiguous q, k (2h), their rotated copy (2h), the FlashAttention output (h) and proj's (h): 11 x 1,280 =
    # 14,080. The MLP holds x, x_attn, norm2's normed x and residual (new tensors: vLLM compiles by default, so the
    # IR op runs its native fused_add_rms_norm), gate_up (2i), SiluAndMul's (i) and down_proj's (h): 5 x 1,280 +
    # 3 x 3,420 = 16,660, the wider. The rotary cos / sin kept through the blocks: 2 x head_dim / 2 = 1,280 / 16 =
    # 80. Tower: 308,281,344 + 131,072 x (16,660 + 80) x 2 = 4,696,571,904 B.
    assert 11 * 1280 < 5 * 1280 + 3 * 3420
    tower = 131072 * 1176 * 2 + 131072 * (5 * 1280 + 3 * 3420 + 1280 // 16) * 2
    assert tower == 4_696_571_904
    plan = _qwen_vl()
    assert "the tower's own run peaks at 4.37 GiB (4,696,571,904 B)" in _tower_note(plan)
    # the decoder's run with the held outputs and inputs (2.99 GiB before the tower was derived) is smaller, so
    # the tower's run sets the profiled peak
    assert plan.memory.activation_bytes == tower


def test_qwen2_5_vl_eager_norm_adds_in_place():
    # --enforce-eager (and -O0): no inductor, so the IR priority is ['vllm_c', 'native'] and norm2's
    # fused_add_rms_norm writes into x and x_attn (kernels/vllm_c.py, inplace=True): the MLP holds 3 x 1,280 +
    # 3 x 3,420 = 14,100 values a patch, still above the attention's 14,080.
    # 308,281,344 + 131,072 x (14,100 + 80) x 2 = 4,025,483,264 B.
    tower = 131072 * 1176 * 2 + 131072 * (3 * 1280 + 3 * 3420 + 80) * 2
    for knobs in ({"enforce_eager": True}, {"optimization_level": 0}):
        plan = _qwen_vl(**knobs)
        assert f"the tower's own run peaks at 3.75 GiB ({tower:,} B)" in _tower_note(plan) and tower == 4_025_483_264


def test_qwen2_5_vl_tower_split_over_tp_and_under_data_mode():
    # TP 2 ('weights'): qkv, q / k copies, the attention output, gate_up and SiluAndMul are halved on a rank:
    # attention 3 x 1,280 + 8 x 640 = 8,960, MLP 5 x 1,280 + 3 x 1,710 = 11,530 values a patch, so
    # 308,281,344 + 131,072 x (11,530 + 80) x 2 = 3,351,773,184 B.
    split = _qwen_vl(tensor_parallel_size=2)
    assert "the tower's own run peaks at 3.12 GiB (3,351,773,184 B)" in _tower_note(split)
    # --mm-encoder-tp-mode data: the one video goes whole to one rank (run_dp_sharded_mrope_vision_model), which
    # also holds the torch.cat copy of its pixels: 2 x 308,281,344 + 131,072 x (16,660 + 80) x 2 = 5,004,853,248 B.
    data = _qwen_vl(tensor_parallel_size=2, mm_encoder_tp_mode="data")
    assert "the tower's own run peaks at 4.66 GiB (5,004,853,248 B)" in _tower_note(data)
    assert data.memory.activation_bytes == 2 * 308_281_344 + 131072 * 16740 * 2 == 5_004_853_248


def test_qwen3_vl_8b_tower_with_deepstack_by_hand():
    # Qwen3-VL-8B (hidden 1,152, intermediate 4,304, 16 heads, patch 16, merge 2, out_hidden_size 4,096, depth 27,
    # deepstack_visual_indexes [8, 16, 24]) at 32K on an H100: the image (16,777,216 px -> 128 x 128 merged tokens
    # = 16,384) outgrows the video (12,288), one item, N = 65,536 patches of 3 x 2 x 16^2 = 1,536 values.
    # Per patch (qwen3_vl.py Qwen3_VisionTransformer.forward): kept through the blocks pos_embeds (h = 1,152) and
    # cos / sin (1,152 / 16 = 72); at the last block the three deepstack outputs, 3 x 4,096 / 2^2 = 3,072. The
    # attention: block input, norm1, qkv (3h), q / k contiguous and rotated (4h), the attention output (h) and
    # proj's (h) = 11 x 1,152 = 12,672 against the MLP's block input, sum, norm2 and fc1 with its gelu (3h + 2i =
    # 12,064). The merger and the final torch.cat hold less (2 x 4 x 1,024 = 8,192 + 1,224 at the cat).
    # 65,536 x 1,536 x 2 + 65,536 x (1,152 + 72 + 12,672 + 3,072) x 2 = 2,425,356,288 B, 2.26 GiB.
    tower = 65536 * 1536 * 2 + 65536 * (1152 + 72 + 11 * 1152 + 3 * 4096 // 4) * 2
    assert tower == 2_425_356_288
    plan = estimate("Qwen/Qwen3-VL-8B-Instruct", gpu="h100", engine="vllm", engine_version="0.33.0",
                    max_model_len=32768)
    assert "the tower's own run peaks at 2.26 GiB (2,425,356,288 B)" in _tower_note(plan)
    assert plan.memory.activation_bytes > tower  # the decoder's run with its held bytes stays the peak here


def test_qwen3_5_tower_has_no_deepstack_outputs():
    # Qwen3.5-27B's tower (qwen3_5.py builds Qwen3_VisionTransformer; its config leaves deepstack_visual_indexes
    # out, so [] as vLLM reads it, and num_heads out, Qwen3_5VisionConfig's 16): the same 16,384-token image,
    # 65,536 x 1,536 x 2 + 65,536 x (1,152 + 72 + 12,672) x 2 = 2,022,703,104 B.
    tower = 65536 * 1536 * 2 + 65536 * (1152 + 72 + 11 * 1152) * 2
    plan = estimate("Qwen/Qwen3.5-27B", gpu="h100", engine="vllm", engine_version="0.33.0", max_model_len=32768)
    assert f"the tower's own run peaks at 1.88 GiB ({tower:,} B)" in _tower_note(plan) and tower == 2_022_703_104


def test_gemma3_27b_siglip_tower_by_hand_and_under_the_v019_log():
    # C17 (gemma-3-27b-it, vLLM 0.19.0, H100, 8,192 batched tokens): 32 images of 256 tokens (as the budget line
    # of the v0.19 Gemma 3 logs), each 896^2 px in 14 px patches, 64^2 = 4,096 patches: N = 131,072. SigLIP
    # (hidden 1,152, intermediate 4,304): from the second layer on SiglipEncoder keeps the patch embeddings and the
    # layer's input (2h); the attention adds layer_norm1, qkv (3h), the attention output (h) and out_proj's (h):
    # 8 x 1,152 = 9,216; the MLP adds the residual, layer_norm2 and fc1 with its gelu: 4 x 1,152 + 2 x 4,304 =
    # 13,216 values a patch. pixel_values 32 x 3 x 896^2 x 2 B = 154,140,672.
    # 154,140,672 + 131,072 x 13,216 x 2 = 3,618,635,776 B, 3.37 GiB (0.19.0's siglip.py runs the same forward).
    tower = 32 * 3 * 896 * 896 * 2 + 131072 * (4 * 1152 + 2 * 4304) * 2
    assert tower == 3_618_635_776
    plan = calibration.plan_for(C17)
    assert "profiled with 32 image item(s) of 256 tokens" in _tower_note(plan)
    assert "the tower's own run peaks at 3.37 GiB (3,618,635,776 B)" in _tower_note(plan)
    # The log's own peak: what it leaves for KV (19.53 GiB) from 0.95 x the H100 less the weights kvplan counts
    # exactly (the weights line) is the torch peak plus non-torch memory, 4.31 GiB; the tower stays under it (a
    # tower above it would mean a wrong derivation), and the decoder's run, 3.99 GiB, remains kvplan's peak.
    implied = plan.memory.budget_bytes - plan.memory.weights_bytes - int(19.53 * GiB)
    assert tower + plan.memory.non_torch_bytes < implied
    assert plan.memory.activation_bytes > tower


def test_llama4_scout_tower_split_over_tp4_by_hand():
    # L14 (Llama-4-Scout, vLLM 0.19.0, TP 4, H100): 3 images of 17 tiles (16 and the global one), 51 tiles of
    # (336 / 14)^2 + 1 = 577 patches (the class token): N = 29,427. Vision hidden 1,408, intermediate 5,632, split
    # over 4 ranks: 352 and 1,408 a rank. Per patch in bytes: Llama4VisionModel keeps the encoder's input and the
    # loop the layer's input (2 x 1,408 x 2 = 5,632); the rotary embedding (llama4_vision_rope.py forward_native)
    # holds input_layernorm's output, qkv (3 x 352), the bf16 q and k it returns (2 x 352) in bf16 and the float32
    # q / k copies with their complex64 products (4 x 352 x 4 B): (1,408 + 5 x 352) x 2 + 5,632 = 11,968, in all
    # 17,600 B; the MLP: post-attention sum, layer norm, fc1 and its gelu (2 x 1,408 + 2 x 1,408) x 2 = 11,264, in
    # all 16,896 B. pixel_values 51 x 3 x 336^2 x 2 B = 34,546,176. 34,546,176 + 29,427 x 17,600 = 552,461,376 B.
    attention = 2 * 1408 * 2 + (1408 + 5 * 352) * 2 + 4 * 352 * 4
    mlp = 2 * 1408 * 2 + (2 * 1408 + 2 * 1408) * 2
    assert (attention, mlp) == (17_600, 16_896)
    tower = 51 * 3 * 336 * 336 * 2 + 51 * 577 * attention
    assert tower == 552_461_376
    plan = calibration.plan_for(L14)
    assert "profiled with 3 image item(s) of 2,448 tokens" in _tower_note(plan)
    assert "the tower's own run peaks at 0.51 GiB (552,461,376 B)" in _tower_note(plan)
    assert plan.memory.activation_bytes > tower


def test_llama4_scout_tower_under_data_mode_by_hand():
    # --mm-encoder-tp-mode data at TP 4 (Llama4ForConditionalGeneration supports it): run_dp_sharded_vision_model
    # pads the 51 tiles to 52 (a copy of all their pixels, 52 x 677,376 B) and each rank runs 13 tiles through the
    # whole tower: rotary moment 2 x 1,408 x 2 + (1,408 + 5 x 1,408) x 2 + 4 x 1,408 x 4 = 45,056 B a patch.
    # 34,546,176 + 35,223,552 + 13 x 577 x 45,056 = 407,734,784 B.
    plan = estimate("meta-llama/Llama-4-Scout-17B-16E-Instruct", gpu="h100", engine="vllm", engine_version="0.33.0",
                    max_model_len=8192, tensor_parallel_size=4, mm_encoder_tp_mode="data")
    assert "profiled with 3 image item(s) of 2,448 tokens" in _tower_note(plan)
    per_patch = 2 * 1408 * 2 + (1408 + 5 * 1408) * 2 + 4 * 1408 * 4
    tower = 51 * 677_376 + 52 * 677_376 + 13 * 577 * per_patch
    assert tower == 407_734_784
    assert "the tower's own run peaks at 0.38 GiB (407,734,784 B)" in _tower_note(plan)


def test_the_mlp_moment_wins_where_the_intermediate_is_wide():
    # Qwen3-VL's tower with a wider MLP (intermediate 8,192, a made-up width on the real config): 3 x 1,152 +
    # 2 x 8,192 = 19,840 values a patch outgrow the attention's 12,672 at the same deepstack and kept terms.
    tower = resolve("Qwen/Qwen3-VL-8B-Instruct").tower
    assert tower is not None
    wide = replace(tower, intermediate_size=8192)
    item = Item(16384, 16384, 16384 * 4 * 1536, patches=65536)
    peak = PROCESSORS["Qwen3VLForConditionalGeneration"].tower_peak(wide, item, 1, 2, 80 * GiB, None)
    assert peak == 65536 * 1536 * 2 + 65536 * (1152 + 72 + 3 * 1152 + 2 * 8192 + 3 * 1024) * 2
