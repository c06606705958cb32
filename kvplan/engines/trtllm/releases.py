"""TensorRT-LLM's releases as kvplan knows them. The budget and the trtllm-serve options are read from the
sources as stored in 2026 (release 1.2: a flag typed on the command line wins over the options file, #14812); the
PyPI package is a stub whose wheel lives elsewhere, so no older release's rules are read from a wheel.

The stored GitHub copies hold many versions of each file, but a version is reachable with its commit only where it
is the one the index names for that commit, and tensorrt_llm/version.py is reachable at two commits: 000a01de
(1.0.0rc4) and b35ac1b6 (1.2.0rc2). One rule differs between versions that can be dated that way: at b35ac1b6
(1.2.0rc2) the PyTorch backend's KVCacheManager.calculate_max_num_blocks (_torch/pyexecutor/resource_manager.py)
still rounds the max tokens up to blocks (math.ceil, as at d2a5560a and in the 1.1.0rc3 log T03); the newest stored
version (001541ba) rounds down (int(max_tokens // tokens_per_block)), which kvplan applies. version.py is not stored
at 001541ba (nor at d2a5560a), so the change is dated only as after 1.2.0rc2: whether 1.2.0 and 1.2.1 already round
down is not established by the stored sources."""

from kvplan.engines.releases import Change, Releases

RELEASES = Releases("TensorRT-LLM", ("1.2.0", "1.2.1"), changes=(
    Change((1, 2), "command-line flags win over the --config / --extra_llm_api_options file (NVIDIA/TensorRT-LLM#14812)"),
))
