"""verify's entry: one rank in this process, several spawned (--nproc), or this process's rank under torchrun.
Returns the document (None on torchrun ranks other than 0) and the exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanError
from kvplan.verify import require_torch

if TYPE_CHECKING:
    from kvplan.verify.run import VerifyOptions


def verify(options: VerifyOptions, nproc: int = 1) -> tuple[dict[str, Any] | None, int]:
    require_torch()
    from kvplan.verify.ranks import launched_by_torchrun, spawn_ranks, torchrun_rank
    from kvplan.verify.report import combine
    from kvplan.verify.run import verified, verify_rank

    if nproc < 1:
        raise KvplanError(f"--nproc must be at least 1, got {nproc}", "--nproc")
    dep = options.deployment
    if nproc > 1 and nproc != dep.tensor_parallel_size * dep.pipeline_parallel_size:
        raise KvplanError(f"{nproc} ranks for tensor parallel {dep.tensor_parallel_size} x pipeline parallel "
                          f"{dep.pipeline_parallel_size}; run {dep.tensor_parallel_size * dep.pipeline_parallel_size}",
                          "--nproc")
    if launched_by_torchrun():
        document = torchrun_rank(options)
    elif nproc > 1:
        document = spawn_ranks(options, nproc)
    else:
        document = combine([verify_rank(options)])
    if document is None:
        return None, 0
    ranks = document["ranks"] or [document]
    return document, 0 if all(verified(rank) for rank in ranks) else 1
