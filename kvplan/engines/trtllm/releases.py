"""TensorRT-LLM's releases as kvplan knows them. The budget and the trtllm-serve options are read from the
sources as stored in 2026 (release 1.2: a flag typed on the command line wins over the options file, #14812); the
PyPI package is a stub whose wheel lives elsewhere, so no older release's rules are read."""

from kvplan.engines.releases import Change, Releases

RELEASES = Releases("TensorRT-LLM", ("1.2.0", "1.2.1"), changes=(
    Change((1, 2), "command-line flags win over the --config / --extra_llm_api_options file (NVIDIA/TensorRT-LLM#14812)"),
))
