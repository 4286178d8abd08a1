"""Shared test helpers: fixture paths, cached real wheels from PyPI, strict mode."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
WHEEL_CACHE = Path(os.environ.get("ARCHAUDIT_WHEEL_CACHE", Path.home() / ".cache" / "archaudit-wheels"))

# Tests never touch the user's result cache, and leave none of their own behind.
if "ARCHAUDIT_CACHE_DIR" not in os.environ:
    os.environ["ARCHAUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="archaudit-test-cache-")
    atexit.register(shutil.rmtree, os.environ["ARCHAUDIT_CACHE_DIR"], ignore_errors=True)


def wheel(requirement: str) -> Path:
    """A real wheel from PyPI, downloaded once into the cache (slow tests only)."""
    name, version = requirement.split("==")
    stem = name.replace("-", "_").lower() + "-" + version + "-"
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(p for p in WHEEL_CACHE.glob("*.whl") if p.name.lower().startswith(stem))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "-d",
                str(WHEEL_CACHE),
                requirement,
            ],
            check=True,
        )
        found = sorted(p for p in WHEEL_CACHE.glob("*.whl") if p.name.lower().startswith(stem))
    assert found, f"no wheel for {requirement}"
    return found[0]
