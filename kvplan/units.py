"""Sizes and dtypes. Bytes are integers everywhere inside kvplan; GB (10^9) and GiB (2^30) live only here."""

from __future__ import annotations

import re

from kvplan.errors import KvplanError

GB = 10**9
GiB = 2**30
MiB = 2**20

# Units of two or more letters read in any case: 'GB' and 'gb' are 10^9, 'GiB' and 'gib' 2^30.
_UNITS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": GB, "tb": 10**12,
    "kib": 2**10, "mib": MiB, "gib": GiB, "tib": 2**40,
}
# One-letter suffixes as vLLM's human_readable_int reads them (--kv-cache-memory-bytes, --max-num-batched-tokens):
# lowercase decimal, uppercase binary, so '24G' is 24 GiB and '24g' 24 * 10^9.
_LETTERS = {"k": 10**3, "m": 10**6, "g": GB, "t": 10**12, "K": 2**10, "M": MiB, "G": GiB, "T": 2**40}
_SIZE = re.compile(r"^\s*([0-9]+(?:_[0-9]+)*(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
MAX_SIZE = 2**50  # 1,024 TiB (said in the largest unit kvplan reads): more than any device has


def parse_size(text: str, where: str = "size") -> int:
    """'24GiB' and '24G' -> 24 * 2^30; '24GB' and '24g' -> 24 * 10^9; '25769803776' -> bytes. A bare number below
    1 MiB is refused: '24' is far more likely a forgotten unit than 24 bytes. `where` names the flag in errors."""
    stripped = str(text).strip()
    shown = stripped if len(stripped) <= 40 else stripped[:37] + "..."
    match = _SIZE.match(stripped)
    if not match:
        raise KvplanError(f"cannot read {shown!r} as a size; write a number with a unit: 24GiB or 24G (2^30), "
                          "24GB or 24g (10^9), or a byte count", where)
    number, unit = match.groups()
    number = number.replace("_", "")
    from decimal import Decimal  # exact decimals (1.5GiB) without float rounding

    value = Decimal(number)
    if unit in _LETTERS:
        factor = _LETTERS[unit]
        if unit.isupper() and "." in number:  # vLLM refuses these too
            raise KvplanError(f"{shown!r}: vLLM refuses a decimal number with the binary suffix {unit}; write "
                              f"{number}{unit}iB or {number}{unit.lower()} (decimal)", where)
    elif unit:
        found = _UNITS.get(unit.lower())
        if found is None:
            raise KvplanError(f"unknown unit {unit!r} in {shown!r}; use B, GiB or G (2^30), GB or g (10^9), "
                              "and the same for K, M and T", where)
        factor = found
    else:
        if "." in number:
            raise KvplanError(f"{shown!r} has no unit, and a byte count is a whole number; did you mean "
                              f"{shown}GiB?", where)
        if 0 < value < MiB:
            raise KvplanError(f"{shown!r} has no unit, so it would be {value:,} bytes; did you mean "
                              f"{stripped}GiB?", where)
        factor = 1
    if value * factor > MAX_SIZE:
        raise KvplanError(f"{shown!r} is more than 1,024 TiB; no device has that much memory", where)
    return int(value * factor)


_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_HUMAN_INT = re.compile(r"^(-?[0-9]+)([KMGT]?)$|^([0-9]+(?:\.[0-9]+)?)([kmgt])$")


def parse_human_int(text: str | None, flag: str) -> int | None:
    """Integers as vLLM's human_readable_int reads them: '32768', '32K' (x 2^10), '25.6k' (x 10^3; decimals
    only with the lower-case, decimal suffixes k/m/g/t)."""
    if text is None:
        return None
    value = text.strip().replace("_", "")
    match = _HUMAN_INT.match(value)
    if not match:
        raise KvplanError(f"expected an integer (e.g. 32768, 32K = 32,768 or 32k = 32,000), got {text!r:.40}", flag)
    whole, binary, decimal, letter = match.groups()
    if whole is not None:
        return int(whole) * _BINARY.get(binary, 1)
    from decimal import Decimal  # 25.6k is exactly 25,600

    return int(Decimal(decimal) * _DECIMAL[letter])


# Bytes per element of the dtypes that appear in HF configs and vLLM flags.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4, "float": 4, "fp32": 4,
    "float16": 2, "half": 2, "fp16": 2,
    "bfloat16": 2, "bf16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "float8_e4m3fn": 1, "int8": 1,
    # packed KV cache formats (KV_FORMATS): the element is a byte
    "int8_per_token_head": 1, "fp8_per_token_head": 1, "nvfp4": 1, "fp8_ds_mla": 1, "mxfp8": 1, "fp4_mx_block16": 1,
}

CANONICAL_DTYPE = {
    "float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16", "bf16": "bfloat16",
    "float8_e4m3fn": "fp8_e4m3",
}


def canonical_dtype(name: str) -> str:
    lowered = name.lower().removeprefix("torch.")
    return CANONICAL_DTYPE.get(lowered, lowered)


