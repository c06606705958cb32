"""kvplan models: list, show and import specs."""

import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli.options import JsonFlag, ModelArg, RevisionOpt, TokenOpt
from kvplan.cli.output import console, print_json
from kvplan.errors import KvplanError
from kvplan.models import sources
from kvplan.models.model import ModelSpec, spec_to_dict

app = typer.Typer(help="Bundled and user model specs.", no_args_is_help=True)


def served_dtype(spec: ModelSpec) -> str:
    """The dtype `kvplan estimate` serves SPEC in with default flags (float32 and fp8 checkpoints in bfloat16), which
    is also the KV cache's dtype: the engines' own rule, so that the list shows what an estimate uses."""
    from kvplan.deployment import Deployment
    from kvplan.engines.common import model_dtype

    served = model_dtype(spec, Deployment())
    return served[0] if isinstance(served, tuple) else served  # (dtype, note) since the engines' refactor


def _row(spec: ModelSpec, label: str) -> dict[str, object]:
    from kvplan.units import dtype_bytes

    kv_dtype = served_dtype(spec)
    try:
        kv_bytes = dtype_bytes(kv_dtype)
    except KvplanError:
        kv_bytes = 2
    return {"id": spec.id, "layers": spec.num_layers, "kv_layers": spec.num_kv_layers,
            "kv_heads": spec.num_kv_heads, "head_dim": spec.head_dim, "attention": spec.attention,
            "params": spec.params.total, "params_exact": spec.params.exact, "dtype": spec.dtype,
            "kv_dtype": kv_dtype, "kv_bytes_per_token": spec.kv_bytes_per_token(kv_bytes), "source": label}


def model_rows() -> tuple[list[dict[str, object]], list[str]]:
    """The rows of `models list --json` (and kvplan serve's /api/models), and a note for each spec skipped."""
    rows, skipped = [], []
    for spec_file in sources.spec_files():
        try:
            rows.append(_row(sources.read_spec_file(spec_file), spec_file.label))
        except KvplanError as exc:  # one broken user spec must not hide the others
            skipped.append(f"skipped {spec_file.kind} spec: {' '.join(str(exc).split())}")
    return rows, skipped


@app.command("list", help="Table of bundled and user specs.")
def list_models(json_output: JsonFlag = False) -> None:
    rows, skipped = model_rows()
    for note in skipped:
        sys.stderr.write(f"kvplan: note: {note}\n")
    if json_output:
        print_json(rows)
        return
    from rich.table import Table

    table = Table(title=f"{len(rows)} model specs (KV bytes per token at the dtype estimate serves them in, all "
                        "layers; float32 and fp8 checkpoints in bfloat16)")
    for column in ("id", "layers", "KV layers", "KV heads", "head dim", "attention", "params", "KV B/token",
                   "source"):
        table.add_column(column, justify="left" if column in ("id", "attention", "source") else "right",
                         no_wrap=column == "id")
    for r in rows:
        params = f"{r['params']:,}" + ("" if r["params_exact"] else "~")
        table.add_row(str(r["id"]), str(r["layers"]), str(r["kv_layers"]), str(r["kv_heads"]), str(r["head_dim"]),
                      str(r["attention"]), params, f"{r['kv_bytes_per_token']:,}", str(r["source"]))
    from rich.console import Console
    from rich.measure import Measurement

    out = console()
    # ids are copied from this table: give it the width it needs rather than cut them short
    needed = Measurement.get(out, out.options.update_width(1000), table).maximum
    if needed > out.width and not out.is_terminal:
        out = Console(highlight=False, emoji=False, width=min(needed, 300))
    out.print(table)
    console().print("[dim]~ = parameter count derived from the config layout, not checked against a published "
                  f"count. User specs: {sources.user_dir()} (${sources.USER_SPEC_DIR_ENV})[/dim]")


