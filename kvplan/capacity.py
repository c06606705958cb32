"""Paging math shared by every engine: how a rank's KV layers are grouped into one block pool, how many
blocks fit, and how many blocks one request holds (vLLM v1 kv_cache_utils rules)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from kvplan.models.layers import Layer
from kvplan.units import cdiv


@dataclass(eq=False)
class KvGroup:
    """Layers of one spec that share block ids: a KV-cache group."""

    layer: Layer  # the spec every layer of the group shares
    slots: int  # layers per group, padding included
    real_layers: int
    # tokens per block of this group where its page was equalised through the block size; 0: the pool's
    tokens_per_block: int = 0
    # a packed group's specs (vLLM's block-outermost layout), each with its layer count; empty: `layer` alone
    members: tuple[tuple[Layer, int], ...] = ()


@dataclass(eq=False)
class PoolLayout:
    """One rank's block pool: its groups and what a block costs."""

    block_size: int
    groups: tuple[KvGroup, ...]
    page_bytes: int  # one layer's bytes for one block
    block_bytes: int  # one block id across every slot of a group: what one more block costs
    padding_layers: int
    kv_bytes: int
    tp: int
    # one group whose block spans layers of different page sizes (a draft model's layers beside the target's):
    # each spec with its layer count, in the stage's order
    mixed: tuple[tuple[Layer, int], ...] = ()

    @property
    def num_groups(self) -> int:
        return len(self.groups)

    @property
    def single_spec(self) -> bool:
        """One group of one spec: a block is that spec's page times its layers (no mixed sizes averaged)."""
        if len(self.groups) != 1:
            return False
        group = self.groups[0]
        return self.block_bytes == group.layer.page_bytes(self.block_size, self.kv_bytes, self.tp) * group.slots

    @property
    def bytes_per_token(self) -> int:
        """One token's KV summed over the real KV layers of this rank."""
        if (len(self.groups) == 1 and not self.single_spec) or (self.groups and self.groups[0].members):
            return self.block_bytes // self.block_size  # one block spans layers of different sizes
        return sum(g.layer.bytes_per_token(self.kv_bytes, self.tp) * g.real_layers for g in self.groups)

    def num_blocks(self, available_bytes: int) -> int:
        if not self.groups or available_bytes <= 0:
            return 0
        return available_bytes // self.block_bytes

    def blocks_per_request(self, context: int, max_num_batched_tokens: int) -> int:
        return sum(g.layer.blocks_per_request(context, g.tokens_per_block or self.block_size, max_num_batched_tokens)
                   for g in self.groups)

    def request_bytes(self, context: int, max_num_batched_tokens: int) -> int:
        return self.blocks_per_request(context, max_num_batched_tokens) * self.block_bytes

    def reported_tokens(self, num_blocks: int) -> int:
        """vLLM's "GPU KV cache size: N tokens": blocks shared among the groups, in tokens."""
        return num_blocks // self.num_groups * self.block_size if self.groups else 0

    def longest_context(self, available_bytes: int, max_num_batched_tokens: int, upper: int) -> int:
        """The largest context one request can have within available_bytes (vLLM's binary search)."""
        if not self.groups or self.request_bytes(1, max_num_batched_tokens) > available_bytes:
            return 0
        low, high = 1, max(1, upper)
        if self.request_bytes(high, max_num_batched_tokens) <= available_bytes:
            return high
        while low < high:
            mid = (low + high + 1) // 2
            if self.request_bytes(mid, max_num_batched_tokens) <= available_bytes:
                low = mid
            else:
                high = mid - 1
        return low


ATTENTION_BLOCK_ALIGNMENT = 16  # vLLM rounds a raised attention block size to a multiple of 16 tokens


def pool_layout(layers: list[Layer], block_size: int, kv_bytes: int, tp: int, max_model_len: int = 0) -> PoolLayout:
    """The pool of a model on one stage (no pipeline parallelism)."""
    return pool_layouts([layers], block_size, kv_bytes, tp, max_model_len)[0]


