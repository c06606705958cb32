"""The RoPE cos/sin tables vLLM builds with the model (vllm/model_executor/layers/rotary_embedding/: a buffer of
positions x rotary_dim values in the model dtype, one per distinct RoPE as get_rope caches them), read from the
config, and counted with the weights as "Model loading took" counts them."""

from __future__ import annotations

import pytest

from kvplan.api import estimate
from kvplan.errors import KvplanError
from kvplan.models.families import family_of
from kvplan.models.fields import ConfigFields
from kvplan.models.rope import RopeTable, rope_tables
from kvplan.models.sources import resolve
from kvplan.units import MiB


def tables(model: str) -> list[tuple[int, int, str]]:
    return [(t.positions, t.rotary_dim, t.scaling) for t in resolve(model).rope_tables]


def test_llama3_scaling_keeps_max_position_embeddings():
    # Llama3RotaryEmbedding changes the frequencies only: Scout's table has all 10,485,760 positions x 128
    # = 1,342,177,280 values, 2,684,354,560 B (2.5 GiB) in bf16; Llama-3.1-8B's 131,072 x 128 = 32 MiB.
    assert tables("meta-llama/Llama-4-Scout-17B-16E-Instruct") == [(10_485_760, 128, "llama3")]
    assert tables("meta-llama/Llama-3.1-8B-Instruct") == [(131_072, 128, "llama3")]


def test_gemma3_linear_global_table_and_unscaled_local_table():
    # Gemma-3-4B: global layers linear x 8 -> 131,072 x 8 = 1,048,576 positions; sliding layers rotate with
    # rope_local_base_freq, a second table of 131,072. Both 256 wide: (1,048,576 + 131,072) x 256 x 2 B
    # = 603,979,776 B = 576 MiB.
    assert tables("google/gemma-3-4b-it") == [(1_048_576, 256, "linear"), (131_072, 256, "default")]
    assert resolve("google/gemma-3-4b-it").rope_tables[0].values() == 268_435_456
    # Gemma 2 has one RoPE for both kinds of layer: 8,192 x 256
    assert tables("google/gemma-2-9b-it") == [(8192, 256, "default")]


def test_yarn_builds_from_the_original_length_and_gpt_oss_keeps_float32():
    # YaRN: original 4,096 x factor 32 = 131,072 positions, 64 wide; gpt_oss.py passes dtype float32
    (table,) = resolve("openai/gpt-oss-20b").rope_tables
    assert (table.positions, table.rotary_dim, table.float32) == (131_072, 64, True)
    # DeepSeek's YaRN on the MLA rope part: 4,096 x 40 = 163,840 positions x qk_rope_head_dim 64
    assert tables("deepseek-ai/DeepSeek-V2-Lite") == [(163_840, 64, "yarn")]


def test_partial_rotary_factor_and_mrope():
    # Qwen3.5: partial_rotary_factor 0.25 of head_dim 256 = 64 wide; mrope_section makes MRotaryEmbedding,
    # whose table is 4 x max_position_embeddings (mrope.py): 4 x 262,144 = 1,048,576 positions
    assert tables("Qwen/Qwen3.5-27B") == [(1_048_576, 64, "mrope")]
    # Qwen3-Next states the factor at the top level: 0.25 x 256
    assert tables("Qwen/Qwen3-Next-80B-A3B-Instruct") == [(262_144, 64, "default")]
    # phi-2: 0.4 x 80 = 32
    assert tables("microsoft/phi-2") == [(2048, 32, "default")]
    # Phi-3.5 LongRoPE stacks the short table (original 4,096) on the long one (131,072)
    assert tables("microsoft/Phi-3.5-mini-instruct") == [(135_168, 96, "longrope")]


def test_no_table_without_rotary_positions():
    # learned positions (GPT-2, OPT), ALiBi (BLOOM, MPT), none (Jamba's and Nemotron-H's attention, Mamba)
    for model in ("openai-community/gpt2", "facebook/opt-1.3b", "bigscience/bloom", "mosaicml/mpt-7b-instruct",
                  "ai21labs/AI21-Jamba-1.5-Mini", "nvidia/Nemotron-H-56B-Base-8K", "state-spaces/mamba-2.8b-hf"):
        assert tables(model) == [], model
    # Falcon with alibi true has no table; with RoPE, vLLM's falcon.py falls back to 8,192 positions
    fields = ConfigFields({"alibi": True}, "config.json")
    assert rope_tables(fields, family_of("falcon"), 64, False) == ()
    assert rope_tables(ConfigFields({}, "config.json"), family_of("falcon"), 64, False) == (RopeTable(8192, 64),)


def test_transformers_v5_rope_parameters_per_layer_type():
    # one RoPE per layer type, nested in rope_parameters
    fields = ConfigFields({"max_position_embeddings": 131072, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}, "config.json")
    assert rope_tables(fields, family_of("gemma3_text"), 128, True) == (
        RopeTable(1_048_576, 128, "linear"), RopeTable(131_072, 128, "default"))