@app.command("show", help="The normalized spec of MODEL and where it came from.")
def show(model: ModelArg, json_output: JsonFlag = False, revision: RevisionOpt = None,
         token: TokenOpt = None,
         allow_unmodelled: Annotated[bool, typer.Option("--allow-unmodelled", help="Show a model whose config has "
                                                        "a key kvplan does not model (a note names it).")] = False,
         ) -> None:
    spec = sources.resolve(model, revision, token, allow_unmodelled=allow_unmodelled)
    data = spec_to_dict(spec)
    label = spec.source.kind
    if label == "user" and sources.overrides_bundled(spec.id):
        label = "user (overrides bundled)"
    data["source"]["label"] = label
    data["lookup_order"] = list(sources.LOOKUP_ORDER)
    if json_output:
        print_json(data)
        return
    console().print(f"[bold]{spec.id}[/bold]  ({spec.architecture}, model_type {spec.model_type})")
    console().print(f"source: {label}: {spec.source.location}"
                  + (f" @ {spec.source.revision}" if spec.source.revision else ""))
    console().print(f"lookup order: {' -> '.join(sources.LOOKUP_ORDER)}")
    exact = "exact" if spec.params.exact else "derived, not checked against a published count"
    console().print(f"parameters: {spec.params.total:,} ({exact}); dtype {spec.dtype}; "
                  f"max context {spec.max_context:,}")
    console().print(f"layers: {spec.num_layers} ({spec.num_kv_layers} hold KV); hidden {spec.hidden_size}; "
                  f"heads {spec.num_attention_heads}; vocab {spec.vocab_size:,}")
    for run in data["layers"]:
        last = run["first"] + run["count"] - 1
        fields = ", ".join(f"{k} {v}" for k, v in run.items() if k not in ("first", "count", "kind"))
        console().print(f"  layers {run['first']}-{last}: {run['kind']}" + (f" ({fields})" if fields else ""))
    console().print(f"KV bytes per token at 16-bit: {spec.kv_bytes_per_token(2):,}")
    if spec.moe:
        m = spec.moe
        console().print(f"MoE: {m.num_experts} experts, {m.experts_per_token} per token, width "
                      f"{m.expert_intermediate_size}, shared {m.shared_experts}, dense layers {list(m.dense_layers)}, "
                      f"no MLP {list(m.mlp_free_layers)}")
    if spec.quantization:
        q = spec.quantization
        kv = f", KV cache {q.kv_cache_quant_algo}" if q.kv_cache_quant_algo else ""
        console().print(f"quantization: {q.method}, {q.bits} bits, group {q.group_size}{kv}"
                        + (f" (from {q.source})" if q.source else ""))
    for note in spec.notes:
        console().print(f"[yellow]note:[/yellow] {note}")


@app.command("import", help="Write a trimmed spec from a full config.json into the user spec directory.")
def import_spec(
    path: Annotated[Path, typer.Argument(help="config.json or a model directory holding one.")],
    model_id: Annotated[str | None, typer.Option("--id", help="Id to store it under (org/name).")] = None,
    params: Annotated[int | None, typer.Option("--params", help="Published exact parameter count.")] = None,
    source: Annotated[str | None, typer.Option("--source", help="Where the config came from.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing user spec.")] = False,
) -> None:
    from kvplan.models.fields import trimmed
    from kvplan.models.hf_config import load_json, parse_config
    from kvplan.models.model import SpecSource

    config_path = path / "config.json" if path.is_dir() else path
    if not config_path.is_file():
        raise KvplanError("no such config.json", str(config_path))
    data = load_json(config_path.read_bytes(), str(config_path))
    name = model_id or sources.name_from_config(data)
    if not name:
        raise KvplanError("cannot tell the model id from the config; pass --id org/name", str(config_path))
    sources.check_spec_id(name, "--id" if model_id else f"{config_path} (_name_or_path; pass --id org/name)")
    if params is not None and params <= 0:
        raise KvplanError(f"must be positive, got {params}", "--params")
    accessed: set[tuple[str, ...]] = set()
    quant = sources.quant_document(config_path)
    parse_config(data, name, SpecSource("local", str(config_path)), str(config_path), accessed,
                 quant_file=sources.read_quant_file(config_path))
    meta: dict[str, object] = {"source": source or str(config_path.resolve()), "revision": None}
    if params is not None:
        meta["params"] = params
    target_dir = sources.user_dir()
    target = target_dir / sources.spec_file_name(name)
    if target.exists() and not force:
        raise KvplanError("a user spec with this id exists; pass --force to replace it", str(target))
    bundled = next((f for f in sources.spec_files() if f.id.lower() == name.lower() and
                    (f.kind == "bundled" or f.overrides)), None)
    if bundled is not None and not force:
        raise KvplanError(f"{name} is a bundled spec's id: a user spec under it would be used in its place "
                          "everywhere; pass --id another name, or --force to override the bundled spec",
                          "--id" if model_id else str(config_path))
    target_dir.mkdir(parents=True, exist_ok=True)
    text = sources.dump_document(name, trimmed(data, accessed), meta, quant)
    handle, temp = tempfile.mkstemp(dir=target_dir, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temp, target)
    console().print(f"wrote {target}" + (" (overrides the bundled spec of this id)" if bundled else ""))