def pool_layouts(stages: list[list[Layer]], block_size: int, kv_bytes: int, tp: int,
                 max_model_len: int = 0) -> list[PoolLayout]:
    """Each pipeline stage's pool. As vLLM's get_kv_cache_configs (v1 kv_cache_utils, 0.10+): the whole model's
    layers are grouped once, by the layer ratio of the whole model, and those groups are projected onto each
    stage; a stage's block spans as many layers as its fullest group holds there."""
    paged = [[cache for layer in stage for cache in layer.cache_layers() if cache.holds_kv or cache.paged_state]
             for stage in stages]
    everything = [layer for stage in paged for layer in stage]
    if not everything:
        return [PoolLayout(block_size, (), 0, 0, 0, kv_bytes, tp) for _ in stages]
    if is_packed(everything):
        return packed_layouts(paged, block_size, kv_bytes, tp)
    attention = [layer for layer in everything if layer.holds_kv]
    if attention:
        block_size = aligned_block_size(everything, block_size, kv_bytes, tp)
        page = attention[0].page_bytes(block_size, kv_bytes, tp)
        paged = [[layer.padded_to(page, tp) for layer in stage] for stage in paged]
    elif max_model_len:
        # State only (pure Mamba): a state block stands for a whole request, vLLM's MambaSpec block_size being
        # max_model_len; the logged token count is in those blocks.
        block_size = max_model_len
    groups = _global_groups([layer for stage in paged for layer in stage], block_size, kv_bytes, tp)
    layouts, first = [], 0
    for stage in paged:
        members = range(first, first + len(stage))
        first += len(stage)
        layouts.append(_projected(groups, members, stage, block_size, kv_bytes, tp))
    return layouts


def aligned_block_size(layers: list[Layer], block_size: int, kv_bytes: int, tp: int) -> int:
    """vLLM's HybridAttentionMambaModelConfig.verify_and_update_config (model_executor/models/config.py,
    0.10-0.2x): with state layers beside attention, an attention block must hold at least one state page, so the
    block size becomes the smallest multiple of 16 tokens whose attention page is >= the state page, unless the
    user chose a larger one ("Setting attention block size to N tokens")."""
    states = [layer.state_page_bytes(tp) for layer in layers if layer.paged_state]
    attention = next((layer for layer in layers if layer.holds_kv), None)
    if not states or attention is None:
        return block_size
    per_token = attention.page_bytes(1, kv_bytes, tp)
    step = ATTENTION_BLOCK_ALIGNMENT
    return max(block_size, step * cdiv(max(states), step * per_token))


@dataclass(eq=False)
class _Group:
    layer: Layer
    members: list[int]  # indices into the whole model's paged layers
    hybrid: bool  # one of several equal-page groups (else the model's only group)
    tokens_per_block: int = 0  # where the page was equalised through the block size; 0: the pool's


