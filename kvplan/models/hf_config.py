"""Hugging Face config.json -> ModelSpec. The same parser reads bundled, local and Hub configs."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from kvplan.errors import KvplanError
from kvplan.models import modelopt
from kvplan.models import params as param_count
from kvplan.models.blocks import block_pattern, block_pattern_key
from kvplan.models.families import Family, family_of
from kvplan.models.fields import MAX_CONTEXT, ConfigFields
from kvplan.models.layers import (
    ChunkedLocal,
    FullAttention,
    GatedDeltaNetState,
    IndexedAttention,
    IndexerSharingLatentAttention,
    KdaLowRankGateState,
    KdaState,
    LatentAttention,
    Layer,
    Mamba1State,
    Mamba2State,
    MlpBlock,
    ParallelHybrid,
    SharedKv,
    ShortConvState,
    SlidingWindow,
    SparseLatentAttention,
    StateOnly,
    checkpoint_conv_bytes,
    has_compressed_attention,
)
from kvplan.models.model import ModelSpec, MoE, Quantization, SpecSource
from kvplan.models.plamo import is_plamo2_config, plamo2_layers
from kvplan.models.resident import resident_copies
from kvplan.models.rope import rope_tables
from kvplan.models.shared_blocks import is_shared_block_config, shared_block_layers
from kvplan.models.subconfigs import with_class_defaults
from kvplan.models.towers import vision_tower
from kvplan.models.unmodelled import note as unmodelled_note
from kvplan.models.unmodelled import refusal, unread_keys
from kvplan.units import dtype_bytes

MAX_CONFIG_BYTES = 8 * 2**20  # real config.json files are a few KB; anything this large is not one
NESTED_LANGUAGE_KEYS = ("text_config", "llm_config", "language_config")
LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
HIDDEN_KEYS = ("hidden_size", "n_embd", "n_embed", "d_model")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads")
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num")
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                "max_sequence_length", "max_seq_length", "seq_len")
DEFAULT_MAX_LEN = 2048  # vLLM's fallback when a config names no maximum length
ROPE_TYPES_KEEPING_LENGTH = ("su", "longrope", "llama3", "mrope", "default")
# The dtype a checkpoint asks its SSM state to be cached in: Qwen3.5 writes mamba_ssm_dtype; Nemotron-H writes
# mamba_ssm_cache_dtype, which vLLM's NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype (models/config.py)
# copies into the cache config while --mamba-ssm-cache-dtype is auto.
SSM_DTYPE_KEYS = ("mamba_ssm_dtype", "mamba_ssm_cache_dtype")


def load_json(raw: bytes, where: str) -> dict[str, Any]:
    """Parse config bytes. Python's json accepts bare Infinity / NaN, which real configs contain."""
    if len(raw) > MAX_CONFIG_BYTES:
        raise KvplanError(f"file is over {MAX_CONFIG_BYTES:,} bytes; a config.json is a few KB, so this is not one",
                          where)
    if not raw.strip():
        raise KvplanError("file is empty; expected a JSON object", where)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise KvplanError(f"not UTF-8 text (byte {exc.start}); expected a config.json", where) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KvplanError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", where) from None
    except RecursionError:
        raise KvplanError("JSON nested too deeply", where) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise KvplanError(f"invalid JSON: {str(exc).split(':')[0]}", where) from None
    if not isinstance(data, dict):
        raise KvplanError(f"expected a JSON object at the top level, got {type(data).__name__}", where)
    return data


def language_fields(top: ConfigFields) -> ConfigFields:
    """The language-model part of a (possibly multimodal) config."""
    for key in NESTED_LANGUAGE_KEYS:
        nested = top.nested(key)
        if nested is not None:
            nested = with_class_defaults(nested, LAYER_KEYS)  # a sparse text_config: its class's defaults
        if nested is not None and (nested.first_key(LAYER_KEYS) or nested.has("layers_block_type")):
            return nested
    thinker = top.nested("thinker_config")
    if thinker is not None:
        nested = thinker.nested("text_config")
        if nested is not None:
            return nested
    return top


