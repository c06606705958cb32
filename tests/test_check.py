"""kvplan check's rules: each passes on a sound deployment and fails (or warns) on a broken one. Expected
figures are derived by hand in the comments; the simple engine is used where a test needs exact arithmetic."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kvplan.check import Options, check_paths
from kvplan.check.findings import exit_code

# The seed example of tests/test_cli.py: Qwen2.5-7B (28 layers, 4 KV heads of 128) on the simple engine,
# 24 GB at utilization 1.0, 15.2 GB of weights, 1 GB reserve: 7.8e9 bytes of KV cache. One block of 16 tokens
# in float16 is 2 x 28 x 4 x 128 x 16 x 2 = 917,504 bytes, so 7.8e9 // 917,504 = 8,501 blocks = 136,016 tokens;
# a 32,768-token request holds 2,048 blocks: 8,501 / 2,048 = 4.15 at once.
SEED = """\
    model: Qwen/Qwen2.5-7B
    engine: simple
    gpu_memory: 24GB
    weights_memory: 15.2GB
    reserve: 1GB
    gpu_memory_utilization: 1.0
    dtype: float16
"""


def check(tmp_path, text, name="fleet.yaml", **options):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return check_paths([str(path)], Options(**options)).findings


def deployment_file(*entries):
    body = "deployments:\n"
    for entry in entries:
        lines = textwrap.dedent(entry).strip().splitlines()
        body += "  - " + lines[0] + "\n" + "".join(f"    {line}\n" for line in lines[1:])
    return body


def outcome(findings, rule, deployment=None):
    chosen = [f for f in findings if f.rule == rule and (deployment is None or f.deployment == deployment)]
    assert chosen, f"no {rule} finding in {[(f.rule, f.deployment) for f in findings]}"
    return chosen[0]


def seeded(name, extra=""):
    return f"name: {name}\n{textwrap.dedent(SEED)}{textwrap.dedent(extra)}"


def test_seed_numbers_reach_the_findings(tmp_path):
    findings = check(tmp_path, deployment_file(seeded("seed", "max_model_len: 32768\n")))
    fits = outcome(findings, "KV011")
    assert fits.status == "pass"
    assert "136,016 tokens" in fits.message and "4.15 such requests" in fits.message


@pytest.fixture
def hub_offline(monkeypatch):
    """The Hub out of reach, as in a CI runner without network: huggingface_hub's offline switch."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


@pytest.mark.parametrize(("model", "strict", "status"), [("Qwen/Qwen2.5-7B", False, "pass"),
                                                         ("Qwen/Qwen2.5-7BB", False, "warn"),
                                                         ("Qwen/Qwen2.5-7BB", True, "fail")])
def test_model_resolvable(tmp_path, hub_offline, model, strict, status):
    findings = check(tmp_path, deployment_file(f"name: a\nmodel: {model}\ngpu: h100\n"), strict=strict)
    found = outcome(findings, "KV001")
    assert found.status == status
    if status != "pass":  # the Hub could not be asked: a warning by default, a failure with --strict
        assert "HF_HUB_OFFLINE is set" in found.message
        assert outcome(findings, "KV011").status == "skip"
        assert exit_code(findings) == (1 if strict else 0)


def test_an_unresolved_model_is_counted_and_a_broken_local_config_fails(tmp_path, hub_offline):
    from kvplan.check.reporters import REPORTERS

    broken = tmp_path / "m" / "config.json"
    broken.parent.mkdir()
    broken.write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096}')  # no num_hidden_layers
    path = tmp_path / "fleet.yaml"
    path.write_text(deployment_file("name: a\nmodel: org/not-bundled\ngpu: h100\n",
                                    f"name: b\nmodel: {broken}\ngpu: h100\n"))
    report = check_paths([str(path)], Options())
    assert outcome(report.findings, "KV001", "a").status == "warn"
    assert outcome(report.findings, "KV001", "b").status == "fail"  # a file that is there and broken is a mistake
    assert report.unresolved_models == 1
    assert "2 deployment(s), 1 with an unresolved model (capacity rules skipped)" in REPORTERS["text"]().render(report)


def test_no_model_fails_model_rule(tmp_path):
    findings = check(tmp_path, deployment_file("name: a\ngpu: h100\nmax_model_len: 4096\n"))
    assert outcome(findings, "KV001").status == "fail"


