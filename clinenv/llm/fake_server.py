"""Deprecated alias of :mod:`clinenv.testing.fake_server` (moved in 0.2; this path goes
in 0.3); ``python -m clinenv.llm.fake_server`` still starts the server."""

import sys

from clinenv._moved import alias

if __name__ == "__main__":
    import runpy

    runpy.run_module("clinenv.testing.fake_server", run_name="__main__")
    sys.exit(0)
alias(__name__)
