"""verify claims only memory it holds: the CPU dry run's pool is capped at half the memory the OS says is
available, every byte of a pool is written (so a page the OS only promised, or one left over from an earlier pool,
cannot pass), an allocator's refusal is the probe's result and not a traceback, and a decode whose output is NaN
fails. Qwen2.5-0.5B (bundled config): 24 layers, 2 KV heads, head_dim 64, bfloat16, block 16: each layer's buffer
takes 2 x 2 x 64 x 16 x 2 B = 8,192 B a block, 24 x 8,192 = 196,608 B a block in all."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from kvplan.capacity import pool_layout  # noqa: E402
from kvplan.cli.app import main  # noqa: E402
from kvplan.deployment import Deployment  # noqa: E402
from kvplan.models.layers import FullAttention  # noqa: E402
from kvplan.verify import device as device_module  # noqa: E402
from kvplan.verify import run as run_module  # noqa: E402
from kvplan.verify.decode import run_decode  # noqa: E402
from kvplan.verify.device import open_device  # noqa: E402
from kvplan.verify.kernels import Gather  # noqa: E402
from kvplan.verify.pool import UNWRITTEN, allocate  # noqa: E402
from kvplan.verify.shape import pool_shape  # noqa: E402

MiB, TiB = 2**20, 2**40
BLOCK = 196_608
LAYER_PAGE = 8_192
CPU = torch.device("cpu")
# what torch 2.13's CPU allocator raises when the OS refuses (its message, verbatim)
REFUSAL = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
           "allocate {} bytes. Error code 12 (Cannot allocate memory)")


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def options(cap, **knobs):
    mapping = {"model": "Qwen/Qwen2.5-0.5B", "gpu": "h100", **knobs}
    return run_module.VerifyOptions(Deployment.from_mapping(mapping), "cpu", cap, probe=True, batch=2, context=64)


def available(monkeypatch, nbytes):
    monkeypatch.setattr(device_module, "available_memory", lambda: nbytes)


def refusing_above(monkeypatch, limit):
    """torch.empty as the OS would answer with `limit` bytes to give: the CPU allocator's RuntimeError above it."""
    real_empty = torch.empty

    def empty(size, *args, **kwargs):
        if size > limit:
            raise RuntimeError(REFUSAL.format(size))
        return real_empty(size, *args, **kwargs)

    monkeypatch.setattr(torch, "empty", empty)


def test_the_cpu_cap_is_half_the_available_memory(monkeypatch):
    available(monkeypatch, 64 * MiB)
    device = open_device("cpu", TiB)
    assert device.cap_bytes == device.total_bytes == 32 * MiB
    assert device.cap_note == ("--max-pool-bytes 1,099,511,627,776 B is more than this machine can hold: the pool is "
                               "capped at 33,554,432 B, half of the 67,108,864 B of memory available")
    assert open_device("cpu", 32 * MiB).cap_note is None  # what the machine holds is taken as asked


def test_a_terabyte_cap_verifies_the_pool_the_machine_holds(monkeypatch):
    available(monkeypatch, 64 * MiB)
    refusing_above(monkeypatch, 64 * MiB)  # were the cap lost, the 73.7 GB plan must not be written for real
    document = run_module.verify_rank(options(TiB))
    # 32 MiB = 33,554,432 B // 196,608 B = 170 blocks (33,423,360 B); the plan (H100's 372,954 blocks) is scaled to them.
    # The plan: budget 78,217,367,414 - weights 992,259,824 - activation 2,890,498,048 (Model Runner V2 at 1,024
    # rows: 3.5 x 1,024 x 151,936 x 4 + 1 MiB = 2,179,203,072, the dummy run's hidden states (8,192 + 1,024) x 896
    # x 2 = 16,515,072, the Hopper cuBLAS workspace 33,554,432, the held buffers 1,024 x (151,936 + 2 x 4,748) x 4
    # = 661,225,472) - non-torch 268,435,456 - graphs 740,294,656 = 73,325,879,430 // 196,608 = 372,954
    assert document["probe"]["max_blocks"] == 170
    assert document["allocated"] == {"num_blocks": 170, "pool_bytes": 170 * BLOCK, "fits": False, "ok": True}
    assert document["decode"]["ok"] and run_module.verified(document)
    assert "the planned 372,954 blocks do not fit (the memory available); scaled to the 170 that do" in document["notes"]


