"""DeepSeek-V4's KV cache as vLLM 0.33.0 plans it, run on CPU in the oracle's scratch venv (CI never imports it):
the specs come from the release's own get_kv_cache_spec methods (models/deepseek_v4/attention.py
DeepseekV4Attention and DeepseekV4IndexerCache, models/deepseek_v4/compressor.py CompressorStateCache,
v1/attention/backends/mla/sparse_swa.py DeepseekV4SWACache), each called on a stand-in holding what the layer's
__init__ would set; the block size from platforms/interface.py _preferred_block_size_for_backends over the layers'
backends; then the planning as vllm_v033.plan runs it. tests/test_deepseek_v4.py records what it printed.

    PYTHONPATH=SRC:tests/oracle python tests/oracle/vllm_dsv4.py MODEL_DIR GPU_BYTES KV_BYTES MAX_MODEL_LEN \\
        [KV_CACHE_DTYPE [MAX_NUM_BATCHED_TOKENS [TP [PP [MTP_TOKENS]]]]]

With PP above 1 each stage's layers are a worker's specs (vllm.distributed.utils.get_pp_indices), every worker given
KV_BYTES. MTP_TOKENS above 0 adds an MTP draft (speculative_config method mtp) and its layer's sliding-window cache
on the last worker: nvidia/mtp.py builds a DeepseekV4DecoderLayer past num_hidden_layers, of ratio 1.

MODEL_DIR holds the config.json without its quantization_config (as vllm_adapter.model_dir writes it)."""

from __future__ import annotations

import json
import sys
from typing import Any

import vllm_env


class Stand:
    """The attributes a layer's get_kv_cache_spec reads, without building the module."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


def engine_config(model: str, gpu_bytes: int, max_len: int, kv_dtype: str, batched: int | None, tp: int,
                  pp: int, mtp: int) -> Any:
    vllm_env.set_gpu("NVIDIA H200", gpu_bytes, "9.0", tp * pp)
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    args = EngineArgs(model=model, skip_tokenizer_init=True, load_format="dummy", max_model_len=max_len,
                      kv_cache_dtype=kv_dtype, max_num_batched_tokens=batched, tensor_parallel_size=tp,
                      pipeline_parallel_size=pp,
                      speculative_config={"method": "mtp", "num_speculative_tokens": mtp} if mtp else None)
    return args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)


def layer_specs(config: Any, mtp: int) -> dict[str, Any]:
    import torch
    import vllm._custom_ops as ops

    ops.cutlass_scaled_mm_supports_block_fp8 = lambda *args: False  # importing the model's fp8 helpers asks
    from vllm.config.cache import CacheConfig
    from vllm.models.deepseek_v4 import attention, compressor
    from vllm.models.deepseek_v4.nvidia.flashmla import DeepseekV4FlashMLAAttention
    from vllm.platforms.interface import Platform
    from vllm.v1.attention.backends.mla import sparse_swa
    from vllm.v1.attention.backends.mla.indexer import DeepseekV4IndexerBackend

    hf, cache = config.model_config.hf_config, config.cache_config
    backends = [DeepseekV4FlashMLAAttention.backend_cls, DeepseekV4FlashMLAAttention.swa_backend_cls,
                compressor.CompressorBackend, DeepseekV4IndexerBackend]
    cache.block_size = Platform._preferred_block_size_for_backends(backends, CacheConfig.DEFAULT_BLOCK_SIZE, config)
    kv_name, kv_torch = attention._resolve_dsv4_kv_cache_dtype(True, cache.cache_dtype, cache)  # FlashMLA's layout
    specs, head, index = {}, hf.head_dim, hf.index_head_dim
    kinds = list(hf.layer_types) + (["sliding_attention"] * hf.num_nextn_predict_layers if mtp else [])
    for i, kind in enumerate(kinds):
        ratio, name = max(1, hf.compress_rates.get(kind, 0)), f"model.layers.{i}.attn"
        swa = Stand(bounded_replay=False, block_size=64, head_dim=head, window_size=hf.sliding_window, dtype=kv_torch,
                    cache_config=cache, packed_bytes_per_token=584, packed_page_alignment=576,
                    packed_block_stride_alignment=None)
        specs[name + ".swa_cache"] = sparse_swa.DeepseekV4SWACache.get_kv_cache_spec(swa, config)
        if ratio > 1:
            layer = Stand(compress_ratio=ratio, head_dim=head, kv_cache_dtype=kv_name, kv_cache_torch_dtype=kv_torch)
            specs[name] = attention.DeepseekV4Attention.get_kv_cache_spec(layer, config)
            coff = 1 + (ratio == 4)
            state = Stand(state_dim=2 * coff * head, dtype=torch.float32, sliding_window=coff * ratio,
                          block_size=4 if ratio == 4 else 8)
            specs[name + ".compressor.state_cache"] = compressor.CompressorStateCache.get_kv_cache_spec(state, config)
        if ratio == 4:
            key = Stand(head_dim=index + index // 128 * 4, dtype=torch.uint8, cache_config=cache, compress_ratio=4)
            specs[name + ".indexer.k_cache"] = attention.DeepseekV4IndexerCache.get_kv_cache_spec(key, config)
            state = Stand(state_dim=4 * index, dtype=torch.float32, sliding_window=8, block_size=4)
            specs[name + ".indexer.compressor.state_cache"] = compressor.CompressorStateCache.get_kv_cache_spec(
                state, config)
    return specs


def main(argv: list[str]) -> int:
    vllm_env.install()
    model, gpu_bytes, kv_bytes, max_len = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    kv_dtype = argv[4] if len(argv) > 4 else "auto"
    batched = int(argv[5]) if len(argv) > 5 else None
    tp = int(argv[6]) if len(argv) > 6 else 1
    pp = int(argv[7]) if len(argv) > 7 else 1
    mtp = int(argv[8]) if len(argv) > 8 else 0
    config = engine_config(model, gpu_bytes, max_len, kv_dtype, batched, tp, pp, mtp)
    specs = layer_specs(config, mtp)
    from vllm.distributed.utils import get_pp_indices
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core import kv_cache_planning, kv_cache_utils

    layers = config.model_config.hf_config.num_hidden_layers
    workers = []
    for rank in range(pp):
        start, end = get_pp_indices(layers, rank, pp)
        end = end if rank < pp - 1 else len(specs)  # the MTP layer on the last stage
        workers.append({name: spec for name, spec in specs.items() if start <= int(name.split(".")[2]) < end})
    resolve_kv_cache_layout(config, [["BLHNC", "BLNHC"]], specs.values())  # DeepseekV4IndexerBackend's layouts
    groups = kv_cache_planning.get_global_kv_cache_groups(config, workers)
    configs = kv_cache_planning.get_kv_cache_configs(config, workers, [kv_bytes] * pp, groups)
    scheduler = kv_cache_utils.generate_scheduler_kv_cache_config(configs)
    kv_cache_utils.update_kv_cache_capacity(config, scheduler)
    print("ORACLE " + json.dumps({
        "block_size": config.cache_config.block_size, "kv_cache_dtype": config.cache_config.cache_dtype,
        "num_blocks": scheduler.num_blocks, "tokens": int(config.cache_config.kv_cache_size_tokens),
        "max_concurrency": round(config.cache_config.kv_cache_max_concurrency, 2),
        "groups": [[len(g.layer_names), g.kv_cache_spec.block_size] for g in scheduler.kv_cache_groups]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
