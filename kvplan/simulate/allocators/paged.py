"""Paging (vLLM's block manager): blocks of block_size tokens from a free list, a block taken only when a token
needs it, reference counts for what sequences share (sharing.py: parallel samples and beams, copy-on-write of a
partly filled block) and prefix caching across requests (prefix_cache.py, in the full-attention groups). A new
request is admitted only while 1% of the blocks stay free (the watermark); a running one that cannot grow is
preempted by the scheduler. Each KV-cache group of the pool holds its own blocks (pool.Pool): a window group frees
a sequence's blocks once they leave its window, a state group holds a fixed number per sequence.

Blocks are interchangeable, so the free list is a count and a request's block table is what its length implies.
Growth is counted per step by phase: a decoding sequence opens a block in every step whose token is the first of
one, and those steps recur every block_size steps, so `growth[phase]` holds the blocks the decoding requests of
that phase take together; `freeing[phase]` likewise holds what window groups give back."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from kvplan.simulate.allocators.base import State, Usage, make_usage
from kvplan.simulate.allocators.prefix_cache import CachedPrefix, PrefixCache
from kvplan.simulate.pool import Pool
from kvplan.simulate.sequence import Seq
from kvplan.simulate.sharing import Sharing, unused_tail
from kvplan.simulate.workload import Request


class Paged:
    name = "paged"

    def __init__(self, pool: Pool, prefix_caching: bool = True) -> None:
        size = pool.block_size
        self.pool = pool
        self.watermark = pool.watermark_blocks
        self.releases = 0
        self.block_size = size
        self.num_blocks = pool.num_blocks
        self.full_groups = pool.full_groups
        self.windows = pool.windows
        self.token_groups = pool.token_groups
        self.state_blocks = pool.state_blocks()
        self.prefix_caching = prefix_caching and pool.full_groups > 0
        self.cache = PrefixCache()
        self.free = pool.num_blocks
        self.growth = [0] * size  # blocks taken in steps of each phase
        self.widths = [0] * size  # block tails opened in steps of each phase (sequences x token groups)
        self.freeing = [0] * size  # blocks window groups give back in steps of each phase
        self.freeing_unshared = [0] * size  # what they would give back without sharing
        self.changes: list[tuple[int, int, Seq, int, int]] = []  # (step, order, seq, window index, amount)
        self.decoding_width = 0  # block tails of decoding sequences: each fills by one slot a step
        self.internal = 0  # slots: unused tails of the last blocks
        self.reserved = 0  # slots: blocks taken for prompt tokens not computed yet
        self.unshared = 0  # blocks the same sequences would hold without sharing

    # -- the footprint of one request --

    def _left(self, length: int, window: int) -> int:
        """Leading blocks of each sequence wholly outside the window: the next token attends to the last `window`."""
        return max(0, length - window + 1) // self.block_size

    def _blocks(self, sharing: Sharing, length: int, prompt: int, prefix_blocks: int = 0) -> int:
        size = self.block_size
        blocks = sharing.blocks(length, prompt, size)
        held = self.full_groups * blocks - prefix_blocks + sharing.width * self.state_blocks
        for window, count in self.windows:
            held += count * (blocks - sharing.freed(self._left(length, window), prompt, size))
        return held

    def _unshared(self, width: int, length: int) -> int:
        blocks = -(-length // self.block_size)  # cdiv without the call: this runs on every admission and release
        held = self.full_groups * blocks + self.state_blocks
        for window, count in self.windows:
            held += count * (blocks - self._left(length, window))
        return width * held

    def _prefix_blocks(self, request: Request) -> int:
        if not self.prefix_caching or request.prefix_id is None:
            return 0
        return self.full_groups * (min(request.prefix_len, request.prompt) // self.block_size)

    def fits_ever(self, request: Request) -> bool:
        sharing, prompt = request.sharing, request.prompt
        # No mode of sharing holds more than every sequence its own copy of every block: most requests stop here.
        most = sharing.width * (self.token_groups * -(-request.total // self.block_size) + self.state_blocks)
        if most <= self.num_blocks - self.watermark:
            return True
        first = self._blocks(sharing, prompt + 1, prompt)
        final = max(first, self._blocks(sharing, request.total, prompt))
        return first <= self.num_blocks - self.watermark and final <= self.num_blocks

    def _admission(self, seq: Seq) -> tuple[int, CachedPrefix | None, int]:
        """Blocks admitting seq takes from the free count, its cached prefix and the prefix blocks it computes."""
        if seq.first_blocks < 0:
            seq.prefix_blocks = self._prefix_blocks(seq.request)
            seq.first_blocks = self._blocks(seq.sharing, seq.prompt + 1, seq.prompt, seq.prefix_blocks)
        blocks = seq.prefix_blocks
        if not blocks:
            return seq.first_blocks, None, 0
        prefix = self.cache.get(seq.request.prefix_id)  # type: ignore[arg-type]
        missing = max(0, blocks - prefix.blocks)
        return seq.first_blocks + missing + self.cache.reclaimable(prefix), prefix, missing

    def can_admit(self, seq: Seq) -> bool:
        taken, _, _ = self._admission(seq)
        return self.free + self.cache.evictable - taken >= self.watermark  # available(), without the call

    def admit(self, seq: Seq) -> bool:
        taken, prefix, missing = self._admission(seq)
        if self.free + self.cache.evictable - taken < self.watermark:
            return False
        size, prompt = self.block_size, seq.prompt
        cached_tokens = 0
        if prefix is not None:
            hit = min(prefix.blocks, seq.prefix_blocks) // self.full_groups
            self.cache.reference(seq.request.prefix_id, prefix)  # type: ignore[arg-type]
            prefix.blocks = max(prefix.blocks, seq.prefix_blocks)
            seq.group = prefix
            cached_tokens = min(hit * size, prompt - 1)  # the last prompt token is always computed
        blocks = seq.first_blocks + missing
        if blocks <= self.free:
            self.free -= blocks
        else:
            self._take(blocks)
        seq.prefill_left = prompt - cached_tokens
        length = prompt + 1
        empty = seq.width * self.token_groups * unused_tail(length, size)  # in every block tail it opens
        seq.reserved_left = reserved = self._reserved_at_admission(seq, empty, missing)
        self.reserved += reserved
        self.internal += empty
        self.unshared += self._unshared(seq.width, length)
        return True

    def _reserved_at_admission(self, seq: Seq, empty: int, missing: int) -> int:
        """Slots this request will write during its prefill: its own blocks' tokens (all but `empty` slots of its
        blocks beside the state) and the prefix blocks it computes for the cache."""
        return (seq.first_blocks - seq.width * self.state_blocks + missing) * self.block_size - empty

    def prefill(self, seq: Seq, tokens: int) -> None:
        written = min(tokens * self.token_groups, seq.reserved_left)
        seq.reserved_left -= written
        self.reserved -= written

    def start_decode(self, seq: Seq, step: int) -> None:
        self.reserved -= seq.reserved_left  # the copies of a shared partial block, and the sampled token
        seq.reserved_left = 0
        groups = self.token_groups
        tails = seq.width * groups
        # The sequence opens a block in step s when its token there is the first of one: prompt + s - step ≡ 0.
        phase = seq.phase = (step - seq.prompt) % self.block_size
        self.growth[phase] += seq.sharing.growth * groups
        self.widths[phase] += tails
        self.decoding_width += tails
        if self.windows:
            self._schedule_window_frees(seq, step)

    def _schedule_window_frees(self, seq: Seq, step: int) -> None:
        """A window group frees in step s when (length(s) - window + 1) reaches a multiple of the block size; what
        it frees changes when the first block leaves and, for parallel samples, when the shared prompt has left."""
        size, length = self.block_size, seq.prompt + 1
        seq.windows = []
        for index, (window, _) in enumerate(self.windows):
            start = length - window + 1
            first = max(size, (start // size + 1) * size)  # the first multiple past `start` that frees a block
            phase = (step + first - start) % size
            seq.windows.append([phase, 0, False])
            lefts = [first // size]
            shared = seq.prompt // size
            if shared + 1 > lefts[0] and seq.sharing.freed(shared + 1, seq.prompt, size) - \
                    seq.sharing.freed(shared, seq.prompt, size) != 1:
                lefts.append(shared + 1)
            for left in lefts:
                amount = seq.sharing.freed(left, seq.prompt, size) - seq.sharing.freed(left - 1, seq.prompt, size)
                heapq.heappush(self.changes, (step + left * size - start, seq.order, seq, index, amount))

    def _apply_changes(self, step: int) -> None:
        changes = self.changes
        while changes and changes[0][0] <= step:
            _, _, seq, index, amount = heapq.heappop(changes)
            if not seq.live or not seq.decoding:
                continue
            state = seq.windows[index]
            count = self.windows[index][1]
            self.freeing[state[0]] += count * (amount - state[1])
            if not state[2]:
                self.freeing_unshared[state[0]] += count * seq.width
                state[2] = True
            state[1] = amount

    def next_change(self) -> int | None:
        """The next step at which what the decoding sequences free per step changes."""
        changes = self.changes
        while changes and not (changes[0][2].live and changes[0][2].decoding):
            heapq.heappop(changes)
        return changes[0][0] if changes else None

    def frees_while_decoding(self) -> bool:
        return bool(self.windows) and any(self.freeing)

    def release(self, seq: Seq, length: int) -> None:
        self.releases += 1
        tails = seq.width * self.token_groups
        if seq.decoding:
            phase = seq.phase
            self.growth[phase] -= seq.sharing.growth * self.token_groups
            self.widths[phase] -= tails
            self.decoding_width -= tails
            if seq.windows:
                self._stop_window_frees(seq)
        else:
            length = seq.prompt + 1
            self.reserved -= seq.reserved_left
        self.free += self._blocks(seq.sharing, length, seq.prompt, seq.prefix_blocks)
        self.internal -= tails * (-length % self.block_size)  # sharing.unused_tail
        self.unshared -= self._unshared(seq.width, length)
        if seq.group is not None:
            self.cache.release(seq.request.prefix_id, seq.group)  # type: ignore[arg-type]

    def _stop_window_frees(self, seq: Seq) -> None:
        for (phase, amount, active), (_, count) in zip(seq.windows, self.windows, strict=True):
            self.freeing[phase] -= count * amount
            if active:
                self.freeing_unshared[phase] -= count * seq.width

    # -- the free count --

    def available(self) -> int:
        return self.free + self.cache.evictable

    def _take(self, blocks: int) -> None:
        if blocks <= self.free:
            self.free -= blocks
        else:
            self.cache.evict(blocks - self.free)
            self.free = 0

    # -- decoding --

    def grow(self, step: int) -> bool:
        if self.changes:
            self._apply_changes(step)
        phase = step % self.block_size
        taken, freed, free = self.growth[phase], self.freeing[phase], self.free
        if taken > free + freed + self.cache.evictable:
            return False
        if freed:
            free += freed
            self.releases += 1
        if taken <= free:
            self.free = free - taken
        else:
            self.free = free
            self._take(taken)
        widths = self.widths[phase]
        self.internal += self.block_size * widths - self.decoding_width
        self.unshared += widths - self.freeing_unshared[phase]
        return True

    def decode_steps(self, step: int, steps: int) -> tuple[int, State, State]:
        if not self.windows:
            return self._full_decode_steps(step, steps)
        size, growth, widths, width = self.block_size, self.growth, self.widths, self.decoding_width
        freeing, freeing_unshared = self.freeing, self.freeing_unshared
        num_blocks, reserved = self.num_blocks, self.reserved
        free, evictable = self.free, self.cache.evictable
        internal, unshared = self.internal, self.unshared
        used_sum = internal_sum = unshared_sum = 0
        ran = 0
        for ran in range(steps):  # noqa: B007 (ran counts the steps run, read after the loop)
            phase = (step + ran) % size
            taken, freed = growth[phase], freeing[phase]
            if taken > free + freed + evictable:
                break
            free += freed
            if taken <= free:
                free -= taken
            else:
                self.free = free
                self._take(taken)
                free, evictable = self.free, self.cache.evictable
            internal += size * widths[phase] - width
            unshared += widths[phase] - freeing_unshared[phase]
            used_sum += num_blocks - free - evictable
            internal_sum += internal
            unshared_sum += unshared
        else:
            ran = steps
        self.free, self.internal, self.unshared = free, internal, unshared
        return ran, (used_sum * size, internal_sum, reserved * ran, unshared_sum), self.state()

    def _full_decode_steps(self, step: int, steps: int) -> tuple[int, State, State]:
        """decode_steps without window groups: nothing is freed, and a phase in which no sequence opens a block
        only fills tails."""
        size, growth, widths, width = self.block_size, self.growth, self.widths, self.decoding_width
        free, evictable = self.free, self.cache.evictable
        internal, unshared = self.internal, self.unshared
        available_sum = internal_sum = unshared_sum = 0
        ran = 0
        for ran in range(steps):  # noqa: B007 (ran counts the steps run, read after the loop)
            phase = (step + ran) % size
            taken = growth[phase]
            if taken:  # some sequences open a block: widths[phase] of them
                if taken <= free:
                    free -= taken
                elif taken <= free + evictable:
                    self.free = free
                    self._take(taken)
                    free, evictable = self.free, self.cache.evictable
                else:
                    break
                opened = widths[phase]
                internal += size * opened - width
                unshared += opened
            else:
                internal -= width
            available_sum += free + evictable
            internal_sum += internal
            unshared_sum += unshared
        else:
            ran = steps
        self.free, self.internal, self.unshared = free, internal, unshared
        used_sum = self.num_blocks * ran - available_sum
        return ran, (used_sum * size, internal_sum, self.reserved * ran, unshared_sum), self.state()

    def state(self) -> State:
        """Slots of the blocks in use (all allocated), internal slots, reserved slots, blocks unshared."""
        return (self.num_blocks - self.free - self.cache.evictable) * self.block_size, self.internal, \
            self.reserved, self.unshared

    def split(self, sums: Sequence[int], steps: int) -> Usage:
        allocated, internal, reserved, unshared = sums
        unshared_slots = unshared * self.block_size
        return make_usage(allocated - internal - reserved, reserved, internal,
                          self.num_blocks * self.block_size * steps - allocated, unshared_slots - allocated,
                          unshared_slots)

    def usage(self) -> Usage:
        return self.split(self.state(), 1)
