"""The simulator's paged KV block pool (llminfer.sim.kvblocks): counts, prefix sharing, LRU
eviction.

The behaviour modelled is vLLM V1's ``BlockPool`` (vllm/v1/core/block_pool.py): a request's
blocks return to the pool when it finishes or is preempted, a cached prefix block nobody uses
stays reusable until a new block is needed, and the least recently freed is evicted first.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from llminfer.sim.kvblocks import BlockPool


def _check_counts(pool: BlockPool) -> None:
    """Totals agree with the per-request and per-group records; nothing over capacity."""
    assert pool.private == sum(b - s for b, s in zip(pool.blocks, pool.shared, strict=True))
    referenced = {g for g in pool.ref if g >= 0}
    assert pool.pinned == sum(pool.group_blocks[g] for g in referenced)
    assert pool.idle_blocks == sum(pool.idle.values())
    assert set(pool.idle) == set(pool.group_blocks) - referenced
    for group, refs in pool.group_refs.items():
        if group in pool.group_blocks:
            assert refs == sum(1 for g in pool.ref if g == group)
    assert 0 <= pool.in_use() <= pool.capacity
    assert pool.in_use() + pool.available() == pool.capacity


def test_a_request_holds_its_blocks_until_it_leaves():
    pool = BlockPool(capacity=10, n_requests=2)
    assert pool.allocate(0, need=4, group=-1, hit=0)
    assert (pool.blocks[0], pool.in_use(), pool.available()) == (4, 4, 6)
    assert not pool.allocate(1, need=7, group=-1, hit=0)  # 6 free: refused, nothing taken
    assert (pool.blocks[1], pool.in_use()) == (0, 4)
    assert pool.reserve(6)
    pool.grant(0, 6)
    assert (pool.blocks[0], pool.available()) == (10, 0)
    assert not pool.reserve(1)
    pool.release(0)
    assert (pool.blocks[0], pool.in_use(), pool.available()) == (0, 0, 10)
    _check_counts(pool)


def test_a_shared_prefix_is_pinned_while_used_then_idle_then_evicted_lru():
    pool = BlockPool(capacity=20, n_requests=4)
    # request 0 computes a 5-block prompt whose first 3 blocks are prefix group 7
    assert pool.allocate(0, need=5, group=7, hit=0)
    pool.share_prefix(0, group=7, blocks=3)
    assert (pool.private, pool.pinned, pool.cached(7)) == (2, 3, 3)
    # request 1 hits the cache: only its 2 own blocks are new
    assert pool.allocate(1, need=2, group=7, hit=3)
    assert (pool.blocks[1], pool.shared[1], pool.in_use(), pool.group_refs[7]) == (5, 3, 7, 2)
    _check_counts(pool)
    pool.release(0)
    assert (pool.pinned, pool.idle_blocks) == (3, 0)  # request 1 still uses the prefix
    pool.release(1)
    assert (pool.pinned, pool.idle_blocks, pool.in_use(), pool.cached(7)) == (0, 3, 3, 3)
    # a second prefix goes idle later: group 7 is the least recently used
    assert pool.allocate(2, need=4, group=9, hit=0)
    pool.share_prefix(2, group=9, blocks=4)
    pool.release(2)
    assert list(pool.idle) == [7, 9] and pool.in_use() == 7
    # 15 blocks for request 3: 13 are free, evicting group 7 (3 blocks) is enough
    assert pool.allocate(3, need=15, group=-1, hit=0)
    assert (pool.cached(7), pool.cached(9), pool.in_use()) == (0, 4, 19)
    _check_counts(pool)


def test_a_hit_that_does_not_fit_leaves_the_prefix_idle():
    pool = BlockPool(capacity=6, n_requests=3)
    assert pool.allocate(0, need=4, group=1, hit=0)
    pool.share_prefix(0, group=1, blocks=4)
    pool.release(0)
    assert pool.allocate(1, need=2, group=-1, hit=0)  # 4 idle + 2 private: full
    # request 2 hits the 4 cached blocks but needs 1 more: none free, and its own prefix is
    # the only idle one, which it pins while trying, so it is not evicted
    assert not pool.allocate(2, need=1, group=1, hit=4)
    assert (pool.cached(1), list(pool.idle), pool.ref[2]) == (4, [1], -1)
    _check_counts(pool)


def test_share_prefix_ignores_what_cannot_be_shared():
    pool = BlockPool(capacity=10, n_requests=2)
    assert pool.allocate(0, need=3, group=-1, hit=0)
    pool.share_prefix(0, group=-1, blocks=2)  # no group
    pool.share_prefix(0, group=5, blocks=0)  # prompt shorter than one block
    assert (pool.private, pool.pinned, pool.group_blocks) == (3, 0, {})
    assert pool.allocate(1, need=3, group=5, hit=0)
    pool.share_prefix(1, group=5, blocks=2)
    pool.share_prefix(0, group=5, blocks=2)  # group already cached by request 1
    assert (pool.private, pool.pinned, pool.shared[0]) == (4, 2, 0)
    _check_counts(pool)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["admit", "grow", "release"]),
            st.integers(0, 5),  # request
            st.integers(-1, 2),  # prefix group
            st.integers(0, 6),  # blocks
        ),
        max_size=60,
    )
)
def test_counts_stay_consistent_under_any_sequence(ops):
    pool = BlockPool(capacity=16, n_requests=6)
    running: set[int] = set()
    for op, i, group, n in ops:
        if op == "admit" and i not in running:
            hit = min(pool.cached(group), 2) if group >= 0 else 0
            if pool.allocate(i, n, group if hit else -1, hit):
                running.add(i)
                if not hit and group >= 0:
                    pool.share_prefix(i, group, min(2, pool.blocks[i]))
        elif op == "grow" and i in running and pool.reserve(n):
            pool.grant(i, n)
        elif op == "release" and i in running:
            pool.release(i)
            running.discard(i)
        _check_counts(pool)
