"""bench/run.py still runs and writes its table (tiny tree; no network, no semgrep/ast-grep)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import ROOT

PY = """\
import torch


def is_sm90_supported():
    return torch.cuda.get_device_capability()[0] == 9


if is_sm90_supported():
    pass
if torch.cuda.get_device_capability()[0] >= 10:
    pass
"""

CU = """\
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200)
__device__ void f() { cudaGridDependencySynchronize(); }
#else
__device__ void f() {}
#endif
"""


@pytest.mark.slow
def test_quick_bench_writes_table(tmp_path):
    tree = tmp_path / "tree"
    for i in range(4):
        (tree / "pkg" / f"m{i}").mkdir(parents=True)
        (tree / "pkg" / f"m{i}" / "gate.py").write_text(PY)
        (tree / "pkg" / f"m{i}" / "kernel.cu").write_text(CU)
    out = tmp_path / "results.md"
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "run.py"),
        "--tree",
        str(tree),
        "--quick",
        "--runs",
        "1",
        "--tools",
        "ripgrep,archaudit",
        "--no-install",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--output",
        str(out),
        "--timeout",
        "300",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    assert text == proc.stdout
    assert "- nproc: " in text and "- load average" in text
    assert "| tool | finds | median wall s |" in text
    rows = {line.split("|")[1].strip(): line.split("|") for line in text.splitlines() if line.startswith("| ")}
    cold = rows["archaudit cold"]
    float(cold[3])  # a median wall time, not "error"/"timeout"
    assert int(cold[8]) > 0  # tree RSS: the sum over the command's processes
    assert int(cold[9]) + int(cold[10]) >= 1  # found gates
    assert "archaudit warm" in rows
    if shutil.which("rg"):
        float(rows["ripgrep"][3])
        assert int(rows["ripgrep"][9]) == 16 and int(rows["ripgrep"][10]) == 4
    else:
        assert "not installed" in rows["ripgrep"][-2]
    assert "## Scaling: archaudit cold" in text
    for label in ("¼", "½", "all"):
        assert label in rows
    assert "## Scaling: archaudit cold on copies" in text
    # copies of self-contained files: k copies hold k times the gates of one
    one = int(rows["1× ¼"][7])
    assert one >= 1 and int(rows["2× ¼"][7]) == 2 * one and int(rows["4× ¼"][7]) == 4 * one
    assert int(rows["4× ¼"][2]) == 4 * int(rows["1× ¼"][2])


def _wheel(where, version: str, body: str):
    """A tiny wheel under the name and version the bench's diff asks for (no download)."""
    path = where / f"flashinfer_python-{version}-py3-none-any.whl"
    info = f"flashinfer_python-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("flashinfer/gate.py", body)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: flashinfer-python\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


@pytest.mark.slow
def test_the_diff_case_times_both_ways_and_compares_the_json(tmp_path):
    tree, wheels = tmp_path / "tree", tmp_path / "wheels"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "gate.py").write_text(PY)
    wheels.mkdir()
    _wheel(wheels, "0.6.7", PY)
    _wheel(wheels, "0.7.4", PY.replace("[0] >= 10", "[0] in (10, 11)"))
    out = tmp_path / "results.md"
    cmd = [sys.executable, str(ROOT / "bench" / "run.py"), "--tree", str(tree), "--tools", "ripgrep"]
    cmd += ["--no-install", "--no-scaling", "--diff", "--runs", "2", "--wheel-dir", str(wheels)]
    cmd += ["--cache-dir", str(tmp_path / "cache"), "--output", str(out), "--timeout", "300"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    assert "## Diff" in text and "The JSON of every good run: byte-identical." in text
    rows = {line.split("|")[1].strip(): line.split("|") for line in text.splitlines() if line.startswith("| ")}
    for label in ("diff, no cache", "diff, warm"):
        float(rows[label][2])  # a median wall time, not "error"
        low, high = rows[label][3].split("–")
        assert float(low) <= float(rows[label][2]) <= float(high)
