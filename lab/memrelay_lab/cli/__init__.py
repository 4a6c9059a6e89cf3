"""The `memrelay-lab` command line (`main`): one module per subcommand."""

from ._main import build_parser, main

__all__ = ["build_parser", "main"]
