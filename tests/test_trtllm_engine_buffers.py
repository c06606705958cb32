"""The TensorRT engine backend's runtime buffers and decoder (kvplan/engines/trtllm/engine_buffers.py), derived by
hand from the stored C++ sources each term cites, and held against the logs that print them ("[MemUsageChange]
Allocated ... GPU memory for runtime buffers / for decoder"; MemoryCounters' GB is GiB):
- NVIDIA/TensorRT-LLM#1188, comment of 2024-11-21: Qwen2.5-Coder-0.5B-Instruct int8 engine built with
  trtllm-build's defaults (max_batch_size 2,048, max_num_tokens 8,192, max_seq_len the model's 32,768; vocabulary
  151,936, float32 logits) prints 2.66 GB of runtime buffers and 5.76 GB of decoder;
- T05 (kvplan/engines/trtllm/data/calibration.yaml; the trtllm-bench guide of the v0.12 era, Llama-2-7B,
  max_batch_size 4,096, max_seq_len 4,098, max_num_tokens 8,192, vocabulary 32,000) prints 1.14 and 4.35 GB."""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.trtllm import engine_buffers as buffers
from kvplan.units import GiB

T05 = buffers.EngineShape(max_batch_size=4096, max_seq_len=4098, max_num_tokens=8192, vocab_size=32000)
ISSUE_1188 = buffers.EngineShape(max_batch_size=2048, max_seq_len=32768, max_num_tokens=8192, vocab_size=151936,
                                 decoder_buffers=True)


def test_cub_asks_for_a_third_keys_and_values_buffer():
    # DispatchSegmentedRadixSort::InvokePasses with is_overwrite_okay false: num_items x sizeof(key) and
    # num_items x sizeof(value), each rounded up to 256 B by AliasTemporaries, + 255 B.
    # 4,096 x 32,000 = 131,072,000 float keys and int32 values: 2 x 524,288,000 + 255.
    assert buffers.cub_sort_pairs_temp(131_072_000, 4, 4) == 1_048_576_255
    # 1,000 half keys (2,000 B -> 2,048) and int32 values (4,000 B -> 4,096): 6,144 + 255
    assert buffers.cub_sort_pairs_temp(1000, 2, 4) == 6399


def test_t05_sampling_workspaces_by_hand():
    # AIR top-p (the default), float, deterministic: counters 4,096 x 384 = 1,572,864, histograms 4,096 x 2,048
    # x 8 = 67,108,864, count histograms 4,096 x 2,048 x 4 = 33,554,432, candidate buffers 32,000 // 32 = 1,000
    # -> 1,024 long: 4 x 4,096 x 1,024 x 4 = 67,108,864; + 255 = 169,345,279.
    assert buffers.top_p_workspace(4096, 32000, 4) == 169_345_279
    # The sort-based top-p (isAirTopP false): CUB 1,048,576,255 -> 1,048,576,256, sorted probabilities, sorted
    # ids and ids 3 x 524,288,000, two offset arrays of 4,097 int32 (16,388 -> 16,640), + 255.
    assert buffers.top_p_workspace(4096, 32000, 4, air=False) == 2_621_473_791
    # Top-k for k 1,024 and 8 blocks a beam: 524,288,000 + 2 x 4,096 x 8,192 x 4 (134,217,728) + 255 =
    # 792,723,711, the larger: the shared scratch.
    assert buffers.top_k_workspace(4096, 32000, 4) == 792_723_711


def test_t05_runtime_buffers_by_hand():
    # logits 4,096 x 32,000 x 4 = 524,288,000; TransformerBuffers' cache indirection 4,096 x 4,098 x 4 =
    # 67,141,632; SlotDecoderBuffers 4,096 x (4,098 x 8 + 8) = 134,316,032; per slot 9 int32 + 3 int64 = 60 B:
    # 245,760; input ids 8,192 x 4 = 32,768. Sum 726,024,192 B = 0.676 GiB.
    terms = buffers.runtime_buffers(T05)
    assert terms == {"logits": 524_288_000, "cache_indirection": 67_141_632, "slot_outputs": 134_316_032,
                     "per_slot": 245_760, "input_ids": 32_768}
    assert sum(terms.values()) == 726_024_192
    # The 2024 DecoderBuffers add 4,096 x (2 x 4,098 x 4 + 4,098 x 4 + 12) = 201,474,048
    assert buffers.runtime_buffers(replace(T05, decoder_buffers=True))["decoder_buffers"] == 201_474_048


