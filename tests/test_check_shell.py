"""kvplan check reads launch commands as a shell, Kubernetes and Docker read them: launchers inside -c scripts,
compose strings, args-only containers on an engine's image, $(VAR) from the container's env, unresolved values,
GPU labels, multi-node pods, and the line of each flag inside a block scalar."""

from __future__ import annotations

import textwrap

import pytest
from conftest import check_findings as findings
from conftest import first_finding as rule

from kvplan.check.commands import script_commands
from kvplan.check.findings import exit_code


@pytest.mark.parametrize(("script", "commands"), [
    ("a --x=$(N); b", ["a --x=$(N)", " b"]),  # a glued ;
    ("a && b || c | d", ["a ", " b ", " c ", " d"]),
    ("a\nb # c; d\n", ["a", "b "]),  # a comment ends at the newline
    ("echo 'x; y' \"a && b\"; c", ["echo 'x; y' \"a && b\"", " c"]),  # quoted separators do not cut
    ("x=$(cat f; echo); y", ["x=$(cat f; echo)", " y"]),  # nor do those inside $( )
])
def test_script_commands(script, commands):
    assert script_commands(script) == commands


def pod(command, image="vllm/vllm-openai:v0.10.1", gpus="1", extra="", kind="Deployment", selector=""):
    body = textwrap.indent(textwrap.dedent(command).strip("\n"), " " * 10)
    return f"""\
apiVersion: apps/v1
kind: {kind}
metadata: {{name: srv}}
spec:
  template:
    spec:
      nodeSelector: {{{selector or 'nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3'}}}
      containers:
        - name: engine
          image: {image}
{body}
          resources: {{limits: {{nvidia.com/gpu: "{gpus}"}}}}
{extra}"""


def test_a_launcher_after_a_glued_semicolon_in_sh_c(tmp_path):
    found = findings(tmp_path, pod("""\
        command: [sh, -c, "bash setup.sh --n=$(X); python3 -m vllm.entrypoints.openai.api_server
                  --model Qwen/Qwen2.5-7B --max-model-len 4096 --swap-space 4"]
    """))
    assert rule(found, "KV011").status == "pass"
    # a flag vLLM removed (last in v0.17.1) is still accepted by the pinned v0.10.1 image: KV003 warns
    assert rule(found, "KV003").status == "warn" and "--swap-space" in rule(found, "KV003").message


def test_a_multi_line_bash_script_in_a_literal_block_points_at_each_flag(tmp_path):
    text = pod("""\
        command: ["/bin/bash", "-c"]
        args:
          - |
            set -e
            pip list | grep vllm
            exec vllm serve Qwen/Qwen2.5-7B \\
              --max-model-len 131072 \\
              --max-num-seqz 8
    """)
    found = findings(tmp_path, text)
    lines = text.splitlines()
    typo = rule(found, "KV002")
    assert typo.status == "fail" and lines[typo.line - 1].strip().startswith("--max-num-seqz")
    assert typo.line == 18


def test_folded_args_give_each_flag_its_own_line(tmp_path):
    text = pod("""\
        args:
          - >-
            --model Qwen/Qwen2.5-7B
            --max-model-len 131072
            --gpu-memory-utilization 0.97
    """)
    found = findings(tmp_path, text)
    lines = text.splitlines()
    assert lines[rule(found, "KV040").line - 1].strip() == "--gpu-memory-utilization 0.97"
    assert rule(found, "KV040").line == 15 and rule(found, "KV011").line == 14  # not the >- at line 12


@pytest.mark.parametrize("image", ["quay.io/modh/vllm-openai-ubi9:0.4.2", "opea/vllm-gaudi:1.2",
                                   "registry.example.com/team/vllm-cuda:2025.1"])
def test_args_only_containers_run_the_engine_their_image_names(tmp_path, image):
    found = findings(tmp_path, pod("args: [--model, Qwen/Qwen2.5-7B, --max-model-len, '4096']", image=image))
    assert rule(found, "KV011").status == "pass"
    assert rule(found, "KV000").message == "1 deployment(s) read as Kubernetes manifest"


def test_an_engine_hint_names_the_engine_of_an_image_that_does_not(tmp_path):
    text = pod("args: [--model-path, Qwen/Qwen2.5-7B, --context-length, '4096', --tp, '2']", image="corp/llm:7",
               gpus="2").replace("metadata: {name: srv}", "metadata: {name: srv, annotations: {kvplan/engine: sglang}}")
    found = findings(tmp_path, text)
    assert rule(found, "KV030").status == "pass" and "TP 2" in rule(found, "KV030").message
    assert rule(found, "KV011").status == "pass"
    assert findings(tmp_path, text.replace("kvplan/engine: sglang", "x: y"))[0].status == "skip"  # no hint, no engine


def test_dollar_paren_takes_the_env_value(tmp_path):
    found = findings(tmp_path, pod("""\
        args: [--model=$(MODEL_ID), --max-model-len=4096]
        env:
          - {name: MODEL_ID, value: Qwen/Qwen2.5-7B}
    """))
    assert rule(found, "KV001").status == "pass" and rule(found, "KV001").message.startswith("Qwen/Qwen2.5-7B")


