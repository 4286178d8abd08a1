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


GATED_PY = "import torch\n\n\ndef f{i}():\n    if torch.cuda.get_device_capability()[0] >= 9:\n        return 1\n    return 0\n"
"""A Python module with one capability gate (``{i}`` makes each copy its own)."""
GATED_CU = "#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n__device__ void k{i}() {{}}\n#endif\n"
"""A CUDA file with one preprocessor gate."""


def gated_tree(root: Path, n: int) -> Path:
    """A small input of ``n`` gated Python modules and ``n`` gated CUDA files under ``root/pkg``."""
    (root / "pkg").mkdir(parents=True)
    for i in range(n):
        (root / "pkg" / f"m{i}.py").write_text(GATED_PY.format(i=i))
        (root / "pkg" / f"k{i}.cu").write_text(GATED_CU.format(i=i))
    return root


_LANGUAGES = {"py": "python", "cu": "cuda", "cuh": "cuda", "h": "cuda", "hpp": "cuda", "cpp": "cuda", "jinja": "cuda"}


def audit_texts(files: dict[str, str]):
    """(gates, findings) of one input made of these files (path -> text), the language by extension."""
    from auditor import pipeline
    from auditor.model import SourceFile

    sources = [SourceFile(p, t.encode(), _LANGUAGES[p.rpartition(".")[2]], "t") for p, t in files.items()]
    gates, findings, _ = pipeline.audit_input(sources, "t", pipeline.Options(jobs=1))
    return gates, findings
