"""Shared test settings.

Hypothesis runs derandomized (the same examples every run: the project seeds every random
generator) and without its per-example deadline: the suite runs on small shared machines where
a slow moment is not a failure of the code under test.
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "llminfer",
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("llminfer")


# The files that spend longest waiting (a paced server's real-time steps, a kernel's timed
# cells), started first. `make test` runs pytest-xdist with --dist loadfile: one file to one
# worker, handed out in queue order. xdist's default order (most test items first) left these
# few-cell notebooks to the end, where their ~50 s of mostly waiting ran with the other workers
# already idle; started first, their waiting overlaps everything else. Measured durations on
# the 2-core machine (`pytest --durations=0`, both editions), longest first.
START_FIRST = (
    "notebooks/08_measure_a_server.ipynb",  # 50 s: three paced sweeps of 264 requests
    "notebooks/zh/08_measure_a_server.ipynb",
    "notebooks/02_prefill_and_decode.ipynb",  # 32 s: the toy model's timed generations
    "notebooks/zh/02_prefill_and_decode.ipynb",
)


def pytest_collection_modifyitems(config, items):
    """Put the items of ``START_FIRST``'s files first, then the other notebooks (each several
    seconds of one kernel), then the unit tests, each group in its collected order; with
    xdist's ``--no-loadscope-reorder`` (the Makefile) that is the order files are handed out."""
    rank = {path: i for i, path in enumerate(START_FIRST)}

    def order(item):
        path = item.nodeid.split("::")[0]
        return rank.get(path, len(rank) + (not path.endswith(".ipynb")))

    items.sort(key=order)