def parse_config(data: dict[str, Any], model_id: str, source: SpecSource, where: str | None = None,
                 accessed: set[tuple[str, ...]] | None = None, allow_unmodelled: bool = False,
                 quant_file: Quantization | None = None) -> ModelSpec:
    """Build the spec; `accessed`, when given, collects the key paths the parser read. A key that changes the KV
    layout or the weights and that the parser did not read (kvplan.models.unmodelled) refuses the config, or with
    allow_unmodelled is named in a note. quant_file: the hf_quant_config.json beside it (kvplan.models.modelopt),
    which vLLM takes only where config.json has no quantization_config."""
    where = where or source.location
    accessed = set() if accessed is None else accessed
    top = ConfigFields(data, where, accessed=accessed)
    lm = language_fields(top)
    model_type = lm.text("model_type") or top.text("model_type") or "unknown"
    family = family_of(model_type)
    architectures = top.array("architectures") or lm.array("architectures") or []
    architecture, served_note = _served_architecture(str(architectures[0]) if architectures else model_type)

    num_layers = _num_layers(lm)
    hidden = lm.integer(HIDDEN_KEYS)
    vocab = lm.integer("vocab_size", family.vocab_default)
    is_ssm = lm.first_key(HEAD_KEYS) is None and lm.has("state_size")
    heads = 0 if is_ssm else lm.integer(HEAD_KEYS)
    intermediate = _intermediate_size(lm, hidden)
    layers = tuple(_layers(lm, family, num_layers, hidden, heads))
    moe = _moe(lm, num_layers, intermediate)
    tie = _tied(top, lm, family)
    dtype = _checkpoint_dtype(lm, top)
    quant = _quantization(top.nested("quantization_config") or lm.nested("quantization_config")) or quant_file
    quant = _expert_format(lm, quant)
    max_context, context_note = _max_context(lm, family)
    notes = ([context_note] if context_note else []) + served_note + _compressed_notes(layers)
    notes += modelopt.check_formats(quant, allow_unmodelled, where)

    params = param_count.count(lm, top, param_count.Decoder(model_type, family, hidden, heads, vocab, intermediate,
                                                            layers, moe, tie))
    if params.note:  # approximate, or (exact) what the engines' plans leave out of the towers
        notes.append(params.note)
    resident = resident_copies(lm, layers, hidden)
    notes += [note for copy in resident if (note := copy.spec_note())]
    unread = unread_keys([((), top.data), (lm.path, lm.data)], accessed)
    if unread and not allow_unmodelled:
        raise KvplanError(refusal(unread), where)
    notes.extend([unmodelled_note(unread)] if unread else [])
    return ModelSpec(
        id=model_id, source=source, architecture=architecture, model_type=model_type,
        num_layers=num_layers, hidden_size=hidden, num_attention_heads=heads, vocab_size=vocab,
        intermediate_size=intermediate, tie_word_embeddings=tie, dtype=dtype, max_context=max_context,
        layers=layers, params=params, moe=moe, quantization=quant,
        mtp_layers=lm.optional_int(("num_nextn_predict_layers", "mtp_num_hidden_layers"), minimum=0) or 0,
        mtp_layer=_mtp_layer(lm),
        rope_tables=rope_tables(lm, family, max((layer.head_dim for layer in layers if layer.holds_kv), default=0),
                                any(layer.drops_old_tokens for layer in layers)),
        notes=tuple(notes), tower=vision_tower(top, hidden), resident=resident,
    )


# Architecture names that neither vLLM 0.33.0 (model_executor/models/registry.py) nor SGLang 0.5.23 (srt/models/
# minimax_m3.py EntryClass) registers, for the class both serve the same layers with. ai-dynamo/aiconfigurator's
# MiniMax-M3 config (model_type minimax_m3, which transformers 5.19.0 does not register either; its aic-core sdk
# maps the name to its own MINIMAXM3) calls the text backbone MiniMaxM3ForCausalLM; the engines' class for that
# backbone is MiniMaxM3SparseForCausalLM (nvidia/MiniMax-M3-NVFP4 names MiniMaxM3SparseForConditionalGeneration)
SERVED_AS = {"MiniMaxM3ForCausalLM": "MiniMaxM3SparseForCausalLM"}


def _checkpoint_dtype(lm: ConfigFields, top: ConfigFields) -> str:
    """torch_dtype (transformers 5 writes dtype), the text config's first, else float32 (PretrainedConfig's
    default). A name kvplan cannot weigh (units.DTYPE_BYTES) is refused here, naming the file and key: vLLM's
    plan stopped later at the encoder budget's dtype_bytes with only 'dtype' to say where."""
    for fields in (lm, top):
        key = fields.first_key(("torch_dtype", "dtype"))
        name = fields.text(key) if key is not None else None
        if not name:
            continue
        # units.dtype_bytes refuses it; the first 40 characters keep the line short (no dtype's name is longer)
        dtype_bytes(name[:40], f"{fields.where}: {fields.prefix}{key}")
        return name
    return "float32"


def _served_architecture(published: str) -> tuple[str, list[str]]:
    """The architecture the engines' rules are looked up by, and a note where it is not the config's own."""
    served = SERVED_AS.get(published)
    if served is None:
        return published, []
    return served, [f"architecture {published} is registered by neither vLLM 0.33.0 nor SGLang 0.5.23, which "
                    f"would refuse this config.json as written; planned as {served}, the class both serve these "
                    "layers with"]


def _num_layers(lm: ConfigFields) -> int:
    """num_hidden_layers, or where a Nemotron-H config gives only its block list (Nemotron-3 Ultra), its length."""
    if lm.first_key(LAYER_KEYS) is None:
        pattern = block_pattern(lm)
        if pattern:
            return len(pattern)
    return lm.integer(LAYER_KEYS)


def _intermediate_size(lm: ConfigFields, hidden: int) -> int:
    per_layer = lm.data.get("intermediate_size")
    if isinstance(per_layer, list):  # one width per layer (Gemma 3n): the widest sizes the activations
        widths = lm.array("intermediate_size") or []
        if not widths or not all(isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in widths):
            raise lm.fail("intermediate_size", "must be a positive integer or a list of them")
        return max(widths)
    explicit = lm.optional_int(("intermediate_size", "block_ff_dim", "ffn_dim", "n_inner", "ffn_hidden_size"))
    if explicit:
        return _adjusted_ff_dim(lm, explicit)
    ratio = lm.optional_int("expansion_ratio")
    return hidden * (ratio or 4)