def equalised_block_sizes(layers: list[Layer], block_size: int, kv_bytes: int, tp: int) -> dict[Layer, int]:
    """vLLM's unify_kv_cache_spec_page_size (vllm 0.33.0 v1/core/kv_cache_planning.py): when attention layers of
    different kinds have different pages (Gemma 4: sliding layers 16 KV heads x 256, full layers 4 x 512), each
    smaller page whose size divides the largest gets its block size multiplied by the ratio, so that every page
    is equal and the kinds can share one pool. Empty where the pages are equal, the kinds are one, or a page
    does not divide (those keep kvplan's one-group approximation)."""
    specs = [layer for layer in dict.fromkeys(layers) if layer.holds_kv]
    if len({layer.kind for layer in specs}) < 2 or any(not layer.holds_kv for layer in dict.fromkeys(layers)):
        return {}
    pages = {layer: layer.page_bytes(block_size, kv_bytes, tp) for layer in specs}
    largest = max(pages.values())
    if len(set(pages.values())) < 2 or any(largest % page for page in pages.values()):
        return {}
    return {layer: block_size * (largest // page) for layer, page in pages.items()}


def _global_groups(layers: list[Layer], block_size: int, kv_bytes: int, tp: int) -> list[_Group]:
    counts = Counter(layers)
    sizes = equalised_block_sizes(layers, block_size, kv_bytes, tp)
    pages = {layer: layer.page_bytes(sizes.get(layer, block_size), kv_bytes, tp) for layer in counts}
    kinds = {layer.kind for layer in counts}
    if len(counts) == 1 or len(kinds) == 1 or len(set(pages.values())) > 1:
        # One spec; or one kind with differing sizes, a single group whose block spans every layer's page.
        # (Mixed kinds with unequal pages are approximated the same way.)
        return [_Group(layers[0], list(range(len(layers))), False)]
    # Genuinely hybrid: equal pages, layers of each spec split into groups of group_size, a group taking every
    # num_groups-th layer of its spec so that pipeline stages share groups evenly.
    smallest, largest = min(counts.values()), max(counts.values())
    group_size = largest if largest < 1.5 * smallest else smallest
    groups: list[_Group] = []
    for layer in counts:
        indices = [i for i, other in enumerate(layers) if other == layer]
        num_groups = cdiv(len(indices), group_size)
        groups.extend(_Group(layer, indices[j::num_groups], True, sizes.get(layer, 0) if sizes.get(layer) != block_size
                             else 0) for j in range(num_groups))
    return groups


def _projected(groups: list[_Group], members: range, stage: list[Layer], block_size: int, kv_bytes: int,
               tp: int) -> PoolLayout:
    if not stage:
        return PoolLayout(block_size, (), 0, 0, 0, kv_bytes, tp)
    if not groups[0].hybrid:
        pages = [layer.page_bytes(block_size, kv_bytes, tp) for layer in stage]
        n = len(stage)
        mixed = tuple(Counter(stage).items()) if len(set(stage)) > 1 else ()
        return PoolLayout(block_size, (KvGroup(groups[0].layer, n, n),), sum(pages) // n, sum(pages), 0, kv_bytes,
                          tp, mixed)
    here = [sum(1 for i in group.members if i in members) for group in groups]
    slots = max(here)
    page = groups[0].layer.page_bytes(groups[0].tokens_per_block or block_size, kv_bytes, tp)
    projected = tuple(KvGroup(group.layer, slots, real, group.tokens_per_block)
                      for group, real in zip(groups, here, strict=True))
    return PoolLayout(block_size, projected, page, page * slots, sum(slots - real for real in here), kv_bytes, tp)


# vLLM's packed KV cache groups: when a model's backends declare a block-outermost layout and its cache pages
# differ in size (DeepSeek-V4's compressed sparse attention), vLLM 0.33.0 packs the pages of several specs side by
# side in each block instead of equalising them (v1/core/kv_cache_planning.py _get_packed_kv_cache_groups, then
# _get_kv_cache_bytes_per_block). The rules, as that function applies them:
# - caches are bucketed by uniform type: one block size and one window (every full cache of a block size together);
# - a bucket is balanced when each of its page sizes has as many layers; the balanced buckets that mix page sizes
#   stay whole, so the largest of them sets the fewest pattern repeats a group takes, and the repeats per group are
#   _approximate_gcd of the balanced buckets' layer counts from that floor (the d that pads least, ties larger);
# - a balanced bucket splits into cdiv(its layers per page size, repeats) groups, each taking every n-th repeat; an
#   unbalanced one stays one group; a sliding bucket left without a repeat pattern splits to what the widest group's
#   bytes hold;
# - one block id costs the widest group's pages, summed (every group aliases the same bytes from byte 0);
# - a request holds, in each group, the blocks its caches need (UniformTypeKVCacheSpecs.max_memory_usage_pages).


def is_packed(layers: list[Layer]) -> bool:
    return any(layer.block_outermost for layer in layers)


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """The chunk d >= lower_bound that pads the values up to multiples of d least; ties take the larger d."""
    best, best_pad = lower_bound, None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - value % d) % d for value in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


def _buckets(layers: list[Layer], block_size: int) -> list[list[int]]:
    keys: dict[tuple[int, int], list[int]] = {}
    for index, layer in enumerate(layers):
        key = (layer.block_tokens(block_size), layer.kept_tokens() or 0)
        keys.setdefault(key, []).append(index)
    return list(keys.values())


def packed_groups(layers: list[Layer], block_size: int, kv_bytes: int, tp: int) -> list[list[int]]:
    """The groups vLLM forms, as lists of indices into `layers` (the model's caches in its order)."""
    pages = [layer.page_bytes(block_size, kv_bytes, tp) for layer in layers]
    buckets = []
    for members in _buckets(layers, block_size):
        by_page: dict[int, list[int]] = defaultdict(list)
        for index in members:
            by_page[pages[index]].append(index)
        balanced = len({len(names) for names in by_page.values()}) == 1
        buckets.append((members, dict(by_page), balanced, max(len(names) for names in by_page.values())))
    floor = max((most for _, by_page, balanced, most in buckets if balanced and len(by_page) > 1), default=0)
    repeats = approximate_gcd([most for *_, balanced, most in buckets if balanced], floor) if floor else None

    def count(balanced: bool, most: int) -> int:
        return cdiv(most, repeats) if balanced and repeats else 1

    def stateful(members: list[int]) -> bool:
        return repeats is None and bool(layers[members[0]].kept_tokens())

    def widest(by_page: dict[int, list[int]], n: int) -> int:
        return sum(cdiv(len(names), n) * page for page, names in by_page.items())

    anchor = max(widest(by_page, len(members) if stateful(members) else count(balanced, most))
                 for members, by_page, balanced, most in buckets)
    groups: list[list[int]] = []
    for members, by_page, balanced, most in buckets:
        n = count(balanced, most)
        if stateful(members):
            n = max(n, cdiv(len(members), max(anchor // pages[members[0]], 1)))
        if n == 1:
            groups.append(members)
            continue
        repeat_rows = list(zip(*by_page.values(), strict=False))
        groups.extend([index for row in repeat_rows[i::n] for index in row] for i in range(n))
    return groups


def packed_layouts(stages: list[list[Layer]], block_size: int, kv_bytes: int, tp: int) -> list[PoolLayout]:
    """Each pipeline stage's pool: the groups formed over the whole model, each stage keeping its own members."""
    everything = [layer for stage in stages for layer in stage]
    groups = packed_groups(everything, block_size, kv_bytes, tp)
    layouts, first = [], 0
    for stage in stages:
        members = range(first, first + len(stage))
        first += len(stage)
        here = [[i for i in group if i in members] for group in groups]
        here = [group for group in here if group]
        sums = [sum(everything[i].page_bytes(block_size, kv_bytes, tp) for i in group) for group in here]
        block_bytes = max(sums, default=0)
        kv_groups = tuple(KvGroup(everything[group[0]], len(group), len(group),
                                  everything[group[0]].block_tokens(block_size),
                                  tuple(Counter(everything[i] for i in group).items()))
                          for group in here)
        widest = max((len(group) for group in here), default=1)
        layouts.append(PoolLayout(block_size, kv_groups, block_bytes // widest, block_bytes, 0, kv_bytes, tp))
    return layouts


def pipeline_stages(num_layers: int, pp: int) -> list[range]:
    """Layer ranges per pipeline stage as vLLM's get_pp_indices splits them: the remainder goes to the
    stages before the last, from the second-to-last backwards."""
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    stages, start = [], 0
    for size in sizes:
        stages.append(range(start, start + size))
        start += size
    return stages


def concurrency(num_blocks: int, blocks_per_request: int) -> float:
    return num_blocks / blocks_per_request if blocks_per_request else 0.0


def context_ladder(max_context: int, explicit: list[int] | None = None) -> list[int]:
    if explicit:
        return sorted(set(explicit))
    rungs, context = [], 2048
    while context < max_context:
        rungs.append(context)
        context *= 2
    rungs.append(max_context)
    return rungs



@dataclass(frozen=True)
class TokenPool:
    """One of an engine's separate token pools (SGLang's SWAKVPool keeps a full-attention and a sliding-window
    one): how many tokens it holds, what one token costs across its layers on one rank, and a layer of the kind
    whose page rule says how many of its tokens a request holds."""

    name: str
    tokens: int
    bytes_per_token: int
    layer: Layer

    def need(self, context: int, page: int, max_num_batched_tokens: int) -> int:
        """Tokens one request of `context` tokens holds in this pool, in whole pages."""
        return self.layer.blocks_per_request(context, page, max_num_batched_tokens) * page


@dataclass(frozen=True)
class SplitPools:
    """Token pools that must all hold a request: concurrency and the longest request are the tightest pool's."""

    pools: tuple[TokenPool, ...]
    page: int
    max_num_batched_tokens: int

    def _needs(self, context: int) -> list[tuple[int, int]]:
        return [(pool.tokens, pool.need(context, self.page, self.max_num_batched_tokens)) for pool in self.pools]

    def requests(self, context: int) -> int:
        """Whole requests of `context` tokens that run at once."""
        return min(tokens // need if need else 0 for tokens, need in self._needs(context))

    def concurrency(self, context: int) -> float:
        return min(tokens / need if need else 0.0 for tokens, need in self._needs(context))

    def request_bytes(self, context: int) -> int:
        """One request's KV summed over the pools."""
        return sum(pool.need(context, self.page, self.max_num_batched_tokens) * pool.bytes_per_token
                   for pool in self.pools)

    def fits(self, context: int) -> bool:
        return self.requests(context) >= 1

    def longest(self, upper: int) -> int:
        """The longest request, at most `upper` tokens, that every pool holds."""
        if not self.fits(1):
            return 0
        low, high = 1, max(1, upper)
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if self.fits(mid) else (low, mid - 1)
        return low
