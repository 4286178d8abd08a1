"""archaudit reads code and never runs it.

The input holds everything that Python, pip, setuptools, pytest or git would execute on its
own: ``setup.py``, an in-tree PEP 517 build backend, ``.pth`` files, ``sitecustomize``,
``usercustomize``, ``conftest.py``, ``__init__``/``__main__`` and plain modules with side effects
at import, git hooks, filter drivers and ``core.fsmonitor``. Each would write a marker file.
The input is scanned as a directory, a single file, a wheel, an sdist and a git revision
(``scan git:`` and ``pr``), in process and in fresh processes; ``archaudit`` also runs with
the hostile tree as its working directory, beside modules that shadow its own dependencies.
No marker may appear.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from auditor import cli

GATE_PY = "import torch\nmajor, minor = torch.cuda.get_device_capability()\nif major >= 9:\n    x = 1\n"
GATE_CU = "#if __CUDA_ARCH__ >= 900\nint x;\n#endif\n"


def payload(markers: Path, name: str) -> str:
    """Python that leaves ``markers/name`` behind if it ever runs."""
    return f"open({str(markers / name)!r}, 'w').close()\n"


def hostile_tree(root: Path, markers: Path) -> Path:
    """A package whose every executable hook would leave a marker; it also has real gates."""
    pkg = root / "evilpkg"
    pkg.mkdir(parents=True)
    (root / "setup.py").write_text(payload(markers, "setup.py") + "from setuptools import setup\nsetup()\n")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    (root / "backend.py").write_text(payload(markers, "backend.py"))
    (root / "conftest.py").write_text(payload(markers, "conftest.py"))
    (root / "sitecustomize.py").write_text(payload(markers, "sitecustomize.py"))
    (root / "usercustomize.py").write_text(payload(markers, "usercustomize.py"))
    (root / "evil.pth").write_text("import os; " + payload(markers, "evil.pth"))
    (pkg / "__init__.py").write_text(payload(markers, "__init__.py") + GATE_PY)
    (pkg / "__main__.py").write_text(payload(markers, "__main__.py"))
    (pkg / "gates.py").write_text(payload(markers, "gates.py") + GATE_PY)
    (pkg / "kernel.cu").write_text(GATE_CU)
    (pkg / "build.py.in").write_text("#if __CUDA_ARCH__ >= 900\n" + payload(markers, "template") + "#endif\n")
    (pkg / "evilpkg-1.0.data").mkdir()
    (pkg / "evilpkg-1.0.data" / "run.py").write_text(payload(markers, "data-script"))
    # Modules named like archaudit's own dependencies: harmless unless the working directory
    # lands on sys.path (``python -m`` puts it there; the ``archaudit`` script does not).
    for shadow in (
        "yaml",
        "jinja2",
        "pathspec",
        "platformdirs",
        "rich",
        "re2",
        "jsonschema",
        "argparse",
        "typing_extensions",
        "tree_sitter",
        "elftools",
        "httpx",
    ):
        (root / f"{shadow}.py").write_text(payload(markers, f"shadow-{shadow}"))
    return root


@pytest.fixture()
def env(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    tree = hostile_tree(tmp_path / "src" / "evilpkg-1.0", markers)
    return tmp_path, markers, tree


def assert_no_markers(markers: Path) -> None:
    assert sorted(p.name for p in markers.iterdir()) == []


def as_wheel(tree: Path, path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for p in sorted(tree.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(tree).as_posix())
        zf.writestr("evilpkg-1.0.dist-info/RECORD", "")
        zf.writestr("evilpkg-1.0.data/purelib/zz.pth", "import os; " + (tree / "evil.pth").read_text())
    return path


def as_sdist(tree: Path, path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        tf.add(tree, arcname=tree.name)
    return path


def scan_in_process(capsys, *args) -> str:
    rc = cli.main(["scan", *map(str, args), "--no-cache", "--format", "json", "--jobs", "1"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def test_scanning_a_directory_wheel_sdist_and_file_runs_nothing(env, capsys):
    tmp_path, markers, tree = env
    whl = as_wheel(tree, tmp_path / "evilpkg-1.0-py3-none-any.whl")
    sdist = as_sdist(tree, tmp_path / "evilpkg-1.0.tar.gz")
    for target in (tree, whl, sdist, tree / "setup.py", tree / "evilpkg" / "gates.py"):
        out = scan_in_process(capsys, target)
        assert_no_markers(markers)
        assert '"gates"' in out
    out = scan_in_process(capsys, tree)
    assert "evilpkg/kernel.cu" in out and "evilpkg/gates.py" in out  # the gates themselves are read


def test_fresh_processes_run_nothing(env):
    """``python -m auditor`` from a neutral directory, with the pool and the result cache on."""
    tmp_path, markers, tree = env
    whl = as_wheel(tree, tmp_path / "evilpkg-1.0-py3-none-any.whl")
    sdist = as_sdist(tree, tmp_path / "evilpkg-1.0.tar.gz")
    neutral = tmp_path / "neutral"
    neutral.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "auditor",
            "scan",
            str(tree),
            str(whl),
            str(sdist),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--jobs",
            "2",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=str(neutral),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert_no_markers(markers)


def test_archaudit_run_inside_the_hostile_tree(env):
    """The Action and the pre-commit hook run ``archaudit scan .`` inside the checked-out code."""
    tmp_path, markers, tree = env
    script = Path(sys.executable).with_name("archaudit")
    if not script.exists():
        pytest.skip("the archaudit console script is not installed next to this interpreter")
    for cmd in ([str(script), "scan", "."], [sys.executable, "-P", "-m", "auditor", "scan", "."]):
        proc = subprocess.run(
            [*cmd, "--no-cache", "--format", "json"], capture_output=True, text=True, cwd=str(tree), timeout=300
        )
        assert proc.returncode == 0, proc.stderr
        assert_no_markers(markers)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "GIT_CONFIG_GLOBAL": os.devnull,
        },
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_revisions_run_no_hook_filter_or_fsmonitor(env, capsys):
    tmp_path, markers, tree = env
    repo = tmp_path / "repo"
    shutil.copytree(tree, repo)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    (repo / "evilpkg" / "kernel.cu").write_text(GATE_CU.replace("900", "1000"))
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "head")
    # Everything git can be told to run, armed after the commits.
    hook = f"#!/bin/sh\ntouch {markers}/git-hook-$(basename $0)\n"
    for name in (
        "post-checkout",
        "post-merge",
        "pre-commit",
        "post-index-change",
        "reference-transaction",
        "fsmonitor-watchman",
    ):
        path = repo / ".git" / "hooks" / name
        path.write_text(hook)
        path.chmod(0o755)
    for key, value in (
        ("core.fsmonitor", f"touch {markers}/fsmonitor #"),
        ("filter.evil.smudge", f"touch {markers}/smudge #"),
        ("filter.evil.clean", f"touch {markers}/clean #"),
        ("filter.evil.process", f"touch {markers}/process #"),
        ("diff.evil.textconv", f"touch {markers}/textconv #"),
        ("core.pager", f"touch {markers}/pager #"),
        ("core.sshCommand", f"touch {markers}/ssh #"),
    ):
        _git(repo, "config", key, value)
    out = scan_in_process(capsys, f"git:{repo}:HEAD")
    assert "evilpkg/kernel.cu" in out
    assert_no_markers(markers)
    for cmd in (
        ["pr", "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown"],
        ["diff", f"git:{repo}:HEAD~1", f"git:{repo}:HEAD", "--format", "json"],
    ):
        rc = cli.main([*cmd, "--no-cache"])
        out, err = capsys.readouterr()
        assert rc in (0, 1), err
        assert_no_markers(markers)