def _adjusted_ff_dim(lm: ConfigFields, size: int) -> int:
    """LFM2's MLP width (vLLM 0.33.0 models/lfm2.py Lfm2MLP): where block_auto_adjust_ff_dim (transformers'
    Lfm2Config default true, which reads block_ff_dim as intermediate_size), two thirds of it, times
    block_ffn_dim_multiplier, rounded up to a multiple of block_multiple_of (256). Only models/lfm2.py adjusts
    (lfm2_moe.py's MLPs keep their width)."""
    if lm.text("model_type") != "lfm2" or not lm.flag("block_auto_adjust_ff_dim", True):
        return size
    size = int(2 * size / 3)
    multiplier = lm.number("block_ffn_dim_multiplier")
    if multiplier is not None:
        size = int(multiplier * size)
    step = lm.integer("block_multiple_of", 256)
    return -(-size // step) * step


def _head_dim(lm: ConfigFields, hidden: int, heads: int) -> int:
    explicit = lm.optional_int(("head_dim", "attention_head_dim", "hidden_size_per_head"))
    if explicit:
        return explicit
    if hidden % heads:
        raise lm.fail("hidden_size", f"({hidden}) is not divisible by the {heads} attention heads and no "
                                     "head_dim is given")
    return hidden // heads


def _kv_heads(lm: ConfigFields, heads: int) -> int:
    key = lm.first_key(KV_HEAD_KEYS)
    if key is not None:
        kv = lm.integer(key)
    elif lm.flag("multi_query", False) and not lm.flag("new_decoder_architecture", False):
        kv = 1
    else:
        attn = lm.nested("attn_config")
        kv = (attn.optional_int("kv_n_heads") if attn else None) or heads
    if kv > heads or heads % kv:
        raise lm.fail(key or "num_key_value_heads", f"({kv}) must divide the {heads} attention heads")
    return kv


def _compressed_layers(lm: ConfigFields, num_layers: int) -> list[Layer] | None:
    """DeepSeek-V4's layers (kvplan.models.compressed_attention), which it reads from compress_ratios or
    layer_types alone: a config with neither is none of its, and the module is not imported (start-up time)."""
    if "compress_ratios" not in lm.data and "layer_types" not in lm.data:
        return None
    from kvplan.models.compressed_attention import compressed_layers

    return compressed_layers(lm, num_layers)


def _compressed_notes(layers: tuple[Layer, ...]) -> list[str]:
    if not has_compressed_attention(layers):
        return []
    from kvplan.models.compressed_attention import compressed_notes

    return compressed_notes(layers)


def _mamba_backbone(lm: ConfigFields, num_layers: int, hidden: int, heads: int) -> list[Layer] | None:
    """A Mamba backbone with attention of its own layout: Zamba2's shared blocks (models/shared_blocks.py), PLaMo
    2's mamba_step placement (models/plamo.py)."""
    if is_shared_block_config(lm):
        return shared_block_layers(lm, num_layers, hidden, heads)
    if is_plamo2_config(lm):
        return plamo2_layers(lm, num_layers)
    return None


def _layers(lm: ConfigFields, family: Family, num_layers: int, hidden: int, heads: int) -> list[Layer]:
    if heads == 0:
        return [_state_layer(lm, family, hidden, pure=True)] * num_layers
    if (backbone := _mamba_backbone(lm, num_layers, hidden, heads)) is not None:
        return backbone
    compressed = _compressed_layers(lm, num_layers)
    if compressed is not None:
        return compressed
    if (linear := _kimi_linear(lm, num_layers)) is not None:
        return linear
    kv_lora = lm.optional_int("kv_lora_rank")
    if kv_lora:
        latent_dim = kv_lora + lm.integer("qk_rope_head_dim", 0, minimum=0)
        indexer = _sparse_indexer(lm, latent_dim)
        if indexer is None:
            return [LatentAttention(latent_dim, lm.optional_int("qk_nope_head_dim"))] * num_layers
        return _indexer_sharing(lm, indexer, num_layers)

    head_dim = _head_dim(lm, hidden, heads)
    kv = _kv_heads(lm, heads)
    full = _full_attention(lm, kv, head_dim)
    window = lm.optional_int(("sliding_window", "sliding_window_size"))
    sliding = SlidingWindow(kv, head_dim, window) if window else None
    state = _state_layer(lm, family, hidden)
    if family.parallel_mixers:
        return [ParallelHybrid(full, state)] * num_layers

    kinds = lm.data.get("attn_type_list")
    if isinstance(kinds, list) and kinds and all(kind == 1 for kind in kinds):
        lm.array("attn_type_list")  # MiniMax-M2.x: 1 marks softmax attention in every layer, as full attention
    if (indexed := _sparse_attention(lm, num_layers, full)) is not None:
        return indexed
    hybrid = lm.array("hybrid_layer_pattern")
    if hybrid is not None:
        return _from_hybrid_pattern(lm, hybrid, num_layers, full)
    layer_types = lm.array("layer_types")
    if layer_types is not None:
        return _shared_kv(lm, _from_layer_types(lm, layer_types, num_layers, full, sliding, state))
    pattern = block_pattern(lm)
    if pattern is not None:
        return _from_pattern(lm, pattern, num_layers, full, state)
    interval = lm.optional_int("full_attention_interval")
    if interval:  # Qwen3-Next without layer_types: every interval-th layer is full attention (transformers'
        # Qwen3NextConfig default, which vLLM reads)
        return [full if (i + 1) % interval == 0 else state for i in range(num_layers)]
    if (placed := _placed_attention(lm, num_layers, full, state)) is not None:
        return placed
    chunk = lm.optional_int("attention_chunk_size")
    if chunk:
        return _chunked(lm, num_layers, kv, head_dim, chunk)
    if sliding is None or not lm.flag("use_sliding_window", True):
        return [full] * num_layers
    every = lm.optional_int(("sliding_window_pattern", "_sliding_window_pattern")) or family.sliding_pattern
    if every:
        return [full if (i + 1) % every == 0 else sliding for i in range(num_layers)]
    if lm.has("max_window_layers") and lm.has("use_sliding_window"):
        first = lm.integer("max_window_layers", minimum=0)
        return [sliding if i >= first else full for i in range(num_layers)]
    return [sliding] * num_layers


def _placed_attention(lm: ConfigFields, num_layers: int, full: FullAttention, state: Layer) -> list[Layer] | None:
    """Attention at the layers a period or a list names, the state mixer elsewhere: Jamba's attn_layer_period and
    offset; Bamba's attn_layer_indices (transformers' BambaConfig.layers_block_type, which vLLM 0.22.0 bamba.py,
    its last release with Bamba, reads)."""
    period = lm.optional_int("attn_layer_period")
    if period:
        offset = lm.integer("attn_layer_offset", 0, minimum=0)
        return [full if i % period == offset else state for i in range(num_layers)]
    indices = lm.array("attn_layer_indices")
    if indices is None:
        return None
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < num_layers for i in indices):
        raise lm.fail("attn_layer_indices", f"must list layer indices below {num_layers}")
    return [full if i in indices else state for i in range(num_layers)]


