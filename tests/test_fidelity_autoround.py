"""AutoRound checkpoints (quant_method auto-round): sized as the other packed-integer formats, which vLLM loads them as
(quantization/auto_round.py: the GPTQ or AWQ linear methods, by packing_format, with the config's bits and
group_size; lm_head is not quantized)."""

from __future__ import annotations

import pytest

from kvplan import api
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice

# Llama-3.1-8B (bundled config): 8,030,261,248 parameters, of which embeddings and lm_head 128,256 x 4,096 =
# 525,336,576 each, kept 16-bit; the 32 decoder layers hold the other 6,979,588,096.
DECODER, EMBEDDING = 6_979_588_096, 525_336_576
# vLLM builds its RoPE cos/sin table beside the weights: 131,072 positions x 128 x 2 B
ROPE = 33_554_432


def test_auto_round_flag_is_four_bit_with_128_groups():
    # 4 bits: 6,979,588,096 / 2 = 3,489,794,048 B, plus a 16-bit scale and a 4-bit zero per 128 weights:
    # 6,979,588,096 x 20 // 1,024 = 136,320,080 B -> 3,626,114,128 B, 113,316,066 B per layer (floor) x 32 =
    # 3,626,114,112 B; + 2 x 525,336,576 x 2 B = 2,101,346,304 B -> 5,727,460,416 B (16-bit: 16,060,522,496 B).
    plan = api.estimate("meta-llama/Llama-3.1-8B", gpu="h100", max_model_len=8192, quantization="auto_round")
    assert plan.memory.weights_bytes == 5_727_460_416 + ROPE


@pytest.mark.parametrize("config, weights", [
    # the checkpoint's own config, as AutoRound writes it
    ({"quant_method": "auto-round", "bits": 4, "group_size": 128, "sym": True,
      "packing_format": "auto_round:auto_gptq"}, 5_727_460_416),
    # 8 bits in groups of 64: 6,979,588,096 + 6,979,588,096 x 24 // 512 = 7,306,756,288 B (228,336,134 per layer,
    # exact) + 2,101,346,304 B = 9,408,102,592 B
    ({"quant_method": "auto-round", "bits": 8, "group_size": 64, "sym": True}, 9_408_102_592),
])
def test_auto_round_checkpoint_uses_its_bits_and_group_size(config, weights):
    spec = resolve("meta-llama/Llama-3.1-8B", overrides={"quantization_config": config})
    h100 = find_gpu("h100")
    choice = GpuChoice(h100.id, h100.name, h100.memory_bytes, 1, h100.compute_capability, h100.fp8)
    plan = plan_deployment(spec, Deployment(gpu="h100", max_model_len=8192), choice)
    assert plan.memory.weights_bytes == weights + ROPE
