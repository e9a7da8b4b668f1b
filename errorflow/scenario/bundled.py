"""Finding the bundled scenarios, installed (errorflow/scenarios in the wheel) or in a
checkout (scenarios/ at the top of the repository)."""

from __future__ import annotations

from pathlib import Path

import yaml


def scenarios_dir() -> Path:
    package = Path(__file__).resolve().parent.parent  # errorflow/
    for candidate in (package / "scenarios", package.parent / "scenarios"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("bundled scenarios not found (broken install?)")


def bundled() -> dict[str, Path]:
    return {p.stem: p for p in sorted(scenarios_dir().glob("*.yaml"))}


def resolve(name_or_path: str) -> Path:
    """A path as given, or the bundled scenario of that name."""
    path = Path(name_or_path)
    if path.exists() or path.suffix in (".yaml", ".yml") or "/" in name_or_path:
        return path
    found = bundled().get(name_or_path)
    return found if found is not None else path


def describe(path: Path) -> str:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return ""
    text = str(data.get("description", "")) if isinstance(data, dict) else ""
    return text.strip().splitlines()[0] if text.strip() else ""
