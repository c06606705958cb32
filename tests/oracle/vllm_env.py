"""What every vLLM adapter needs before the release's own code runs on a CPU-only machine (scratch venv only; CI
never imports this): the compiled modules stubbed, a CUDA platform answering the GPU facts a case gives, the model
class inspection run in-process, and the release's log lines caught as it prints them.

Each stand-in hides something, listed here so the README can say it once:
- stubbed compiled modules (vllm._C, ...): any number they would compute is absent, so only planning code runs;
- the platform answers capability, total memory, name and device count from kvplan's GPU catalogue;
- the model registry inspects the class in this process (vLLM uses a subprocess, which would not see the stubs);
  where the class import itself fails, a plain-decoder _ModelInfo stands in (wrong for hybrid or pooling models,
  so the generator only feeds plain decoders through that path).
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import types
from typing import Any

COMPILED = ("vllm._C", "vllm._C_stable_libtorch", "vllm._moe_C", "vllm.cumem_allocator", "vllm.vllm_flash_attn",
            "vllm._flashmla_C", "vllm._vllm_fa2_C", "vllm._vllm_fa3_C", "vllm._flashmla_extension_C",
            "vllm._rocm_C", "vllm._custom_C")


def _stub(name: str) -> None:
    module = types.ModuleType(name)
    module.__path__ = []  # type: ignore[attr-defined]
    module.__file__ = name + ".stub"

    def attribute(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return lambda *args, **kwargs: None

    module.__getattr__ = attribute  # type: ignore[method-assign]
    sys.modules[name] = module


class LogCatcher(logging.Handler):
    """Every record the release logs, formatted as it prints them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # a record that cannot format is not ours to fix
            self.lines.append(record.getMessage())

    def take(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


CATCHER = LogCatcher()
GPU: dict[str, Any] = {"name": "NVIDIA H100 80GB HBM3", "memory": 85018877624, "capability": (9, 0), "count": 1}


def set_gpu(name: str, memory: int, capability: str, count: int = 1) -> None:
    major, minor = (int(part) for part in capability.split("."))
    GPU.update(name=name, memory=memory, capability=(major, minor), count=count)
    count_devices()


def count_devices() -> None:
    """cuda_device_count_stateless (vllm.utils, later vllm.utils.torch_utils), wherever a module imported it."""
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("vllm") and hasattr(module, "cuda_device_count_stateless"):
            module.cuda_device_count_stateless = lambda: GPU["count"]


def install() -> None:
    """Stubs, the pretend platform, in-process inspection and the log catcher; call before importing vllm.*"""
    for name in COMPILED:
        _stub(name)
    import torch
    import transformers

    # releases built for transformers 4 register configs that transformers 5 now ships (aimv2 in 0.9): keep theirs
    register = transformers.AutoConfig.register
    transformers.AutoConfig.register = lambda *args, **kwargs: register(*args, **{**kwargs, "exist_ok": True})

    torch.cuda.is_available = lambda: True  # type: ignore[assignment]
    import vllm.utils

    with contextlib.suppress(ImportError):
        import vllm.utils.torch_utils  # noqa: F401
    count_devices()
    torch.cuda.device_count = lambda: GPU["count"]  # type: ignore[assignment]
    import vllm.platforms as platforms
    from vllm.platforms.cuda import CudaPlatform
    from vllm.platforms.interface import DeviceCapability

    class PretendGpu(CudaPlatform):  # type: ignore[misc, valid-type]
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            return DeviceCapability(*GPU["capability"])

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return int(GPU["memory"])

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return str(GPU["name"])

        @classmethod
        def is_device_capability_family(cls, capability: int, device_id: int = 0) -> bool:
            major, minor = GPU["capability"]
            return bool((major * 10 + minor) // 10 == capability // 10)

        @classmethod
        def has_device_capability(cls, capability: Any, device_id: int = 0) -> bool:
            major, minor = GPU["capability"]
            if isinstance(capability, tuple):
                return bool((major, minor) >= tuple(capability))
            return bool(major * 10 + minor >= capability)

        @classmethod
        def device_count(cls) -> int:
            return int(GPU["count"])

        @classmethod
        def is_fully_connected(cls, physical_device_ids: Any) -> bool:
            return True

    platforms._current_platform = PretendGpu()  # type: ignore[attr-defined]
    with contextlib.suppress(Exception):
        platforms.current_platform = platforms._current_platform  # type: ignore[attr-defined]
    import vllm.model_executor.models.registry as registry

    registry._run_in_subprocess = lambda fn: fn()  # type: ignore[attr-defined]
    inspect = registry._try_inspect_model_cls

    def inspect_or_plain(model_arch: str, *args: Any) -> Any:
        return inspect(model_arch, *args) or plain_decoder(registry, model_arch)

    registry._try_inspect_model_cls = inspect_or_plain
    registry._try_load_model_cls = lambda *args: type("Dummy", (torch.nn.Module,), {})
    logging.getLogger("vllm").addHandler(CATCHER)
    logging.getLogger("vllm").setLevel(logging.DEBUG)


PLAIN = {"is_text_generation_model": True, "attn_type": "decoder", "default_pooling_type": "LAST",
         "default_seq_pooling_type": "LAST", "default_tok_pooling_type": "ALL", "score_type": "bi-encoder",
         "supports_pp": True, "supports_lora": True, "supported_video_pruning_methods": ()}


def plain_decoder(registry: Any, architecture: str) -> Any:
    """A _ModelInfo for a plain text decoder, whatever fields this release's _ModelInfo has."""
    import dataclasses

    values: dict[str, Any] = {}
    for field in dataclasses.fields(registry._ModelInfo):
        if field.name == "architecture":
            values["architecture"] = architecture
        elif field.name in PLAIN:
            values[field.name] = PLAIN[field.name]
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            values[field.name] = False
    return registry._ModelInfo(**values)


def forget_once() -> None:
    """vLLM's info_once / warning_once remember what they printed; a second case must print again."""
    import vllm.logger as vlog

    for name in dir(vlog):
        function = getattr(vlog, name)
        if hasattr(function, "cache_clear"):
            function.cache_clear()


KV_LINE = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
CONCURRENCY_LINE = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")


def logged(lines: list[str]) -> dict[str, Any]:
    """The token count and concurrency as the release prints them."""
    found: dict[str, Any] = {}
    for line in lines:
        if match := KV_LINE.search(line):
            found["tokens"] = int(match.group(1).replace(",", ""))
        if match := CONCURRENCY_LINE.search(line):
            found["max_concurrency"] = float(match.group(2))
    return found
