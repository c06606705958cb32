"""Parameter count from the config: embeddings, attention, MLP or experts, norms, lm_head, vision tower, as the
engine loads them (a tied lm_head once). Exact for the families whose layout was checked against published
counts (see tests/test_params.py); the others carry a "parameter count approximate" note."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models import tower_params
from kvplan.models.families import Family
from kvplan.models.fields import ConfigFields
from kvplan.models.layers import KdaLowRankGateState, KdaState, Layer, Mamba2State, ShortConvState
from kvplan.models.model import LayerParams, MoE, ParamCount


@dataclass(eq=False)
class Decoder:
    """What the config parser has read of the decoder: the shape every parameter rule works from."""

    model_type: str
    family: Family
    hidden: int
    heads: int
    vocab: int
    intermediate: int
    layers: tuple[Layer, ...]
    moe: MoE | None
    tied: bool


def count(lm: ConfigFields, top: ConfigFields, decoder_shape: Decoder) -> ParamCount:
    """lm: the language model's part of the config; top: the whole config (a vision tower sits there)."""
    shape = decoder_shape
    family, model_type, hidden, heads, vocab = shape.family, shape.model_type, shape.hidden, shape.heads, shape.vocab
    intermediate, layers, moe, tied = shape.intermediate, shape.layers, shape.moe, shape.tied
    norm = _norm(lm, family, hidden)
    norms_per_layer = _norms_per_layer(lm, family) + 2 * _attention_residuals(lm)
    if heads == 0:
        pad = lm.optional_int("pad_vocab_size_multiple") or 1
        vocab = -(-vocab // pad) * pad

    mixers = _Mixers(lm, family, hidden, heads, intermediate)
    hc_layer, hc_head = hyper_connections(lm, hidden)
    by_layer = []
    for index, layer in enumerate(layers):
        before, float32_before = mixers.loose, mixers.float32
        mixer = layer.mixer_params(mixers) + hc_layer
        mixers.loose += hc_layer
        mixer_loose = mixers.loose - before
        float32 = mixers.float32 - float32_before
        if not _has_mlp(lm, layer):
            by_layer.append(LayerParams(mixer - mixer_loose, 0, 0, mixer_loose + norm, float32))
            continue
        mlp, expert_part, mlp_loose = _mlp(lm, family, hidden, intermediate, moe, index)
        by_layer.append(LayerParams(mixer - mixer_loose, mlp - expert_part - mlp_loose, expert_part,
                                    mixer_loose + mlp_loose + norms_per_layer * norm, float32,
                                    _score_bias(lm, family, moe, index)))
    decoder = sum(p.mixer + p.mlp + p.experts + p.loose for p in by_layer)
    experts = sum(p.experts for p in by_layer)

    embeddings = vocab * hidden
    if family.position_rows_extra is not None:
        lengths = [lm.integer(k) for k in ("n_positions", "max_position_embeddings") if lm.has(k)]
        embeddings += (max(lengths, default=0) + family.position_rows_extra) * hidden
    if family.embedding_norm:
        embeddings += norm
    lm_head = 0 if tied else vocab * hidden + (vocab if family.lm_head_bias else 0)
    vision, vision_note = _towers(top, hidden)
    total = embeddings + decoder + norm + hc_head + lm_head + vision + _attention_residuals(lm) * hidden

    left_out = "; ".join(note for note in (vision_note, _uncounted(lm)) if note)
    exact = family.exact and not left_out
    note = _audio_alone_note(top, vision) if exact else (
        f"parameter count approximate: the layout of model_type '{model_type}' was not checked against a "
        "published count" + (f"; {left_out}" if left_out else "") if not family.exact else
        f"parameter count approximate: {left_out}")
    return ParamCount(total=total, exact=exact, note=note, embeddings=embeddings, lm_head=lm_head,
                      experts=experts, vision=vision, by_layer=tuple(by_layer), mtp=_mtp_module(lm, hidden, by_layer))


def _mtp_module(lm: ConfigFields, hidden: int, by_layer: list[LayerParams]) -> int:
    """Nemotron-3's MTP module (vLLM 0.33.0 nemotron_h_mtp.py NemotronHMultiTokenPredictor, which asserts
    num_nextn_predict_layers 1): one decoder layer per mtp_hybrid_override_pattern character, each as the main
    model's layer of that kind; the first with the start projections (enorm and hnorm of hidden, eh_proj 2 x hidden
    -> hidden without bias), the last with final_layernorm; embed_tokens and lm_head are the target's. 0 without
    mtp_hybrid_override_pattern (or a kind the main pattern does not hold). Nemotron-3 Ultra's config writes the
    list forms, mtp_layers_block_type and layers_block_type, which its NemotronHConfig (configuration_nemotron_h.py
    _list_to_pattern) turns into those patterns, mamba M, moe E, attention *, mlp -."""
    pattern = lm.text("mtp_hybrid_override_pattern") or _block_pattern(lm, "mtp_layers_block_type")
    main = lm.text("hybrid_override_pattern") or _block_pattern(lm, "layers_block_type")
    if not pattern or len(main) != len(by_layer) or any(kind not in main for kind in pattern):
        return 0
    layers = sum(_layer_total(by_layer[main.index(kind)]) for kind in pattern)
    return layers + 2 * hidden + 2 * hidden * hidden + hidden


BLOCK_PATTERN = {"mamba": "M", "moe": "E", "attention": "*", "mlp": "-"}


def _block_pattern(lm: ConfigFields, key: str) -> str:
    """A Nemotron-H block list as its pattern string ("" where the key is absent, not a list, or names a block
    type outside BLOCK_PATTERN)."""
    words = lm.data.get(key)
    if not isinstance(words, list) or not all(isinstance(word, str) and word in BLOCK_PATTERN for word in words):
        return ""
    return "".join(BLOCK_PATTERN[word] for word in words)


def _layer_total(layer: LayerParams) -> int:
    return layer.mixer + layer.mlp + layer.experts + layer.loose


def _uncounted(lm: ConfigFields) -> str:
    """What a config names that the count leaves out ("" where nothing): Gemma 4's per-layer input embeddings and
    their gates (vLLM 0.33.0 gemma4.py embed_tokens_per_layer, per_layer_model_projection, per_layer_input_gate,
    where hidden_size_per_layer_input > 0), and its KV-shared layers, which build no k_proj / v_proj / k_norm."""
    left = [key for key in ("hidden_size_per_layer_input", "num_kv_shared_layers") if lm.optional_int(key, minimum=0)]
    return f"{' and '.join(left)} not counted" if left else ""


def _interleaved_by_period(lm: ConfigFields) -> bool:
    """Jamba's layout, named by its `attn_layer_period`: every decoder layer, Mamba or attention, has an MLP
    or experts after its mixer, and the Mamba mixer RMS-normalises its dt, B and C projections."""
    return lm.has("attn_layer_period")


def _one_block_per_layer(lm: ConfigFields) -> bool:
    """Nemotron-H's layout, named by its `hybrid_override_pattern`: every decoder layer is one block after one norm,
    a Mamba-2 mixer, attention, an MLP or experts (vLLM nemotron_h.py ALL_DECODER_LAYER_TYPES), so its attention
    layers carry no MLP of their own."""
    return lm.has("hybrid_override_pattern") or lm.has("layers_block_type")


def _mlp_in_every_layer(lm: ConfigFields) -> bool:
    """Granite-4.0-H's layout, named by its `shared_intermediate_size`: both decoder layer kinds, Mamba-2 and
    attention, carry the shared MLP after their mixer and two RMSNorms, and the experts where num_local_experts > 0
    (vLLM 0.33.0 granitemoehybrid.py GraniteMoeHybridMambaDecoderLayer and GraniteMoeHybridAttentionDecoderLayer:
    shared_mlp, block_sparse_moe; SGLang 0.5.23 models/granitemoehybrid.py the same). Bamba's, named by its
    `attn_layer_indices`: a feed_forward BambaMLP after input_layernorm and pre_ff_layernorm in both its
    BambaMixerDecoderLayer and BambaAttentionDecoderLayer (vLLM 0.22.0 bamba.py). PLaMo 2's, named by its
    `mamba_step`: a DenseMLP in every Plamo2DecoderLayer, Mamba or attention (vLLM 0.26.0 plamo2.py)."""
    return (lm.has("shared_intermediate_size") or lm.array("attn_layer_indices") is not None
            or lm.has("mamba_step"))


def _has_mlp(lm: ConfigFields, layer: Layer) -> bool:
    """A plain Mamba block is its mixer and one norm."""
    if _one_block_per_layer(lm):
        return layer.mixer_free
    return layer.has_mlp or _interleaved_by_period(lm) or _mlp_in_every_layer(lm)


def _norm(lm: ConfigFields, family: Family, hidden: int) -> int:
    """One norm's parameters. MPT's `no_bias` drops the LayerNorm bias along with every linear bias."""
    with_bias = family.layer_norm and not lm.flag("no_bias", False)
    return hidden * (2 if with_bias else 1)


def _attention_residuals(lm: ConfigFields) -> int:
    """Kimi-K3's attention residuals (vLLM 0.33.0 models/kimi_k3/nvidia/model.py, attn_res_block_size): an RMSNorm
    and a hidden -> 1 projection, unquantized, twice in every decoder layer (self_attention_res_*, mlp_res_*) and
    once after the last (output_attn_res_*); each pair is 2 x hidden parameters, counted as norms are."""
    return 2 if lm.optional_int("attn_res_block_size") else 0


def _norms_per_layer(lm: ConfigFields, family: Family) -> int:
    """Falcon's decoder layer: one shared norm before the parallel attention and MLP, two (ln_attn and ln_mlp,
    or num_ln_in_parallel_attn of them) in the new decoder architecture, two when attention is sequential.
    A RefinedWeb config that gives grouped KV heads (`n_head_kv`) is the new architecture: the 40B layout."""
    if lm.flag("new_decoder_architecture", False) or lm.has("n_head_kv"):
        return lm.integer("num_ln_in_parallel_attn", 2)
    if not lm.flag("parallel_attn", True):
        return 2
    return family.norms_per_layer


@dataclass(eq=False)
class _Mixers:
    """The parameter rule of each kind of mixer, read from one config (a layers.MixerCounter)."""

    lm: ConfigFields
    family: Family
    hidden: int
    heads: int
    intermediate: int
    # running sum of the mixers' parameters outside their linear projections (norms, biases, convolutions, SSM
    # per-head parameters): what a quantized checkpoint keeps at the model dtype
    loose: int = 0
    # running sum of the loose parameters the engines allocate in float32 whatever the model dtype
    float32: int = 0

    def kv_attention(self, kv_heads: int, head_dim: int, value_dim: int | None = None,
                     sliding: bool = False) -> int:
        """q, k, v and o (v and o of value_dim per head where V's head dim is apart); a sliding layer with its own
        query heads and sinks (vLLM 0.33.0 mimo_v2.py MiMoV2FlashDecoderLayer: swa_num_attention_heads, and one
        sink logit per head where add_swa_attention_sink_bias)."""
        lm, family, hidden = self.lm, self.family, self.hidden
        heads = lm.integer("swa_num_attention_heads", self.heads) if sliding else self.heads
        qkv_bias = lm.flag("attention_bias", family.qkv_bias) if lm.has("attention_bias") else family.qkv_bias
        o_bias = lm.flag("attention_bias", family.o_bias) if lm.has("attention_bias") else family.o_bias
        if lm.has("bias"):  # Falcon's single switch for every linear layer
            qkv_bias = o_bias = lm.flag("bias", False)
        q_width = heads * head_dim
        kv_width = kv_heads * head_dim
        v_width = kv_heads * (value_dim or head_dim)
        total = hidden * (q_width + kv_width + v_width) + heads * (value_dim or head_dim) * hidden
        if lm.flag("attention_k_eq_v", False) and head_dim == lm.optional_int("global_head_dim"):
            total -= hidden * kv_width  # Gemma 4's full layers ship k_proj only (vLLM 0.33.0 gemma4.py)
        if lm.flag("attn_output_gate", _gated_delta_net(lm)):
            # q_proj also yields a per-channel output gate; vLLM's Qwen3-Next attention reads
            # attn_output_gate with a default of true
            total += hidden * q_width
        sinks = family.attention_sinks or (sliding and lm.flag("add_swa_attention_sink_bias", False))
        loose = (q_width + kv_width + v_width if qkv_bias else 0) + (hidden if o_bias else 0)
        loose += (2 * head_dim if family.qk_norm else 0) + (heads if sinks else 0)
        loose += (heads + kv_heads) * head_dim if family.qk_norm_per_head else 0
        self.loose += loose
        return total + loose

    def latent_attention(self, indexer: bool = True) -> int:
        """MLA, with its layer's lightning indexer unless the layer shares another's (indexer False: vLLM 0.33.0
        deepseek_v2.py load_weights drops a skipped layer's indexer weights, which the checkpoint still ships)."""
        lm, hidden, heads = self.lm, self.hidden, self.heads
        kv_lora = lm.integer("kv_lora_rank")
        rope = lm.integer("qk_rope_head_dim", 0, minimum=0)
        nope = lm.integer("qk_nope_head_dim", 0, minimum=0)
        v_dim = lm.integer("v_head_dim")
        q_lora = lm.optional_int("q_lora_rank")
        q_width = heads * (nope + rope)
        q = hidden * q_width if not q_lora else hidden * q_lora + q_lora + q_lora * q_width
        self.loose += kv_lora + (q_lora or 0)  # the q_a and kv_a layernorms
        return (q + hidden * (kv_lora + rope) + kv_lora + kv_lora * heads * (nope + v_dim)
                + heads * v_dim * hidden + (self._sparse_indexer(q_lora or hidden) if indexer else 0)
                + (hidden * heads * v_dim if lm.flag("mla_use_output_gate", False) else 0))

    def index_branch(self, index_dim: int) -> int:
        """MiniMax-M3's sparse layers (vLLM 0.33.0 models/minimax_m3/nvidia/model.py MiniMaxM3SparseAttention):
        index_q (sparse_num_index_heads x index_dim) and index_k (one shared head) fused into qkv_proj, and their two
        RMSNorms of index_dim; index_v and index_o are never built (sparse_disable_index_value)."""
        sparse = self.lm.nested("sparse_attention_config")
        heads = sparse.integer("sparse_num_index_heads") if sparse is not None else 1
        self.loose += 2 * index_dim
        return self.hidden * (heads + 1) * index_dim + 2 * index_dim

    def compressed_attention(self, ratio: int) -> int:
        """DeepSeek-V4's attention (vLLM 0.33.0 models/deepseek_v4/attention.py DeepseekV4Attention): fused_wqa_wkv
        (hidden -> q_lora_rank + head_dim), q_norm, wq_b (q_lora_rank -> heads x head_dim), kv_norm, the grouped
        output projection wo_a (heads x head_dim / o_groups -> o_groups x o_lora_rank) and wo_b (-> hidden), one
        sink per head; where ratio > 1 a compressor (compressor.py DeepseekCompressor: ape of ratio x coff x
        head_dim, the unquantized fused_wkv_wgate hidden -> 2 x coff x head_dim, a norm), and where ratio is 4 an
        indexer (DeepseekV4Indexer: wq_b q_lora_rank -> index_n_heads x index_head_dim, the unquantized
        weights_proj hidden -> index_n_heads, and its own compressor of index_head_dim)."""
        lm, hidden, heads = self.lm, self.hidden, self.heads
        head_dim, q_lora = lm.integer("head_dim"), lm.integer("q_lora_rank")
        groups, o_lora = lm.integer("o_groups"), lm.integer("o_lora_rank")
        linear = (hidden * (q_lora + head_dim) + q_lora * heads * head_dim
                  + heads * head_dim // groups * groups * o_lora + groups * o_lora * hidden)
        loose = q_lora + head_dim + heads
        if ratio > 1:
            loose += _compressor(hidden, head_dim, ratio)
        if ratio == 4:
            index_dim, index_heads = lm.integer("index_head_dim"), lm.integer("index_n_heads")
            linear += q_lora * index_heads * index_dim
            loose += hidden * index_heads + _compressor(hidden, index_dim, ratio)
        self.loose += loose
        return linear + loose

    def _sparse_indexer(self, q_input: int) -> int:
        """DeepSeek-V3.2's lightning indexer beside MLA: query and key projections, a LayerNorm on the key
        and per-head weights."""
        index_heads = self.lm.optional_int("index_n_heads")
        if not index_heads:
            return 0
        index_dim = self.lm.integer("index_head_dim")
        self.loose += 2 * index_dim  # the key's LayerNorm
        return q_input * index_heads * index_dim + self.hidden * index_dim + 2 * index_dim + self.hidden * index_heads

    def kda_mixer(self, state: KdaState) -> int:
        """Kimi-K3's KDA mixer with its full-rank gate (vLLM 0.33.0 models/kimi_k3/nvidia/kda.py
        KimiK3DeltaAttention): in_proj_qkvgfab (q, k, v, g of heads x head_dim each, f_a of head_dim, beta of one
        per head), f_b_proj (head_dim -> heads x head_dim), o_proj; beside them dt_bias, a bias-free conv1d over q, k
        and v, A_log per head and the gated output norm of head_dim."""
        hidden, width, dim, heads = self.hidden, state.heads * state.head_size, state.head_size, state.heads
        loose = width + 3 * width * state.conv_kernel + heads + dim
        self.loose += loose
        self.float32 += self._kda_float32(state)
        return hidden * (4 * width + dim + heads) + dim * width + width * hidden + loose

    @staticmethod
    def _kda_float32(state: KdaState) -> int:
        """dt_bias (heads x head_dim), the conv1d over q, k and v (3 x heads x head_dim x kernel) and A_log (one per
        head) are allocated in float32 whatever the model dtype: vLLM 0.33.0 layers/mamba/gdn/kimi_gdn_linear_attn.py
        KimiGatedDeltaNetAttention.__init__ and models/kimi_k3/nvidia/kda.py (torch.empty(..., dtype=torch.float32),
        ColumnParallelLinear params_dtype=torch.float32); SGLang 0.5.23 models/kimi_linear.py and kimi_k3.py the
        same (its qkv_conv1d MergedColumnParallelLinear params_dtype=torch.float32). The loader copies the
        checkpoint's tensors into them, so they are held at 4 bytes. o_norm stays at the model dtype."""
        width = state.heads * state.head_size
        return width + 3 * width * state.conv_kernel + state.heads

    def kda_low_rank_mixer(self, state: KdaLowRankGateState) -> int:
        """Kimi-Linear's KDA mixer (vLLM 0.33.0 model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py
        KimiGatedDeltaNetAttention, use_full_rank_gate false; KimiLinearModel.packed_modules_mapping names the
        checkpoint's parts): in_proj_qkvgfab of q, k, v (heads x head_dim each), beta (one per head, b_proj) and f_a
        (head_dim), f_b_proj (head_dim -> heads x head_dim), the output gate's g_a_proj (hidden -> head_dim) and
        g_b_proj (head_dim -> heads x head_dim), o_proj; beside them, as in Kimi-K3's, dt_bias of heads x head_dim,
        the bias-free conv1d over q, k and v, A_log per head and o_norm of head_dim."""
        hidden, width, dim, heads = self.hidden, state.heads * state.head_size, state.head_size, state.heads
        loose = width + 3 * width * state.conv_kernel + heads + dim
        self.loose += loose
        self.float32 += self._kda_float32(state)
        return hidden * (3 * width + heads + dim) + 2 * dim * width + hidden * dim + width * hidden + loose

    def mamba2_mixer(self, state: Mamba2State) -> int:
        """vLLM's MambaMixer2 (mamba_mixer2.py, used by Nemotron-H, Granite-4.0-H, Falcon-H1, Bamba): in_proj to the
        gate and x (inner each), B and C (groups x state each) and dt (one per head); a depthwise conv over x, B
        and C; A, D and dt bias per head; a gated RMSNorm over inner unless the config turns it off
        (mamba_rms_norm); out_proj back to hidden."""
        lm, hidden = self.lm, self.hidden
        if lm.has("mamba_step"):
            return self._plamo2_mixer(state)
        conv_dim = state.inner + 2 * state.groups * state.state_size
        projected = state.inner + conv_dim + state.heads
        conv_bias = conv_dim if _first_flag(lm, ("use_conv_bias", "mamba_conv_bias"), True) else 0
        proj_bias = projected + hidden if _first_flag(lm, ("use_bias", "mamba_proj_bias"), False) else 0
        norm = state.inner if lm.flag("mamba_rms_norm", True) else 0
        self.loose += conv_dim * state.conv_kernel + conv_bias + 3 * state.heads + norm + proj_bias
        return (hidden * projected + conv_dim * state.conv_kernel + conv_bias + 3 * state.heads + norm
                + state.inner * hidden + proj_bias)

    def shared_block(self, owner: bool) -> int:
        """What a Zamba2 hybrid position adds to its Mamba-2 mixer (vLLM 0.33.0 model_executor/models/zamba2.py):
        its own hidden x hidden linear (Zamba2HybridLayer.linear) and the LoRA adapter of the MLP's gate_up_proj
        (hidden -> adapter_rank -> 2 x intermediate), with q, k and v adapters (attention width -> adapter_rank ->
        attention width each) where use_shared_attention_adapter; where owner, the shared block itself, counted
        once for all its positions (Zamba2AttentionDecoderLayer): input_layernorm over the 2 x hidden
        concatenation, qkv_proj (attention width -> 3 x attention width), o_proj (-> hidden), pre_ff_layernorm,
        gate_up_proj and down_proj, with biases where add_bias_linear."""
        lm, hidden, inner = self.lm, self.hidden, self.intermediate
        width, rank = 2 * hidden, lm.integer("adapter_rank", 128)
        adapters = hidden * rank + rank * 2 * inner
        if lm.flag("use_shared_attention_adapter", False):
            adapters += 3 * (width * rank + rank * width)
        if not owner:
            return hidden * hidden + adapters
        bias = 2 * inner + hidden if lm.flag("add_bias_linear", False) else 0
        self.loose += 2 * hidden + hidden + bias
        block = (2 * hidden + width * 3 * width + width * hidden + hidden
                 + hidden * 2 * inner + inner * hidden + bias)
        return hidden * hidden + adapters + block

    def _plamo2_mixer(self, state: Mamba2State) -> int:
        """PLaMo 2's Mamba mixer (vLLM 0.26.0 plamo2.py Plamo2MambaMixer), no bias anywhere: in_proj hidden -> 2 x
        inner, a depthwise conv1d of inner x conv taps, bcdt_proj inner -> time-step rank + 2 x state (the rank
        max(64, hidden // 16)), dt_proj rank -> heads, A, D and dt_bias per head, out_proj inner -> hidden, and the
        RMSNorms dt_norm (rank), B_norm and C_norm (state each)."""
        hidden, inner, heads, size = self.hidden, state.inner, state.heads, state.state_size
        rank = max(64, hidden // 16)
        loose = inner * state.conv_kernel + 3 * heads + rank + 2 * size
        self.loose += loose
        return hidden * 2 * inner + inner * (rank + 2 * size) + rank * heads + inner * hidden + loose

    def short_conv_mixer(self, state: ShortConvState) -> int:
        """LFM2's gated short convolution (vLLM 0.33.0 model_executor/layers/mamba/short_conv.py ShortConv): in_proj
        conv_dim -> 3 x conv_dim (B, C and x), a depthwise conv of conv_L_cache taps, out_proj back; each with a
        bias where conv_bias (Lfm2Config's default false)."""
        width, kernel = state.channels, state.conv_kernel
        bias = 5 * width if self.lm.flag("conv_bias", False) else 0
        self.loose += width * kernel + bias
        return self.hidden * 3 * width + width * kernel + width * self.hidden + bias

    def state_mixer(self) -> int:
        """The recurrent mixer the config's fields describe: Gated DeltaNet, else Mamba-1."""
        if _gated_delta_net(self.lm):
            return self._gated_delta_net()
        return self._mamba1()

    def _gated_delta_net(self) -> int:
        """Qwen3-Next / Qwen3.5 linear attention: q, k (key width) and v, z (value width) projections, the b and a
        gates (one per value head), a bias-free depthwise conv over q, k, v, dt bias and A per value head, a
        gated RMSNorm of the value head width and the output projection."""
        lm, hidden = self.lm, self.hidden
        value_heads = lm.integer("linear_num_value_heads")
        key = lm.integer("linear_num_key_heads") * lm.integer("linear_key_head_dim")
        value_dim = lm.integer("linear_value_head_dim")
        value = value_heads * value_dim
        conv = lm.integer("linear_conv_kernel_dim", 4)
        self.loose += (2 * key + value) * conv + 2 * value_heads + value_dim
        return (hidden * (2 * key + 2 * value) + hidden * 2 * value_heads + (2 * key + value) * conv
                + 2 * value_heads + value_dim + value * hidden)

    def _mamba1(self) -> int:
        """A Mamba (v1) mixer; Jamba names the same sizes with a `mamba_` prefix."""
        lm, hidden = self.lm, self.hidden
        state = lm.integer(("state_size", "mamba_d_state", "ssm_state_size"), 16)
        conv = lm.integer(("conv_kernel", "mamba_d_conv"), 4)
        # Jamba's intermediate_size is its MLP's; a plain Mamba config gives the mixer width there.
        expand = lm.optional_int("mamba_expand")
        inner = lm.optional_int("mamba_d_inner") or (expand * hidden if expand else self.intermediate)
        dt_rank = _time_step_rank(lm, hidden)
        conv_bias = inner if _first_flag(lm, ("use_conv_bias", "mamba_conv_bias"), True) else 0
        proj_bias = 2 * inner + hidden if _first_flag(lm, ("use_bias", "mamba_proj_bias"), False) else 0
        inner_norms = dt_rank + 2 * state if _interleaved_by_period(lm) else 0
        self.loose += inner * conv + conv_bias + inner + inner * state + inner + proj_bias + inner_norms
        return (hidden * 2 * inner + inner * conv + conv_bias
                + inner * (dt_rank + 2 * state) + dt_rank * inner + inner
                + inner * state + inner + inner * hidden + proj_bias + inner_norms)


def _compressor(hidden: int, head_dim: int, ratio: int) -> int:
    """A DeepSeek-V4 compressor: ape, fused_wkv_wgate and a norm; windows overlap (coff 2) at ratio 4."""
    coff = 1 + (ratio == 4)
    return ratio * coff * head_dim + hidden * 2 * coff * head_dim + head_dim


def hyper_connections(lm: ConfigFields, hidden: int) -> tuple[int, int]:
    """DeepSeek-V4's manifold-constrained hyper-connections (vLLM 0.33.0 models/deepseek_v4/nvidia/model.py): per
    decoder layer hc_attn_fn and hc_ffn_fn ((2 + hc_mult) x hc_mult rows of hc_mult x hidden), their bases and
    three scales each; once, the head's hc_head_fn (hc_mult x hc_mult x hidden), base and scale. (0, 0) without
    hc_mult."""
    mult = lm.optional_int("hc_mult") or 0
    if not mult:
        return 0, 0
    mix = (2 + mult) * mult
    return 2 * (mix * mult * hidden + mix + 3), mult * mult * hidden + mult + 1


def _gated_delta_net(lm: ConfigFields) -> bool:
    return lm.has("linear_num_value_heads")


def _time_step_rank(lm: ConfigFields, hidden: int) -> int:
    key = lm.first_key(("time_step_rank", "mamba_dt_rank"))
    if key is None or lm.data[key] == "auto":
        return -(-hidden // 16)
    return lm.integer(key)


def _first_flag(lm: ConfigFields, keys: tuple[str, ...], default: bool) -> bool:
    key = lm.first_key(keys)
    return default if key is None else lm.flag(key, default)


def _mlp(lm: ConfigFields, family: Family, hidden: int, intermediate: int, moe: MoE | None,
         index: int) -> tuple[int, int, int]:
    """Parameters of one layer's MLP, how many of them are routed experts, and how many sit outside every
    linear projection but the routed experts' (biases, the router: vLLM 0.33.0 builds routers unquantized, e.g.
    nemotron_h.py's GateLinear without a quant_config)."""
    bias = lm.flag("bias", False) if lm.has("bias") else family.mlp_bias  # Falcon: one switch for all
    if moe is None or not _has_experts(lm, moe, index):
        # Llama 4's intermediate_size_mlp; MiniMax-M3's dense_intermediate_size (vLLM 0.33.0
        # models/minimax_m3/nvidia/model.py: its dense layers' MiniMaxM3MLP); a dense Granite-4.0-H's only MLP is
        # its shared_mlp of shared_intermediate_size (granitemoehybrid.py, no block_sparse_moe at 0 experts)
        size = lm.optional_int(("intermediate_size_mlp", "dense_intermediate_size")) if moe else None
        if moe is None and lm.has("shared_intermediate_size"):
            size = lm.integer("shared_intermediate_size", minimum=0)
            return _dense_mlp(family, hidden, size, bias) if size else 0, 0, _mlp_bias(family, hidden, size, bias)
        size = size or intermediate
        return _dense_mlp(family, hidden, size, bias), 0, _mlp_bias(family, hidden, size, bias)
    # A latent MoE (vLLM 0.33.0 nemotron_h.py NemotronHMoE): the router and shared experts read the hidden state,
    # the routed experts its moe_latent_size-wide projection (fc1_latent_proj hidden -> latent, fc2_latent_proj
    # back, each with mlp_bias)
    width = moe.latent_size or hidden
    expert = _dense_mlp(family, width, moe.expert_intermediate_size, bias)
    experts = moe.num_experts * expert
    router = hidden * moe.num_experts + (moe.num_experts if bias else 0)
    loose = router  # outside the quantized linears: the router, the biases, the shared expert's gate
    if moe.latent_size:
        router += 2 * hidden * moe.latent_size + ((moe.latent_size + hidden) if bias else 0)
        loose += (moe.latent_size + hidden) if bias else 0
        if lm.flag("latent_moe_use_norm", False):  # Kimi-K3's routed_expert_norm (vLLM 0.33.0 KimiMoE)
            router += moe.latent_size
            loose += moe.latent_size
    shared = (_dense_mlp(family, hidden, moe.shared_intermediate_size, bias)
              if moe.shared_intermediate_size else 0)
    loose += _mlp_bias(family, hidden, moe.shared_intermediate_size, bias)
    if lm.flag("enable_moe_block", False):  # Gemma 4 26B: a dense MLP beside the experts in every layer
        shared += _dense_mlp(family, hidden, intermediate, bias)
        loose += _mlp_bias(family, hidden, intermediate, bias)
        # vLLM 0.33.0 gemma4.py: post_feedforward_layernorm_1 / _2 and pre_feedforward_layernorm_2 beside the
        # layer's four norms, and Gemma4Router's scale (hidden) and per_expert_scale (one per expert)
        router += 3 * hidden + hidden + moe.num_experts
        loose += 3 * hidden + hidden + moe.num_experts
    if moe.shared_intermediate_size and lm.has("shared_expert_intermediate_size"):
        shared += hidden  # the shared expert's sigmoid gate (Qwen3-Coder writes a size of 0: no shared expert)
        loose += hidden
    if index < (lm.optional_int("num_hash_layers", minimum=0) or 0):
        # DeepSeek-V4's hash-routed layers: a token -> experts table (vocab x top-k) instead of the score bias
        # (vLLM 0.33.0 models/deepseek_v4/nvidia/model.py DeepseekV4MoE: gate.tid2eid)
        table = lm.integer("vocab_size") * moe.experts_per_token
        router += table
        loose += table
    else:
        # e_score_correction_bias; vLLM 0.33.0 minimax_m2.py MiniMaxM2MoE builds it where use_routing_bias
        score_bias = _score_bias(lm, family, moe, index)
        router += score_bias
        loose += score_bias
    return experts + router + shared, experts, loose


def _score_bias(lm: ConfigFields, family: Family, moe: MoE | None, index: int) -> int:
    """The router's e_score_correction_bias of an MoE layer (one per routed expert; 0 for a dense layer, a
    DeepSeek-V4 hash-routed layer, or a router without one): where topk_method is noaux_tc (vLLM 0.33.0
    deepseek_v2.py DeepseekV2MoE), use_routing_bias (minimax_m2.py MiniMaxM2MoE) or the family always builds it."""
    if moe is None or not _has_experts(lm, moe, index) or index < (lm.optional_int("num_hash_layers", minimum=0) or 0):
        return 0
    if lm.text("topk_method") == "noaux_tc" or family.expert_score_bias or lm.flag("use_routing_bias", False):
        return moe.num_experts
    return 0


def _has_experts(lm: ConfigFields, moe: MoE, index: int) -> bool:
    """Layers the config leaves dense (first_k_dense_replace, mlp_only_layers, Jamba's expert_layer_period and
    offset: kvplan.models.hf_config) have one MLP instead of experts."""
    return index not in moe.dense_layers


def _mlp_bias(family: Family, hidden: int, size: int, bias: bool) -> int:
    """The biases of a dense MLP of `size` (0 without biases, or for a size of 0)."""
    if not bias or not size:
        return 0
    return (2 * size + hidden) if family.gated_mlp else (size + hidden)


def _dense_mlp(family: Family, hidden: int, size: int, bias: bool) -> int:
    if family.gated_mlp:
        return 3 * hidden * size + ((2 * size + hidden) if bias else 0)
    return 2 * hidden * size + ((size + hidden) if bias else 0)


# the sub-configs of an omni model's thinker whose towers are not counted (Qwen2.5-Omni, Qwen3-Omni: vLLM 0.33.0
# qwen2_5_omni_thinker.py and qwen3_omni_moe_thinker.py build an audio and a vision tower from them)
THINKER_TOWER_KEYS = ("audio_config", "vision_config")
# a wrapper's tower sub-configs under other names, whose towers are not counted: Granite Speech's speech encoder
# and Q-Former projector (vLLM 0.33.0 granite_speech.py: GraniteSpeechCTCEncoder(config.encoder_config),
# GraniteSpeechEncoderProjector(config.projector_config)); Phi-4-multimodal's image and audio embedders
# (phi4mm.py Phi4MMForCausalLM: Phi4MMImageEncoder and AudioEmbedding from config.embd_layer)
OTHER_TOWER_KEYS = ("encoder_config", "projector_config", "embd_layer")


def _towers(top: ConfigFields, text_hidden: int) -> tuple[int, str]:
    """The towers of a multimodal wrapper with their projectors into the language model, and what makes the count
    approximate ("" where exact). An audio tower beside no vision tower (Qwen2-Audio) is counted on its own."""
    vision = top.nested("vision_config")
    if vision is None:
        thinker = top.nested("thinker_config")
        uncounted = [key for key in THINKER_TOWER_KEYS if thinker is not None and thinker.has(key)]
        if uncounted:
            return 0, (f"the thinker's towers ({', '.join(f'thinker_config.{key}' for key in uncounted)}) are "
                       "not counted")
        others = [key for key in OTHER_TOWER_KEYS if top.has(key)]
        if others and top.nested("audio_config") is None:
            return 0, f"the towers of {', '.join(others)} are not counted"
        return tower_params.audio_alone(top, text_hidden), ""
    count, exact = _vision(top, vision, text_hidden)
    return count, "" if exact else "the vision tower's parameters are estimated"


def _audio_alone_note(top: ConfigFields, towers: int) -> str:
    """How the engines' plans hold an exactly counted audio tower beside no vision tower ("" otherwise)."""
    if not towers or top.nested("vision_config") is not None:
        return ""
    return (f"audio tower counted ({towers:,} parameters, no vision tower); vLLM holds it "
            f"{tower_params.vllm_layout(top)}; a vLLM plan holds it so and adds its encoder profiling run for "
            "audio items (engines/vllm/multimodal.py)")


def _vision(top: ConfigFields, vision: ConfigFields, text_hidden: int) -> tuple[int, bool]:
    """The vision tower of a multimodal wrapper, with its projector into the language model (and an audio tower
    beside it: tower_params.count)."""
    exact = tower_params.count(top, vision, text_hidden)
    if exact is not None:
        return exact, True
    # Kimi-K2.5 / K3's MoonViT names its sizes vt_* (vLLM 0.33.0 transformers_utils/configs/kimi_k3.py)
    hidden = vision.integer(("hidden_size", "embed_dim", "vt_hidden_size"))
    depth = vision.integer(("num_hidden_layers", "depth", "vt_num_hidden_layers"))
    inner = vision.integer(("intermediate_size", "vt_intermediate_size"), 4 * hidden)
    patch = vision.integer("patch_size", 14)
    channels = vision.integer(("num_channels", "in_chans"), 3)
    per_layer = 4 * (hidden * hidden + hidden) + 2 * hidden * inner + inner + hidden + 4 * hidden
    patch_embed = channels * patch * patch * hidden + hidden
    if vision.text("model_type") == "siglip_vision_model":
        # SigLIP: learned positions for every patch, a post-layernorm, and Gemma 3's projector
        # (a hidden x text_hidden matrix and an RMSNorm of the vision width).
        positions = (vision.integer("image_size") // patch) ** 2 * hidden
        projector = hidden * text_hidden + hidden
        return patch_embed + positions + depth * per_layer + 2 * hidden + projector, True
    return patch_embed + depth * per_layer + 2 * hidden + hidden * text_hidden, False