def test_known_flags(tmp_path):
    findings = check(tmp_path, deployment_file("name: good\nmodel: Qwen/Qwen2.5-7B\ngpu: h100\nmax-model-len: 4096\n",
                                               "name: bad\nmodel: Qwen/Qwen2.5-7B\ngpu: h100\nmax_model_lenn: 4096\n"))
    assert outcome(findings, "KV002", "good").status == "pass"
    bad = outcome(findings, "KV002", "bad")
    assert bad.status == "fail" and "did you mean --max-model-len" in bad.message
    assert bad.line == 9  # the key's own line: deployments: / 4 keys of good / name, model, gpu / the typo


MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:{tag}
          command: ["vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "8192"{extra}]
          resources:
            limits: {{nvidia.com/gpu: {gpus}}}
"""


def manifest(tag="v0.11.0", extra="", gpus=1):
    return MANIFEST.format(tag=tag, extra=extra, gpus=gpus)


# kvplan/engines/vllm/flags.py RENAMED: --num-scheduler-steps "last in v0.10.0, unrecognized from v0.10.1".
@pytest.mark.parametrize(("tag", "status"), [("v0.11.0", "fail"), ("v0.10.0", "warn")])
def test_current_flags_follow_the_pinned_version(tmp_path, tag, status):
    findings = check(tmp_path, manifest(tag, ', "--num-scheduler-steps", "8"'), "k8s.yaml", gpu="h100")
    found = outcome(findings, "KV003")
    assert found.status == status
    assert "num-scheduler-steps" in found.message and "v0.10.0" in found.message


def test_current_flags_pass_without_old_flags(tmp_path):
    assert outcome(check(tmp_path, manifest(), "k8s.yaml", gpu="h100"), "KV003").status == "pass"


@pytest.mark.parametrize(("extra", "status", "words"), [
    ("max_model_len: 4096\n", "pass", ""),
    ("max_model_len: -5\n", "fail", "must be within"),
    ("gpu_memory_utilization: 1.5\n", "fail", "must be within (0, 1]"),
    # Qwen2.5-7B's config: max_position_embeddings 131,072; vLLM refuses a longer max_model_len
    ("max_model_len: 200000\n", "fail", "greater than the derived max_model_len (131072)"),
])
def test_valid_values(tmp_path, extra, status, words):
    found = outcome(check(tmp_path, deployment_file(f"name: a\nmodel: Qwen/Qwen2.5-7B\ngpu: h100\n{extra}")), "KV004")
    assert found.status == status
    assert words in found.message
    if status == "fail":
        assert found.line == 5  # deployments: / name / model / gpu / the bad key


def test_invalid_requirement_is_a_value_error(tmp_path):
    found = outcome(check(tmp_path, deployment_file("name: a\nmodel: Qwen/Qwen2.5-7B\ngpu: h100\nmin_kv_tokens: lots\n")),
                    "KV004")
    assert found.status == "fail" and "min_kv_tokens" in found.message


# Llama-3.1-8B: 32 attention heads, 8 KV heads. vLLM: heads must divide by TP.
@pytest.mark.parametrize(("tp", "status"), [(2, "pass"), (3, "fail")])
def test_parallel_accepted(tmp_path, tp, status):
    findings = check(tmp_path, deployment_file(f"name: a\nmodel: meta-llama/Llama-3.1-8B\ngpu: h100\n"
                                               f"tensor_parallel_size: {tp}\n"))
    found = outcome(findings, "KV005")
    assert found.status == status
    if status == "fail":
        assert "Total number of attention heads (32) must be divisible by tensor parallel size (3)" in found.message
        assert found.line == 5


def test_parallel_checked_without_a_gpu(tmp_path):
    findings = check(tmp_path, deployment_file("name: a\nmodel: meta-llama/Llama-3.1-8B\ntensor_parallel_size: 3\n"))
    assert outcome(findings, "KV005").status == "fail"
    assert outcome(findings, "KV006").status == "skip"


@pytest.mark.parametrize(("gpu", "status"), [("h100", "pass"), ("h1000", "fail")])
def test_gpu_known(tmp_path, gpu, status):
    found = outcome(check(tmp_path, deployment_file(f"name: a\nmodel: Qwen/Qwen2.5-7B\ngpu: {gpu}\n")), "KV006")
    assert found.status == status


def test_no_gpu_skips_the_rules_that_need_one(tmp_path):
    findings = check(tmp_path, deployment_file("name: a\nmodel: Qwen/Qwen2.5-7B\nmax_model_len: 4096\n"))
    assert {f.rule: f.status for f in findings}["KV010"] == "skip"
    assert "no GPU known" in outcome(findings, "KV011").message
    assert outcome(findings, "KV001").status == "pass"
    # --gpu supplies one for files that name none
    again = check(tmp_path, deployment_file("name: a\nmodel: Qwen/Qwen2.5-7B\nmax_model_len: 4096\n"), gpu="h100")
    assert outcome(again, "KV010").status == "pass"


def test_weights_fit(tmp_path):
    good = check(tmp_path, deployment_file(seeded("a", "max_model_len: 4096\n")))
    # 25 GB of weights on a 24 GB budget leave nothing for the pool
    bad = check(tmp_path, deployment_file(seeded("a", "max_model_len: 4096\n").replace("15.2GB", "25GB")))
    assert outcome(good, "KV010").status == "pass"
    assert "7.26 GiB left" in outcome(good, "KV010").message  # 7.8e9 / 2^30 = 7.26
    assert outcome(bad, "KV010").status == "fail"
    assert outcome(bad, "KV011").status == "skip"


def test_request_fits_quotes_the_estimated_maximum(tmp_path):
    # reserve 2 GB: 6.8e9 bytes of KV cache = 7,411 blocks of 917,504 bytes = 118,576 tokens at most;
    # a 131,072-token request needs 8,192 blocks = 7,516,192,768 bytes = 7.00 GiB.
    findings = check(tmp_path, deployment_file(seeded("a", "max_model_len: 131072\n").replace("reserve: 1GB",
                                                                                           "reserve: 2GB")))
    found = outcome(findings, "KV011")
    assert found.status == "fail"
    assert "the estimated maximum model length is 118576" in found.message and "7.00 GiB" in found.message
    assert found.line == 10  # max_model_len's line


@pytest.mark.parametrize(("need", "status"), [("4", "pass"), ("5", "fail")])
def test_min_concurrency(tmp_path, need, status):
    findings = check(tmp_path, deployment_file(seeded("a", f"max_model_len: 32768\nmin_concurrency: {need}\n")))
    found = outcome(findings, "KV020")
    assert found.status == status and "4.15 requests" in found.message


def test_min_concurrency_capped_by_max_num_seqs(tmp_path):
    findings = check(tmp_path, deployment_file(seeded("a", "max_model_len: 32768\nmax_num_seqs: 2\nmin_concurrency: 3\n")))
    assert outcome(findings, "KV020").status == "fail"


@pytest.mark.parametrize(("need", "status"), [("136016", "pass"), ("136017", "fail")])
def test_min_kv_tokens(tmp_path, need, status):
    found = outcome(check(tmp_path, deployment_file(seeded("a", f"max_model_len: 32768\nmin_kv_tokens: {need}\n"))),
                    "KV021")
    assert found.status == status


@pytest.mark.parametrize(("need", "status"), [("32K", "pass"), ("32769", "fail")])
def test_min_max_model_len(tmp_path, need, status):
    found = outcome(check(tmp_path, deployment_file(seeded("a", f"max_model_len: 32768\nmin_max_model_len: {need}\n"))),
                    "KV022")
    assert found.status == status


# 8,192-token requests hold 512 blocks each: 8,501 // 512 = 16 at once.
@pytest.mark.parametrize(("requests", "status"), [(16, "pass"), (17, "fail")])
def test_min_requests_at(tmp_path, requests, status):
    findings = check(tmp_path, deployment_file(seeded(
        "a", f"max_model_len: 32768\nmin_requests_at: {{context: 8K, requests: {requests}}}\n")))
    found = outcome(findings, "KV023")
    assert found.status == status and "16 requests of 8,192 tokens" in found.message


def test_min_requests_longer_than_max_model_len_fail(tmp_path):
    findings = check(tmp_path, deployment_file(seeded(
        "a", "max_model_len: 4096\nmin_requests_at: [{context: 8192, requests: 1}]\n")))
    assert outcome(findings, "KV023").status == "fail"


@pytest.mark.parametrize(("limit", "status"), [("1.0", "pass"), ("0.95", "fail")])
def test_max_gpu_memory_utilization(tmp_path, limit, status):
    findings = check(tmp_path, deployment_file(seeded("a", f"max_model_len: 4096\nmax_gpu_memory_utilization: {limit}\n")))
    assert outcome(findings, "KV024").status == status


@pytest.mark.parametrize(("gpus", "status"), [(2, "pass"), (4, "fail")])
def test_gpu_count(tmp_path, gpus, status):
    text = manifest(extra=', "-tp", "2"', gpus=gpus)
    found = outcome(check(tmp_path, text, "k8s.yaml", gpu="h100"), "KV030")
    assert found.status == status
    assert found.line == 12  # the nvidia.com/gpu limit


@pytest.mark.parametrize(("value", "status"), [("0.95", "pass"), ("0.97", "warn")])
def test_high_utilization(tmp_path, value, status):
    findings = check(tmp_path, deployment_file(f"name: a\nmodel: Qwen/Qwen2.5-7B\ngpu: h100\n"
                                               f"gpu_memory_utilization: {value}\n"))
    assert outcome(findings, "KV040").status == status
    assert exit_code(findings) == 0  # a warning alone does not fail the check


# 136,016 tokens: 2 x 65,536 = 131,072 fits twice; 2 x 100,000 = 200,000 does not (one 100,000 request,
# 6,250 blocks, still fits the 8,501).
@pytest.mark.parametrize(("length", "status"), [(65536, "pass"), (100000, "warn")])
def test_small_pool(tmp_path, length, status):
    findings = check(tmp_path, deployment_file(seeded("a", f"max_model_len: {length}\n")))
    assert outcome(findings, "KV011").status == "pass"
    assert outcome(findings, "KV041").status == status


# Llama-3.1-8B has 8 KV heads: TP 16 puts each head on 2 ranks.
@pytest.mark.parametrize(("tp", "status"), [(8, "pass"), (16, "warn")])
def test_replicated_kv_heads(tmp_path, tp, status):
    findings = check(tmp_path, deployment_file(f"name: a\nmodel: meta-llama/Llama-3.1-8B\ngpu: h100\n"
                                               f"tensor_parallel_size: {tp}\n"))
    found = outcome(findings, "KV042")
    assert found.status == status
    if status == "warn":
        assert "replicated on 2 ranks" in found.message


@pytest.mark.parametrize(("tag", "status"), [("latest", "warn"), ("v0.10.0", "pass")])
def test_floating_tag_with_removed_flags(tmp_path, tag, status):
    findings = check(tmp_path, manifest(tag, ', "--num-scheduler-steps", "8"'), "k8s.yaml", gpu="h100")
    found = outcome(findings, "KV043")
    assert found.status == status
    assert found.line == 9  # the image


def test_floating_tag_without_removed_flags_passes(tmp_path):
    assert outcome(check(tmp_path, manifest("latest"), "k8s.yaml", gpu="h100"), "KV043").status == "pass"


def test_model_config(tmp_path):
    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures" / "check"
    good = check_paths([str(fixtures / "qwen2.5-7b")], Options()).findings
    found = outcome(good, "KV050")
    # 2 (K and V) x 28 layers x 4 KV heads x 128 x 2 bytes (bfloat16) = 57,344
    assert found.status == "pass" and "57,344 KV bytes per token" in found.message and "4 KV heads of 128" in found.message
    bad = outcome(check_paths([str(fixtures / "incomplete-config.json")], Options()).findings, "KV050")
    assert bad.status == "fail" and "num_attention_heads" in bad.message


def test_select_and_ignore(tmp_path):
    text = deployment_file(seeded("a", "max_model_len: 4096\n"))
    only = check(tmp_path, text, select=["KV01"])
    assert {f.rule for f in only} == {"KV000", "KV010", "KV011"}  # the file's own record is no rule's to drop
    rest = check(tmp_path, text, ignore=["KV0"])
    assert [(f.rule, f.status) for f in rest] == [("KV000", "pass")]
    with pytest.raises(Exception, match="no rule id starts with 'KV9'"):
        check(tmp_path, text, select=["KV9"])


def test_an_unknown_gpu_typed_to_check_is_refused_up_front(tmp_path):
    # One error for the user's own --gpu, exit 2, before any file is read (not a KV006 failure per deployment).
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "check", "--gpu", "l40z", str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("kvplan: error: --gpu: unknown GPU 'l40z'; did you mean l40")
