"""The verify document (--json) and its text rendering. One rank's document carries the contract's keys; a
multi-rank run reports rank 0's at the top, its verdicts taken over every rank, with all ranks listed."""

from __future__ import annotations

from typing import Any

from kvplan.units import GiB


def combine(documents: list[dict[str, Any]]) -> dict[str, Any]:
    ranks = sorted(documents, key=lambda document: document["rank"])
    top = {key: value for key, value in ranks[0].items() if key not in ("rank", "tp_rank", "pp_rank")}
    if len(ranks) > 1:
        top["allocated"] = {**top["allocated"], "ok": all(r["allocated"]["ok"] for r in ranks),
                            "fits": all(r["allocated"]["fits"] for r in ranks)}
        if top["decode"] is not None:
            top["decode"] = {**top["decode"], "ok": all(r["decode"] is not None and r["decode"]["ok"] for r in ranks),
                             "max_abs_err": max((r["decode"]["max_abs_err"] for r in ranks
                                                 if r["decode"] and r["decode"]["max_abs_err"] is not None),
                                                default=None)}
        top["ranks"] = ranks
    else:
        top["ranks"] = None
    return top


def _gib(nbytes: int) -> str:
    return f"{nbytes / GiB:,.2f} GiB"


def render(document: dict[str, Any]) -> str:
    device, plan, allocated = document["device"], document["plan"], document["allocated"]
    decode, probe = document["decode"], document["probe"]
    catalogue = f"; catalogue {device['catalogue_id']}" if device["catalogue_id"] else ""
    lines = [
        f"device    {device['name']}: {_gib(device['total_bytes'])} total, {_gib(device['free_bytes'])} free{catalogue}",
        f"plan      {plan['num_blocks']:,} blocks x {plan['block_size']} tokens ({plan['kv_dtype']}), "
        f"{plan['pool_bytes']:,} B ({_gib(plan['pool_bytes'])})",
        f"allocated {allocated['num_blocks']:,} blocks, {allocated['pool_bytes']:,} B: "
        + ("bytes match the plan" if allocated["ok"] else "bytes DIFFER from the plan"),
    ]
    if decode is not None:
        rate = (f"; {decode['bandwidth_gbps']:,.1f} GB/s of KV read" if decode["bandwidth_gbps"] is not None else "")
        peak = f" (catalogue peak {decode['peak_bandwidth_gbps']:,.0f} GB/s)" if decode["peak_bandwidth_gbps"] else ""
        error = "n/a" if decode["max_abs_err"] is None else f"{decode['max_abs_err']:.2e}"
        lines.append(f"decode    batch {decode['batch']}, max |paged - reference| {error} "
                     f"(tolerance {decode['tolerance']:.0e}): {'ok' if decode['ok'] else 'MISMATCH'}, "
                     f"{decode['seconds'] * 1000:.2f} ms{rate}{peak}")
    if probe is not None:
        error = probe["plan_error_pct"]
        lines.append(f"probe     largest pool that fits: {probe['max_blocks']:,} blocks"
                     + (f"; plan vs reality {error:+.2f}%" if error is not None else ""))
    for rank in document["ranks"] or []:
        rank_decode = rank["decode"] or {}
        lines.append(f"rank {rank['rank']}    tp {rank['tp_rank']} pp {rank['pp_rank']}: "
                     f"{rank['allocated']['num_blocks']:,} blocks, {rank['allocated']['pool_bytes']:,} B, decode "
                     f"{'ok' if rank_decode.get('ok') else 'not ok'}")
    lines += [f"note      {note}" for note in document["notes"]]
    return "\n".join(lines) + "\n"