def test_t05_decoder_by_hand():
    # DecoderState: 16 B x 4,096 x 4,098 = 268,566,528, embedding bias 524,288,000, 30 B a slot 122,880.
    # PenaltyLayer: occurrence workspace 524,288,000 + 20 B a slot = 524,369,920.
    # DecodingLayerWorkspace: logits 524,288,000 + (4 + 48) B a slot 212,992 + scratch 792,723,711 =
    # 1,317,224,703. Layers' per-slot arguments 111 B a slot: 454,656. Sum 2,635,026,687 B = 2.454 GiB.
    terms = buffers.decoder(T05)
    assert terms == {"token_history": 268_566_528, "embedding_bias": 524_288_000, "per_slot": 122_880,
                     "sampling_penalty": 524_369_920, "sampling_workspace": 1_317_224_703,
                     "sampling_per_slot": 454_656}
    assert sum(terms.values()) == 2_635_026_687


def test_the_2024_engine_of_issue_1188_prints_what_the_terms_add_to():
    # Runtime buffers: logits 2,048 x 151,936 x 4 = 1,244,659,712, cache indirection 2,048 x 32,768 x 4 =
    # 268,435,456, slot outputs 2,048 x (32,768 x 8 + 8) = 536,887,296, 60 B a slot 122,880, input ids 32,768,
    # DecoderBuffers 2,048 x (2 x 32,768 x 4 + 32,768 x 4 + 12) = 805,330,944: 2,855,469,056 B = 2.659 GiB,
    # printed "2.66 GB".
    assert sum(buffers.runtime_buffers(ISSUE_1188).values()) == 2_855_469_056
    assert f"{2_855_469_056 / GiB:.2f}" == "2.66"
    # Decoder: 16 x 2,048 x 32,768 = 1,073,741,824, bias 1,244,659,712, 30 B a slot 61,440; penalty
    # 1,244,659,712 + 40,960; workspace logits 1,244,659,712 + 106,496 + top-k scratch (1,244,659,712 +
    # 2 x 67,108,864 + 255 = 1,378,877,695); 111 B a slot 227,328: 6,187,034,879 B = 5.762 GiB, printed "5.76 GB".
    assert sum(buffers.decoder(ISSUE_1188).values()) == 6_187_034_879
    assert f"{6_187_034_879 / GiB:.2f}" == "5.76"


def test_t05_is_well_above_the_derivation():
    # T05 (an engine of 0.12.0.dev2024073000) prints 1.14 + 4.35 = 5.49 GiB; the terms give 0.68 + 2.45 = 3.13 GiB
    # from the 2025 sources (3.32 with the 2024 DecoderBuffers): 43% (40%) short. Its decoder is 1.9 GiB above
    # the 2.45 derived, which the stored sources do not explain for that release (the T05 log also allocates
    # 7/8 of its model's KV per token: it may not be one run). Nothing is fitted; the assertions record the gap.
    total = buffers.before_kv_bytes(T05)
    assert total == 726_024_192 + 2_635_026_687
    printed = (1.14 + 4.35) * GiB
    assert 0.42 < (printed - total) / printed < 0.44


def test_vocabulary_is_padded_over_all_ranks():
    # getVocabSizePadded(world size): ceil(32,001 / 4) x 4 = 32,004; the occurrence-penalty workspace keeps the
    # unpadded vocabulary: 8 x 32,001 x 4 = 1,024,032, with 8 x 20 B of penalty arguments
    shape = buffers.EngineShape(8, 16, 64, 32001, world_size=4)
    assert shape.vocab_padded == 32004
    assert buffers.sampling_layers(shape)["penalty"] == 1_024_032 + 8 * 20
    assert buffers.runtime_buffers(shape)["logits"] == 8 * 32004 * 4


def test_an_earlier_pipeline_stage_holds_no_logits_and_no_sampler():
    # PP 2, first stage: 2 RuntimeBuffers (one a micro batch) without logits, each with its cache indirection
    # 2 x 8 x 100 x 4 = 6,400 and hidden states 2 x 64 x 512 x 2 = 131,072; the decoder is only
    # DecoderState::setupCacheIndirection's pair 2 x 8 x 100 x 4 = 6,400.
    shape = buffers.EngineShape(8, 100, 64, 32000, world_size=2, pipeline_parallel=2, last_rank=False,
                                hidden_size=512)
    runtime = buffers.runtime_buffers(shape)
    assert runtime["logits"] == 0 and runtime["cache_indirection"] == 6400 and runtime["hidden_states"] == 131_072
    assert buffers.decoder(shape) == {"cache_indirection": 6400}
    # the last stage of the same build: logits in both RuntimeBuffers, 2 x 8 x 32,000 x 4 = 2,048,000
    assert buffers.runtime_buffers(replace(shape, last_rank=True))["logits"] == 2_048_000
