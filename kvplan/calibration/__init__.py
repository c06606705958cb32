"""Replays of real engine startup logs through kvplan: vLLM's dense and MoE logs (vllm.py), and SGLang's,
TensorRT-LLM's and vLLM's hybrid-model logs (engines.py). Each engine's logs lie in its folder's data/."""
