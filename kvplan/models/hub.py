"""The Hugging Face Hub source: config.json through huggingface_hub, so that revision, token, cache,
HF_HUB_OFFLINE and HF_ENDPOINT behave as they do for every other Hub tool."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kvplan.errors import KvplanError

# Unless telemetry is off, huggingface_hub 2.x first fetches an "agent harness" registry from the endpoint (with its
# own 3 s timeout) to build the User-Agent of each request: a second wait on a Hub that does not answer. kvplan turns
# telemetry off for its own process unless the user set the variable; it must be set before huggingface_hub reads it.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def env_seconds(name: str) -> int | None:
    """A timeout variable that huggingface_hub reads with int() when it is imported, and would fail on."""
    value = os.environ.get(name)
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise KvplanError(f"must be a whole number of seconds, got {value!r}", name) from None


for _name in ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"):
    env_seconds(_name)

from huggingface_hub import (  # noqa: E402
    constants,
    get_hf_file_metadata,
    get_safetensors_metadata,
    hf_hub_download,
    hf_hub_url,
    try_to_load_from_cache,
)
from huggingface_hub.errors import (  # noqa: E402
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import disable_progress_bars  # noqa: E402
from huggingface_hub.utils import logging as hf_logging  # noqa: E402

from kvplan.models.model import SpecSource  # noqa: E402
from kvplan.models.modelopt import QUANT_FILE  # noqa: E402

OFFLINE_HINT = "use a bundled id (kvplan models list) or a local config.json path"


def cached_config(repo_id: str, revision: str | None) -> Path | None:
    found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return Path(found) if isinstance(found, str) else None


# How long kvplan waits for the Hub's answer to its one metadata request, unless HF_HUB_ETAG_TIMEOUT says otherwise.
# huggingface_hub's own default is 10 s, and when that first request fails and nothing is cached, hf_hub_download
# asks again with five retries and backoff (about 24 s in all); kvplan asks once and says so.
PROBE_TIMEOUT_S = 3.0
RETRYABLE_STATUS = (408, 429, 500, 502, 503, 504)


def probe_timeout() -> float:
    return float(env_seconds("HF_HUB_ETAG_TIMEOUT") or PROBE_TIMEOUT_S)


def _hub_error(exc: Exception, where: str, revision: str | None, suggestions: list[str]) -> KvplanError:
    """The one line for a Hub answer that is not the file."""
    if isinstance(exc, GatedRepoError):
        return KvplanError("the repo is gated: accept its licence on the Hub, then log in (hf auth login) or pass "
                           "--token; or give a local config.json path", where)
    if isinstance(exc, RevisionNotFoundError):
        return KvplanError(f"revision {revision!r} not found; check the branch, tag or commit", where)
    if isinstance(exc, RepositoryNotFoundError):
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        return KvplanError("repo not found, or private (401/404): check the id, log in (hf auth login) or pass "
                           f"--token, or give a local config.json path{hint}", where)
    if isinstance(exc, LocalEntryNotFoundError):  # a subclass of EntryNotFoundError: the network failed
        return KvplanError(f"the Hub ({constants.ENDPOINT}) is unreachable and config.json is not cached; "
                           f"{OFFLINE_HINT}", where)
    if isinstance(exc, EntryNotFoundError):
        return KvplanError("the repo has no config.json; pass a local config.json path", where)
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        if status in (401, 403):
            return KvplanError(f"access denied ({status}): log in (hf auth login) or pass --token, or give a "
                               "local config.json path", where)
        return KvplanError(f"the Hub answered {status}; {OFFLINE_HINT}", where)
    return KvplanError(f"cannot fetch config.json ({exc}); {OFFLINE_HINT}", where)


def download_config(repo_id: str, revision: str | None, token: str | None,
                    suggestions: list[str]) -> tuple[Path, SpecSource]:
    """repo_id has passed sources.repo_id_problem: an org/name the Hub can have."""
    where = repo_id if revision is None else f"{repo_id}@{revision}"
    if constants.HF_HUB_OFFLINE:
        cached = cached_config(repo_id, revision)
        if cached is None:
            raise KvplanError(f"HF_HUB_OFFLINE is set and config.json is not in the Hugging Face cache; "
                              f"{OFFLINE_HINT}", where)
        return cached, SpecSource("hub-cache", str(cached), revision)
    hf_logging.set_verbosity_error()  # its retry warnings would break the one-line error contract
    disable_progress_bars()
    timeout = probe_timeout()
    # One metadata request without retries first: a Hub that is down or unreachable is reported at once (or the
    # cached copy used), instead of after hf_hub_download's retries.
    try:
        get_hf_file_metadata(hf_hub_url(repo_id, "config.json", revision=revision), token=token, timeout=timeout)
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status not in RETRYABLE_STATUS:
            raise _hub_error(exc, where, revision, suggestions) from None
        return _cached_or_unreachable(repo_id, revision, where, f"it answered {status}")
    except Exception as exc:  # the network: refused, reset, timed out, no route, bad proxy, DNS
        why = (f"no answer within {timeout:g} s; HF_HUB_ETAG_TIMEOUT sets the wait" if "Timeout" in type(exc).__name__
               else type(exc).__name__)
        return _cached_or_unreachable(repo_id, revision, where, why)
    try:
        path = hf_hub_download(repo_id, "config.json", revision=revision, token=token, etag_timeout=timeout)
    except (HfHubHTTPError, LocalEntryNotFoundError, EntryNotFoundError, OSError) as exc:
        raise _hub_error(exc, where, revision, suggestions) from None
    return Path(path), SpecSource("hub", f"{constants.ENDPOINT}/{repo_id}", revision)


def download_quant_config(repo_id: str, revision: str | None, token: str | None, live: bool) -> Path | None:
    """ModelOpt's hf_quant_config.json beside config.json (vLLM 0.33.0 transformers_utils/config.py get_config reads
    it where config.json has no quantization_config); None where the repo has none, or the Hub cannot say and
    nothing is cached. live: config.json came from the Hub just now (else from the cache: no request is made)."""
    cached = try_to_load_from_cache(repo_id, QUANT_FILE, revision=revision)
    if constants.HF_HUB_OFFLINE or not live:
        return Path(cached) if isinstance(cached, str) else None
    try:
        return Path(hf_hub_download(repo_id, QUANT_FILE, revision=revision, token=token,
                                    etag_timeout=probe_timeout()))
    except (HfHubHTTPError, LocalEntryNotFoundError, EntryNotFoundError, OSError):
        return Path(cached) if isinstance(cached, str) else None


def _cached_or_unreachable(repo_id: str, revision: str | None, where: str, why: str) -> tuple[Path, SpecSource]:
    cached = cached_config(repo_id, revision)
    if cached is not None:
        return cached, SpecSource("hub-cache", str(cached), revision)
    raise KvplanError(f"the Hub ({constants.ENDPOINT}) is unreachable ({why}) and config.json is not cached; "
                      f"{OFFLINE_HINT}", where)


# Bytes per element of each safetensors dtype; MXFP4 and packed int4 are stored as U8 / I32 elements.
SAFETENSORS_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
                     "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvplan" / "safetensors"


def stored_weight_bytes(repo_id: str, revision: str | None, token: str | None) -> int | None:
    """Bytes of the checkpoint's tensors as stored, from the safetensors headers (cached per repo and revision).
    None when the repo has no safetensors or the Hub cannot say."""
    cached = cache_dir() / f"{repo_id.replace('/', '__')}@{revision or 'main'}.json"
    try:
        counts = json.loads(cached.read_text())
    except (OSError, ValueError):  # not cached yet, or an unreadable cache file
        counts = None
    if counts is None:
        if constants.HF_HUB_OFFLINE:
            return None
        try:
            counts = get_safetensors_metadata(repo_id, revision=revision, token=token).parameter_count
        except Exception:  # any Hub or parsing failure: fall back to the config-derived estimate
            return None
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(counts))
        except OSError:
            pass
    if not isinstance(counts, dict) or any(d not in SAFETENSORS_BYTES for d in counts):
        return None
    return sum(int(n) * SAFETENSORS_BYTES[d] for d, n in counts.items())