def test_unresolved_values_skip_only_the_rules_that_need_them(tmp_path):
    found = findings(tmp_path, pod("""\
        args: [--model=$(MODEL_ID), --max-model-len=4096]
        env:
          - name: MODEL_ID
            valueFrom: {configMapKeyRef: {name: m, key: id}}
    """))
    assert rule(found, "KV001").status == "skip" and "$(MODEL_ID)" in rule(found, "KV001").message
    assert rule(found, "KV002").status == "pass" and exit_code(found) == 0
    tp = findings(tmp_path, pod("args: [--model, Qwen/Qwen2.5-7B, --tensor-parallel-size, '${TP_SIZE}']",
                                gpus="${TP_SIZE}"))
    assert rule(tp, "KV001").status == "pass"  # the model is known
    assert rule(tp, "KV030").status == "skip" and "${TP_SIZE}" in rule(tp, "KV030").message
    assert rule(tp, "KV011").status == "skip" and "--tensor-parallel-size is ${TP_SIZE}" in rule(tp, "KV011").message
    assert exit_code(tp) == 0  # not a file error: the rest of the file is checked


@pytest.mark.parametrize(("selector", "name"), [
    ("cloud.google.com/gke-accelerator: nvidia-l4", "NVIDIA L4"),
    ("cloud.google.com/gke-accelerator: nvidia-h100-80gb", "NVIDIA H100 80GB HBM3"),
    ("node.kubernetes.io/instance-type: g6e.12xlarge", "NVIDIA L40S"),
    ("node.kubernetes.io/instance-type: p4de.24xlarge", "NVIDIA A100-SXM4-80GB"),
    ("karpenter.k8s.aws/instance-gpu-name: a10g", "NVIDIA A10G"),
])
def test_gpu_labels(tmp_path, selector, name):
    found = findings(tmp_path, pod("args: [--model, Qwen/Qwen2.5-7B, --max-model-len, '4096']", selector=selector))
    assert rule(found, "KV006").status == "pass" and name in rule(found, "KV006").message


def test_an_ambiguous_karpenter_a100_says_so(tmp_path):
    found = findings(tmp_path, pod("args: [--model, Qwen/Qwen2.5-7B]", selector="karpenter.k8s.aws/instance-gpu-name: a100"))
    assert rule(found, "KV006").status == "skip" and "40 or 80 GB" in rule(found, "KV006").message


def test_amd_gpus_are_counted(tmp_path):
    text = pod("args: [--model, Qwen/Qwen2.5-7B, --tensor-parallel-size, '2']", gpus="2",
               selector="amd.com/gpu.product-name: AMD_Instinct_MI300X_OAM").replace("nvidia.com/gpu:", "amd.com/gpu:")
    found = findings(tmp_path, text)
    assert rule(found, "KV030").status == "pass" and rule(found, "KV030").message == "2 GPU(s) = TP 2 x PP 1 x DP 1"
    assert "MI300X" in rule(found, "KV006").message


def test_a_stateful_set_of_nnodes_pods_is_one_engine(tmp_path):
    # 2 pods of 8 GPUs, --nnodes 2: one engine of TP 16 over both (before: "8 GPUs but TP 16")
    text = pod("""\
        command: [python3, -m, sglang.launch_server, --model-path, Qwen/Qwen2.5-72B, --tp, '16', --nnodes, '2',
                  --node-rank, '0', --context-length, '4096']
    """, image="lmsysorg/sglang:v0.5.4", gpus="8", kind="StatefulSet")
    found = findings(tmp_path, text.replace("spec:\n  template:", "spec:\n  replicas: 2\n  template:"))
    assert rule(found, "KV030").status == "pass" and rule(found, "KV030").message.startswith("16 GPU(s) = TP 16")


def test_attention_dp_is_inside_tp(tmp_path):
    found = findings(tmp_path, pod("""\
        command: [python3, -m, sglang.launch_server, --model-path, Qwen/Qwen3-30B-A3B, --tp, '8', --dp, '8',
                  --enable-dp-attention, --context-length, '4096']
    """, image="lmsysorg/sglang:v0.5.4", gpus="8"))
    assert rule(found, "KV030").status == "pass" and rule(found, "KV030").message == "8 GPU(s) = TP 8 x PP 1 x DP 1"


def test_a_pinned_sglang_image_decides_its_flag_rules(tmp_path):
    # --enable-lora-overlap-loading... any flag the catalogue marks "gone by 0.5.20": accepted by a 0.5.4 image
    from kvplan.engines.sglang.flags import CATALOGUE

    gone = next(flag for flag, (_, when, refused, arity) in CATALOGUE.renamed.items()
                if refused and "gone by 0.5.20" in when and arity == "bool")
    command = f"command: [python3, -m, sglang.launch_server, --model-path, Qwen/Qwen2.5-7B, --{gone}]"
    pinned = findings(tmp_path, pod(command, image="lmsysorg/sglang:v0.5.4"))
    assert rule(pinned, "KV003").status == "warn"  # still there in 0.5.4: a warning with today's spelling
    current = findings(tmp_path, pod(command, image="lmsysorg/sglang:v0.5.22"))
    assert rule(current, "KV003").status == "fail" and "gone by 0.5.20" in rule(current, "KV003").message


def test_compose_strings_split_and_joined_as_docker_does(tmp_path):
    found = findings(tmp_path, """\
        x-kvplan: {gpu: l40s}
        services:
          llm:
            image: opea/vllm:latest
            command: /bin/bash -c "cd / && export X=1 && python3 -m vllm.entrypoints.openai.api_server
              --model Qwen/Qwen2.5-7B --max-model-len 4096 --num-scheduler-steps 8"
          router:
            image: opea/vllm-router:latest
            entrypoint: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
            command: --model Qwen/Qwen2.5-7B --max-model-len 8192
    """, name="compose.yaml")
    assert rule(found, "KV000").message == "2 deployment(s) read as docker-compose file"
    assert rule(found, "KV003").status == "fail" and "--num-scheduler-steps" in rule(found, "KV003").message
    # the list entrypoint joined with the string command, split as Docker splits it: max_model_len 8192
    assert any(f.deployment == "router" and f.rule == "KV011" and "8,192 tokens" in f.message for f in found)
