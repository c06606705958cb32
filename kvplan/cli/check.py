"""kvplan check: parse the options, run the check, render the findings in the chosen format."""

from typing import Annotated

import typer

HELP = ("Check deployment files: kvplan's own, vLLM --config, Kubernetes, KServe, KubeAI, KubeRay RayService, "
        "Ray Serve LLM, llm-d values, Helm values, compose, engine options, config.json.")
EPILOG = (
    "PATH may be a file, a directory (searched for *.yaml, *.yml and config.json) or a glob. Each file's kind is "
    "read from its content (--kind forces one). Rule ids are stable: KV000 the file itself, KV001-KV006 model, "
    "flags, values, parallelism and GPU, KV010-KV011 memory, KV020-KV024 the file's requirements, KV030 the GPU "
    "count, KV040-KV043 warnings, KV050 config.json; --select KV01 keeps KV010-KV019, --ignore KV041 drops one; "
    "--list-rules lists them with their fixes. The GPU comes from the file: a deployment's gpu, a "
    "kvplan: {gpu: ...} mapping or, in a vLLM --config file, a # kvplan: {gpu: ...} comment, a node label "
    "(nvidia.com/gpu.product, GKE's accelerator, EC2 instance types, Karpenter's GPU name, AMD's product name), "
    "a KubeAI resource profile or a Ray accelerator_type; else --gpu; without one, the rules that need "
    "it are skipped.  Examples:  kvplan check deploy/ · kvplan check --gpu h100 serve.yaml · "
    "kvplan check 'k8s/**/*.yaml' --format github.  Every file gets a record: checked, skipped with the reason "
    "(a file found in a folder that is of no kind check reads), or an error (a file named here that is of none).  "
    "Exit codes: 0 every rule passes (warnings allowed); 1 a rule failed; 2 a file cannot be read or is invalid."
)

TAKES_PASTED = False
ENDS_AT_ONCE = True  # reads and prints, leaves nothing open (kvplan.cli.app.end)

FORMATS = ("text", "json", "github", "junit", "sarif")


def check(
    paths: Annotated[list[str] | None, typer.Argument(help="Files, directories or globs.", show_default=False)] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU for files that name none (catalogue id).")] = None,
    output_format: Annotated[str, typer.Option("--format", help="text, json, github, junit or sarif.")] = "text",
    select: Annotated[str | None, typer.Option("--select", help="Only these rule ids or prefixes, comma-separated.")] = None,
    ignore: Annotated[str | None, typer.Option("--ignore", help="Drop these rule ids or prefixes, comma-separated.")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="Read every file as this kind: deployments, "
                                             "helm-values, compose, kserve, kubeai, rayservice, ray-serve-llm, "
                                             "llm-d, kubernetes, hf-config, engine-options, vllm-config.")] = None,
    models: Annotated[str | None, typer.Option("--models", help="A folder of config.json files (DIR/ORG/NAME/"
                                               "config.json) for models that are not bundled: CI without the Hub.")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="A model that cannot be resolved fails KV001 (default: "
                                         "a warning, its capacity rules skipped and counted).")] = False,
    skip_unknown: Annotated[bool, typer.Option(
        "--skip-unknown", help="A named file of no kind check reads is skipped, not an error (the pre-commit hook "
        "passes every YAML file).")] = False,
    schema: Annotated[bool, typer.Option("--schema", help="Print the deployment file's JSON Schema and exit.")] = False,
    list_rules: Annotated[bool, typer.Option("--list-rules", help="List the rules and exit.")] = False,
) -> int:
    import os
    import sys

    from kvplan.errors import KvplanError

    if schema:
        from kvplan.check.requirements import check_file_schema
        from kvplan.cli.output import print_json

        print_json(check_file_schema())
        return 0
    if list_rules:
        from kvplan.check.reporters import rule_table

        sys.stdout.write(rule_table())
        return 0
    if output_format not in FORMATS:
        raise KvplanError(f"unknown format {output_format!r}; choose from {', '.join(FORMATS)}", "--format")
    if not paths:
        raise KvplanError("no files to check: give files, directories or globs", "kvplan check")

    from kvplan.check import Options, check_paths
    from kvplan.check.findings import exit_code
    from kvplan.check.reporters import REPORTERS

    if gpu is not None:
        from kvplan.hardware import find_gpu

        find_gpu(gpu)  # a GPU the user typed is checked once, up front, not blamed on every deployment
    if models is not None and not os.path.isdir(models):
        raise KvplanError("not a folder of model configs", f"--models {models}")
    if select is not None and not _codes(select):
        raise KvplanError("no rule ids given: name ids or prefixes (KV011, KV01); leave --select out for all rules",
                          "--select")
    options = Options(gpu, kind, _codes(select), _codes(ignore), skip_unknown, models, strict)
    report = check_paths(list(paths), options)
    sys.stdout.write(REPORTERS[output_format]().render(report))
    return exit_code(report.findings)


def _codes(text: str | None) -> list[str]:
    return [code.strip() for code in (text or "").split(",") if code.strip()]


COMMAND = check
