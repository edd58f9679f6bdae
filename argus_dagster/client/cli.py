"""``argus``: its options parsed (:mod:`argus_dagster.client.arguments`), then the command run from the
module that holds it (:data:`COMMANDS`): demo and evaluate in :mod:`argus_dagster.client.run_commands`,
the read-only leaderboard, export, best-of-n, history and diff in
:mod:`argus_dagster.client.read_commands` (compare in :mod:`argus_dagster.client.compare_command`), ui in :mod:`argus_dagster.client.ui_command`, open, align,
robustness, evaluations and env in the modules named for what they show. A command's module is imported
only when it runs, so ``argus --help`` loads neither Dagster nor polars. The process ends at once after
the command (:mod:`argus_dagster.client.quick_exit`)."""

from __future__ import annotations

import argparse
import importlib
from typing import Callable

from argus_dagster.client.arguments import parser
from argus_dagster.client.printing import say, storage_failure
from argus_dagster.client.quick_exit import leave
from argus_dagster.infra.environment import SettingError

# Each command's name (``args.command``) and what runs it: ``module:function`` of the module that holds the
# command, imported only when that command runs.
COMMANDS: dict[str, str] = {
    "demo": "argus_dagster.client.run_commands:cmd_demo",
    "evaluate": "argus_dagster.client.run_commands:cmd_evaluate",
    "export": "argus_dagster.client.read_commands:cmd_export",
    "best-of-n": "argus_dagster.client.read_commands:cmd_best_of_n",
    "leaderboard": "argus_dagster.client.read_commands:cmd_leaderboard",
    "history": "argus_dagster.client.read_commands:cmd_history",
    "diff": "argus_dagster.client.read_commands:cmd_diff",
    "compare": "argus_dagster.client.compare_command:cmd_compare",
    "open": "argus_dagster.client.serve_reports:cmd_open",
    "ui": "argus_dagster.client.ui_command:cmd_ui",
    "align": "argus_dagster.client.agreement:cmd_align",
    "robustness": "argus_dagster.client.agreement:cmd_robustness",
    "evaluations": "argus_dagster.client.listings:cmd_evaluations",
    "env": "argus_dagster.client.listings:cmd_env",
}


def command(name: str) -> Callable[[argparse.Namespace], int]:
    """What runs the command ``name`` (:data:`COMMANDS`); a command's own module is imported here, so
    ``argus --help`` and every other command start without it (Dagster, polars, the page templates)."""
    module, function = COMMANDS[name].split(":")
    return getattr(importlib.import_module(module), function)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return command(args.command)(args)
    except SettingError as exc:  # a setting no command can work with, wherever it is read: one line
        say(f"argus {args.command}: {exc}")
        return 2
    except Exception as exc:
        failure = storage_failure(exc)
        if failure is None:
            raise
        say(f"argus {args.command}: {failure}")
        return 2


def entry() -> None:
    """The ``argus`` command: :func:`main`, then out of the process at once (:func:`leave`); a command
    that fails ends the ordinary way."""
    leave(main())


if __name__ == "__main__":
    entry()
