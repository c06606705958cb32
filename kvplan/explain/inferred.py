"""What a log says only implicitly: the parallelism in its process prefixes, and the terms vLLM prints only as
parts of others. Each inference is noted in the run."""

from __future__ import annotations

import re

from kvplan.explain.record import LoggedRun


def parallelism_from_ranks(run: LoggedRun) -> None:
    """Worker_TP1 or Worker_PP1_TP0 prefixes show the parallelism when the flags that set it are not printed."""
    for flag, tag in (("tensor_parallel_size", "TP"), ("pipeline_parallel_size", "PP"), ("data_parallel_size", "DP")):
        indices = [int(m.group(1)) for rank in run.ranks for m in [re.search(tag + r"(\d{1,9})(?!\d)", rank)] if m]
        if run.flag(flag) is None and indices and max(indices) > 0:
            run.set_flag(flag, max(indices) + 1, None, 0)
            run.notes.append(f"{flag} {max(indices) + 1} from the {tag} ranks in the process prefixes (at least)")


def derived_terms(run: LoggedRun) -> None:
    """Terms the log prints only as parts of others: V0's torch peak holds the weights, and the budget is the
    total times the utilization (vLLM's own arithmetic, e.g. 23.58 GiB x 0.90 - 17.06 - 0.35 = 3.81 GiB)."""
    weights, peak = run.first("memory", "weights_bytes"), run.first("memory", "peak_torch_bytes")
    if run.first("memory", "activation_bytes") is None and weights is not None and peak is not None:
        run.add("memory", "activation_bytes", peak - weights, None, 0)
        run.notes.append("activation peak = the logged torch peak minus the weights")
    total, utilization = run.first("memory", "total_bytes"), run.flag("gpu_memory_utilization")
    usable = isinstance(utilization, float) and 0 < utilization <= 1  # the log's own args can say anything
    if run.first("memory", "budget_bytes") is None and total is not None and usable:
        run.add("memory", "budget_bytes", int(total * utilization), None, 0)
        run.notes.append("budget = the logged total x gpu_memory_utilization")