def test_bad_partial_rotary_factor_is_refused():
    with pytest.raises(KvplanError, match="partial_rotary_factor"):
        rope_tables(ConfigFields({"partial_rotary_factor": 1.5}, "config.json"), family_of("llama"), 128, False)
    with pytest.raises(KvplanError, match="partial_rotary_factor"):
        rope_tables(ConfigFields({"partial_rotary_factor": -1}, "config.json"), family_of("llama"), 128, False)


def test_vllm_weights_include_the_tables_on_every_rank():
    # Llama-4-Scout at TP 4: the 2,684,354,560 B table is whole on each rank, the weights are split
    one = estimate("meta-llama/Llama-4-Scout-17B-16E-Instruct", gpu="h100", tensor_parallel_size=4,
                   max_model_len=8192)
    assert any("10,485,760 x 128 values = 2,560 MiB per rank" in note for note in one.notes)
    # Gemma-2-9B's 8,192 x 256 x 2 B = 4 MiB table is in the derived weights; a measured figure already holds it
    plain = estimate("google/gemma-2-9b-it", gpu="h100", max_model_len=8192)
    given = estimate("google/gemma-2-9b-it", gpu="h100", max_model_len=8192, weights_memory_bytes=17 * 1024 * MiB)
    assert any("8,192 x 256 values = 4 MiB per rank" in note for note in plain.notes)
    assert given.memory.weights_bytes == 17 * 1024 * MiB
    assert not any("RoPE" in note for note in given.notes)
    # and the table is the difference between the derived weights and the parameters alone (less the < 42 B the
    # floor of each of the 42 layers' share drops)
    extra = plain.memory.weights_bytes - resolve("google/gemma-2-9b-it").params.total * 2
    assert 0 <= 8192 * 256 * 2 - extra < 42


def test_identical_layer_types_share_one_table_and_absent_types_make_none():
    # get_rope keeps one table per distinct RoPE: two equal per-type entries are one table; a sliding entry in a
    # model without sliding layers builds nothing
    same = {"rope_type": "default", "rope_theta": 1e4}
    fields = ConfigFields({"max_position_embeddings": 4096, "rope_parameters": {
        "full_attention": same, "sliding_attention": dict(same)}}, "config.json")
    assert rope_tables(fields, family_of("gemma3_text"), 128, True) == (RopeTable(4096, 128),)
    fields = ConfigFields({"max_position_embeddings": 4096, "rope_parameters": {
        "full_attention": same, "sliding_attention": {"rope_type": "linear", "factor": 2.0}}}, "config.json")
    assert rope_tables(fields, family_of("llama"), 128, False) == (RopeTable(4096, 128),)
    # a flat rope_parameters is one RoPE, whatever other objects it holds
    fields = ConfigFields({"max_position_embeddings": 4096, "rope_parameters": {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "extra": {}}}, "config.json")
    assert rope_tables(fields, family_of("llama"), 128, False) == (RopeTable(4096, 128, "yarn"),)


def test_linear_scaling_with_an_mrope_section_stays_linear():
    # get_rope builds LinearScalingRotaryEmbedding for rope_type linear, mrope_section or not: 4,096 x 2
    fields = ConfigFields({"max_position_embeddings": 4096, "rope_scaling": {
        "rope_type": "linear", "factor": 2.0, "mrope_section": [16, 24, 24]}}, "config.json")
    assert rope_tables(fields, family_of("qwen2_5_vl"), 128, False) == (RopeTable(8192, 128, "linear"),)


def test_a_local_base_in_the_config_gives_sliding_layers_their_own_table():
    # Gemma 3n-style: rope_local_base_freq differs from rope_theta, so the sliding layers rotate apart; equal bases
    # share one table
    own = {"max_position_embeddings": 32768, "rope_theta": 1e6, "rope_local_base_freq": 1e4}
    assert len(rope_tables(ConfigFields(own, "config.json"), family_of("gemma3n_text"), 256, True)) == 2
    same = {**own, "rope_local_base_freq": 1e6}
    assert len(rope_tables(ConfigFields(same, "config.json"), family_of("gemma3n_text"), 256, True)) == 1


@pytest.mark.parametrize("config, key", [
    # 2^31 positions x factor 1,024: beyond any real model
    ({"max_position_embeddings": 2**31, "rope_scaling": {"rope_type": "linear", "factor": 1024}}, "factor"),
    ({"max_position_embeddings": 4096, "rotary_dim": 999_999_999}, "rotary_dim"),
    ({"max_position_embeddings": 4096, "rotary_dim": 256}, "rotary_dim"),  # wider than the 128-wide heads
    ({"max_position_embeddings": 4096, "rope_parameters": {"full_attention": {}, "sliding_attention": 5}},
     "sliding_attention"),
])
def test_absurd_rope_values_are_refused_naming_the_key(config, key):
    with pytest.raises(KvplanError, match=key):
        rope_tables(ConfigFields(config, "config.json"), family_of("llama"), 128, True)
