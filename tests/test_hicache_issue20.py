"""Issue 20, SGLang's hierarchical cache: the host KV pool beside an unchanged GPU pool, as the SGLang 0.5.23 wheel
sizes it (arg_groups/hicache_hook.py: ratio 2.0 by default; mem_cache/pool_host/base.py HostKVCache: a size in GB
gives int(GB x 1e9 // bytes per token) tokens, else device tokens x ratio, then one padding page more;
pool_host/mha.py get_size_per_token). Qwen2.5-7B: 2 x 28 layers x 4 KV heads x 128 x 2 B = 57,344 B per token."""

from __future__ import annotations

import subprocess
import sys

from kvplan.api import estimate

PER_TOKEN = 2 * 28 * 4 * 128 * 2


def plan(**knobs):
    return estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", max_model_len=32768, **knobs)


def test_the_default_ratio_doubles_the_device_pool_plus_a_padding_page():
    base, tier = plan(), plan(enable_hierarchical_cache=True)
    assert tier.capacity.tokens == base.capacity.tokens and base.capacity.offload_tokens == 0
    assert tier.capacity.offload_tokens == base.capacity.tokens * 2 + 1  # page size 1: one padding token
    host = tier.capacity.offload_tokens * PER_TOKEN
    assert any(f"the host needs {host / 2**30:.2f} GiB for the 1 rank(s)" in note for note in tier.notes)


def test_a_size_in_gb_is_decimal_and_per_rank():
    tier = plan(enable_hierarchical_cache=True, hicache_size=100)
    assert tier.capacity.offload_tokens == 100 * 10**9 // PER_TOKEN + 1 == 1_743_862
    two = plan(enable_hierarchical_cache=True, hicache_size=100, tensor_parallel_size=2)
    assert two.capacity.offload_tokens == 100 * 10**9 // (PER_TOKEN // 2) + 1  # 2 KV heads per rank


def test_the_flags_as_sglang_spells_them():
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--gpu", "h100", "--json", "--",
                             "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-7B",
                             "--context-length", "32768", "--enable-hicache", "--hicache-ratio", "3"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert '"offload_tokens": ' + str(plan().capacity.tokens * 3 + 1) in result.stdout
    assert "accepted but not modelled (host-memory KV tier" not in result.stdout


def test_the_host_memory_is_each_ranks_pool():
    # HostKVCache per rank: 1,743,862 tokens x 57,344 B = 100,000,022,528 B; at TP 2 two ranks of half the bytes each
    assert plan(enable_hierarchical_cache=True, hicache_size=100).capacity.offload_host_bytes == 100_000_022_528
    two = plan(enable_hierarchical_cache=True, hicache_size=100, tensor_parallel_size=2)
    assert two.capacity.offload_host_bytes == (100 * 10**9 // (PER_TOKEN // 2) + 1) * (PER_TOKEN // 2) * 2