def _full_attention(lm: ConfigFields, kv: int, head_dim: int) -> FullAttention:
    """Gemma 4: full-attention layers with their own KV heads and head dim (num_global_key_value_heads,
    global_head_dim; vLLM 0.33.0 model_executor/models/gemma4.py Gemma4DecoderLayer takes head_dim and
    num_key_value_heads from config.per_layer_config). With attention_k_eq_v those layers load K into both the K
    and the V slot (gemma4.py _gemma4_layer_weights_mapper), so the cache still holds K and V."""
    lm.flag("attention_k_eq_v", False)
    # v_head_dim: V's own head dim (MiMo-V2-Flash; vLLM 0.33.0 mimo_v2.py MiMoV2Attention, head_size_v)
    return FullAttention(lm.integer("num_global_key_value_heads", kv), lm.integer("global_head_dim", head_dim),
                         lm.optional_int("v_head_dim"))


def _kimi_linear(lm: ConfigFields, num_layers: int) -> list[Layer] | None:
    """Kimi-K3: linear_attn_config's kda_layers, 1-based (vLLM 0.33.0 transformers_utils/configs/kimi_linear.py
    is_kda_layer: layer_idx + 1 in kda_layers), are Kimi Delta Attention with a recurrent state per request, the
    others MLA (models/kimi_k3/nvidia/model.py KimiDecoderLayer). The gate is the config's use_full_rank_gate:
    true builds KimiK3DeltaAttention (Kimi-K3), false or absent KimiGatedDeltaNetAttention with its low-rank gate
    (Kimi-Linear: layers.KdaLowRankGateState); their states are the same."""
    if lm.mapping("linear_attn_config") is None:
        return None
    kda = lm.nested("linear_attn_config")
    assert kda is not None
    numbers = kda.array("kda_layers") or []
    kda.array("full_attn_layers")  # the complement of kda_layers, which vLLM reads alone
    if not numbers:
        return None
    kind = KdaState if kda.flag("use_full_rank_gate", False) else KdaLowRankGateState
    # the recurrent state float32 under auto (vLLM 0.33.0 mamba_utils.py kda_state_dtype)
    state = kind(kda.integer("num_heads"), kda.integer("head_dim"), kda.integer("short_conv_kernel_size", 4),
                 ssm_bytes=4).as_served(checkpoint_conv_bytes(lm), None, 0, 0)
    latent = LatentAttention(lm.integer("kv_lora_rank") + lm.integer("qk_rope_head_dim", 0, minimum=0))
    return [state if index + 1 in numbers else latent for index in range(num_layers)]


INDEX_KEY_BYTES = 2  # vLLM 0.33.0 attention_config indexer_kv_dtype 'auto' -> 'bf16' (models/minimax_m3 model.py)


def _sparse_attention(lm: ConfigFields, num_layers: int, full: FullAttention) -> list[Layer] | None:
    """MiniMax-M3: sparse_attention_freq[i] != 0 gives layer i a sparse-attention indexer whose key is cached beside
    its K and V (vLLM 0.33.0 models/minimax_m3/nvidia/model.py _sparse_attention_layer_ids; layers.IndexedAttention),
    the others full attention. Refused by name: a sparse layer that keeps its index value (sparse_disable_index_value
    0; vLLM builds no index V, SGLang 0.5.23 would cache one) and a sparse block other than the kernels' 128."""
    if lm.mapping("sparse_attention_config") is None:
        return None
    sparse = lm.nested("sparse_attention_config")
    assert sparse is not None
    freq = sparse.array("sparse_attention_freq")
    if freq is None:
        return None
    if len(freq) != num_layers:
        raise sparse.fail("sparse_attention_freq", f"has {len(freq)} entries for {num_layers} layers")
    block = sparse.integer("sparse_block_size", IndexedAttention.kernel_block_size)
    if block != IndexedAttention.kernel_block_size:
        raise sparse.fail("sparse_block_size", f"({block}) is not modelled: the engines' sparse kernels read "
                                               f"{IndexedAttention.kernel_block_size}-token blocks")
    keep_value = sparse.array("sparse_disable_index_value") or []
    for index, entry in enumerate(freq):
        if entry and not (index < len(keep_value) and keep_value[index]):
            raise sparse.fail("sparse_disable_index_value", f"is 0 for sparse layer {index}: an index value cache "
                                                            "is not modelled")
    layer = IndexedAttention(full, sparse.integer("sparse_index_dim"), INDEX_KEY_BYTES)
    return [layer if entry else full for entry in freq]


