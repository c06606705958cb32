"""What a config's model_type implies that its keys do not say (the transformers config-class defaults
and the module layout of each family). Keyed by the config's own model_type field, never by a model name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(eq=False)
class Family:
    qkv_bias: bool = False
    o_bias: bool = False
    gated_mlp: bool = True
    mlp_bias: bool = False
    layer_norm: bool = False  # LayerNorm (weight + bias) rather than RMSNorm (weight only)
    norms_per_layer: int = 2
    qk_norm: bool = False  # per-head q_norm / k_norm weights of head_dim each
    qk_norm_per_head: bool = False  # q_norm / k_norm weights of their own per head (heads x head_dim, kv x head_dim)
    attention_sinks: bool = False  # one learned sink logit per attention head
    tied_default: bool = False
    lm_head_bias: bool = False
    position_rows_extra: int | None = None  # learned absolute positions: max length + this many rows
    embedding_norm: bool = False
    sliding_pattern: int | None = None  # every N-th layer is global when the config gives no pattern
    vocab_default: int | None = None
    max_position_default: int | None = None
    rope_scaling_extends_context: bool = True
    expert_score_bias: bool = False  # the router keeps an e_score_correction_bias whatever topk_method says
    parallel_mixers: bool = False  # every decoder layer runs attention and a Mamba mixer side by side
    rotary: bool = True  # attention positions by RoPE (not learned rows, ALiBi or none)
    local_rope_base: bool = False  # sliding layers rotate with a base of their own (a second RoPE table)
    rope_float32: bool = False  # the model file builds its RoPE table in float32 (vLLM gpt_oss.py)
    # The parameter count of this family was checked to the parameter against a published count.
    exact: bool = False


LLAMA = Family(exact=True)
FALCON = Family(gated_mlp=False, layer_norm=True, norms_per_layer=1, tied_default=True, exact=True)

FAMILIES: dict[str, Family] = {
    "llama": LLAMA,
    "mistral": LLAMA,
    "mixtral": LLAMA,
    "qwen2": Family(qkv_bias=True, exact=True),
    "qwen2_moe": Family(qkv_bias=True),
    # Qwen2-VL-7B-Instruct: 7,615,616,512 (Qwen2-7B's) + 675,759,104 tower = the Hub's 8,291,375,616
    "qwen2_vl": Family(qkv_bias=True, exact=True),
    "qwen2_5_vl": Family(qkv_bias=True, exact=True),  # Qwen2.5-VL-7B's text model: Qwen2.5-7B's 7,615,616,512
    "qwen3": Family(qk_norm=True, exact=True),
    "qwen3_moe": Family(qk_norm=True, exact=True),
    # the loaded model plus its MTP layer (vLLM 0.33.0 qwen3_next_mtp.py) is the Hub's 81,324,862,720 for
    # Qwen3-Next-80B-A3B-Instruct (tests/test_hybrid_params.py)
    "qwen3_next": Family(qk_norm=True, exact=True),
    # Qwen3.5 / Qwen3.6 (vLLM 0.33.0 qwen3_5.py; its loader maps "mtp." to None): the main model with the
    # Qwen3-VL tower, and with the checkpoint's MTP layer (qwen3_5_mtp.py: fc 2 x hidden -> hidden, pre_fc_norm_hidden,
    # pre_fc_norm_embedding, one full-attention decoder layer, norm) the Hub's totals, e.g. Qwen3.5-27B's
    # 27,781,427,952 (tests/test_frontier_hub_totals.py)
    "qwen3_5_text": Family(qk_norm=True, exact=True),
    "qwen3_vl_text": Family(qk_norm=True, exact=True),  # Qwen3-VL-8B's text model: Qwen3-8B's 8,190,735,360
    # Qwen3-VL-235B-A22B (vLLM 0.33.0 qwen3_vl_moe.py: Qwen3MoeLLMModel, q_norm / k_norm of head_dim): with its
    # Qwen3-VL tower the Hub's 235,670,022,896 (tests/test_frontier_hub_totals.py)
    "qwen3_vl_moe_text": Family(qk_norm=True, exact=True),
    "qwen3_5_moe_text": Family(qk_norm=True, exact=True),
    # vLLM nemotron_h.py: ReLU^2 MLPs and experts (up and down projections only), one norm per layer, a router
    # score bias in every NemotronHMoE. The SSM state's dtype where the config names none is each engine's rule.
    # Nemotron-3 Nano's and Super's Hub totals follow by hand (tests/test_frontier_hub_totals.py: the MTP layers
    # vLLM loads only as the draft added, the score biases the index leaves out taken off); not marked exact while
    # the Hub's 96,099,893,248 for Nemotron-H-56B-Base-8K (llmfit hf_models.json @5bdc9df9) stays unexplained
    "nemotron_h": Family(gated_mlp=False, norms_per_layer=1, expert_score_bias=True, rotary=False),
    "gemma": Family(tied_default=True, vocab_default=256000, max_position_default=8192, exact=True),
    "gemma2": Family(tied_default=True, norms_per_layer=4, sliding_pattern=2, exact=True),
    "gemma3_text": Family(tied_default=True, norms_per_layer=4, qk_norm=True, sliding_pattern=6,
                          vocab_default=262208, max_position_default=131072,
                          rope_scaling_extends_context=False, local_rope_base=True, exact=True),
    # Gemma 4 (vLLM 0.33.0 gemma4.py Gemma4DecoderLayer): input, post-attention, pre- and post-feedforward RMSNorms,
    # q_norm and k_norm of the layer's head_dim (v_norm has no weight); the MoE block's three more norms and
    # Gemma4Router's scale and per_expert_scale are params._mlp's. The 26B-A4B and 31B counts less the vision
    # tower's std_bias / std_scale are the Hub's totals of their text-and-vision re-uploads
    # (tests/test_frontier_hub_totals.py); per-layer input embeddings (hidden_size_per_layer_input, the E2B /
    # E4B models) are not counted (params._uncounted)
    "gemma4_text": Family(norms_per_layer=4, qk_norm=True, exact=True),
    "phi3": Family(exact=True),
    "phi": Family(qkv_bias=True, o_bias=True, gated_mlp=False, mlp_bias=True, layer_norm=True,
                  norms_per_layer=1, lm_head_bias=True, exact=True),
    "deepseek_v2": Family(exact=True),
    # DeepSeek-V3 / R1 / V3.1 (vLLM 0.33.0 deepseek_v2.py): 671,026,419,200, which with the FP8 block scales and the
    # checkpoint's MTP layer (its own embed_tokens and shared_head.head copies) is the Hub's 684,531,386,000
    # (tests/test_frontier_hub_totals.py). Not marked exact: Kimi-K2.x text models (their NVFP4 configs name
    # deepseek_v3) leave 3,416 = 61 x 56 of Kimi-K2-Instruct's Hub 1,026,470,731,056 unexplained beside the scales;
    # its index's total_size (1,029,173,256,720 B) puts them at BF16, 6,832 B (tests/test_moe_score_bias_and_mtp_totals.py),
    # which no vLLM 0.33.0 deepseek_v2.py module of the config's sizes accounts for
    "deepseek_v3": Family(),
    # DeepSeek-V4-Flash: 284,334,567,511, the parameters llama.cpp reports for unsloth/DeepSeek-V4-Flash-GGUF
    # (its /v1/models n_params, in erstmalreden/deepseek-v4-flash-ryzen-ai-max-395-experiment README.md), and the
    # checkpoint's 290,942,289,362 unpacked values less its MTP layer plus the hash layers' int64 tid2eid. The Hub
    # counts stored elements (FP4 experts two to a byte, the ue8m0 scales, the MTP layer): Flash's 158,069,433,298
    # and Pro's 861,608,274,846 follow from these counts by hand (tests/test_published_totals.py)
    "deepseek_v4": Family(exact=True),
    # MiMo-V2-Flash (vLLM 0.33.0 mimo_v2.py): the main model vLLM loads (load_weights skips "mtp"); the Hub's
    # 309,785,318,400 adds the checkpoint's three MTP layers and the F32 block scales, by hand in
    # tests/test_published_totals.py
    "mimo_v2_flash": Family(exact=True),
    # GLM-5.x (vLLM glm_moe_dsa): GLM-5.2's 743,377,019,904 is the text model of its safetensors headers at
    # zai-org/GLM-5.2@b4734de4 (753,329,940,480 less the MTP layer's 9,952,920,576; joshuahickscorp/hawking
    # workspace/campaign/evidence/models/glm52/GLM52_LOGICAL_WEIGHT_LEDGER.json, read shard header by header).
    # GLM-5 and GLM-5.1: 743,911,218,432 by hand, and with the checkpoint's MTP layer (9,952,920,576, which vLLM
    # 0.33.0 loads only as the deepseek_mtp draft) the Hub's 753,864,139,008 (tests/test_frontier_hub_totals.py)
    "glm_moe_dsa": Family(exact=True),
    # Kimi-K3's text model (vLLM kimi_linear): 2,779,484,476,000 by hand (tests/test_kimi_k3_kda.py); with its
    # tower, the Hub's moonshotai/Kimi-K3 total of 2,779,931,837,184 less the 69 x 32 A_log values the checkpoint
    # pads past num_heads 96 (vLLM 0.33.0 models/kimi_k3/nvidia/kda.py builds A_log of num_heads, loads a slice).
    # Kimi-Linear-48B-A3B-Instruct: the Hub's 49,122,681,728 by hand (tests/test_issue22_hybrid_totals.py). vLLM
    # 0.33.0 models/kimi_k3/nvidia/model.py KimiMoE builds gate.e_score_correction_bias whatever the config says
    # (Kimi-Linear's names no topk_method); KimiLinearConfig (transformers_utils/configs/kimi_linear.py, the class
    # vLLM's config registry maps kimi_linear to) defaults max_position_embeddings to 4,096, which Kimi-Linear's
    # config leaves out (its model_max_length only lets a user's longer max_model_len through)
    "kimi_linear": Family(expert_score_bias=True, max_position_default=4096, exact=True),
    # MiniMax-M2 / M2.1 / M2.5 / M2.7 (vLLM 0.33.0 minimax_m2.py MiniMaxM2Attention): q_norm and k_norm span every
    # head (MiniMaxText01RMSNormTP of head_dim x heads and head_dim x KV heads), the count qk_norm_per_head gives;
    # the router's score bias is read from use_routing_bias (params._mlp). The Hub's 228,703,644,928 for
    # MiniMaxAI/MiniMax-M2.5 and M2.7 is this count plus the FP8 128 x 128 block scales, by hand in
    # tests/test_frontier_hub_totals.py; vLLM builds no MTP module for MiniMaxM2ForCausalLM and the Hub
    # total holds none
    "minimax_m2": Family(qk_norm_per_head=True, exact=True),
    # vLLM 0.33.0 models/minimax_m3/nvidia/model.py: q_norm and k_norm of head_dim in every attention layer, and
    # MiniMaxM3MoE's e_score_correction_bias (use_routing_bias, which its config sets)
    "minimax_m3": Family(qk_norm=True, expert_score_bias=True),
    "gpt_oss": Family(qkv_bias=True, o_bias=True, mlp_bias=True, attention_sinks=True, rope_float32=True),
    "llama4_text": Family(),
    "falcon": FALCON,
    "RefinedWebModel": FALCON,
    "RefinedWeb": FALCON,
    "gpt2": Family(qkv_bias=True, o_bias=True, gated_mlp=False, mlp_bias=True, layer_norm=True,
                   tied_default=True, position_rows_extra=0, rotary=False, exact=True),
    "opt": Family(qkv_bias=True, o_bias=True, gated_mlp=False, mlp_bias=True, layer_norm=True,
                  tied_default=True, position_rows_extra=2, rotary=False),
    "bloom": Family(qkv_bias=True, o_bias=True, gated_mlp=False, mlp_bias=True, layer_norm=True,
                    tied_default=True, embedding_norm=True, rotary=False, exact=True),
    "mpt": Family(gated_mlp=False, layer_norm=True, tied_default=True, rotary=False, exact=True),
    "gpt_neox": Family(qkv_bias=True, o_bias=True, gated_mlp=False, mlp_bias=True, layer_norm=True),
    "mamba": Family(tied_default=True, rotary=False),
    "jamba": Family(rotary=False, exact=True),  # vLLM jamba.py: its attention layers carry no positions
    # vLLM falcon_h1.py: every decoder layer is a FalconH1ParallelHybrid (attention and MambaMixer2 beside each
    # other, then a gated SiLU MLP, an RMSNorm before each of the two); no bias in attention or MLP. The Hub's
    # 521,411,104 for Falcon-H1-0.5B-Base and 91,131,072 for Falcon-H1-Tiny-90M-Instruct, by hand in
    # tests/test_issue22_hybrid_totals.py (the µP multipliers scale activations and are no parameters)
    "falcon_h1": Family(parallel_mixers=True, exact=True),
    # Granite-4.0-H (vLLM 0.33.0 granitemoehybrid.py): the Hub's 3,191,396,096 for granite-4.0-h-micro and
    # 6,939,037,248 for granite-4.0-h-tiny, by hand in tests/test_hybrid_params.py
    "granitemoehybrid": Family(exact=True),
    # LFM2 (vLLM 0.33.0 models/lfm2.py): the lm_head always tied to the embeddings, q_layernorm and k_layernorm of
    # head_dim in every attention layer; the Hub's 1,170,340,608 for LFM2-1.2B (tests/test_hybrid_params.py)
    "lfm2": Family(tied_default=True, qk_norm=True, exact=True),
    # Zamba2 (vLLM 0.33.0 zamba2.py Zamba2ForCausalLM ties its lm_head to the embeddings; Zamba2Config's
    # tie_word_embeddings default true); its layers read by models/shared_blocks.py
    "zamba2": Family(tied_default=True),
    # PLaMo 2 (vLLM 0.26.0 plamo2.py Plamo2DecoderLayer): pre and post norms around both mixer and MLP, and
    # Plamo2AttentionMixer's q_norm / k_norm weights of (heads, hidden_size_per_head) and (KV heads, ...)
    "plamo2": Family(norms_per_layer=4, qk_norm_per_head=True),
}

DEFAULT_FAMILY = Family()


def family_of(model_type: str) -> Family:
    return FAMILIES.get(model_type, DEFAULT_FAMILY)
