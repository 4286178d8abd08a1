"""``[tool.archaudit]`` in ``pyproject.toml``: project defaults that command-line flags override.

Found as ruff and mypy find theirs: the nearest ``pyproject.toml`` from the current directory
upwards that has a ``[tool.archaudit]`` table. Keys are the long option names (``fail-on``,
``select``); lists may be TOML arrays or comma strings. An unknown key or a value of the wrong
type is an error naming the file, so a typo never silently does nothing.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

LISTS = ("target", "cuda", "include", "exclude", "select", "ignore", "rules", "vendored")
"""Keys whose value is a list of strings (``target`` also accepts ``"12.0,12.1"``)."""
SCALARS = ("fail-on", "baseline")
"""Keys whose value is one string."""
FLAGS = ("exit-zero", "quiet", "unreached")
"""Keys whose value is a boolean."""
SIZES = ("cache-max",)
"""Keys whose value is a size: bytes, or a string with a unit (``"500M"``, ``"2GiB"``)."""

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str | int) -> int:
    """Bytes of ``1073741824``, ``"512M"``, ``"1.5G"``, ``"2GiB"``, ``"800MB"`` (units are powers of 1024)."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"size must not be negative: {text}")
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.I)
    if not m:
        raise ValueError(f"not a size: {text!r} (use bytes or a number with K, M, G or T)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


@dataclass(frozen=True, slots=True)
class Config:
    """The settings of one ``[tool.archaudit]`` table, by option name (``fail_on``)."""

    path: Path | None = None
    """The pyproject.toml it came from; None when there is none."""
    values: tuple[tuple[str, object], ...] = ()

    def get(self, key: str, default=None):
        return dict(self.values).get(key, default)


def find(start: Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.archaudit]`` table, from ``start`` upwards."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and "archaudit" in _read(candidate).get("tool", {}):
            return candidate
    return None


def _read(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: cannot read ({exc})") from None


def load(path: Path | None) -> Config:
    """The table of ``path`` (``find()``'s answer), checked; an empty Config for None."""
    if path is None:
        return Config()
    table = _read(path).get("tool", {}).get("archaudit", {})
    values: dict[str, object] = {}
    for key, value in table.items():
        if key in LISTS:
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
                raise ValueError(f"{path}: [tool.archaudit] {key} must be a string or a list of strings")
            found = tuple(i.strip() for v in items for i in v.split(",") if i.strip())
            values[key] = tuple(str(path.parent / r) for r in found) if key == "rules" else found
        elif key in SCALARS:
            if not isinstance(value, str):
                raise ValueError(f"{path}: [tool.archaudit] {key} must be a string")
            values[key] = str(path.parent / value) if key == "baseline" else value
        elif key in FLAGS:
            if not isinstance(value, bool):
                raise ValueError(f"{path}: [tool.archaudit] {key} must be true or false")
            values[key] = value
        elif key in SIZES:
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise ValueError(f'{path}: [tool.archaudit] {key} must be a size (bytes, or a string like "1G")')
            try:
                values[key] = parse_size(value)
            except ValueError as exc:
                raise ValueError(f"{path}: [tool.archaudit] {key}: {exc}") from None
        else:
            known = ", ".join(sorted((*LISTS, *SCALARS, *FLAGS, *SIZES)))
            raise ValueError(f"{path}: [tool.archaudit] has no key {key!r} (known: {known})")
    return Config(path, tuple((k.replace("-", "_"), v) for k, v in sorted(values.items())))
