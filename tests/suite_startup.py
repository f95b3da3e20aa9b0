"""Loaded by ``make test`` before pytest's plugins (``-p tests.suite_startup``), in each
xdist worker: what the suite's start-up need not pay for.

nbval imports nbformat, which imports jsonschema, which imports ``rfc3987_syntax`` when it is
installed (Jupyter's ``jsonschema[format-nongpl]`` brings it) and compiles 39 Lark grammars for
the "iri" string format at import: 1.3 s of each worker's 4.4 s collection on this 2-core
machine, four workers in every run. No notebook schema uses that format (nbformat's v4 schemas
have no "format" at all), so the import is refused here and jsonschema leaves the format
unchecked, as it does where the package is missing. Notebook kernels and every subprocess are
untouched.
"""

import sys

sys.modules.setdefault("rfc3987_syntax", None)
