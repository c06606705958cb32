"""Never a silent guess: the config keys that change what a layer caches or what the weights hold. Each is either
read by the parser (kvplan.models.hf_config and params, which then model it), or a plan that meets it is refused
with one line naming it, or, with --allow-unmodelled, planned with a note naming it. A key counts as read when the
parser looked at it (the ConfigFields access record that `models import` trims by), and as present when its value
is not empty, false or zero (Gemma 4's `hidden_size_per_layer_input: 0` changes nothing).

The list is built from the published configs of the 2026 families (tests/fixtures/configs/frontier); each entry
says what the key changes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

GUARDED: dict[str, str] = {
    # what each layer caches
    "compress_ratios": "DeepSeek-V4's per-layer KV compression",
    "index_topk": "a sparse-attention indexer's cache",
    "index_head_dim": "a sparse-attention indexer's cache",
    "index_n_heads": "a sparse-attention indexer's cache",
    "indexer_types": "GLM-5's indexer shared between layers",
    "index_topk_freq": "GLM-5's indexer shared between layers",
    "global_head_dim": "the head dim of full-attention layers",
    "num_global_key_value_heads": "the KV heads of full-attention layers",
    "attention_k_eq_v": "K reused as V in full-attention layers",
    "hybrid_layer_pattern": "which layers are sliding-window attention",
    "swa_num_key_value_heads": "the KV heads of sliding-window layers",
    "swa_head_dim": "the head dim of sliding-window layers",
    "swa_v_head_dim": "the V head dim of sliding-window layers",
    "v_head_dim": "a V head dim apart from the K head dim",
    "sparse_attention_config": "MiniMax-M3's sparse attention and its index cache",
    "linear_attn_config": "Kimi linear-attention (KDA) layers and their states",
    "attn_type_list": "which layers are linear attention",
    "block_configs": "per-layer heterogeneous blocks (NAS)",
    # what the weights hold
    "moe_latent_size": "the latent width routed experts run in",
    "o_lora_rank": "a low-rank attention output projection",
    "o_groups": "a grouped attention output projection",
    "hc_mult": "hyper-connections (several residual streams)",
    "expert_dtype": "the routed experts' stored format",
    "num_hash_layers": "hash-routed expert layers",
    "enable_moe_block": "a dense MLP beside the experts in each layer",
    "use_double_wide_mlp": "double-width MLPs",
    "hidden_size_per_layer_input": "per-layer input embeddings",
    "routed_expert_hidden_size": "the routed experts' own hidden width",
    "mla_use_output_gate": "an output gate on MLA",
    "mlp_layer_types": "which layers have experts",
}


def present(value: Any) -> bool:
    return value not in (None, False, 0, "", [], {})


def unread_keys(sections: Iterable[tuple[tuple[str, ...], dict[str, Any]]],
                accessed: set[tuple[str, ...]]) -> list[str]:
    """The guarded keys present and not read, as dotted paths, in each (path, section) of the config given."""
    found = []
    for path, data in sections:
        for key in GUARDED:
            if present(data.get(key)) and (*path, key) not in accessed:
                found.append(".".join((*path, key)))
    return list(dict.fromkeys(found))


def refusal(keys: list[str]) -> str:
    """One line naming the first key (and how many more)."""
    first = keys[0]
    more = f" (and {len(keys) - 1} more: {', '.join(keys[1:4])}{', ...' if len(keys) > 4 else ''})" \
        if len(keys) > 1 else ""
    return (f"key '{first}' ({GUARDED[first.rsplit('.', 1)[-1]]}) is not modelled by kvplan{more}; "
            "--allow-unmodelled plans without it")


def note(keys: list[str]) -> str:
    named = ", ".join(f"'{key}' ({GUARDED[key.rsplit('.', 1)[-1]]})" for key in keys)
    return f"not modelled, planned without: {named} (--allow-unmodelled)"
