"""Loaded by ``make test`` before pytest's plugins (``-p tests.suite_startup``), in each
xdist worker: what the suite's start-up need not pay for.

nbval imports nbformat, which imports jsonschema, which imports ``rfc3987_syntax`` when it is
installed (Jupyter's ``jsonschema[format-nongpl]`` brings it) and compiles 39 Lark grammars for
the "iri" string format at import: 1.3 s of each worker's 4.4 s collection on this 2-core
machine, four workers in every run. No notebook schema uses that format (nbformat's v4 schemas
have no "format" at all), so the import is refused here and jsonschema leaves the format
unchecked, as it does where the package is missing. Notebook kernels and every subprocess are
untouched.

Python's cyclic garbage collector took 2.5-2.7 s of 37 s in a worker running five of the
heaviest test files (timed with ``gc.callbacks``): every 700 new objects it scans the young
ones, and every so often all of the ~1 million that pandas, matplotlib and the collected tests
leave alive. Once collection is done those are frozen out of its scans (``gc.freeze``) and the
young generation is scanned every 10,000 objects: 0.85-0.89 s then, the same tests 1-4 s of CPU
cheaper. Nothing a test checks depends on when garbage is collected.
"""

import gc
import sys

sys.modules.setdefault("rfc3987_syntax", None)


def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
