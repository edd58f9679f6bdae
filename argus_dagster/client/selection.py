"""Which evaluation (bench x profile) a command names: ``--bench``/``--profile``, by default the one
evaluated last; a read-only command finds the home like git finds its repository and creates nothing."""

from __future__ import annotations

import argparse
from pathlib import Path
from shlex import quote

from argus_dagster.client.printing import say
from argus_dagster.infra.environment import SettingError
from argus_dagster.infra.settings import DEFAULT_PROFILE, DEMO_BENCH, find_home, load_settings


def chosen(args: argparse.Namespace):
    """The evaluation ``--bench`` / ``--profile`` name (default: the one evaluated last)."""
    return load_settings(bench=getattr(args, "bench", None), profile=getattr(args, "profile", None))


def read_only_evaluation(args: argparse.Namespace, needs_instance: bool = True):
    """The evaluation a read-only command shows, or None after saying why there is none. Finds the
    home like git finds its repository, and creates nothing."""
    home = find_home()
    if home is None:
        say(f"no ARGUS_HOME: no .argus folder in {Path.cwd()} or its parents, and ARGUS_HOME is not set; "
            "run `argus demo` or `argus evaluate` there first")
        return None
    try:
        settings = chosen(args)
    except SettingError as exc:
        say(f"argus {args.command}: {exc}")
        return None
    if needs_instance and not settings.dagster_home.is_dir():
        say(f"nothing evaluated yet for {settings.evaluation} in {home}: run `argus demo` or `argus evaluate` first")
        return None
    return settings


def selector(settings) -> str:
    """The options that name ``settings``' evaluation to a later command (none for the demo's default),
    shell-quoted: a user copies them into a shell."""
    out = "" if settings.bench == DEMO_BENCH else f" --bench {quote(settings.bench)}"
    return out + ("" if settings.profile == DEFAULT_PROFILE else f" --profile {quote(settings.profile)}")
