"""Issues 20 and 22: the published parameter totals of DeepSeek-V4-Flash and -Pro, MiMo-V2-Flash and InternVL3-8B
against kvplan's count, each derived module by module from the config as vLLM 0.33.0 builds the model, and the
difference to the Hub's figure (what the checkpoint ships that vLLM does not load, how it stores it) by hand.

Published totals:
- The Hub's safetensors parameter counts, as AlexsJones/llmfit llmfit-core/data/hf_models.json @5bdc9df9
  (2026-05-12) records them in parameters_raw: deepseek-ai/DeepSeek-V4-Flash 158,069,433,298,
  deepseek-ai/DeepSeek-V4-Pro 861,608,274,846, XiaomiMiMo/MiMo-V2-Flash 309,785,318,400,
  OpenGVLab/InternVL3-8B-Instruct (internvl_chat) and InternVL3-8B-hf 7,944,373,760. The Hub counts stored
  elements: a packed FP4 byte is one, a scale tensor's entries count too.
- DeepSeek-V4-Flash@60d8d707 read tensor by tensor (public reports, GitHub code index file ids 61809074102 and
  61523403628): 69,187 tensors, "stored elements (prod of physical shapes): 158069433298", "logical unpacked params:
  290942289362", "Scope logical: base=283273109074 mtp=6610048891 global=1059131397"; dtypes: I8 (FP4 e2m1 two to
  a byte) for the routed experts, F8_E8M0 scales, F8_E4M3 for the attention, shared-expert, indexer wq_b and MTP
  e_proj / h_proj linears, BF16 / F32 for the rest, I64 for the hash layers' tid2eid (counted 0 logical there).
- MiMo-V2-Flash's MTP file (model_mtp.safetensors) tensor by tensor: GitHub code index file id 61419705414
  (expected_mtp_inventory: three layers of 16 tensors, 1,189,400,448 bytes), its main layers' FP8 layout in file id
  70134028966 (mimo_flash_tensors: o_proj BF16, the full layers' k_proj scale grid restarting per 192-row head).
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import fp8_block_scales as blocks  # 128 x 128 weight_block_size scale entries of one FP8 linear

from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource
from kvplan.models.sources import resolve

ROOT = Path(__file__).parent


def v4_by_hand(c: dict) -> dict[str, int]:
    """DeepSeek-V4 module by module (vLLM 0.33.0 models/deepseek_v4: DeepseekV4Attention, DeepseekCompressor,
    DeepseekV4Indexer, DeepseekV4MoE, the hyper-connections), then its checkpoint's MTP layer and storage."""
    h, heads, hd, ql, ol, og = (c["hidden_size"], c["num_attention_heads"], c["head_dim"], c["q_lora_rank"],
                                c["o_lora_rank"], c["o_groups"])
    experts, inter, ih, idim = c["n_routed_experts"], c["moe_intermediate_size"], c["index_n_heads"], c["index_head_dim"]
    vocab, topk, layers = c["vocab_size"], c["num_experts_per_tok"], c["num_hidden_layers"]
    # FP8 linears (out, in): wq_a, wq_b, wkv, wo_a (o_groups x o_lora_rank from heads x head_dim / o_groups), wo_b,
    # and the shared expert's w1, w3, w2
    fp8 = [(ql, h), (heads * hd, ql), (hd, h), (og * ol, heads * hd // og), (h, og * ol),
           (inter, h), (inter, h), (h, inter)]
    fp8_layer = sum(o * i for o, i in fp8)
    small = ql + hd + heads + 2 * h  # q_norm, kv_norm, attn_sink, attn_norm and ffn_norm
    mix = (2 + 4) * 4  # hc_mult 4: (2 + hc) x hc rows of hc x hidden, a base of as many and three scales
    mhc = 2 * (mix * 4 * h + mix + 3)
    head_hc = 4 * 4 * h + 4 + 1
    routed = experts * 3 * inter * h
    gate = experts * h

    def compressor(dim: int, ratio: int) -> int:  # ape, the fused wkv / wgate, the norm; coff 2 at ratio 4
        coff = 2 if ratio == 4 else 1
        return ratio * coff * dim + h * 2 * coff * dim + dim

    main, tid2eid, fp8_blocks = 0, 0, 0
    for index, ratio in enumerate(c["compress_ratios"][:layers]):
        layer = fp8_layer + small + mhc + routed + gate
        fp8_blocks += sum(blocks(o, i) for o, i in fp8)
        if index < c["num_hash_layers"]:
            tid2eid += vocab * topk  # an int64 token -> experts table instead of the score bias
        else:
            layer += experts  # e_score_correction_bias
        if ratio > 1:
            layer += compressor(hd, ratio)
        if ratio == 4:  # the indexer: wq_b (FP8), weights_proj, its own compressor of index_head_dim
            layer += ih * idim * ql + h * ih + compressor(idim, 4)
            fp8_blocks += blocks(ih * idim, ql)
        main += layer
    main += tid2eid + 2 * vocab * h + h + head_hc  # embed, head, norm and the head's hyper-connection
    # mtp.0: one more layer (no compressor, a learned gate with its bias), e_proj and h_proj (FP8), enorm, hnorm,
    # its norm and hc_head; vLLM's main model does not build it
    mtp = fp8_layer + small + mhc + routed + gate + experts + 2 * h * h + 3 * h + head_hc
    fp8_blocks += sum(blocks(o, i) for o, i in fp8) + 2 * blocks(h, h)
    unpacked = main - tid2eid + mtp
    all_routed = (layers + 1) * routed
    # stored: two FP4 values a byte, a ue8m0 scale for every 32 of them and every FP8 128 x 128 block, the int64s
    stored = unpacked - all_routed // 2 + all_routed // 32 + fp8_blocks + tid2eid
    return {"main": main, "mtp": mtp, "unpacked": unpacked, "stored": stored, "fp8_blocks": fp8_blocks}


def bundled_config(name: str) -> dict:
    return json.loads((ROOT.parent / "model_specs" / f"{name}.json").read_text())["config"]


def test_deepseek_v4_flash_layer_by_hand():
    # hidden 4,096, 64 heads x 512, q_lora 1,024, 8 output groups of o_lora 1,024:
    # fused_wqa_wkv 4,096 x (1,024 + 512) = 6,291,456; wq_b 1,024 x 32,768 = 33,554,432; wo_a 8 x 1,024 x 4,096 =
    # 33,554,432; wo_b 8,192 x 4,096 = 33,554,432 -> 106,954,752 (the report's "MLA fp8 weights only")
    attention = 6_291_456 + 3 * 33_554_432
    spec = resolve("deepseek-ai/DeepSeek-V4-Flash")
    assert spec.params.by_layer[0].mixer == attention == 106_954_752
    # layer 0 (a hash layer, no compressor): q_norm 1,024, kv_norm 512, 64 sinks, two norms 8,192, hyper-connections
    # 2 x (24 x 16,384 + 24 + 3) = 786,486, the router 256 x 4,096 and tid2eid 129,280 x 6 = 775,680
    assert spec.params.by_layer[0].loose == 1_600 + 8_192 + 786_486 + 1_048_576 + 775_680
    # layer 3 (ratio 128, learned routing): its compressor ape 128 x 512 + wkv_wgate 4,096 x 1,024 + norm 512 =
    # 4,260,352, and the score bias of 256 instead of the table
    assert spec.params.by_layer[3].loose == 1_600 + 8_192 + 786_486 + 1_048_576 + 256 + 4_260_352
    # layer 4 (ratio 4): the compressor (coff 2) 4 x 2 x 512 + 4,096 x 2,048 + 512 = 8,393,216; the indexer's wq_b
    # 1,024 x 64 x 128 = 8,388,608 (a linear), weights_proj 4,096 x 64 = 262,144 and its compressor of 128:
    # 4 x 2 x 128 + 4,096 x 512 + 128 = 2,098,304
    assert spec.params.by_layer[4].mixer == attention + 8_388_608
    assert spec.params.by_layer[4].loose == (1_600 + 8_192 + 786_486 + 1_048_576 + 256 + 8_393_216 + 262_144
                                             + 2_098_304)
    assert spec.params.by_layer[4].experts == 256 * 3 * 2048 * 4096 == 6_442_450_944


def test_deepseek_v4_flash_total_against_its_checkpoint():
    spec = resolve("deepseek-ai/DeepSeek-V4-Flash")
    hand = v4_by_hand(bundled_config("deepseek-ai__DeepSeek-V4-Flash"))
    # 43 layers as vLLM builds them: the llama.cpp n_params of unsloth's GGUF of it (kvplan/models/families.py)
    assert hand["main"] == spec.params.total == 284_334_567_511
    assert spec.params.exact and not spec.params.note
    # the checkpoint (file ids 61809074102, 61523403628): the MTP layer vLLM does not load, 6,610,048,891 unpacked
    # values; base + global 283,273,109,074 + 1,059,131,397 are the main model less the 3 x 775,680 int64 tid2eid
    assert hand["mtp"] == 6_610_048_891
    assert hand["main"] - 3 * 775_680 == 283_273_109_074 + 1_059_131_397
    assert hand["unpacked"] == 290_942_289_362
    # the Hub's count: 44 x 6,442,450,944 routed values stored two to a byte, their 8,858,370,048 ue8m0 scales
    # (one per 32) and 367,616 FP8 block scales (the report's F8_E8M0 total 8,858,737,664), the int64s
    assert hand["fp8_blocks"] == 8_858_737_664 - 283_467_841_536 // 32 == 367_616
    assert hand["stored"] == 158_069_433_298


def test_deepseek_v4_pro_total_against_the_hub():
    # the same layout at Pro's sizes (hidden 7,168, 128 heads, q_lora 1,536, 16 groups, 384 experts of 3,072, 61
    # layers: ratio 128 at 0 and 1, then 4 / 128 alternating): vLLM's count, and the Hub's 861,608,274,846 stored
    # elements with its MTP layer of 25,840,145,979 values
    spec = resolve("deepseek-ai/DeepSeek-V4-Pro")
    hand = v4_by_hand(bundled_config("deepseek-ai__DeepSeek-V4-Pro"))
    assert hand["main"] == spec.params.total == 1_572_999_528_803
    assert hand["mtp"] == 25_840_145_979
    assert hand["stored"] == 861_608_274_846
    assert spec.params.exact and not spec.params.note


def test_mimo_v2_flash_total_against_the_hub():
    # vLLM 0.33.0 mimo_v2.py, hidden 4,096, 48 layers; hybrid_layer_pattern 0 (full) at 0, 5, 11, ..., 47 (9 layers)
    full = 64 * 192 * 4096 + 4 * 192 * 4096 + 4 * 128 * 4096 + 4096 * 64 * 128  # q, k, v, o: 89,128,960
    swa = 64 * 192 * 4096 + 8 * 192 * 4096 + 8 * 128 * 4096 + 4096 * 64 * 128 + 64  # and its 64 sinks
    dense = 3 * 4096 * 16384  # layer 0's MLP (moe_layer_freq 0)
    moe = 256 * 3 * 2048 * 4096 + 256 * 4096 + 256  # experts, the router and its e_score_correction_bias
    main = 2 * 152576 * 4096 + 4096 + 9 * full + 39 * swa + dense + 47 * moe + 48 * 2 * 4096
    spec = resolve("XiaomiMiMo/MiMo-V2-Flash")
    assert spec.params.total == main == 308_778_780_864
    assert spec.params.exact and not spec.notes
    assert spec.params.by_layer[0].mixer == full == 89_128_960
    # the checkpoint's three MTP layers (load_weights skips every "mtp" name; mimo_v2_mtp.py builds only the first
    # as a drafter), each as file id 61419705414 lists it: eh_proj 4,096 x 8,192, five norms of 4,096, the 64 sinks,
    # o_proj 4,096 x 8,192 (BF16), qkv_proj 14,848 x 4,096 with (116, 32) F32 scales, the MLP 3 x 16,384 x 4,096
    # with 3 x 4,096 scales -> 329,289,408 elements (396,466,816 bytes, as the file says)
    mtp = 33_554_432 + 5 * 4096 + 64 + 33_554_432 + 14848 * 4096 + 116 * 32 + 3 * 67_108_864 + 3 * 4096
    assert mtp == 329_289_408
    assert 2 * (33_554_432 + 5 * 4096 + 64 + 33_554_432) + 14848 * 4096 + 3 * 67_108_864 \
        + 4 * (116 * 32 + 3 * 4096) == 396_466_816
    # the main model's F32 128 x 128 scales: the experts' 47 x 256 x 3 x 512, the dense MLP's 3 x 4,096; q, k, v of
    # a sliding layer (96 + 12 + 8) x 32; of a full layer (96 + 8 + 4) x 32, k's grid restarting per 192-row head
    # (4 heads x 2 blocks, file id 70134028966); o_proj stays BF16
    scales = 47 * 256 * 3 * 512 + 3 * 4096 + 39 * (96 + 12 + 8) * 32 + 9 * (96 + 8 + 4) * 32
    assert scales == 18_669_312
    assert main + 3 * mtp + scales == 309_785_318_400  # the Hub's count for XiaomiMiMo/MiMo-V2-Flash


def test_internvl3_8b_total_against_the_hub():
    # tests/fixtures/internvl/internvl3-8b.json (SOURCES.md there); vLLM 0.33.0 internvl.py / intern_vit.py:
    # InternViT-300M-448px, 24 layers of 1,024 (select_layer -1: all), MLP 4,096, qkv_bias, layer_norm, no qk norm
    embeddings = 1024 + 3 * 14 * 14 * 1024 + 1024 + (32 * 32 + 1) * 1024  # class, conv (with bias), 1,025 positions
    layer = (1024 * 3072 + 3072) + (1024 * 1024 + 1024) + (1024 * 4096 + 4096) + (4096 * 1024 + 1024) \
        + 2 * 2 * 1024 + 2 * 1024  # qkv, proj, fc1, fc2, norm1 / norm2 (weight, bias), ls1 / ls2
    vit = embeddings + 24 * layer
    assert vit == 304_012_288  # llmfit's parameters_raw for an InternViT-300M (InternVL3.5-1B's) checkpoint too
    # mlp1: LayerNorm(4,096) and Linear(4,096 -> 3,584) after the 0.5 pixel shuffle, Linear(3,584 -> 3,584)
    mlp1 = 2 * 4096 + (4096 * 3584 + 3584) + (3584 * 3584 + 3584)
    assert mlp1 == 27_540_480
    # the Qwen2 text model: vocab 151,674 x 3,584 twice (untied), 28 layers of q/k/v with biases
    text = 2 * 151674 * 3584 + 3584 + 28 * (
        (3584 * 3584 + 3584) + 2 * (3584 * 512 + 512) + 3584 * 3584 + 3 * 3584 * 18944 + 2 * 3584)
    assert text == 7_612_820_992
    config = json.loads((ROOT / "fixtures" / "internvl" / "internvl3-8b.json").read_text())
    spec = parse_config(config, "OpenGVLab/InternVL3-8B", SpecSource("local", "internvl3-8b.json"))
    assert spec.params.vision == vit + mlp1
    assert spec.params.total == text + vit + mlp1 == 7_944_373_760  # the Hub's InternVL3-8B-Instruct / -hf count
    assert spec.params.exact and not spec.notes


def test_internvl_select_layer_builds_fewer_vit_layers():
    # vLLM 0.33.0 internvl.py _init_vision_model: select_layer -2 builds num_hidden_layers - 1 layers
    config = json.loads((ROOT / "fixtures" / "internvl" / "internvl3-8b.json").read_text())
    full = parse_config(config, "a", SpecSource("local", "a")).params.vision
    config["select_layer"] = -2
    fewer = parse_config(config, "b", SpecSource("local", "b")).params.vision
    assert full - fewer == 12_598_272  # one InternViT-300M layer (above)


def test_kimi_k2_thinking_pool_replays_by_hand():
    # engine-calibration Y19 (vllm-project/recipes moonshotai/Kimi-K2-Think.md): "Available KV cache memory: 46.80
    # GiB", "GPU KV cache size: 715,072 tokens" at TP 8 on H200. MLA keeps one latent per rank whatever the TP: 61
    # layers x (512 + 64) x 2 B = 70,272 B a token, FlashMLA's 64-token blocks of 4,497,408 B. 46.80 GiB +- 0.005
    # is 11,172 to 11,174 blocks; 715,072 = 11,173 x 64 (and the -dcp 8 run's 5,721,088 = 8 x 11,174 x 64)
    from kvplan.calibration import engines as calibration
    from kvplan.units import GiB

    entry = next(e for e in calibration.entries() if e["id"] == "Y19")
    block = 64 * 61 * 576 * 2
    assert block == 4_497_408
    low, high = int((46.80 - 0.005) * GiB) // block, int((46.80 + 0.005) * GiB) // block
    assert (low, high) == (11_172, 11_174) and 715_072 == 11_173 * 64 and 5_721_088 == 8 * 11_174 * 64
    replay = calibration.pool_replay(entry)
    assert replay.closes and replay.low.block_size == 64
    assert (replay.low.tokens, replay.high.tokens) == (low * 64, high * 64)
