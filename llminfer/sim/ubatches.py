"""How llama.cpp runs one step: its slots, and the forward passes ("micro-batches") a step's
batch is split into.

``llama-server`` gives each request a slot (``--parallel N`` of them). Every step
(``update_slots``) it builds one batch: the sampled token of every generating slot, in slot
order, then prompt tokens of every slot still reading its prompt, in slot order, up to
``n_batch`` (2,048) tokens (0.3.36 ``tools/server/server-context.cpp``, ``update_slots``).
llama.cpp's decode (``llama_context::decode``) runs that batch as one forward pass per
*micro-batch* (ubatch), each of at most ``n_ubatch`` tokens (512; ``split_equal`` admits up to
``n_ubatch + 1`` one-token sequences, as llama.cpp's guard does), and every pass reads all the
weights again:

- ``split_simple``: with one KV cache for all slots (``--kv-unified``, or ``--parallel``
  left at its automatic value, which turns it on: ``tools/server/server.cpp`` L157-160), the
  batch is cut into consecutive runs of ``n_ubatch`` tokens (``src/llama-batch.cpp``
  ``split_simple``, L508);
- ``split_equal``: with an explicit ``--parallel N`` and no ``--kv-unified`` each slot has
  its own KV stream, and a pass holds only sequences with *consecutive* slot ids, each
  contributing the same number of tokens (``split_equal(n_ubatch, sequential=true)``,
  ``src/llama-batch.cpp`` L542-711, called from ``src/llama-kv-cache.cpp`` L713). Decoding
  slots 0, 2, 4 and 6 thus takes four passes where slots 0-3 take one.

Measured on llama-server 0.3.36 (built from the llama-cpp-python sdist, one CPU thread, a
random-weight GGUF of 4 layers of hidden 1,024 and FFN 4,096 in F32: 270 MB of weights, so a
decode step is a weight pass; 48 generated tokens per request, each sent to a chosen slot with
``id_slot``; 2026-12-04, ``data/measurements/llama_server_slot_passes.csv``, medians of 2 rounds):
one sequence 10.1 ms a token; slots 0-3 together 20.5 ms, slots 0, 2, 4, 6 together 39.8 ms;
with ``--kv-unified`` 22.6 and 22.4 ms.

``lru_slot`` is the slot a new request takes: the idle slot used least recently, the highest
id among equals (``get_available_slot``: ``slot.t_last_used <= t_last``, L1604; a never-used
slot has -1), unless an idle slot's cached prompt shares more than
``--slot-prompt-similarity`` (10 %) of the new one, which is not modelled here.

Introduced in: notebooks/08_measure_a_server.ipynb
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

#: A pass: (slot, tokens) per sequence in it, in batch order.
Ubatch = list[tuple[int, int]]


def _check_batch(batch: Sequence[tuple[int, int]], n_ubatch: int) -> None:
    if isinstance(n_ubatch, bool) or not isinstance(n_ubatch, int) or n_ubatch < 1:
        raise ValueError(f"n_ubatch={n_ubatch!r} must be an integer >= 1")
    seen = set()
    for slot, tokens in batch:
        if slot in seen:
            raise ValueError(f"slot {slot} appears twice in the batch {list(batch)}")
        seen.add(slot)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ValueError(f"slot {slot} has {tokens!r} tokens; each needs >= 1")


def server_batch(
    decoding: Iterable[int], prompts: dict[int, int] | Iterable[tuple[int, int]]
) -> list[tuple[int, int]]:
    """``update_slots``' batch as (slot, tokens): one token per decoding slot in slot order,
    then each prompt chunk (``{slot: tokens}`` or (slot, tokens) pairs) in slot order.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    pairs = prompts.items() if isinstance(prompts, dict) else prompts
    return [(s, 1) for s in sorted(decoding)] + sorted(pairs)