def test_an_allocator_refusal_is_the_probe_result_not_a_traceback(monkeypatch, capsys):
    available(monkeypatch, 4 * TiB)  # the cap stays 1 TiB: only the allocator can say no
    refusing_above(monkeypatch, MiB)
    code = main(["verify", "--device", "cpu", "--gpu", "h100", "--model", "Qwen/Qwen2.5-0.5B", "--max-pool-bytes",
                 "1TiB", "--probe", "--batch", "2", "--context", "64", "--json"])
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert code == 0 and captured.err == ""
    # each of the 24 layer buffers is one request of blocks x 8,192 B: 1 MiB = 1,048,576 B holds 128 blocks
    assert document["probe"]["max_blocks"] == 128 and document["allocated"]["num_blocks"] == 128
    assert document["allocated"]["pool_bytes"] == 128 * BLOCK and document["decode"]["ok"]


def test_every_byte_of_a_pool_is_written(monkeypatch):
    # memory the OS only promised (overcommit) is held once written; zeros stand for such untouched pages here
    monkeypatch.setattr(torch, "empty", lambda *args, **kwargs: torch.zeros(*args, **kwargs))
    layers = [FullAttention(2, 16)] * 2
    shape = pool_shape(pool_layout(layers, 16, 4, 1), layers)
    pool = allocate(shape, 5, "float32", CPU)
    # 2 buffers of 5 blocks x 2 (K, V) x 2 heads x 16 dims x 16 tokens x 4 B = 20,480 B each
    assert [buffer.numel() for buffer in pool.buffers] == [20_480, 20_480]
    assert all(bool((buffer == UNWRITTEN).all()) for buffer in pool.buffers)


def small_pool():
    layers = [FullAttention(2, 16)]
    return allocate(pool_shape(pool_layout(layers, 16, 4, 1), layers), 8, "float32", CPU)


def test_bytes_left_by_an_earlier_pool_are_overwritten(monkeypatch):
    earlier = small_pool()
    assert run_decode(earlier, [20, 33], attention_heads=4, tp=1, kernel=Gather()).ok
    leftover = [buffer.clone() for buffer in earlier.buffers]
    # the next pool is given the earlier one's memory, its keys and values still in it
    monkeypatch.setattr(torch, "empty", lambda *args, **kwargs: leftover.pop(0))
    pool = small_pool()
    assert not leftover and all(bool((buffer == UNWRITTEN).all()) for buffer in pool.buffers)


class SeesOneMore(Gather):
    """A kernel that attends one slot past each sequence: a slot the decode never wrote."""

    def __call__(self, query, keys, values, batch, visibility, compute):
        longer = type(batch)(batch.lengths + 1, batch.block_tables, batch.block_size)
        return super().__call__(query, keys, values, longer, visibility, compute)


def test_a_kernel_reading_an_unwritten_slot_fails_by_the_fill_value():
    # 20 and 33 tokens end inside a block, so slot 20 (33) is in the sequence's own last block, never written:
    # its key and value read 0x7B7B7B7B = 1.3e36 as float32, the score is ~1e36 and takes all the weight, so
    # the output is off by about 1.3e36; zeros or stale bytes there would be off by far less
    result = run_decode(small_pool(), [20, 33], attention_heads=4, tp=1, kernel=SeesOneMore())
    assert not result.ok and result.max_abs_err > 1e30


class NaNRow(Gather):
    """A kernel whose second sequence comes out NaN."""

    def __call__(self, query, keys, values, batch, visibility, compute):
        out = super().__call__(query, keys, values, batch, visibility, compute)
        out[1] = float("nan")
        return out


def test_a_nan_decode_fails():
    result = run_decode(small_pool(), [20, 33], attention_heads=4, tp=1, kernel=NaNRow())
    # the first sequence matches (an error near 1e-7), the second is NaN: NaN is the worst, not dropped by max()
    assert math.isnan(result.max_abs_err) and not result.ok
    assert result.notes == ["the paged decode's output holds NaN or infinite values: a failure, whatever the "
                            "tolerance"]


def test_a_nan_decode_fails_verify(monkeypatch, capsys):
    monkeypatch.setattr(run_module, "kernel", lambda name: (NaNRow(), None))
    code = main(["verify", "--device", "cpu", "--gpu", "h100", "--model", "Qwen/Qwen2.5-0.5B",
                 "--kv-cache-memory-bytes", "4MiB", "--batch", "2", "--context", "64", "--json"])
    document = json.loads(capsys.readouterr().out)  # strict JSON: NaN is written as null
    assert code == 1 and document["decode"]["ok"] is False and document["decode"]["max_abs_err"] is None
