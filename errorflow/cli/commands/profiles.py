"""`errorflow profiles`: the simulated model's profiles, every parameter with its value
and where it came from (measured, fitted to a published table, or assumed)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from errorflow.cli.command_table import summary
from errorflow.cli.console import out
from errorflow.cli.errors import EXIT_OK, UsageError
from errorflow.reports.profile_lines import profile_table, view_json
from errorflow.scenario.provenance.profile_file import (
    InlinedProfile,
    ProfileError,
    is_profile_path,
    read_profile,
)
from errorflow.scenario.provenance.view import ProfileView, profile_view
from errorflow.scenario.spec.profiles import PROFILES


def view_of(ref: str) -> ProfileView:
    """A built-in profile by name, or a profile file by path."""
    if not is_profile_path(ref):
        if ref not in PROFILES:
            raise UsageError(
                f"no built-in profile {ref!r} (known: {', '.join(PROFILES)}); a profile file "
                "is named by its path (./my-model.yaml)",
                where="PROFILE",
            )
        return profile_view(ref, {}, None)
    try:
        doc = read_profile(Path(ref).expanduser())
    except ProfileError as exc:
        raise UsageError(str(exc), where="PROFILE") from None
    return profile_view(ref, {}, InlinedProfile(path=ref, profile=doc))


def cmd_profiles(args: argparse.Namespace) -> int:
    views = [view_of(ref) for ref in (args.profile or list(PROFILES))]
    if args.json:
        print(json.dumps({v.source if v.source != "built-in" else v.name: view_json(v)
                          for v in views}, indent=2))  # fmt: skip
        return EXIT_OK
    for view in views:
        out.print(profile_table(view))
    return EXIT_OK


def add_profiles(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sp = sub.add_parser(
        "profiles",
        help=summary("profiles"),
        description="Show the simulated model's profiles: every behaviour parameter with "
        "its value and where it came from: measured on a named model by `errorflow "
        "calibrate` (probes, 95% interval, date), fitted to a published table (which one, "
        "its counts), or assumed (why).",
    )
    sp.add_argument(
        "profile",
        nargs="*",
        metavar="PROFILE",
        help="a built-in profile's name or a profile file's path (default: every built-in)",
    )
    sp.add_argument("--json", action="store_true", help="print them as JSON")
    sp.set_defaults(func=cmd_profiles)