def _from_hybrid_pattern(lm: ConfigFields, pattern: list[Any], num_layers: int, full: FullAttention) -> list[Layer]:
    """MiMo-V2-Flash: hybrid_layer_pattern[i] == 1 makes layer i sliding-window attention of its own geometry (vLLM
    0.33.0 mimo_v2.py MiMoV2FlashDecoderLayer.is_compressed_softmax_layer: swa_num_key_value_heads, swa_head_dim,
    swa_v_head_dim or else K's, a window of sliding_window_size), any other entry full attention (num_key_value_heads,
    head_dim, v_head_dim). The attention_chunk_size the same config writes is read by no MiMo layer."""
    if len(pattern) != num_layers:
        raise lm.fail("hybrid_layer_pattern", f"has {len(pattern)} entries for {num_layers} layers")
    sliding = _mimo_sliding(lm)
    return [sliding if entry == 1 else full for entry in pattern]


def _mimo_sliding(lm: ConfigFields) -> SlidingWindow:
    return SlidingWindow(lm.integer("swa_num_key_value_heads"), lm.integer("swa_head_dim"),
                         lm.integer("sliding_window_size"), lm.optional_int("swa_v_head_dim"))


def _mtp_layer(lm: ConfigFields) -> Layer | None:
    """What an MTP draft layer caches where it is not shaped like the first layer. MiMo-V2-Flash (a
    hybrid_layer_pattern, whose layer 0 is full attention): its one MTP layer is sliding-window attention with the
    SWA layers' KV heads, head dims and window (vLLM 0.33.0 model_executor/models/mimo_v2_mtp.py
    MiMoV2MultiTokenPredictorLayer builds MiMoV2Attention from swa_num_key_value_heads, swa_head_dim,
    swa_v_head_dim and sliding_window_size, num_mtp_layers 1; SGLang 0.5.23 srt/models/mimo_v2_nextn.py the same
    keys). None: the first KV layer's geometry (engines/common.draft_layers)."""
    if lm.array("hybrid_layer_pattern") is None:
        return None
    return _mimo_sliding(lm)


