"""kvplan: KV-cache capacity planning for LLM serving engines."""

__version__ = "0.1.0"
