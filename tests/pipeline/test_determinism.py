"""Determinism: the same input gives byte-identical JSON and SARIF, however it is scanned.

Twice in a row; with one process or a pool (``--jobs 2``, the pool forced by lowering
``PARALLEL_MIN_FILES``); from a directory whose files were created in another order; from
a wheel whose members are stored in another order; under different ``PYTHONHASHSEED``s
(set iteration order must not leak into results); with a cold and a warm result cache;
and with the inputs named in another order on the command line.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from auditor import cli
from auditor.pipeline import workers
from tests.conftest import FIXTURES

# Derived macros across files, a macro cycle (its answer depends on the order the walk takes,
# so the walk's order must be fixed), CCCL arms, unknown flags, Python predicates and aliases.
ARCH_H = """#pragma once
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000
#define LIB_SM90 1
#endif
#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL)
#define LIB_SM100A 1
#endif
#if defined(CYC_B) || __CUDA_ARCH__ >= 1000
#define CYC_A 1
#endif
#if defined(CYC_A) && __CUDA_ARCH__ >= 900
#define CYC_B 1
#endif
#if defined(LIB_SM90) || defined(LIB_SM100A)
#define LIB_TMA 1
#endif
"""

KERNEL = """#include "arch.h"
#if defined(LIB_TMA) && ENABLE_FP8_{i}
__device__ void tma_{i}() {{ cudaGridDependencySynchronize(); }}
#elif __CUDA_ARCH__ >= {arch} && __CUDA_ARCH__ < 1200
__device__ void mid_{i}() {{}}
#else
__device__ void rest_{i}() {{}}
#endif
#if defined(CYC_{cyc}) || defined(CYC_{other})
int cyc_{i};
#endif
void f_{i}() {{
  NV_IF_TARGET(NV_PROVIDES_SM_{sm}, (wgmma_{i}();), (fallback_{i}();));
}}
"""

PREDICATES = """import functools
import torch


def _check(device_capability_majors=(), **kw):
    major, minor = torch.cuda.get_device_capability()
    return major in device_capability_majors


is_sm90_supported = functools.partial(_check, device_capability_majors=[9])
is_sm100_supported = functools.partial(_check, device_capability_majors=[10, 11])
is_blackwell = is_sm100_supported
"""

USER = """from .predicates import is_sm90_supported, is_sm100_supported, is_blackwell
import torch

_is_sm90 = is_sm90_supported()


def run_{i}(x):
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) >= ({maj}, 0) and (major, minor) < (12, 0):
        return x
    if _is_sm90 or is_blackwell():
        return -x
    return 0
