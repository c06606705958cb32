"""TensorRT-LLM's engine backend (the C++ executor running a prebuilt TensorRT engine): the runtime buffers and the
decoder it allocates before it sizes the KV cache. TrtGptModelInflightBatching's constructor
(cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp, as stored in 2025, read_file id 538519496) calls
createBuffers, then createDecoder, and prints the GPU bytes MemoryCounters saw each allocate ("[MemUsageChange]
Allocated ... GPU memory for runtime buffers" / "for decoder"; runtime/memoryCounters.cpp divides by 1024, so its
"GB" is GiB). Beam width 1, no speculative decoding, no LoRA, no context or generation logits returned.

Shapes: B max_batch_size (maxNumSequences), S max_seq_len, W the attention window (max_seq_len unless the build
sets one), N max_num_tokens, V the vocabulary padded to a multiple of the world size
(runtime/modelConfig.h getVocabSizePadded), L the logits' bytes: the engine's "logits" tensor type, float32 unless
the build says otherwise (tensorrt_llm/models/modeling_utils.py PretrainedConfig logits_dtype='float32').

Not counted, because their sources were not read or their size is chosen at run time: StopCriteriaLayer's
per-slot arguments (a few bytes a slot), the min-p layer of releases that add one to the
sampling layers, the guided decoder, the custom all-reduce workspace at TP > 1 (created before both prints), and
the pool allocator's rounding of each cudaMallocAsync.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.units import cdiv

ALIGN = 256  # CUB's AliasTemporaries and TensorRT-LLM's calcAlignedSize (common/memoryUtils.h) both align to 256 B
TOP_K_MAX = 1024  # kernels/samplingTopKKernels.h: TopKSamplingLayer sizes its workspace for the largest k
TOP_K_BLOCKS_PER_BEAM = 8  # getTopKWorkspaceSizes' maxBlockPerBeam
AIR_BITS_PER_PASS = 11  # samplingAirTopPKernels.cu: BitsPerPass, 2^11 histogram buckets
# sizeof(Counter<float, int, float>): two pointers and six 4-byte fields in the first 128 B, then filterCnt and
# finishedBlockCnt each alignas(128) (samplingAirTopPKernels.cu)
AIR_COUNTER = 3 * 128
CURAND_STATE = 48  # sizeof(curandState_t), the XORWOW state
INT32, FLOAT32, INT64, BOOL = 4, 4, 8, 1
LOGITS_BYTES = 4


@dataclass(frozen=True)
class EngineShape:
    """The build and runtime limits the C++ executor sizes its buffers by, on one rank."""

    max_batch_size: int
    max_seq_len: int
    max_num_tokens: int
    vocab_size: int
    world_size: int = 1  # tp x pp
    pipeline_parallel: int = 1
    last_rank: bool = True  # the last pipeline stage holds the logits and runs the decoder
    hidden_size: int = 0  # for the hidden states a pipeline stage passes on
    element_bytes: int = 2  # the model's dtype
    logits_bytes: int = LOGITS_BYTES
    decoder_buffers: bool = False  # the 2024 executor's DecoderBuffers in createBuffers (legacy_decoder_buffers)

    @property
    def vocab_padded(self) -> int:
        return cdiv(self.vocab_size, self.world_size) * self.world_size


def aligned(size: int) -> int:
    return cdiv(size, ALIGN) * ALIGN


def aligned_total(*sizes: int) -> int:
    """calcAlignedSize (tensorrt_llm/common/memoryUtils.h) and CUB's AliasTemporaries alike: each part rounded up to
    256 B, plus 255 B for an unaligned start."""
    return sum(aligned(size) for size in sizes) + ALIGN - 1


def cub_sort_pairs_temp(items: int, key_bytes: int, value_bytes: int) -> int:
    """temp_storage_bytes of cub::DeviceSegmentedRadixSort::SortPairsDescending on plain pointers (CUB's
    DispatchSegmentedRadixSort::InvokePasses, cub/device/dispatch/dispatch_radix_sort.cuh; NVIDIA/cccl and
    NVIDIA/cub alike): the pointer overload does not allow overwriting its input, so CUB asks for a third keys
    buffer and a third values buffer of every item, aliased out of one blob by AliasTemporaries."""
    return aligned_total(items * key_bytes, items * value_bytes)


def cub_top_p_workspace(batch: int, vocab: int, logit_bytes: int) -> int:
    """getTopPWorkspaceSize (kernels/samplingTopPKernels.cu), the sort-based top-p a TopPSamplingLayer built with
    isAirTopP false runs: the CUB sort of batch x vocab (probability, id) pairs, the sorted probabilities, the
    sorted ids, the ids to sort, and two (batch + 1) offset arrays."""
    items = batch * vocab
    sort = (cub_sort_pairs_temp(items, logit_bytes, INT32), items * logit_bytes, items * INT32, items * INT32,
            (batch + 1) * INT32, (batch + 1) * INT32)
    init = (batch * INT32, batch * FLOAT32, batch * FLOAT32, batch * FLOAT32, batch * INT32)
    return max(aligned_total(*sort), aligned_total(*init))


def air_top_p_workspace(batch: int, vocab: int, logit_bytes: int) -> int:
    """getAirTopPWorkspaceSize(batch, vocab, deterministic) (kernels/samplingAirTopPKernels.cu), the radix-select
    top-p TopPSamplingLayer runs by default (layers/topPSamplingLayer.h: isAirTopP = true; SamplingLayer asks for
    the deterministic one). Per slot: a Counter (AIR_COUNTER), a histogram of 2^11 buckets in uint64 for float
    (uint32 for half), a count histogram of 2^11 int32, and two candidate buffers of values and int32 indices,
    each calcBufLen long: vocab // ((2 + 2 x 4 / sizeof(T)) x 8), rounded up to 256."""
    buckets = 1 << AIR_BITS_PER_PASS
    histogram = 8 if logit_bytes == 4 else 4
    buffer_len = aligned(vocab // ((2 + 2 * INT32 // logit_bytes) * 8))
    return aligned_total(batch * AIR_COUNTER, batch * buckets * histogram, batch * buckets * INT32,
                         *(batch * buffer_len * size for size in (logit_bytes, INT32, logit_bytes, INT32)))


def top_p_workspace(batch: int, vocab: int, logit_bytes: int, air: bool = True) -> int:
    """TopPSamplingLayer::allocateBuffer's workspace: the AIR top-p's by default, the CUB sort's without it."""
    return (air_top_p_workspace if air else cub_top_p_workspace)(batch, vocab, logit_bytes)


def top_k_workspace(batch: int, vocab: int, logit_bytes: int) -> int:
    """getTopKWorkspaceSize (kernels/samplingTopKKernels.h) for one token a step and k up to TOP_K_MAX: the
    log-probabilities of batch x vocab and each block's candidate ids and values."""
    candidates = batch * TOP_K_MAX * TOP_K_BLOCKS_PER_BEAM
    return aligned_total(batch * vocab * logit_bytes, candidates * INT32, candidates * logit_bytes)


def runtime_buffers(shape: EngineShape) -> dict[str, int]:
    """createBuffers' GPU allocations, by term.
    - logits: RuntimeBuffers (batch_manager/runtimeBuffers.cpp setMaxBufferSizes: numLogits = B at beam 1;
      reshape: [numLogits, V] in the logits type), last pipeline stage only;
    - cache_indirection: TransformerBuffers' [B, beam, W] int32, allocated at any beam width
      (batch_manager/transformerBuffers.cpp);
    - slot_outputs: SlotDecoderBuffers for each of the B slots, outputIds and logProbs over S, with sequenceLengths
      and cumLogProbs (batch_manager/decoderBuffers.cpp);
    - per_slot: RuntimeBuffers' contextLengths, sequenceLengths, lastTokenIds, seqSlots, seqSlotRemapping (int32)
      and the three int64 cache-indirection copy offsets, DecoderInputBuffers' setup slots and fill values,
      TransformerBuffers' fillValuesAlt and seqSlotsAlt;
    - input_ids (N int32) and, between pipeline stages, the hidden states [N, hidden] in the model's dtype.
    One RuntimeBuffers and one DecoderInputBuffers per micro batch: mNumBuffers = numMicroBatches (the pipeline
    depth; 1 without pipeline parallelism) under context-generation fusion, the executor's inflight batching."""
    batch, buffers = shape.max_batch_size, shape.pipeline_parallel
    per_buffer_slot = 5 * INT32 + 3 * INT64 + 2 * INT32 + 2 * INT32  # RuntimeBuffers, DecoderInputBuffers, Transformer
    terms = {
        "logits": buffers * batch * shape.vocab_padded * shape.logits_bytes if shape.last_rank else 0,
        "cache_indirection": buffers * batch * shape.max_seq_len * INT32,
        "slot_outputs": batch * (shape.max_seq_len * (INT32 + FLOAT32) + INT32 + FLOAT32),
        "per_slot": buffers * batch * per_buffer_slot,
        "input_ids": buffers * shape.max_num_tokens * INT32,
    }
    if shape.pipeline_parallel > 1:
        terms["hidden_states"] = buffers * shape.max_num_tokens * shape.hidden_size * shape.element_bytes
    if shape.decoder_buffers:
        terms["decoder_buffers"] = legacy_decoder_buffers(shape)
    return terms


def legacy_decoder_buffers(shape: EngineShape) -> int:
    """The DecoderBuffers createBuffers still made in the 2024 sources (batch_manager/decoderBuffers.cpp, read_file id
    5833106882; the 2025 sources split it into DecoderInputBuffers and host-only DecoderOutputBuffers and move the
    cache indirection into DecoderState, for beam search only): the cache-indirection input and output [B, beam, W]
    int32, the log-probabilities [B, beam, S] float32, and sequence lengths, new output tokens and cumulative
    log-probabilities per slot."""
    batch, window = shape.max_batch_size, shape.max_seq_len
    return batch * (2 * window * INT32 + shape.max_seq_len * FLOAT32 + INT32 + INT32 + FLOAT32)


def decoder_state(shape: EngineShape) -> dict[str, int]:
    """DecoderState::reshapeBuffers (runtime/decoderState.cpp) at beam 1: ids, parentIds, logProbs and
    logProbsTiled over S (16 B a position a slot), the embedding bias [B, V] in the logits type, and 30 B of
    per-slot state (endIds, sequenceLimitLength, input lengths, finishedSteps, finishReasons, lengths,
    finishedSum, newTokensSteps, cumLogProbs). A stage before the last holds only the cache indirection pair
    (DecoderState::setupCacheIndirection, [B, beam, W] int32 in and out)."""
    batch = shape.max_batch_size
    if not shape.last_rank:
        return {"cache_indirection": 2 * batch * shape.max_seq_len * INT32}
    per_slot = 6 * INT32 + 2 * BOOL + FLOAT32
    return {"token_history": batch * shape.max_seq_len * (2 * INT32 + 2 * FLOAT32),
            "embedding_bias": batch * shape.vocab_padded * shape.logits_bytes,
            "per_slot": batch * per_slot}


def sampling_layers(shape: EngineShape) -> dict[str, int]:
    """What GptDecoder's DynamicDecodeLayer (runtime/gptDecoder.cpp, layers/dynamicDecodeLayer.cpp) and its
    layers allocate for the TopKTopP mode, which turns on the penalties (executor DecodingMode::TopKTopP):
    - penalty: PenaltyLayer's occurrence workspace, B x the unpadded vocabulary int32, and five per-slot penalty
      arguments; it writes the penalized logits into the workspace's runtime logits (layers/penaltyLayer.cpp of
      the DecodingLayerWorkspace sources, read_file id 1126433407; earlier versions held a logits copy of their own);
    - workspace: DecodingLayerWorkspace (runtime/decodingLayerWorkspace.cpp): its runtime logits [B, V], batch
      slots, curand states, and one scratch buffer of the largest layer workspace, shared by the layers
      (getWorkspaceSize takes the max): top-k's for k up to 1,024 (top_k_workspace) or the AIR top-p's;
    - per_slot: DynamicDecodeLayer's output and parent id pointers and zero parent ids, BanWordsLayer's
      no-repeat n-gram sizes, SamplingLayer's skip flags and curand states, TopKSamplingLayer's k, p and skip
      flag, TopPSamplingLayer's six arguments and skip flag (layers/banWordsLayer.cpp, samplingLayer.cpp,
      topKSamplingLayer.cpp, topPSamplingLayer.cpp)."""
    batch, vocab, logit = shape.max_batch_size, shape.vocab_padded, shape.logits_bytes
    scratch = max(top_p_workspace(batch, vocab, logit), top_k_workspace(batch, vocab, logit))
    per_slot = (2 * INT64 + 2 * INT32) + INT32 + (BOOL + CURAND_STATE) + (INT32 + FLOAT32 + BOOL) + (6 * INT32 + BOOL)
    return {"penalty": batch * shape.vocab_size * INT32 + batch * 5 * FLOAT32,
            "workspace": batch * vocab * logit + batch * (INT32 + CURAND_STATE) + scratch,
            "per_slot": batch * per_slot}


def decoder(shape: EngineShape) -> dict[str, int]:
    """createDecoder's GPU allocations, by term: the decoder state and, on the last stage, the sampling layers."""
    terms = decoder_state(shape)
    if shape.last_rank:
        terms.update({f"sampling_{name}": size for name, size in sampling_layers(shape).items()})
    return terms


def before_kv_bytes(shape: EngineShape) -> int:
    """The runtime buffers and the decoder together: what both prints add up to."""
    return sum(runtime_buffers(shape).values()) + sum(decoder(shape).values())
