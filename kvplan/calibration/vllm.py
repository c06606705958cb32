"""Replays real vLLM startup logs (kvplan/engines/vllm/data/calibration.yaml) through kvplan's vLLM model: from the logged
available memory (must match to the block) and from scratch (GPU, model, flags and version only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.engines.vllm.log_lines import PRINT_HALF_STEP
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice, Plan
from kvplan.units import GiB

DATA = Path(__file__).parent.parent / "engines" / "vllm" / "data" / "calibration.yaml"


def entries() -> list[dict[str, Any]]:
    import yaml

    return list(yaml.safe_load(DATA.read_text(encoding="utf-8")))


def deployment(entry: dict[str, Any], kv_cache_memory: int | None = None,
               estimate_cudagraphs: bool | None = None) -> tuple[Deployment, GpuChoice]:
    gpu = find_gpu(entry["gpu"])
    tp = entry.get("tp", 1)
    dep = Deployment(
        engine="vllm", engine_version=entry["version"], gpu=gpu.id,
        dtype=entry.get("dtype", "auto"), kv_cache_dtype=entry.get("kv_cache_dtype", "auto"),
        block_size=entry.get("block_size"), tensor_parallel_size=tp,
        pipeline_parallel_size=entry.get("pp", 1), quantization=entry.get("quantization"),
        chunked_hybrid_kv=entry.get("chunked_hybrid_kv"),
        gpu_memory_utilization=entry["utilization"], max_model_len=entry.get("max_model_len"),
        max_num_seqs=entry.get("max_num_seqs"), max_num_batched_tokens=entry.get("max_num_batched_tokens"),
        kv_cache_memory_bytes=kv_cache_memory, estimate_cudagraphs=estimate_cudagraphs,
        flashinfer_sampler=entry.get("flashinfer_sampler"))
    return dep, GpuChoice.of(gpu, tp)


def plan_for(entry: dict[str, Any], kv_cache_memory: int | None = None) -> Plan:
    dep, gpu = deployment(entry, kv_cache_memory)
    return plan_deployment(resolve(entry["model"]), dep, gpu)


def cuda_graph_estimate(entry: dict[str, Any]) -> int:
    """kvplan's CUDA-graph estimate for the log's deployment on rank 0, as v0.20+ would take it out of the budget
    (the v0.19 logs print it without doing so)."""
    dep, gpu = deployment(entry, estimate_cudagraphs=True)
    plan = plan_deployment(resolve(entry["model"]), dep, gpu)
    return plan.rank_zero_memory.cuda_graph_bytes


def cuda_graph_line() -> str:
    """kvplan's CUDA-graph estimate against every estimate the logs print: the mean and largest gap."""
    gaps = [abs(cuda_graph_estimate(e) / GiB - e["cuda_graphs_gib"]) for e in entries() if "cuda_graphs_gib" in e]
    return (f"CUDA-graph estimate against the {len(gaps)} logs that print one: {sum(gaps) / len(gaps):.2f} GiB off "
            f"on average, {max(gaps):.2f} GiB at most.")


@dataclass(frozen=True)
class Residual:
    id: str
    model: str
    version: str
    logged_gib: float
    predicted_gib: float
    weights_gib: float
    activation_gib: float
    non_torch_gib: float
    cuda_graph_gib: float

    @property
    def error_gib(self) -> float:
        return self.predicted_gib - self.logged_gib

    @property
    def error_percent(self) -> float:
        return 100 * self.error_gib / self.logged_gib


def from_scratch(entry: dict[str, Any]) -> Residual:
    plan = plan_for(entry)
    m = plan.rank_zero_memory  # the memory line is rank 0's
    return Residual(entry["id"], entry["model"], entry["version"], entry["available_gib"], m.kv_cache_bytes / GiB,
                    m.weights_bytes / GiB, m.activation_bytes / GiB, m.non_torch_bytes / GiB, m.cuda_graph_bytes / GiB)


def block_band(entry: dict[str, Any]) -> tuple[Plan, Plan]:
    """Plans at the two ends of the logged figure's print rounding: the pool's (pool_gib, where pipeline stages print
    different figures and the smallest bounds the pool), else the available memory line."""
    logged = int(entry.get("pool_gib", entry["available_gib"]) * GiB)
    return plan_for(entry, logged - PRINT_HALF_STEP), plan_for(entry, logged + PRINT_HALF_STEP)


def residual_table(rows: list[Residual]) -> str:
    lines = ["| id | model | vLLM | logged GiB | kvplan GiB | error GiB | error % | weights | activation | "
             "non-torch | CUDA graphs |", "|" + "---|" * 11]
    for r in rows:
        lines.append(f"| {r.id} | {r.model} | {r.version} | {r.logged_gib:.2f} | {r.predicted_gib:.2f} | "
                     f"{r.error_gib:+.2f} | {r.error_percent:+.1f} | {r.weights_gib:.2f} | {r.activation_gib:.2f} | "
                     f"{r.non_torch_gib:.2f} | {r.cuda_graph_gib:.2f} |")
    within = sum(abs(r.error_percent) <= 3 for r in rows)
    lines.append("")
    lines.append(f"{within} of {len(rows)} entries within 3% ({100 * within / len(rows):.0f}%).")
    return "\n".join(lines)
