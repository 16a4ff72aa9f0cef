"""``python3 -m switchyard``: check, match, explain, diff."""
import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
