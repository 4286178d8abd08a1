"""Issue #20 item 2 on real releases: the Python pass's isolated, kept batches give the
gates the way before gave, and a re-scan after one file changed gives, byte for byte, the
JSON of a cold scan of the changed tree (slow: wheels downloaded once, cached on disk)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from auditor import cli
from auditor.model import SourceFile
from auditor.python import extract
from tests.conftest import wheel

pytestmark = pytest.mark.slow

RELEASES = {
    "sglang==0.5.15": ("sglang/srt/utils/common.py", "sglang/srt/layers/quantization/fp8_utils.py"),
    "flashinfer-python==0.5.3": ("flashinfer/utils.py", "flashinfer/gemm/gemm_base.py"),
}


def python_files(requirement: str) -> list[SourceFile]:
    with zipfile.ZipFile(wheel(requirement)) as z:
        return [SourceFile(m, z.read(m), "python", requirement) for m in sorted(z.namelist()) if m.endswith(".py")]


@pytest.mark.parametrize("requirement", sorted(RELEASES))
def test_isolated_batches_give_the_gates_of_the_way_before(requirement):
    files = python_files(requirement)
    inputs = {f.path: f.input for f in files}
    old = extract.read(*extract.load(files), inputs, 1, isolated=False)
    assert old[0]
    assert extract.read(*extract.load(files), inputs, 1) == old
    assert extract.read(*extract.load(files), inputs, 2) == old


@pytest.mark.parametrize("requirement", sorted(RELEASES))
def test_trees_released_at_every_turn_give_the_same_gates(requirement, monkeypatch):
    files = python_files(requirement)
    inputs = {f.path: f.input for f in files}
    kept = extract.read(*extract.load(files), inputs, 2)
    monkeypatch.setattr(extract, "TREES", 0)
    assert extract.read(*extract.load(files), inputs, 2) == kept


def unpack(requirement: str, root: Path) -> Path:
    with zipfile.ZipFile(wheel(requirement)) as z:
        for m in z.namelist():
            if not m.endswith("/") and not m.endswith((".so", ".a")):
                target = root / m
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(m))
    return root


def scan(path: Path, out: Path, cache: Path | None) -> bytes:
    options = ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    assert cli.main(["scan", str(path), "--format", "json", "-q", "--exit-zero", "-o", str(out), *options]) == 0
    return out.read_bytes()


@pytest.mark.parametrize("requirement", sorted(RELEASES))
def test_a_rescan_after_one_file_changed_is_the_cold_scan_of_the_changed_tree(tmp_path, requirement):
    root = unpack(requirement, tmp_path / "tree")
    cache = tmp_path / "cache"
    scan(root, tmp_path / "first.json", cache)
    central, leaf = RELEASES[requirement]
    with (root / leaf).open("a") as fh:
        fh.write("# touched\n")
    assert scan(root, tmp_path / "leaf.json", cache) == scan(root, tmp_path / "leaf-cold.json", None)
    text = (root / central).read_text()
    (root / central).write_text(text.replace("major >= 9", "major >= 10", 1).replace(">= 90", ">= 100", 1) + "\n# x\n")
    assert scan(root, tmp_path / "central.json", cache) == scan(root, tmp_path / "central-cold.json", None)
