"""``python -m clinenv``: the same program as the ``clinenv`` command."""

from clinenv.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