# The indexer of DeepSeek-V3.2's own config.json (index_n_heads 64, index_head_dim 128, index_topk 2048), for a
# config that names only part of it
INDEXER_DEFAULTS = {"index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048}


def _sparse_indexer(lm: ConfigFields, latent_dim: int) -> SparseLatentAttention | None:
    """DeepSeek sparse attention: a config with a lightning indexer (vLLM's test is the presence of index_topk;
    some copies of the V3.2 config keep only index_head_dim and index_n_heads) caches the indexer's key beside
    the latent."""
    if not any(lm.has(key) for key in INDEXER_DEFAULTS):
        return None
    head_dim, heads, topk = (lm.integer(key, default) for key, default in INDEXER_DEFAULTS.items())
    return SparseLatentAttention(latent_dim, head_dim, heads, topk)


def _indexer_sharing(lm: ConfigFields, indexer: SparseLatentAttention, num_layers: int) -> list[Layer]:
    """GLM-5.2: a layer that skips its top-k reuses the previous layer's and has no indexer (vLLM 0.33.0
    models/deepseek_v32/attention.py, SGLang 0.5.23 configs/model_config.py dsa_layer_skips_topk): where
    index_topk_pattern is given, its 'S' entries; else max(i - index_skip_topk_offset + 1, 0) % index_topk_freq != 0,
    the offset 2 where the config names none (vLLM's default; SGLang's max(i - 1, 0) is the same). indexer_types,
    which transformers writes from the same fields ('full' / 'shared'), is read by neither engine."""
    lm.array("indexer_types")
    pattern = lm.array("index_topk_pattern")
    freq = lm.integer("index_topk_freq", 1)
    offset = lm.integer("index_skip_topk_offset", 2)
    if pattern is not None:
        skips = [i < len(pattern) and pattern[i] == "S" for i in range(num_layers)]
    else:
        skips = [max(i - offset + 1, 0) % freq != 0 for i in range(num_layers)]
    sharing = IndexerSharingLatentAttention(indexer.latent_dim, indexer.index_topk)
    return [sharing if skip else indexer for skip in skips]


def _from_layer_types(lm: ConfigFields, layer_types: list[Any], num_layers: int, full: FullAttention,
                      sliding: SlidingWindow | None, state: Layer) -> list[Layer]:
    if len(layer_types) != num_layers:
        raise lm.fail("layer_types", f"has {len(layer_types)} entries for {num_layers} layers")
    result: list[Layer] = []
    for entry in layer_types:
        if entry == "full_attention" or entry == "attention":
            result.append(full)
        elif entry in ("sliding_attention", "sliding_window_attention"):
            if sliding is None:
                raise lm.fail("sliding_window", "is missing but layer_types names sliding_attention layers")
            result.append(sliding)
        elif entry in ("linear_attention", "mamba", "mamba2", "conv", "recurrent"):
            result.append(state)
        else:
            raise lm.fail("layer_types", f"has an unknown layer type {entry!r:.40}")
    return result


def _from_pattern(lm: ConfigFields, pattern: str, num_layers: int, full: FullAttention, state: Layer) -> list[Layer]:
    """Nemotron-H: one symbol per decoder layer, each layer a single block (vLLM nemotron_h.py
    ALL_DECODER_LAYER_TYPES, which refuses any other symbol): 'M' a Mamba-2 mixer, '*' attention, '-' an MLP and
    'E' experts, the last two with no mixer and nothing cached."""
    key = block_pattern_key(lm)
    if len(pattern) != num_layers:
        raise lm.fail(key, f"has {len(pattern)} entries for {num_layers} layers")
    blocks: dict[str, Layer] = {"M": state, "*": full, "-": MlpBlock(), "E": MlpBlock()}
    unknown = sorted(set(pattern) - set(blocks))
    if unknown:
        raise lm.fail(key, f"has an unknown layer symbol {unknown[0]!r}; expected M, *, - or E")
    return [blocks[symbol] for symbol in pattern]


def _chunked(lm: ConfigFields, num_layers: int, kv: int, head_dim: int, chunk: int) -> list[Layer]:
    # no_rope_layers[i] == 1: RoPE + chunked local attention; 0: a global NoPE layer. Empty means the
    # transformers default, every 4th layer global.
    flags = lm.array("no_rope_layers") or []
    if not flags:
        interval = lm.integer("no_rope_layer_interval", 4)
        flags = [int((i + 1) % interval != 0) for i in range(num_layers)]
    if len(flags) != num_layers:
        raise lm.fail("no_rope_layers", f"has {len(flags)} entries for {num_layers} layers")
    local, glob = ChunkedLocal(kv, head_dim, chunk), FullAttention(kv, head_dim)
    return [local if flag else glob for flag in flags]


def _shared_kv(lm: ConfigFields, layers: list[Layer]) -> list[Layer]:
    """Gemma 3n: the last num_kv_shared_layers layers read the KV of an earlier layer of their kind (vLLM's
    kv_sharing_target_layer_name) and cache none of their own."""
    shared = lm.optional_int("num_kv_shared_layers", minimum=0) or 0
    if shared > len(layers):
        raise lm.fail("num_kv_shared_layers", f"({shared}) is more than the {len(layers)} layers")
    first = len(layers) - shared
    return layers[:first] + [SharedKv(layer.kv_heads, layer.head_dim) if layer.holds_kv else layer
                             for layer in layers[first:]]


def _state_layer(lm: ConfigFields, family: Family, hidden: int, pure: bool = False) -> Layer:
    layer = _recurrent(lm, family, hidden, pure)
    # Until an engine says otherwise, the conv state is kept in the checkpoint's dtype.
    return layer.as_served(checkpoint_conv_bytes(lm), None, 0, 0)


def _recurrent(lm: ConfigFields, family: Family, hidden: int, pure: bool) -> Layer:
    """The recurrent mixer the config's own fields describe (vLLM get_mamba_state_shape_from_config of each
    model; shapes in mamba_utils.MambaStateShapeCalculator). A config without the fields keeps the old
    sizeless state."""
    ssm_key = lm.first_key(SSM_DTYPE_KEYS)
    ssm_dtype = lm.text(ssm_key) if ssm_key else None  # where it names none, each engine has its own rule
    ssm = dtype_bytes(ssm_dtype, f"{lm.where}: {ssm_key or 'mamba_ssm_dtype'}") if ssm_dtype else None
    if lm.has("linear_num_value_heads"):
        return GatedDeltaNetState(lm.integer("linear_num_key_heads"), lm.integer("linear_num_value_heads"),
                                  lm.integer("linear_key_head_dim"), lm.integer("linear_value_head_dim"),
                                  lm.integer("linear_conv_kernel_dim", 4), ssm_bytes=ssm)
    if lm.has("conv_L_cache"):
        return ShortConvState(lm.integer("conv_dim", hidden), lm.integer("conv_L_cache"))
    ssm_heads = lm.optional_int(("mamba_n_heads", "mamba_num_heads", *(("num_heads",) if pure else ())))
    state = lm.optional_int(("mamba_d_state", "ssm_state_size", "state_size"))
    if ssm_heads and state:
        d_ssm = lm.optional_int("mamba_d_ssm")
        if lm.first_key(("mamba_d_head",)) and lm.data["mamba_d_head"] == "auto":
            # transformers' FalconH1Config reads "auto" as the inner width over the heads
            inner = d_ssm or hidden * lm.integer("mamba_expand", 2)
            head = inner // ssm_heads
        else:
            head = lm.integer(("mamba_d_head", "mamba_head_dim", *(("head_dim",) if pure else ())))
            inner = d_ssm or ssm_heads * head
        return Mamba2State(inner, ssm_heads, head, lm.integer(("mamba_n_groups", "n_groups"), 1), state,
                           lm.integer(("mamba_d_conv", "conv_kernel"), 4),
                           lm.optional_int(("mamba_chunk_size", "chunk_size")), ssm_bytes=ssm)
    if state:
        # A pure Mamba config states its inner width as intermediate_size, which transformers keeps over
        # hidden x expand (falcon-mamba-7b: 8192, not 4096 x 16); in a hybrid, intermediate_size is the MLP's.
        expand = lm.optional_int("mamba_expand")
        inner = (lm.optional_int("mamba_d_inner") or (hidden * expand if expand else None)
                 or (lm.optional_int("intermediate_size") if pure else None)
                 or hidden * (lm.optional_int("expand") or 2))
        return Mamba1State(inner, state, lm.integer(("mamba_d_conv", "conv_kernel"), 4), ssm_bytes=ssm)
    return StateOnly()


def _moe(lm: ConfigFields, num_layers: int, intermediate: int) -> MoE | None:
    # 0 experts is a dense model: Granite-4.0-H's num_local_experts 0 (vLLM 0.33.0 granitemoehybrid.py builds
    # block_sparse_moe only where num_local_experts > 0)
    experts = lm.optional_int(("num_local_experts", "num_experts", "n_routed_experts"), minimum=0)
    if not experts or experts < 2:
        return None
    per_token_keys = ("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token",
                      "top_k_experts")
    per_token = lm.integer(per_token_keys, 1)
    if per_token > experts:
        raise lm.fail(lm.first_key(per_token_keys) or per_token_keys[0],
                      f"({per_token}) is more than the {experts} experts")
    expert_size = lm.optional_int("moe_intermediate_size") or intermediate
    shared = lm.optional_int(("n_shared_experts", "num_shared_experts"), minimum=0) or 0
    # Nemotron-H sizes its shared experts apart (vLLM NemotronHMoE: moe_shared_expert_intermediate_size x
    # n_shared_experts), as do MiniMax-M3 (shared_intermediate_size) and Step-3.7 (share_expert_dim); the others
    # give them the routed experts' width.
    shared_size = shared * (lm.optional_int(("moe_shared_expert_intermediate_size", "shared_intermediate_size",
                                             "share_expert_dim")) or expert_size) if shared else 0
    if lm.has("intermediate_size_mlp"):  # Llama 4: one always-on shared expert of the expert width
        shared, shared_size = 1, expert_size
    if not shared and lm.optional_int("shared_intermediate_size", minimum=0):
        # Granite-4.0-H: one shared MLP of shared_intermediate_size beside the experts, no count key (vLLM 0.33.0
        # granitemoehybrid.py shared_mlp, granitemoeshared.py GraniteMoeSharedMLP)
        shared, shared_size = 1, lm.integer("shared_intermediate_size")
    shared_width = lm.optional_int("shared_expert_intermediate_size", minimum=0)
    if shared_width:  # Qwen3-Coder writes 0: no shared expert
        shared, shared_size = 1, shared_width
    dense: list[int] = []
    mlp_free: tuple[int, ...] = ()
    pattern = block_pattern(lm)
    if pattern is not None:
        # Nemotron-H (vLLM nemotron_h.py): experts in its 'E' layers, a dense MLP in its '-' layers; its Mamba
        # ('M') and attention ('*') layers have neither
        dense.extend(i for i, symbol in enumerate(pattern) if symbol == "-")
        mlp_free = tuple(i for i, symbol in enumerate(pattern) if symbol not in "-E")
    first_dense = lm.optional_int("first_k_dense_replace", minimum=0) or 0
    dense.extend(range(min(first_dense, num_layers)))
    only_mlp = lm.array("mlp_only_layers") or []
    dense.extend(i for i in only_mlp if isinstance(i, int) and 0 <= i < num_layers)
    dense.extend(_dense_by_layer_list(lm, num_layers))
    step = _moe_step(lm)
    if step > 1:
        offset = step - 1 if lm.has("interleave_moe_layer_step") else 0
        dense.extend(i for i in range(num_layers) if i % step != offset)
    period = lm.optional_int("expert_layer_period")
    if period:  # Jamba: experts in every period-th layer from the offset, a dense MLP in the others
        offset = lm.integer("expert_layer_offset", 0, minimum=0)
        dense.extend(i for i in range(num_layers) if i % period != offset)
    # Nemotron-3 Super / Ultra (vLLM 0.33.0 model_executor/models/nemotron_h.py NemotronHMoE): with
    # moe_latent_size the routed experts run at that width between fc1_latent_proj and fc2_latent_proj
    latent = lm.optional_int(("moe_latent_size", "routed_expert_hidden_size")) or 0  # the second: Kimi-K3's KimiMoE
    return MoE(experts, per_token, expert_size, shared, shared_size, tuple(sorted(set(dense))), mlp_free, latent)


def _moe_step(lm: ConfigFields) -> int:
    """Experts in every step-th layer; a per-layer moe_layer_freq list is read by _dense_by_layer_list instead."""
    keys = ("decoder_sparse_step", "interleave_moe_layer_step", "moe_layer_freq")
    if isinstance(lm.data.get(lm.first_key(keys) or ""), list):
        return 1
    return lm.optional_int(keys) or 1


def _dense_by_layer_list(lm: ConfigFields, num_layers: int) -> list[int]:
    """moe_layer_freq as one flag per layer (MiniMax-M3, MiMo-V2-Flash): 0 a dense MLP, else experts. vLLM 0.33.0
    reads it per layer: models/minimax_m3/nvidia/model.py _is_moe_layer (moe_layer_freq[layer_id] != 0) and
    model_executor/models/mimo_v2.py is_moe_layer (a list entry, an int meaning no dense layer)."""
    kinds = lm.array("mlp_layer_types")
    if kinds is not None:  # GLM-5.1 / 5.2: "dense" or "sparse" per layer
        if len(kinds) != num_layers:
            raise lm.fail("mlp_layer_types", f"has {len(kinds)} entries for {num_layers} layers")
        return [index for index, kind in enumerate(kinds) if kind == "dense"]
    flags = lm.data.get("moe_layer_freq")
    if not isinstance(flags, list):
        return []
    if len(flags) != num_layers:
        raise lm.fail("moe_layer_freq", f"has {len(flags)} entries for {num_layers} layers")
    if not all(isinstance(flag, int) and not isinstance(flag, bool) and flag >= 0 for flag in flags):
        raise lm.fail("moe_layer_freq", "must be an integer or a list of one non-negative integer per layer")
    return [index for index, flag in enumerate(flags) if flag == 0]


def _tied(top: ConfigFields, lm: ConfigFields, family: Family) -> bool:
    if lm.has("tie_word_embeddings"):
        return lm.flag("tie_word_embeddings", family.tied_default)
    return top.flag("tie_word_embeddings", family.tied_default)


def _quantization(q: ConfigFields | None) -> Quantization | None:
    if q is None:
        return None
    if modelopt.is_inline(q.data):
        q.accessed.add(q.path)  # read whole: `kvplan models import` keeps it (quantized_layers with it)
        return modelopt.parse_inline_config(q.data, q.where)
    method = q.text(("quant_method", "quant_algo")) or "unknown"
    bits = q.optional_int(("bits", "w_bit", "weight_bits", "num_bits"))
    group = q.optional_int(("group_size", "q_group_size"), minimum=-1)
    groups = q.nested("config_groups")
    if groups is not None and bits is None:
        for name in groups.data:
            group_cfg = groups.nested(name)
            weights = group_cfg.nested("weights") if group_cfg else None
            if weights is not None:
                bits = weights.optional_int("num_bits")
                group = weights.optional_int("group_size")
                break
    if method == "fp8" and bits is None:
        bits = 8
    if method == "mxfp4":
        bits, group = 4, 32
    skipped = q.array("modules_to_not_convert") or q.array("ignore") or []
    # a compressed-tensors scheme is an object; ModelOpt's inline exports write a string there (quant_algo's
    # "FP8"), where vLLM 0.33.0 modelopt.py from_config's flat branch reads only an object
    string_scheme = isinstance(q.data.get("kv_cache_scheme"), str) and method != "compressed-tensors"
    scheme = None if string_scheme else q.nested("kv_cache_scheme")
    if scheme is not None:
        q.accessed.add(scheme.path)  # kept whole by `kvplan models import`: the note quotes it
    return Quantization(method, bits, group if group and group > 0 else None,
                        tuple(str(s) for s in skipped), expert_format=modelopt.hybrid_moe_format(q.data),
                        kv_cache_scheme=json.dumps(scheme.data, sort_keys=True) if scheme is not None else None)


def _expert_format(lm: ConfigFields, quant: Quantization | None) -> Quantization | None:
    """DeepSeek-V4's expert_dtype beside an fp8 checkpoint (vLLM 0.33.0 models/deepseek_v4/quant_config.py
    DeepseekV4FP8Config, which model_executor/models/config.py puts in place of fp8 for deepseek_v4): "fp4" loads
    the routed experts as MXFP4 (Mxfp4MoEMethod), "fp8" as the block fp8 of every other linear layer. Under another
    quantization (ModelOpt's NVFP4 copies) vLLM does not read it."""
    if not lm.has("expert_dtype"):
        return quant
    fmt = lm.text("expert_dtype")
    if fmt not in ("fp4", "fp8"):
        raise lm.fail("expert_dtype", f"({fmt!r:.20}) must be fp4 or fp8, the formats vLLM 0.33.0 takes")
    if quant is None or quant.method != "fp8" or fmt == "fp8":
        return quant
    return replace(quant, expert_format=quant.expert_format or "mxfp4")


def _max_context(lm: ConfigFields, family: Family) -> tuple[int, str | None]:
    """max_model_len as vLLM derives it: the smallest length key, times the RoPE scaling factor."""
    lengths = [lm.integer(k) for k in MAX_LEN_KEYS if lm.has(k)]
    if not lengths:
        if family.max_position_default:
            return family.max_position_default, None
        return DEFAULT_MAX_LEN, f"config names no maximum length; vLLM falls back to {DEFAULT_MAX_LEN}"
    length = min(lengths)
    # transformers v5 moves rope_scaling into rope_parameters (one flat mapping, or one per layer type)
    rope = lm.mapping("rope_scaling") or lm.mapping("rope_parameters")
    if rope and family.rope_scaling_extends_context:
        rope_type = rope.get("rope_type") or rope.get("type")
        if rope_type not in ROPE_TYPES_KEEPING_LENGTH and isinstance(rope.get("factor"), (int, float)):
            scaled = ConfigFields(rope, lm.where, (*lm.path, "rope_scaling" if lm.has("rope_scaling")
                                                      else "rope_parameters"))
            factor = scaled.number("factor") or 1.0
            if rope_type == "yarn":
                length = scaled.integer("original_max_position_embeddings", length)
            length = int(length * factor)
            if length > MAX_CONTEXT:
                raise scaled.fail("factor", f"({factor:g}) scales the context to {length:,} tokens, beyond any "
                                            f"real model (at most {MAX_CONTEXT:,})")
    return length, None
