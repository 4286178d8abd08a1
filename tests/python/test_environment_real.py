"""Models win over sources, on real releases: sglang's gates scanned alone and inside an
environment that holds its dependencies' source (torch, triton, sgl-kernel, flashinfer), and a
default ``archaudit scan`` inside a virtualenv that has torch installed."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sysconfig
import venv
import zipfile
from functools import cache
from pathlib import Path

import pytest

from auditor import arch
from auditor.model import Gate, SourceFile
from auditor.python.extract import extract
from tests.conftest import ROOT, wheel

pytestmark = pytest.mark.slow

PACKAGE = "sglang==0.5.23"
DEPENDENCIES = ("torch==2.14.1", "triton==3.8.0", "sgl-kernel==0.3.21", "flashinfer-python==0.7.4")


def _python_files(requirement: str) -> list[SourceFile]:
    with zipfile.ZipFile(wheel(requirement)) as z:
        return [SourceFile(m, z.read(m), "python") for m in z.namelist() if m.endswith(".py")]


@cache
def _gates(*requirements: str) -> dict[str, Gate]:
    """sglang's gates by id, scanned with the Python sources of ``requirements`` beside it."""
    files = [f for r in requirements for f in _python_files(r)]
    gates, _ = extract(files, jobs=2)
    return {g.id: g for g in gates if g.file.startswith("sglang/")}


def test_no_sglang_gate_is_lost_beside_its_dependencies():
    """The metamorphic property: every gate of the package alone that turns a capability away
    is found in the environment, admitting the same capabilities or fewer (a dependency's
    definition can only make an answer more precise). A gate lost must admit everything:
    one that a method call on an unknown object found through a same-named method (the
    first few of that name, more of them beside the dependencies), no verdict."""
    alone, beside = _gates(PACKAGE), _gates(PACKAGE, *DEPENDENCIES)
    assert len(alone) > 700 and len(beside) >= len(alone)
    every = len(arch.capabilities())
    lost = sorted(f"{g.file}:{g.line} {g.expression}" for i, g in alone.items() if i not in beside)
    assert all(len(g.admits) == every for i, g in alone.items() if i not in beside), lost
    wider = sorted(
        f"{g.file}:{g.line} {g.expression}: {g.admits} -> {beside[i].admits}"
        for i, g in alone.items()
        if i in beside and not set(beside[i].admits) <= set(g.admits)
    )
    assert not wider, wider


def test_the_two_file_shape_of_the_issue_on_real_sources():
    """sglang's cake-kernel check and its caller, beside torch's own device module."""
    beside = _gates(PACKAGE, "torch==2.14.1")
    here = {(g.line, g.admits) for g in beside.values() if g.file == "sglang/kernels/cake_kernels/sampling.py"}
    assert (18, ("10.3",)) in here
    assert any(admits == ("10.3",) and line != 18 for line, admits in here)


def test_torchs_release_table_is_no_gate():
    """``PYTORCH_RELEASES_CODE_CC`` is keyed by CUDA versions ("12.6"), under a comment naming
    TORCH_CUDA_ARCH_LIST: not a gencode-flags gate."""
    files = [f for f in _python_files("torch==2.14.1") if f.path.startswith("torch/cuda/")]
    gates, _ = extract(files)
    assert not [g for g in gates if g.kind.value == "gencode-flags" and g.file == "torch/cuda/__init__.py"]


def _wheel_of(tmp: Path, name: str, tree: Path) -> Path:
    """A wheel of the fixture package ``tree`` (pure Python, no build step), for pip to install."""
    dist = f"{name}-0.1.dist-info"
    members = {p.relative_to(tree.parent).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*.py"))}
    members[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n".encode()
    members[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    members[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    out = tmp / f"{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, data in members.items():
            z.writestr(path, data)
    return out


def test_a_default_scan_in_a_virtualenv_with_torch_finds_the_package_beside_it(tmp_path):
    """``archaudit scan`` with no argument scans the interpreter's site-packages: with torch
    installed there, the gates of the small package installed beside it are all found."""
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
    subprocess.run([*install, str(wheel("torch==2.14.1"))], check=True)
    app = ROOT / "fixtures" / "python" / "environment" / "app"
    subprocess.run([*install, str(_wheel_of(tmp_path, "app", app))], check=True)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # archaudit itself runs as installed for this interpreter (editable or not): a .pth file adds
    # that site directory to the new interpreter's path, without its files in the scanned one
    dirs = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site) / "archaudit-under-test.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)
    )
    out = tmp_path / "scan.json"
    subprocess.run(
        [str(python), "-m", "auditor", "scan", "--format", "json", "-o", str(out), "--no-cache", "--jobs", "2"],
        check=True,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    result = json.loads(out.read_text())
    assert any(i["path"] == site for i in result["inputs"])
    app_gates = {(g["file"], g["line"]): g["admits"] for g in result["gates"] if g["file"].startswith("app/")}
    assert app_gates[("app/sampling.py", 9)] == ["10.3"]
    assert app_gates[("app/sampling.py", 13)] == ["10.3"]
    assert ("app/sampling.py", 21) in app_gates
    assert any(g["file"].startswith("torch/") for g in result["gates"])  # torch was scanned too