def split_simple(batch: Sequence[tuple[int, int]], n_ubatch: int = 512) -> list[Ubatch]:
    """The passes of one unified KV cache: the batch's tokens in order, ``n_ubatch`` a pass.
    ``batch``: (slot, tokens) per sequence, tokens ≥ 1.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    _check_batch(batch, n_ubatch)
    passes: list[Ubatch] = []
    current: Ubatch = []
    room = n_ubatch
    for slot, tokens in batch:
        while tokens:
            take = min(tokens, room)
            current.append((slot, take))
            tokens -= take
            room -= take
            if room == 0:
                passes.append(current)
                current, room = [], n_ubatch
    if current:
        passes.append(current)
    return passes


def split_equal(batch: Sequence[tuple[int, int]], n_ubatch: int = 512) -> list[Ubatch]:
    """The passes of per-slot KV streams (llama.cpp's ``split_equal`` with ``sequential``):
    each pass starts at the first sequence with tokens left, adds every later one (in batch
    order) whose slot is one more than the last added, and takes the same number of tokens
    from each: as many as the shortest has left, at most ``n_ubatch // sequences`` (at least
    one). ``batch``: (slot, tokens) per sequence, tokens ≥ 1.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    _check_batch(batch, n_ubatch)
    left = [[slot, tokens] for slot, tokens in batch]
    passes: list[Ubatch] = []
    while True:
        members: list[list[int]] = []
        for entry in left:
            if entry[1] == 0:
                continue
            if members and entry[0] != members[-1][0] + 1:
                continue
            members.append(entry)
            if len(members) > n_ubatch:  # llama.cpp's guard, checked after adding: so a pass
                break  # may hold n_ubatch + 1 one-token sequences
        if not members:
            return passes
        each = min(min(m[1] for m in members), max(1, n_ubatch // len(members)))
        passes.append([(m[0], each) for m in members])
        for m in members:
            m[1] -= each


def lru_slot(last_used: Sequence[float], idle: Sequence[int]) -> int:
    """The idle slot a new request takes: the least recently used (``last_used[slot]``, the
    time in seconds its last request ended; -1 for a slot never used). Among slots never used,
    the highest id (``get_available_slot`` keeps the last of equals: ``t_last_used <=
    t_last``); among slots freed at the same time, the lowest id (``update_slots`` releases
    them in slot order, each stamped a microsecond later).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if not idle:
        raise ValueError("no idle slot to give the request")
    return min(idle, key=lambda s: (last_used[s], -s if last_used[s] < 0 else s))


#: What ``EngineConfig.ubatch_split`` may be, and the rule each names.
SPLITS: dict[str, Callable[[Sequence[tuple[int, int]], int], list[Ubatch]]] = {
    "simple": split_simple,
    "equal": split_equal,
}
UBATCH_SPLITS = tuple(SPLITS)


# --- the scheduler's side (``llminfer.sim.scheduler.Scheduler`` binds these as methods) --------


class SlotState(Protocol):
    """The scheduler state the slot functions read and change (see ``Scheduler``).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    split: Callable[[Sequence[tuple[int, int]], int], list[Ubatch]] | None  # None: one pass
    slot: list[int]  # each request's slot now, -1 when it holds none
    slot_log: list[int]  # the slot each request last held
    slot_last_used: list[float]  # when each slot's last request ended, s; -1: never used
    idle_slots: set[int]
    decoding: set[int]
    computed: list[int]  # KV tokens present before this step, per request
    base: list[int]  # decode: a request's KV tokens = base + decode_counter
    decode_counter: int
    sum_base: int  # summed (kv tokens - decode counter) over decoding requests
    cfg: object  # the EngineConfig: n_ubatch
    attended: Callable[[int, int], int]  # attended pairs of a chunk after cached tokens
    step_time: Callable[..., float]


def init_slots(sched: SlotState, engine, n: int) -> None:
    """The slot state of ``n`` requests on ``engine.max_num_seqs`` slots, all never used;
    ``split`` None (and nothing else set) when the engine runs a step as one pass.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    sched.split = SPLITS.get(engine.ubatch_split)
    if sched.split is None:
        return
    sched.slot = [-1] * n
    sched.slot_log = [-1] * n
    sched.slot_last_used = [-1.0] * engine.max_num_seqs
    sched.idle_slots = set(range(engine.max_num_seqs))


def take_slot(sched: SlotState, i: int) -> None:
    """Give admitted request ``i`` the slot llama-server would (``lru_slot``).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    s = lru_slot(sched.slot_last_used, sorted(sched.idle_slots))
    sched.idle_slots.discard(s)
    sched.slot[i] = s
    sched.slot_log[i] = s


def free_slot(sched: SlotState, i: int, t: float) -> None:
    """Request ``i`` leaves its slot at time ``t`` (s): the slot's last use.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    s = sched.slot[i]
    if s >= 0:
        sched.slot_last_used[s] = t
        sched.idle_slots.add(s)
        sched.slot[i] = -1


def decode_groups(sched: SlotState) -> list[tuple[int, int]]:
    """The forward passes of a decode-only step now, as (sequences, summed base) per pass:
    one pass of every decoding request without llama.cpp's micro-batches, else the passes its
    split makes of the decoding slots. A pass's context is ``base + sequences × counter``
    tokens, so the decode shortcuts (``llminfer.sim.decodestretch``) time a whole stretch of
    identical steps pass by pass, as ``passes_time`` times one.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if sched.split is None:
        return [(len(sched.decoding), sched.sum_base)]
    owner = {sched.slot[i]: i for i in sched.decoding}
    passes = sched.split(server_batch(owner, []), sched.cfg.n_ubatch)
    return [(len(p), sum(sched.base[owner[s]] for s, _ in p)) for p in passes]


def passes_time(sched: SlotState, batch: list[tuple[int, int]], n_decode: int) -> tuple[float, int]:
    """Seconds of a step split into llama.cpp's passes, and how many passes: every decoding
    request (when ``n_decode``) and the prompt chunks of ``batch`` ((request, tokens)) in
    ``server_batch`` order, each pass timed by ``sched.step_time`` on its own tokens.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    slot = sched.slot
    decoding = set(sched.decoding) if n_decode else set()
    owner = {slot[i]: i for i in decoding}
    owner.update((slot[i], i) for i, _ in batch)
    # pairs, not a dict: two chunks on one slot would be a bookkeeping bug, and the split
    # refuses a slot twice instead of dropping one
    order = server_batch((slot[i] for i in decoding), [(slot[i], c) for i, c in batch])
    done = dict.fromkeys((i for i, _ in batch), 0)
    total = 0.0
    passes = sched.split(order, sched.cfg.n_ubatch)
    for ubatch in passes:
        prefill = attended = cached = seqs = context = 0
        for s, tokens in ubatch:
            i = owner[s]
            if i in decoding:
                seqs += 1
                context += sched.base[i] + sched.decode_counter
            else:
                before = sched.computed[i] + done[i]
                prefill += tokens
                attended += sched.attended(tokens, before)
                cached += before
                done[i] += tokens
        total += sched.step_time(prefill, attended, seqs, context, cached)
    return total, len(passes)


__all__ = [
    "SPLITS",
    "UBATCH_SPLITS",
    "SlotState",
    "decode_groups",
    "free_slot",
    "init_slots",
    "lru_slot",
    "passes_time",
    "server_batch",
    "split_equal",
    "split_simple",
    "take_slot",
]
