"""What a team requires of a deployment, and the pydantic models of a check file: a deployment entry is the
deployment's own model (deployment.schema) plus its name, the GPU count it is given, and these requirements."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kvplan.errors import KvplanError

REQUIREMENT_KEYS = ("min_concurrency", "min_kv_tokens", "min_max_model_len", "min_requests_at",
                    "max_gpu_memory_utilization")
# The keys of a `kvplan:` mapping besides requirements: they apply to every deployment of the file.
SETTING_KEYS = ("gpu", "gpu_memory", "vllm_version", "engine_version", "engine")


def _human_int(value: Any) -> Any:
    from kvplan.units import parse_human_int

    if isinstance(value, str):
        try:
            return parse_human_int(value.strip(), "value")
        except KvplanError as exc:
            raise ValueError(exc.message) from None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@lru_cache(maxsize=1)
def requirement_models() -> tuple[Any, Any]:
    """(the requirements model, the min_requests_at item model)."""
    from typing import Annotated

    from pydantic import BeforeValidator, ConfigDict, Field, Strict, create_model

    tokens = Annotated[int, Strict(), BeforeValidator(_human_int), Field(ge=1, le=2**40)]
    at = create_model(
        "RequestsAt", __config__=ConfigDict(extra="forbid"),
        context=(tokens, Field(description="Tokens per request, prompt plus output (32K = 32,768).")),
        requests=(Annotated[int, Strict(), Field(ge=1, le=2**31)], Field(description="Requests of that length "
                                                                                      "at once.")))
    requirements = create_model(
        "Requirements", __config__=ConfigDict(extra="forbid"),
        min_concurrency=(Annotated[float, Field(gt=0, allow_inf_nan=False)] | None,
                         Field(None, description="Requests of max_model_len tokens the KV cache holds at once.")),
        min_kv_tokens=(tokens | None, Field(None, description="Tokens the KV cache holds in all (1M = 1,048,576).")),
        min_max_model_len=(tokens | None, Field(None, description="The longest request must be at least this long.")),
        min_requests_at=(at | list[at] | None,  # type: ignore[valid-type,arg-type]
                         Field(None, description="{context: N, requests: M}: M requests of N tokens at once.")),
        max_gpu_memory_utilization=(Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None,
                                    Field(None, description="The share of GPU memory the engine may take, at most.")),
    )
    return requirements, at


def read_requirements(raw: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Validated requirements (min_requests_at always a list), and the problems as (key, message)."""
    from pydantic import ValidationError

    model, _ = requirement_models()
    try:
        parsed = model.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            location = [str(part) for part in error["loc"] if not str(part).startswith(("RequestsAt", "list["))]
            problems.append((location[0] if location else "requirements",
                             f"{'.'.join(location)}: {error['msg']}"))
        return {}, problems
    values = {key: value for key, value in parsed.model_dump().items() if value is not None}
    if "min_requests_at" in values and isinstance(values["min_requests_at"], dict):
        values["min_requests_at"] = [values["min_requests_at"]]
    return values, []


@lru_cache(maxsize=1)
def entry_model() -> Any:
    """One entry of a check file's deployments: the deployment's knobs, its name, GPU count, requirements."""
    from typing import Annotated

    from pydantic import Field, Strict, create_model

    from kvplan.deployment.schema import deployment_model

    requirements, _ = requirement_models()
    extra = {name: (info.annotation, info) for name, info in requirements.model_fields.items()}
    return create_model(  # type: ignore[call-overload]
        "DeploymentEntry", __base__=deployment_model(),
        name=(Annotated[str, Strict()], Field(description="Names the deployment in every report.")),
        gpu_count=(Annotated[int, Strict(), Field(ge=1, le=4096)] | None,
                   Field(None, description="GPUs the deployment is given; must equal TP x PP x DP.")),
        **extra)


def check_file_schema() -> dict[str, Any]:
    """The JSON Schema of a kvplan deployment file (kvplan check --schema). Knobs may also be spelled with
    dashes and by their aliases, as the file reader takes them: each spelling is a twin property."""
    import copy

    entry = entry_model().model_json_schema()
    properties = entry.get("properties", {})
    for name in list(properties):
        spellings = [s for s in properties[name].get("x-spellings", []) if " (" not in s]
        # dict.fromkeys, not a set: a set of strings iterates in the order of the process's string hashes
        # (PYTHONHASHSEED), so the twins' order, and the printed schema, changed from run to run
        for spelling in dict.fromkeys([name.replace("_", "-"), *spellings]):
            if spelling != name:
                properties[spelling] = copy.deepcopy(properties[name])
    definitions = entry.pop("$defs", {})
    # Any other key is an engine flag (enable-prefix-caching: true), checked against the engine's own catalogue.
    entry["additionalProperties"] = True
    settings = {
        "type": "object", "additionalProperties": False,
        "description": "Settings for every deployment of the file (and of vLLM --config files, which vLLM "
                       "ignores): the GPU, engine version and requirements.",
        "properties": {**{key: {"type": ["string", "number"]} for key in SETTING_KEYS},
                       **{key: properties[key] for key in REQUIREMENT_KEYS}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kvplan deployment file",
        "description": "Deployments for kvplan check: each with a name, model, GPU, engine knobs by vLLM's names "
                       "(dashes or underscores) and requirements.",
        "type": "object",
        "required": ["deployments"],
        "additionalProperties": False,
        "properties": {"kvplan": settings, "deployments": {"type": "array", "items": entry}},
        **({"$defs": definitions} if definitions else {}),
    }
