"""The simulated engine's paged KV cache: who holds how many blocks, and the prefix cache.

``llminfer.sim.scheduler`` asks a ``BlockPool`` for blocks when it admits a request or a sequence
grows past a block boundary, and gives them back when a request finishes or is preempted. Only
counts are kept (no block ids, no tokens). Every block of the ``capacity`` is one of:

- **private**: held by one running request for its own prompt and output tokens;
- **pinned**: a cached prefix block that at least one running request references (shared
  between them, never copied);
- **idle**: a cached prefix block no running request references; it stays reusable until memory
  is needed, then whole prefixes are evicted, least recently used first;
- **free**: ``capacity - private - pinned - idle``.

This is the bookkeeping of vLLM V1's ``BlockPool`` (``vllm/v1/core/block_pool.py``: a freed
block keeps its prefix hash and is evicted, in LRU order, only when a new block is needed) at
the grain of a whole shared prefix (a prefix group of the workload) rather than one block hash.
"""

from __future__ import annotations

from collections import OrderedDict


class BlockPool:
    """``capacity`` KV blocks for ``n_requests`` requests (indices 0 … n − 1).

    Per request i: ``blocks[i]`` blocks held, of which ``shared[i]`` belong to a cached prefix,
    and ``ref[i]`` the prefix group it references (-1: none). Totals: ``private``, ``pinned`` and
    ``idle_blocks`` (see the module docstring); ``group_blocks`` maps each cached prefix group to
    its blocks, ``group_refs`` to the running requests that reference it.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    def __init__(self, capacity: int, n_requests: int) -> None:
        self.capacity = capacity
        self.private = 0
        self.pinned = 0
        self.idle: OrderedDict[int, int] = OrderedDict()  # group -> blocks, LRU first
        self.idle_blocks = 0
        self.group_blocks: dict[int, int] = {}  # group -> cached blocks
        self.group_refs: dict[int, int] = {}
        self.blocks = [0] * n_requests  # blocks held (shared prefix blocks included)
        self.shared = [0] * n_requests  # of which shared prefix blocks
        self.ref = [-1] * n_requests  # prefix group referenced, -1 = none

    def in_use(self) -> int:
        """Blocks not free: private, pinned and idle cached ones."""
        return self.private + self.pinned + self.idle_blocks

    def available(self) -> int:
        """Free blocks."""
        return self.capacity - self.private - self.pinned - self.idle_blocks

    def reserve(self, n: int) -> bool:
        """True when ``n`` free blocks exist, evicting idle cached prefixes (LRU) if needed."""
        while self.available() < n and self.idle:
            group, blocks = self.idle.popitem(last=False)
            self.idle_blocks -= blocks
            del self.group_blocks[group]
        return self.available() >= n

    def grant(self, i: int, n: int) -> None:
        """Give request i ``n`` more private blocks (``reserve`` has found them free)."""
        self.private += n
        self.blocks[i] += n

    def cached(self, group: int) -> int:
        """Blocks cached for prefix ``group`` (0: none, or evicted)."""
        return self.group_blocks.get(group, 0)

    def allocate(self, i: int, need: int, group: int, hit: int) -> bool:
        """Admit request i: ``need`` new private blocks on top of ``hit`` cached blocks of prefix
        ``group`` (``hit`` 0: no cached prefix). False when the blocks cannot be found; idle
        prefixes may have been evicted trying, nothing else changes."""
        if hit:
            if self.group_refs.get(group, 0) == 0 and group in self.idle:
                # Re-reference an idle cached prefix: it stops being evictable.
                blocks = self.idle.pop(group)
                self.idle_blocks -= blocks
                self.pinned += blocks
                self.group_refs[group] = 0
            if not self.reserve(need):
                self._unpin_if_unused(group)
                return False
            self.group_refs[group] += 1
            self.ref[i] = group
        elif not self.reserve(need):
            return False
        self.private += need
        self.blocks[i] = need + hit
        self.shared[i] = hit
        return True

    def _unpin_if_unused(self, group: int) -> None:
        if self.group_refs.get(group, 0) == 0 and group in self.group_blocks:
            self._unpin(group)

    def _unpin(self, group: int) -> None:
        """No running request references prefix ``group`` any more: its blocks become idle."""
        blocks = self.group_blocks[group]
        self.pinned -= blocks
        self.idle[group] = blocks
        self.idle_blocks += blocks

    def release(self, i: int) -> None:
        """Request i leaves (finished or preempted): its private blocks become free; a prefix it
        was the last to reference becomes idle (cached, evictable)."""
        self.private -= self.blocks[i] - self.shared[i]
        self.blocks[i] = self.shared[i] = 0
        group = self.ref[i]
        if group >= 0:
            self.ref[i] = -1
            self.group_refs[group] -= 1
            if self.group_refs[group] == 0:
                self._unpin(group)

    def share_prefix(self, i: int, group: int, blocks: int) -> None:
        """Request i, a prefix-cache miss, has computed its prompt: its first ``blocks`` full
        blocks become prefix ``group``'s cache (pinned while it runs). Nothing happens when i
        has no group (-1), already shares a prefix, ``blocks`` is 0 or the group is cached."""
        if group < 0 or self.shared[i] or blocks == 0 or group in self.group_blocks:
            return
        self.group_blocks[group] = blocks
        self.group_refs[group] = 1
        self.private -= blocks
        self.pinned += blocks
        self.shared[i] = blocks
        self.ref[i] = group
