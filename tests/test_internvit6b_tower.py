"""InternViT-6B's tower peak in vLLM 0.33.0 (kvplan/engines/vllm/multimodal.py InternVL.tower_peak with
INTERNVL_NORMS / qk_norm_moments), derived by hand from intern_vit.py, ir/ops/layernorm.py rms_norm and
platforms/cuda.py get_default_ir_op_priority, for InternVL2-26B's config (tests/fixtures/internvl/SOURCES.md):
InternViT-6B-448px (45 layers of h = 3,200, 25 heads, intermediate 12,800, norm_type rms_norm, qk_normalization
true) beside InternLM2-20B.

Per token, bf16 (2 B a value). Beside the embeddings (h, kept through the encoder) a layer holds its input (h).
RMSNorm, where vLLM compiles (the default), runs the IR op's native form eagerly: beside its input a float32
copy (4 B a value), the float32 x * rsqrt (4 B), the cast back (2 B) and the weighted output (2 B): 12 B a value
more; under --enforce-eager the vllm_c kernel writes one 2 B output. InternVLChatModel pads no heads, so 25
heads do not divide over TP 2: the attention runs whole there."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvplan.api import estimate
from kvplan.engines.vllm.multimodal import PROCESSORS, Item
from kvplan.models.sources import read_local

INTERNVL2_26B = str(Path(__file__).parent / "fixtures" / "internvl" / "internvl2-26b.json")
H = 3200
TILE_PIXELS = 3 * 448 * 448  # pixel_values_flat values a tile
TOKENS = (448 // 14) ** 2 + 1  # a tile's patches and the class token: 1,025


def _tower_note(**knobs) -> str:
    plan = estimate(INTERNVL2_26B, gpu="h100", engine="vllm", engine_version="0.33.0", max_model_len=8192,
                    **knobs)
    notes = [note for note in plan.notes if note.startswith("multimodal encoder")]
    assert len(notes) == 1
    return notes[0]


def test_internvl2_26b_tower_compiled_peaks_at_the_qk_norm():
    # 8K: two 13-tile images (12 tiles and the thumbnail, 3,328 tokens each; internlm2's tokenizer has no video
    # token), 26 tiles: pixels 26 x 3 x 448^2 x 2 = 31,309,824 B, embeddings 26 x 1,025 x 3,200 x 2 = 170,560,000 B.
    # Moments a token, in bytes:
    #   norm1: input 2h + native RMSNorm 12h = 14h
    #   k_norm: input, norm1's output, qkv (3h), q_norm's output (h) = 6h values = 12h B, + 12h = 24h  <- widest
    #   attention / proj: 6h + k_norm's output h + attention output h + proj h = 9h values = 18h B
    #   norm2: input, sum 4h + 12h = 16h
    #   MLP: input, sum, norm2, fc1 and its GELU: (3h + 2 x 12,800) x 2 = 70,400 B (22h)
    moments = {"norm1": 14 * H, "qk": 24 * H, "attention": 18 * H, "norm2": 16 * H,
               "mlp": (3 * H + 2 * 12800) * 2}
    assert max(moments, key=moments.get) == "qk" and moments["qk"] == 76_800
    tower = 26 * TILE_PIXELS * 2 + 26 * TOKENS * H * 2 + 26 * TOKENS * 76_800
    assert tower == 2_248_589_824
    note = _tower_note()
    assert "profiled with 2 image item(s) of 3,328 tokens" in note
    assert "the tower's own run peaks at 2.09 GiB (2,248,589,824 B)" in note
    # TP 2: fc1 halves (MLP 3h + 2 x 6,400), the whole attention's qk moment does not: the same peak
    assert "(2,248,589,824 B)" in _tower_note(tensor_parallel_size=2)


def test_internvl2_26b_tower_eager_runs_the_rms_norm_kernel():
    # --enforce-eager: each RMSNorm is one 2 B output, so k_norm's moment is 7h values (14h B) and the MLP's
    # 70,400 B is the widest: 31,309,824 + 170,560,000 + 26 x 1,025 x 70,400 = 2,078,029,824 B.
    assert max(7 * H * 2, 9 * H * 2, (3 * H + 2 * 12800) * 2) == 70_400
    tower = 26 * TILE_PIXELS * 2 + 26 * TOKENS * H * 2 + 26 * TOKENS * 70_400
    assert tower == 2_078_029_824
    assert "the tower's own run peaks at 1.94 GiB (2,078,029,824 B)" in _tower_note(enforce_eager=True)


def test_qk_norm_over_tp_all_gathers_q_and_k():
    # Made up (no InternVL config has it): the real tower with 32 heads (head size 100), so the attention splits
    # over TP 2 (part p = 1,600). _apply_qk_norm all-gathers q and k (each gather: the contiguous copy p, the
    # buffer h and its reshaped copy h) and normalises the whole width with both gathered held:
    #   base = input, norm1, qkv 3p = 2h + 3p = 11,200 values = 22,400 B
    #   k's gather beside the gathered q: 22,400 + (h + p + 2h) x 2 = 44,800 B
    #   the norms: 22,400 + 2h x 2 + 12h = 73,600 B (compiled) / 22,400 + 2h x 2 + 2h = 41,600 B (eager)
    #   attention: 22,400 + 2h x 2 (the normalised q, k) + p x 2 + h x 2 = 44,800 B; MLP (3h + 2 x 6,400) x 2 =
    #   44,800 B; norm2 (the input and the sum, 4h B, and its run) 16h = 51,200 B (compiled) / 6h = 19,200 B (eager).
    # One tile: 3 x 448^2 x 2 + 1,025 x 3,200 x 2 + 1,025 x widest (73,600 compiled, 44,800 eager).
    tower = read_local(Path(INTERNVL2_26B)).tower
    assert tower is not None
    item = Item(256, 256, TILE_PIXELS, frames=1, patches=TOKENS)
    made_up = replace(tower, num_heads=32)
    internvl = PROCESSORS["InternVLChatModel"]
    compiled = internvl.tower_peak(made_up, item, 1, 2, 0, None, split=2)
    eager = internvl.tower_peak(made_up, item, 1, 2, 0, None, split=2, compiled=False)
    assert compiled == TILE_PIXELS * 2 + TOKENS * H * 2 + TOKENS * 73_600 == 83_204_224
    assert eager == TILE_PIXELS * 2 + TOKENS * H * 2 + TOKENS * 44_800 == 53_684_224


def test_internvit_6b_norms_without_qk_normalization_are_derived_too():
    # rms_norm without qk_normalization (made up from the same tower): norm1, norm2 native (14h, 16h B) and the
    # attention 6h values + h + h = 8h values = 16h B, beside the MLP's 70,400 B (22h): the MLP is the widest;
    # one tile: 1,204,224 + 6,560,000 + 1,025 x 70,400 = 79,924,224 B.
    tower = read_local(Path(INTERNVL2_26B)).tower
    assert tower is not None
    item = Item(256, 256, TILE_PIXELS, frames=1, patches=TOKENS)
    peak = PROCESSORS["InternVLChatModel"].tower_peak(replace(tower, qk_normalization=False), item, 1, 2, 0,
                                                     None)
    assert peak == TILE_PIXELS * 2 + TOKENS * H * 2 + TOKENS * 70_400 == 79_924_224
