"""`python -m errorflow.tui tui|serve ...`: the TUI commands without the main CLI (what
`errorflow serve` runs per browser tab, and usable before the CLI hooks them in)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from errorflow.tui.commands import add_commands


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="errorflow")
    add_commands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
