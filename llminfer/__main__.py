"""``python -m llminfer ...`` runs the command line (see ``llminfer.cli``)."""

import sys

from llminfer.cli import main

sys.exit(main())
