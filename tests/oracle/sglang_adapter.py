"""Runs inside a scratch venv with one SGLang release on PYTHONPATH (generate.py starts it; CI never imports it):
ServerArgs as `python -m sglang.launch_server` builds it, with the GPU memory supplied where server_args asks the
device (utils.common.get_device_memory_capacity, nvidia-smi's total in MiB), one ORACLE line per deployment.

Releases to 0.5.18 resolve the defaults in ServerArgs.__post_init__ (_handle_gpu_memory_settings); 0.5.19+ in
ServerArgs.resolve_once (arg_groups/memory_hook.handle_gpu_memory_settings), its values read through
arg_groups/model_override_base.resolved_view. Stand-ins: the compiled kernels (sgl_kernel, flashinfer) and
torchvision are empty modules (transformers is asked first, so it still sees no torchvision); nothing they compute is
used by the defaults read here, but the attention backend SGLang picks from the device's capability is the one a CPU
platform gets, so page_size is recorded, not compared, for GPUs whose backend differs. The prefill CUDA-graph
backend is the one CUDA gets (cuda_prefill_graphs).

    PYTHONPATH=SRC:tests/oracle python -m sglang_adapter VERSION CASES.json
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import tempfile
import types
from typing import Any

from vllm_adapter import model_dir

STUBBED = ("torchvision", "sgl_kernel", "flashinfer", "triton_kernels", "decord")
GPU_MIB = {"value": 81559.0}


class Anything:
    """Whatever a stubbed module hands out."""

    def __getattr__(self, name: str) -> Any:
        return Anything()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return Anything()

    def __iter__(self) -> Any:
        return iter(())

    def __mro_entries__(self, bases: Any) -> tuple[type, ...]:
        return (object,)


class Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> Any:
        module = types.ModuleType(spec.name)
        module.__path__ = []  # type: ignore[attr-defined]

        def attribute(name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return Anything()

        module.__getattr__ = attribute  # type: ignore[method-assign]
        return module

    def exec_module(self, module: Any) -> None:
        pass


def install() -> None:
    import transformers.utils

    transformers.utils.is_torchvision_available()  # cached False before the stub exists
    # 0.5.13-0.5.19 register configs (qwen3_asr) that the venv's newer transformers has itself: theirs replace it
    register = transformers.AutoConfig.register
    transformers.AutoConfig.register = lambda key, config, exist_ok=False: register(key, config, exist_ok=True)
    sys.meta_path.insert(0, Stubs())
    import sglang.srt.utils.common as common

    common.get_device_memory_capacity = lambda device=None: GPU_MIB["value"]
    cuda_prefill_graphs()


def cuda_prefill_graphs() -> None:
    """The prefill CUDA-graph backend a CUDA device gets (model_executor/cuda_graph_config.py
    default_prefill_backend, 0.5.15+: breakable on CUDA, tc_piecewise or disabled elsewhere), which the CPU this
    runs on would otherwise turn off, and with it the prefill graphs' reserve in mem_fraction_static."""
    try:
        import sglang.srt.model_executor.cuda_graph_config as graphs
    except ImportError:  # 0.5.9-0.5.13: piecewise graphs, off only where SGLANG_USE_CPU_ENGINE=1 says CPU (0.5.14 too)
        return
    if hasattr(graphs, "default_prefill_backend"):
        graphs.default_prefill_backend = lambda: graphs.Backend.BREAKABLE


def resolve(case: dict[str, Any], root: str) -> dict[str, Any]:
    import sglang.srt.server_args as server_args

    server_args.get_device_memory_capacity = lambda device=None: GPU_MIB["value"]  # type: ignore[attr-defined]
    args = server_args.ServerArgs(model_path=model_dir(case["config"], root), context_length=case["context_length"],
                                  tp_size=case["tp"], device="cuda", **case.get("server_args", {}))
    if hasattr(args, "resolve_once"):
        from sglang.srt.arg_groups.model_override_base import resolved_view

        args.resolve_once()
        view = resolved_view(args)
        graphs = view.cuda_graph_config.decode
        max_bs, sizes = graphs.max_bs, graphs.bs
    elif hasattr(args, "cuda_graph_config"):  # 0.5.14-0.5.18: per-phase graph settings, still in __post_init__
        view = args
        max_bs, sizes = args.cuda_graph_config.decode.max_bs, args.cuda_graph_config.decode.bs
    else:
        view = args
        max_bs, sizes = args.cuda_graph_max_bs, args.cuda_graph_bs
    return {"mem_fraction_static": view.mem_fraction_static, "chunked_prefill_size": view.chunked_prefill_size,
            "cuda_graph_max_bs": max_bs, "cuda_graph_batch_sizes": len(sizes or []), "page_size": view.page_size,
            "max_running_requests": view.max_running_requests, "attention_backend": view.attention_backend}


def main(argv: list[str]) -> int:
    version, path = argv
    install()
    import sglang.srt.server_args as server_args

    resolves = hasattr(server_args.ServerArgs, "resolve_once")
    source = "sglang.srt.server_args.ServerArgs." + ("resolve_once" if resolves else "__post_init__")
    with open(path) as handle:
        cases = json.load(handle)
    root = tempfile.mkdtemp(prefix="kvplan-oracle-sglang-")
    for case in cases:
        GPU_MIB["value"] = float(case["gpu"]["nvml_mib"] or case["gpu"]["memory"] / 2**20)
        try:
            result = {"id": case["id"], "source": source, "engine_says": {"defaults": resolve(case, root)}}
        except Exception as exc:  # noqa: BLE001 - recorded, not fatal
            if os.environ.get("KVPLAN_ORACLE_DEBUG"):
                import traceback

                traceback.print_exc()
            result = {"id": case["id"], "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        print("ORACLE " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