class KvFormat(int):
    """How the KV cache stores one token's vector of one head: the int value is the element's size in bytes (what
    engines without packed formats multiply by); vector_bytes gives the bytes of a K or V vector with whatever the
    format keeps beside it. Plain formats (16-bit, fp8 per tensor): dim x element."""

    def __new__(cls, element: int) -> KvFormat:
        return super().__new__(cls, element)

    def __reduce__(self) -> tuple[type, tuple[int]]:
        return type(self), (int(self),)

    def vector_bytes(self, dim: int) -> int:
        """Bytes of one head's K (or V) vector of `dim` elements for one token."""
        return dim * int(self)

    def latent_bytes(self, dim: int) -> int:
        """Bytes of one token's MLA latent of `dim` elements."""
        return dim * int(self)

    def describe(self, dim: int, block_size: int) -> str:
        """The page formula's factors for one head's vector over a block."""
        return f"{dim} head dim x {block_size} tokens x {int(self)} B"


class PerTokenHeadKv(KvFormat):
    """int8 / fp8 with one fp32 scale per token per head for K and for V, carved from the same page
    (vllm/v1/kv_cache_interface.py AttentionSpec.page_size_bytes: + 2 x block x heads x 4 B; the
    int8_per_token_head and fp8_per_token_head cache dtypes, vLLM 2026)."""

    SCALE_BYTES = 4

    def vector_bytes(self, dim: int) -> int:
        return dim * int(self) + self.SCALE_BYTES

    def describe(self, dim: int, block_size: int) -> str:
        return f"{block_size} tokens x ({dim} x {int(self)} B + {self.SCALE_BYTES} B scale)"


class Nvfp4Kv(KvFormat):
    """NVFP4: two fp4 values per byte plus one fp8 scale per 16 values (vllm/utils/torch_utils.py
    nvfp4_kv_cache_full_dim: head_size // 2 + head_size // 16 bytes per head vector)."""

    def vector_bytes(self, dim: int) -> int:
        return dim // 2 + dim // 16

    def describe(self, dim: int, block_size: int) -> str:
        return f"{block_size} tokens x ({dim} / 2 + {dim} / 16) B"


class Mxfp8Kv(KvFormat):
    """SGLang's mxfp8 KV cache: fp8_e4m3 values plus one byte of scale per 32 (0.5.23
    model_executor/pool_configurator.py DefaultPoolConfigurator: cell + heads x (K + V dims) x layers // 32)."""

    SCALE_BLOCK = 32

    def vector_bytes(self, dim: int) -> int:
        return dim + dim // self.SCALE_BLOCK

    def describe(self, dim: int, block_size: int) -> str:
        return f"{block_size} tokens x ({dim} + {dim} / {self.SCALE_BLOCK}) B"


class Fp4MxBlock16Kv(Nvfp4Kv):
    """SGLang's fp4_mx_block16 KV cache: two fp4 values per byte and one byte of scale per 16 (0.5.23
    layers/quantization/fp4_kv_cache_quant_method.py FP4MXBlock16KVCacheMethod.compute_cell_size; the dequant
    workspace some attention backends add, one row a token for all layers, is not counted)."""


class DsMlaKv(KvFormat):
    """DeepSeek's fp8 MLA cache (fp8_ds_mla, DeepSeek-V3.2 sparse attention): the 512 latent values in fp8 with
    one fp32 scale per 128, and the 64 rope values kept in bf16: 512 + 16 + 128 = 656 B per token
    (vllm/v1/kv_cache_interface.py MLAAttentionSpec)."""

    ROPE_DIM = 64

    def latent_bytes(self, dim: int) -> int:
        nope = dim - self.ROPE_DIM
        return nope + nope // 128 * 4 + self.ROPE_DIM * 2


# KV cache dtypes whose pages are not element x dim (vllm/config/cache.py CacheDType, 2026).
KV_FORMATS: dict[str, KvFormat] = {
    "int8_per_token_head": PerTokenHeadKv(1), "fp8_per_token_head": PerTokenHeadKv(1), "nvfp4": Nvfp4Kv(1),
    "fp8_ds_mla": DsMlaKv(1), "mxfp8": Mxfp8Kv(1), "fp4_mx_block16": Fp4MxBlock16Kv(1),
}


def kv_format(value: int) -> KvFormat:
    """The KV format of a bare element size, or the format itself."""
    return value if isinstance(value, KvFormat) else KvFormat(value)


def kv_cache_format(name: str, where: str = "kv_cache_dtype") -> KvFormat:
    """The KV format a cache dtype names: a packed one, else the dtype's element size."""
    packed = KV_FORMATS.get(canonical_dtype(name))
    return packed if packed is not None else KvFormat(dtype_bytes(name, where))


def dtype_bytes(name: str, where: str = "dtype") -> int:
    canonical = canonical_dtype(name)
    size = DTYPE_BYTES.get(canonical)
    if size is None:
        known = ", ".join(sorted({canonical_dtype(k) for k in DTYPE_BYTES}))
        raise KvplanError(f"unknown dtype {name!r}; known: {known}", where)
    return int(size)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def parse_contexts(text: str | None, where: str) -> list[int]:
    """'4K,32K' -> [4096, 32768]: the concurrency ladder's contexts."""
    if not text:
        return []
    values = [parse_human_int(part, where) for part in text.split(",") if part.strip()]
    if any(v is None or not 1 <= v <= 2**31 for v in values):
        raise KvplanError("contexts must be positive integers up to 2^31", where)
    return [v for v in values if v is not None]
