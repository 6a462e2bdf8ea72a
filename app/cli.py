"""The `inferlab` command: no arguments opens the window; subcommands run engines headless.

Each subcommand lives in `app/commands/<name>.py` and exposes `register(subparsers)`, which
adds its parser and sets `func=run` where `run(args) -> int`. Errors users can cause (bad
file, unknown model or device) are raised as `UserError` (or ValueError / OSError) and
printed here as one line on stderr with a non-zero exit.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from inferlab.app import __version__

# Modules under app/commands, in help order. A missing module is skipped, so labs can land
# one by one.
COMMAND_MODULES = (
    "devices",
    "roofline",
    "kv_calc",
    "generate",
    "train_head",
    "run_lab",
    "bench",
    "screenshot",
    "snapshot",
    "compare",
    "report",
    "profile",
    "mcu",
    "board",
    "virtual_board",
)


class UserError(Exception):
    """A problem with the user's input: printed as one line, exit status 2."""


def print_json(data) -> None:
    """Write `data` as indented JSON to stdout (the `--json` output of every subcommand)."""
    from inferlab.engines.trace.jsonable import to_jsonable

    json.dump(to_jsonable(data), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def add_kernels_option(parser: argparse.ArgumentParser) -> None:
    """`--kernels native|torch`: the process's default CPU kernel path, set once before the
    command runs (`engines.kernels.set_default_path`): the path of every model the command
    builds whose own `kernels` setting is auto (default: native where its library builds,
    else torch)."""
    parser.add_argument("--kernels", choices=("native", "torch"), default=None,
                        help="CPU kernels: native (C, the default where it builds) or torch "
                             "(the reference)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inferlab",
        description="InferLab: see what decides inference cost, on your own hardware.",
    )
    parser.add_argument("--version", action="version", version=f"inferlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"inferlab.app.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"inferlab.app.commands.{name}":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        # The window: it paints before any command module (numpy, planners, ...) is imported.
        from inferlab.app.launch import launch

        return launch()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if getattr(args, "kernels", None):
            from inferlab.engines import kernels

            kernels.set_default_path(args.kernels)
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `inferlab ... | head`: the reader left; nothing went wrong here
        sys.stderr.close()
        return 0
    except (UserError, ValueError, OSError) as exc:
        # The errors a user can cause; anything else (a KeyError, a TypeError) is a bug and
        # keeps its traceback.
        print(f"inferlab {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
