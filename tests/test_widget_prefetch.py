"""Pictures made ahead by the worker process (llminfer.widgets._prefetch): the same picture the
kernel would draw, shown at once for a one-step move, and nothing made ahead outside Jupyter."""

from __future__ import annotations

import time

import ipywidgets as W
import pytest
from conftest import wait_for_a_picture_ahead

from llminfer.widgets import MemoryExplorer, RequestJourney, _prefetch


def _wait_for(jobs, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not all(job.done() for job in jobs):
        assert time.monotonic() < deadline, "the worker made no picture in time"
        time.sleep(0.05)


def test_neighbours_are_one_step_of_one_control():
    controls = {
        "n": W.IntSlider(value=4, min=1, max=4, step=1),
        "dtype": W.Dropdown(options=["bf16", "fp8", "int4"], value="fp8"),
        "on": W.Checkbox(value=False),
    }
    got = _prefetch.neighbours(controls)
    assert {"n": 3, "dtype": "fp8", "on": False} in got
    assert {"n": 5, "dtype": "fp8", "on": False} not in got  # beyond max
    assert {"n": 4, "dtype": "int4", "on": False} in got
    assert {"n": 4, "dtype": "bf16", "on": False} in got
    assert {"n": 4, "dtype": "fp8", "on": True} in got
    assert len(got) == 4


def test_nothing_is_made_ahead_outside_a_kernel_or_when_turned_off(monkeypatch):
    assert not _prefetch.enabled()  # pytest is not a Jupyter kernel
    explorer = RequestJourney()
    assert explorer._ahead == {}
    monkeypatch.setenv("LLMINFER_PREFETCH", "0")
    assert not _prefetch.enabled()


@pytest.mark.parametrize("cls", [RequestJourney, MemoryExplorer])
def test_a_picture_made_ahead_is_the_one_the_kernel_draws(monkeypatch, cls):
    monkeypatch.setattr(_prefetch, "enabled", lambda: True)
    monkeypatch.setattr(_prefetch, "_waiting", [])  # no wishes of other tests' explorers
    # one worker process, not a kernel's two: its pictures are the same, and a second spawned
    # process (importing matplotlib and pandas, drawing neighbours nobody waits for) only
    # takes CPU from the rest of the suite
    monkeypatch.setattr(_prefetch, "WORKERS", 1)
    explorer = cls()
    control, step, key = wait_for_a_picture_ahead(explorer)
    control.value = step  # one step: the worker's picture, shown at once
    made_ahead = explorer._image.value
    assert made_ahead and key in explorer._pictures and key not in explorer._ahead
    explorer._pictures.clear()  # the same values drawn here, in this process
    explorer.update()
    assert explorer._image.value == made_ahead
    # Moved on: every picture one step from the new values is made, being made or wished for.
    wished = {w[1] for w in _prefetch._waiting if w[0]() is explorer}
    for values in _prefetch.neighbours(explorer.controls):
        key = explorer._key(values)
        assert key in explorer._pictures or key in explorer._ahead or key in wished, values
    _wait_for(list(explorer._ahead.values()))


def test_newest_wishes_are_asked_first(monkeypatch):
    monkeypatch.setattr(_prefetch, "_waiting", [])
    monkeypatch.setattr(_prefetch, "WORKERS", 0)  # every worker busy: wishes only queue

    class Stub:
        def __init__(self) -> None:
            self._ahead: dict = {}
            self._pictures: dict = {}

    old, new = Stub(), Stub()
    _prefetch.ask(old, {("a",): {}, ("b",): {}})
    _prefetch.ask(new, {("c",): {}})
    _prefetch.ask(old, {("b",): {}})  # wished again: moves to the front, once
    assert [w[1] for w in _prefetch._waiting] == [("b",), ("c",), ("a",)]
    _prefetch.ask(Stub(), {("d",): {}}, first=False)  # a new explorer waits its turn
    assert [w[1] for w in _prefetch._waiting][-1] == ("d",)
