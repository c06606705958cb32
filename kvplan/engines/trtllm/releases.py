"""TensorRT-LLM's releases as kvplan knows them. The budget and the trtllm-serve options are read from the
sources as stored in 2026 (release 1.2: a flag typed on the command line wins over the options file, #14812); the
PyPI package is a stub whose wheel lives elsewhere, so no older release's rules are read from a wheel.

The stored GitHub copies hold many versions of each file, but a version is reachable with its commit only where it
is the one the index names for that commit, and tensorrt_llm/version.py is reachable at two commits: 000a01de
(1.0.0rc4) and b35ac1b6 (1.2.0rc2). At b35ac1b6 (1.2.0rc2) two of the PyTorch backend's rules differ from the
newest stored versions, which kvplan applies:
- KVCacheManager.calculate_max_num_blocks (_torch/pyexecutor/resource_manager.py) rounds the max tokens up to blocks
  (math.ceil, as at d2a5560a and in the 1.1.0rc3 log T03); the newest (001541ba) rounds down;
- KvCacheCreator._get_token_num_for_estimation (_torch/pyexecutor/_util.py, read_file id 2160125189) gives each
  dummy request 2 extra tokens with the overlap scheduler on (its default), not 1, and has no floor of
  max_batch_size blocks or of the CUDA-graph warmup's, so a short profiling run (2,048 tokens: 65 blocks of 32)
  captures no 128-request graph there
(configure_kv_cache_capacity's order, max_tokens before max_gpu_total_bytes, is already the same).
version.py is not stored at the newest versions' commits (001541ba, 00043967), so these changes are dated only as
after 1.2.0rc2: whether 1.2.0 and 1.2.1 have them is not established by the stored sources (review threads on
the estimation, NVIDIA/TensorRT-LLM#16311, #16545, #16802, are of July 2026)."""

from kvplan.engines.releases import Change, Releases

RELEASES = Releases("TensorRT-LLM", ("1.2.0", "1.2.1"), changes=(
    Change((1, 2), "command-line flags win over the --config / --extra_llm_api_options file (NVIDIA/TensorRT-LLM#14812)"),
))