"""


def corpus(root: Path, order: int = 0) -> Path:
    """Sixty-odd files under ``root``, created in an order chosen by ``order``."""
    files: dict[str, str] = {"pkg/arch.h": ARCH_H, "pkg/predicates.py": PREDICATES, "pkg/__init__.py": ""}
    archs = [750, 800, 860, 890, 900, 1000, 1030, 1100]
    sms = [80, 90, 100, 103, 120]
    for i in range(48):
        cyc, other = ("A", "B") if i % 2 else ("B", "A")
        files[f"pkg/csrc/k{i:02d}.cu"] = KERNEL.format(
            i=i, arch=archs[i % len(archs)], cyc=cyc, other=other, sm=sms[i % len(sms)]
        )
    for i in range(12):
        files[f"pkg/users/u{i:02d}.py"] = USER.format(i=i, maj=7 + i % 6)
    files["pkg/users/__init__.py"] = ""
    for src in sorted((FIXTURES / "cuda").rglob("*")):
        if src.is_file():
            files[f"fixtures/{src.relative_to(FIXTURES / 'cuda').as_posix()}"] = src.read_text()
    names = sorted(files)
    random.Random(order).shuffle(names) if order else None
    if root.exists():
        shutil.rmtree(root)
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[name])
    return root


def wheel(path: Path, tree: Path, order: int = 0) -> Path:
    """The tree as a wheel, members stored in an order chosen by ``order``."""
    names = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
    random.Random(order).shuffle(names) if order else None
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in names:
            zf.writestr(zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)), (tree / name).read_bytes())
    return path


def run(capsys, *args: str) -> tuple[str, str]:
    """(JSON, SARIF) of one in-process scan."""
    out = {}
    for fmt in ("json", "sarif"):
        rc = cli.main(["scan", *args, "--format", fmt])
        text, err = capsys.readouterr()
        assert rc == 0, err
        out[fmt] = text
    doc = json.loads(out["json"])
    assert len(doc["gates"]) > 150 and doc["errors"] == []
    return out["json"], out["sarif"]


def test_same_input_twice_and_with_a_process_pool(tmp_path, capsys, monkeypatch):
    tree = str(corpus(tmp_path / "tree"))
    first = run(capsys, tree, "--no-cache", "--jobs", "1")
    assert run(capsys, tree, "--no-cache", "--jobs", "1") == first
    monkeypatch.setattr(workers, "PARALLEL_MIN_FILES", 1)  # 48 .cu files now go to the pool
    assert run(capsys, tree, "--no-cache", "--jobs", "2") == first
    assert run(capsys, tree, "--no-cache", "--jobs", "2") == first


def test_file_creation_order_does_not_matter(tmp_path, capsys):
    tree = tmp_path / "tree"
    first = run(capsys, str(corpus(tree, order=0)), "--no-cache", "--jobs", "1")
    for order in (1, 2):
        assert run(capsys, str(corpus(tree, order=order)), "--no-cache", "--jobs", "1") == first


def test_wheel_member_order_does_not_matter(tmp_path, capsys, monkeypatch):
    tree = corpus(tmp_path / "tree")
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    first = run(capsys, str(wheel(whl, tree, order=0)), "--no-cache", "--jobs", "1")
    monkeypatch.setattr(workers, "PARALLEL_MIN_FILES", 1)
    for order in (3, 4):
        assert run(capsys, str(wheel(whl, tree, order=order)), "--no-cache", "--jobs", "2") == first


def test_cold_and_warm_cache(tmp_path, capsys):
    tree = str(corpus(tmp_path / "tree"))
    cache = str(tmp_path / "cache")
    uncached = run(capsys, tree, "--no-cache", "--jobs", "1")
    assert run(capsys, tree, "--cache-dir", cache, "--jobs", "1") == uncached  # cold: fills the cache
    assert run(capsys, tree, "--cache-dir", cache, "--jobs", "1") == uncached  # warm: every file a hit


def test_work_in_processes_of_its_own(tmp_path, capsys, monkeypatch):
    """Issue #20: the judging of a large input's gates and the learning of a large program's
    predicates run in forked processes that end (with two workers, the C and the Python gates
    are judged side by side); the reports are the same, with and without a cache (whose
    entries the process that goes on keeps)."""
    from auditor.pipeline import run as pipeline
    from auditor.python import extract

    tree = str(corpus(tmp_path / "tree"))
    here = run(capsys, tree, "--no-cache", "--jobs", "1")
    forks: list[str] = []
    for module, name in ((pipeline, "begun"), (extract, "apart")):
        real = getattr(module, name)
        monkeypatch.setattr(
            module, name, lambda work, *a, real=real, m=module: forks.append(m.__name__) or real(work, *a)
        )
    monkeypatch.setattr(pipeline, "APART_GATES", 0)
    monkeypatch.setattr(extract, "APART_FILES", 0)
    assert run(capsys, tree, "--no-cache", "--jobs", "1") == here
    assert sorted(set(forks)) == ["auditor.pipeline.run", "auditor.python.extract"]
    forks.clear()
    assert run(capsys, tree, "--no-cache", "--jobs", "2") == here
    assert "auditor.pipeline.run" in forks
    cache = str(tmp_path / "cache")
    assert run(capsys, tree, "--cache-dir", cache, "--jobs", "1") == here
    user = tmp_path / "tree" / "pkg" / "users" / "u03.py"
    user.write_text(user.read_text().replace("(12, 0)", "(12, 1)"))
    changed = run(capsys, tree, "--no-cache", "--jobs", "1")
    assert run(capsys, tree, "--cache-dir", cache, "--jobs", "1") == changed


def test_hash_seed_does_not_matter(tmp_path):
    """Three processes with different string hashing: set orders differ, results must not."""
    tree = str(corpus(tmp_path / "tree"))
    outputs = set()
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-m", "auditor", "scan", tree, "--no-cache", "--format", "json", "--jobs", "1"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=str(tmp_path),
        )
        assert proc.returncode == 0, proc.stderr
        outputs.add(proc.stdout)
    assert len(outputs) == 1


def test_input_order_on_the_command_line_does_not_matter_for_gates(tmp_path, capsys):
    tree = corpus(tmp_path / "tree")
    whl = str(wheel(tmp_path / "pkg-1.0-py3-none-any.whl", tree))
    one, _ = run(capsys, str(tree), whl, "--no-cache", "--jobs", "1")
    two, _ = run(capsys, whl, str(tree), "--no-cache", "--jobs", "1")
    a, b = json.loads(one), json.loads(two)
    for key in ("gates", "findings", "errors"):
        assert a[key] == b[key], key


def test_input_order_on_the_command_line_does_not_matter(tmp_path, capsys):
    tree = corpus(tmp_path / "tree")
    whl = str(wheel(tmp_path / "pkg-1.0-py3-none-any.whl", tree))
    assert run(capsys, str(tree), whl, "--no-cache", "--jobs", "1") == run(
        capsys, whl, str(tree), "--no-cache", "--jobs", "1"
    )
