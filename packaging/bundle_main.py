"""The bundle's entry point: the same `main` as the `inferlab` console script."""

import sys

from inferlab.app.cli import main

if __name__ == "__main__":
    sys.exit(main())
