"""kvplan verify on the CPU: paged decode against plain attention, pool shapes against the plan for every bundled
model, the probe when the pool does not fit, two gloo ranks, the JSON contract, and the message without torch.
Expected byte counts are derived by hand in the comments (a KV page is 2 x KV heads x head_dim x block_size x
dtype bytes per layer; an MLA page is latent x block_size x dtype bytes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from kvplan.capacity import pool_layout  # noqa: E402
from kvplan.cli.app import main  # noqa: E402
from kvplan.deployment import Deployment  # noqa: E402
from kvplan.models.layers import ChunkedLocal, FullAttention, LatentAttention, SlidingWindow  # noqa: E402
from kvplan.models.sources import spec_files  # noqa: E402
from kvplan.units import cdiv  # noqa: E402
from kvplan.verify import pool as pool_module  # noqa: E402
from kvplan.verify import run as run_module  # noqa: E402
from kvplan.verify.attention import Causal, Chunk, Window  # noqa: E402
from kvplan.verify.decode import run_decode  # noqa: E402
from kvplan.verify.device import Device  # noqa: E402
from kvplan.verify.kernels import KERNELS, Gather  # noqa: E402
from kvplan.verify.pool import allocate  # noqa: E402
from kvplan.verify.probe import largest_fitting, plan_error_pct  # noqa: E402
from kvplan.verify.shape import pool_shape  # noqa: E402

CPU = torch.device("cpu")
MiB = 2**20
# Qwen2.5-0.5B (bundled config): 24 layers, 2 KV heads, head_dim 896 / 14 = 64, bfloat16, vLLM block 16:
# 2 x 2 x 64 x 16 x 2 B = 8,192 B a page, x 24 layers = 196,608 B a block; at TP 2 one KV head a rank: 98,304 B.
QWEN_05B_BLOCK = 196_608
QWEN_05B_BLOCK_TP2 = 98_304


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny shapes on shared cores: torch's thread pool costs far more than it gains."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def small_pool(layers, block_size, lengths, dtype="float32", spare=3):
    kv_bytes = {"float32": 4, "bfloat16": 2}[dtype]
    layout = pool_layout(layers, block_size, kv_bytes, 1)
    shape = pool_shape(layout, layers)
    blocks = 2 * shape.groups * sum(cdiv(length, block_size) for length in lengths) + spare
    return allocate(shape, blocks, dtype, CPU)


def edge_lengths(block_size):
    """One token, one short of a block, exactly one block, exactly two, and one past two."""
    return [1, max(1, block_size - 1), block_size, 2 * block_size, 2 * block_size + 1]


@pytest.mark.parametrize("block_size", [1, 16, 32, 544])
@pytest.mark.parametrize("ratio", [1, 4, 8])
def test_paged_decode_equals_reference(block_size, ratio):
    layers = [FullAttention(2, 16)] * 2
    lengths = edge_lengths(block_size)
    pool = small_pool(layers, block_size, lengths)
    result = run_decode(pool, lengths, attention_heads=2 * ratio, tp=1, kernel=Gather(), seed=block_size + ratio)
    assert result.batch == 5 and result.layers == 2
    assert result.max_abs_err <= 1e-4, result.max_abs_err
    # K and V of every cached token: sum(lengths) x 2 x 2 heads x 16 x 4 B, in each of 2 layers
    assert result.kv_bytes_read == sum(lengths) * 2 * 2 * 16 * 4 * 2


@pytest.mark.parametrize("layers, dtype, views", [
    ([SlidingWindow(2, 16, 5)] * 2, "float32", 2),
    ([SlidingWindow(2, 16, 5)] * 2, "bfloat16", 2),
    ([LatentAttention(40)] * 2, "float32", 2),
    ([LatentAttention(40)], "bfloat16", 1),
    ([ChunkedLocal(1, 8, 6)] * 3, "float32", 3),
    # hybrid: equal pages, two kinds -> two KV-cache groups sharing each of 2 buffers (2 x 2 views)
    ([SlidingWindow(2, 16, 5)] * 2 + [FullAttention(2, 16)] * 2, "bfloat16", 4),
])
def test_kinds_and_dtypes(layers, dtype, views):
    lengths = [3, 16, 33, 7, 1]
    pool = small_pool(layers, 16, lengths, dtype)
    result = run_decode(pool, lengths, attention_heads=8, tp=1, kernel=Gather(), seed=3)
    assert result.layers == views and result.batch == 5
    assert result.max_abs_err <= 1e-4, result.max_abs_err


def test_visibility_by_hand():
    positions, length = torch.arange(10), torch.tensor(10)
    assert Causal().visible(positions, torch.tensor(3)).tolist() == [True] * 3 + [False] * 7
    # the last 4 tokens, the query's own (position 9) included
    assert Window(4).visible(positions, length).tolist() == [False] * 6 + [True] * 4
    # chunks of 4: the query at position 9 is in the chunk starting at 8
    assert Chunk(4).visible(positions, length).tolist() == [False] * 8 + [True] * 2


class IgnoresWindow(Gather):
    def __call__(self, query, keys, values, batch, visibility, compute):
        return super().__call__(query, keys, values, batch, Causal(), compute)


def test_a_kernel_that_ignores_the_window_is_caught():
    lengths = [20, 33]  # longer than the window of 5
    pool = small_pool([SlidingWindow(2, 16, 5)], 16, lengths)
    result = run_decode(pool, lengths, attention_heads=4, tp=1, kernel=IgnoresWindow())
    assert not result.ok and result.max_abs_err > 1e-2


def test_flex_kernel_equals_reference():
    lengths = [1, 15, 16, 40]
    pool = small_pool([SlidingWindow(2, 16, 9)], 16, lengths)
    result = run_decode(pool, lengths, attention_heads=8, tp=1, kernel=KERNELS["flex"], seed=5)
    assert result.layers == 1 and result.max_abs_err <= 1e-4


def test_batch_is_cut_to_what_the_pool_holds():
    layers = [FullAttention(1, 8)]
    shape = pool_shape(pool_layout(layers, 16, 4, 1), layers)
    # 5 blocks: 33 tokens take 3, 16 take 1, the third sequence (needing 1 more block... 17 tokens, 2) does not fit
    result = run_decode(allocate(shape, 5, "float32", CPU), [33, 16, 17], attention_heads=1, tp=1, kernel=Gather())
    assert result.lengths == [33, 16] and result.ok


CPU_DEVICE = Device(CPU, "cpu", 256 * MiB, 256 * MiB, None, 256 * MiB)


@pytest.mark.parametrize("model", sorted(f.id for f in spec_files() if f.kind == "bundled"))
def test_pool_shapes_hold_the_planned_bytes(model):
    from kvplan.verify.target import rank_target

    # allow_unmodelled: mpt-7b's MPTForCausalLM left vLLM's registry after 0.28.0 (kvplan/engines/registered.py)
    target = rank_target(Deployment.from_mapping({"model": model, "gpu": "h200", "allow_unmodelled": True}),
                         CPU_DEVICE, 0, 1)
    blocks = max(1, target.num_blocks)
    pool = allocate(target.shape, blocks, target.plan.kv_dtype, torch.device("meta"))
    assert pool.nbytes == target.planned_bytes(blocks)
    for buffer, views in zip(pool.buffers, pool.views, strict=True):
        for group in views:  # each group's typed views cover its buffer exactly
            assert sum(t.numel() * t.element_size() for t in group.values()) == buffer.numel()


def test_pool_shapes_by_hand():
    from kvplan.verify.target import rank_target

    # Qwen2.5-7B: 28 layers x 2 x 4 KV heads x 128 x 16 tokens x 2 B = 917,504 B a block
    qwen = rank_target(Deployment.from_mapping({"model": "Qwen/Qwen2.5-7B", "gpu": "h200"}), CPU_DEVICE, 0, 1)
    pool = allocate(qwen.shape, 10, qwen.plan.kv_dtype, torch.device("meta"))
    assert qwen.shape.block_bytes == 917_504 and pool.nbytes == 9_175_040
    assert pool.views[0][0]["key"].shape == (10, 16, 4, 128) and pool.views[0][0]["key"].dtype == torch.bfloat16
    # DeepSeek-V2-Lite on an H200, vLLM 0.17 (FlashMLA: block 64): latent 512 + 64 = 576, x 64 x 1 B x 27 layers
    lite = rank_target(Deployment.from_mapping({"model": "deepseek-ai/DeepSeek-V2-Lite", "gpu": "h200",
                                                "kv_cache_dtype": "fp8", "engine_version": "0.17"}), CPU_DEVICE, 0, 1)
    latent = allocate(lite.shape, 3, lite.plan.kv_dtype, torch.device("meta")).views[0][0]["latent"]
    assert lite.shape.block_bytes == 576 * 64 * 1 * 27 and latent.shape == (3, 64, 576)
    assert latent.dtype == torch.float8_e4m3fn
    # from v0.18 FLASH_ATTN_MLA pages it in 16-token blocks: 576 x 16 x 1 B x 27
    new = rank_target(Deployment.from_mapping({"model": "deepseek-ai/DeepSeek-V2-Lite", "gpu": "h200",
                                               "kv_cache_dtype": "fp8"}), CPU_DEVICE, 0, 1)
    assert new.shape.block_bytes == 576 * 16 * 1 * 27


def options(*, cap=256 * MiB, probe=False, **knobs):
    mapping = {"model": "Qwen/Qwen2.5-0.5B", "gpu": "h100", **knobs}
    return run_module.VerifyOptions(Deployment.from_mapping(mapping), "cpu", cap, probe=probe, batch=2, context=64)


@pytest.fixture
def pools(monkeypatch):
    """Every pool verify allocates, to check that each is freed."""
    taken = []

    def recording(*args, **kwargs):
        pool = pool_module.allocate(*args, **kwargs)
        taken.append(pool)
        return pool

    monkeypatch.setattr(run_module, "allocate", recording)
    return taken


def test_a_pool_over_the_cap_ends_in_the_probe_and_frees_everything(pools):
    document = run_module.verify_rank(options(cap=8 * MiB))
    # 8 MiB = 8,388,608 B holds 42 blocks of 196,608 B (8,257,536 B)
    assert document["probe"]["max_blocks"] == 42
    assert document["allocated"] == {"num_blocks": 42, "pool_bytes": 42 * QWEN_05B_BLOCK, "fits": False, "ok": True}
    assert document["plan"]["num_blocks"] > 42 and document["probe"]["plan_error_pct"] > 0
    assert document["decode"]["ok"]
    assert pools and all(not pool.buffers and not pool.views for pool in pools)


def test_errors_and_interrupts_free_the_pool(pools, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "run_decode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_module.verify_rank(options(kv_cache_memory_bytes=4 * MiB))
    assert pools and all(not pool.buffers for pool in pools)


def run_cli(args, capsys):
    from kvplan.cli.options import PASTED

    PASTED.set(None)  # main() sets it only when a command is pasted; calls in one process would inherit it
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_contract_of_a_plan_that_fits(capsys):
    code, out, err = run_cli(["verify", "--device", "cpu", "--gpu", "h100", "--model", "Qwen/Qwen2.5-0.5B",
                              "--kv-cache-memory-bytes", "4MiB", "--context", "64", "--batch", "2", "--probe",
                              "--json"], capsys)
    document = json.loads(out)
    assert code == 0, err
    assert {"device", "plan", "allocated", "decode", "probe", "ranks"} <= set(document)
    assert {"name", "total_bytes", "free_bytes", "catalogue_id"} <= set(document["device"])
    assert {"batch", "max_abs_err", "ok", "seconds", "bandwidth_gbps", "peak_bandwidth_gbps"} <= set(document["decode"])
    assert document["device"] == {"name": "cpu", "total_bytes": 256 * MiB, "free_bytes": 256 * MiB,
                                  "catalogue_id": None}
    # 4 MiB = 4,194,304 B of KV cache: 21 blocks of 196,608 B
    assert document["plan"]["num_blocks"] == 21 and document["plan"]["pool_bytes"] == 21 * QWEN_05B_BLOCK
    assert document["allocated"]["num_blocks"] == 21 and document["allocated"]["ok"]
    assert document["decode"]["batch"] == 2 and document["decode"]["ok"] and document["ranks"] is None
    # the 256 MiB cap holds 1,365 blocks; 21 is (21 - 1365) / 1365 = -98.46% of it
    assert document["probe"] == {"max_blocks": 1365, "plan_error_pct": -98.46}


def test_pasted_launch_command(capsys):
    code, out, err = run_cli(["verify", "--device", "cpu", "--gpu", "h100", "--context", "32", "--", "vllm", "serve",
                              "Qwen/Qwen2.5-0.5B", "--kv-cache-memory-bytes", "2MiB", "--port", "8000"], capsys)
    # 2 MiB = 2,097,152 B: 10 blocks of 196,608 B
    assert code == 0, err
    assert "10 blocks x 16 tokens" in out and "bytes match the plan" in out


def test_sglang_attention_data_parallel_keeps_more_kv_heads_per_rank(capsys):
    # SGLang at TP 4 with --attn-dp-size 2 runs attention over TP 4 / 2 = 2 ranks: Qwen2.5-7B's 4 KV heads give 2
    # per rank, so one token (SGLang's page is 1 token) is 2 (K, V) x 28 layers x 2 heads x 128 x 2 B = 28,672 B;
    # 64 MiB = 67,108,864 B holds 67,108,864 // 28,672 = 2,340 pages.
    code, out, err = run_cli(["verify", "--device", "cpu", "--gpu", "h100", "--engine", "sglang", "--model",
                              "Qwen/Qwen2.5-7B", "-tp", "4", "--attn-dp-size", "2", "--kv-cache-memory-bytes", "64MiB",
                              "--context", "32", "--batch", "2", "--json"], capsys)
    document = json.loads(out)
    assert code == 0, err
    plan = document["plan"]
    assert (plan["num_blocks"], plan["block_bytes"], plan["pool_bytes"]) == (2_340, 28_672, 2_340 * 28_672)
    assert document["allocated"]["ok"] and document["decode"]["ok"]


def test_config_file_door(tmp_path, capsys):
    serve = tmp_path / "serve.yaml"
    serve.write_text("model: Qwen/Qwen2.5-0.5B\nkv-cache-memory-bytes: 1MiB\n")
    code, out, err = run_cli(["verify", "--device", "cpu", "--gpu", "h100", "--config", str(serve), "--context", "16",
                              "--json"], capsys)
    # 1 MiB = 1,048,576 B: 5 blocks of 196,608 B
    assert code == 0, err
    assert json.loads(out)["plan"] == {"num_blocks": 5, "pool_bytes": 5 * QWEN_05B_BLOCK, "block_bytes": QWEN_05B_BLOCK,
                                       "block_size": 16, "kv_dtype": "bfloat16"}


def test_two_gloo_ranks_under_tensor_parallel():
    from kvplan.verify.ranks import spawn_ranks

    document = spawn_ranks(options(tensor_parallel_size=2, kv_cache_memory_bytes=2 * MiB), 2)
    # one KV head a rank: 2 MiB holds 21 blocks of 98,304 B on each rank
    assert [rank["tp_rank"] for rank in document["ranks"]] == [0, 1]
    for rank in document["ranks"]:
        assert rank["allocated"] == {"num_blocks": 21, "pool_bytes": 21 * QWEN_05B_BLOCK_TP2, "fits": True, "ok": True}
        assert rank["decode"]["ok"]
    assert document["allocated"]["ok"] and document["decode"]["ok"]


@pytest.mark.parametrize("args, message", [
    (["--kernel", "fast"], "--kernel: unknown kernel 'fast'"),
    (["--device", "tpu"], "--device: cannot read 'tpu' as a device; write cuda, cuda:N or cpu"),
    (["--device", "mps"], "--device: verify runs on cuda or cpu, not mps"),
    (["--device", "cpu", "--nproc", "3", "-tp", "2"], "--nproc: 3 ranks for tensor parallel 2 x pipeline parallel 1"),
    (["--device", "cpu", "--max-pool-bytes", "lots"], "--max-pool-bytes: cannot read 'lots' as a size"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    code, out, err = run_cli(["verify", "--model", "Qwen/Qwen2.5-0.5B", "--gpu", "h100", *args], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"kvplan: error: {message}") and err.count("\n") == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_no_gpu_asks_for_the_cpu_dry_run(capsys):
    code, _, err = run_cli(["verify", "--model", "Qwen/Qwen2.5-0.5B"], capsys)
    assert code == 2 and "no CUDA device found; pass --device cpu for a dry run" in err


def test_without_torch_verify_says_how_to_install_it():
    probe = ("import sys; sys.modules['torch'] = None\n"
             "from kvplan.cli.app import main\n"
             "sys.exit(main(['verify', '--device', 'cpu', '--gpu', 'h100', '--model', 'Qwen/Qwen2.5-0.5B']))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == ("kvplan: error: verify: kvplan verify needs torch, which is not installed: "
                             "pip install 'kvplan[verify]'\n")


def test_help_does_not_import_torch():
    probe = ("import sys\nfrom kvplan.cli.app import main\ncode = main(['--help'])\n"
             "sys.exit(3 if 'torch' in sys.modules else code)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_probe_search():
    calls = []

    def fits(blocks):
        calls.append(blocks)
        return blocks <= 37

    assert largest_fitting(fits, 1000) == 37
    assert len(calls) <= 10  # a binary search over 1,001 counts: ceil(log2 1001) = 10 steps
    for limit in range(50):  # every answer, the bounds included
        assert largest_fitting(lambda blocks, limit=limit: blocks <= limit, 49) == limit
    assert largest_fitting(lambda blocks: False, 12) == 0
    assert plan_error_pct(110, 100) == 10.0 and plan_error_pct(5, 0) is None


@pytest.mark.parametrize("args, says", [
    (["--batch", "0"], "--batch: expected 1 to 4096 sequences"),
    (["--max-pool-bytes", "0"], "--max-pool-bytes: must be above 0"),
    (["--kernel", "triton"], "--kernel: unknown kernel"),
])
def test_bad_input_is_refused_before_torch_is_imported(args, says):
    # torch takes seconds to import; a user's mistake must not wait for it (and must not need it).
    probe = ("import sys; sys.modules['torch'] = None\nfrom kvplan.cli.app import main\n"
             f"sys.exit(main(['verify', '--device', 'cpu', '--gpu', 'h100', '--model', 'Qwen/Qwen2.5-0.5B', *{args!r}]))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and says in result.stderr and "torch" not in result.stderr


def test_a_cpu_dry_run_needs_the_gpu_it_plans_for():
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "verify", "--device", "cpu", "--model",
                             "Qwen/Qwen2.5-0.5B"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--gpu ID or --gpu-memory SIZE" in result.stderr
