"""``archaudit pr``: two revisions read from git (no checkout), only what the change adds or alters."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.sources import InputError, read_all
from auditor.sources import git as gitrev

COMM_BASE = """\
// Allreduce helpers.
#pragma once

__device__ void fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  __threadfence();
#endif
}
"""

COMM_GATED = (
    COMM_BASE
    + """
__device__ void wait_for_previous_grid() {
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
  cudaGridDependencySynchronize();
#endif
}
"""
)

JIT_BASE = '''\
"""JIT specs of the comm kernels."""

from .utils import get_nvcc_flags_list


def gen_comm_module():
    return get_nvcc_flags_list()
'''

JIT_GATED = '''\
"""JIT specs of the comm kernels."""

from .utils import get_nvcc_flags_list


def gen_comm_module():
    return get_nvcc_flags_list(supported_major_versions=[9, 10])
'''

# The same code as COMM_GATED and JIT_GATED, moved around: a helper above, functions swapped.
COMM_MOVED = """\
// Allreduce helpers.
#pragma once

__device__ inline int lane() { return threadIdx.x & 31; }

__device__ void wait_for_previous_grid() {
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
  cudaGridDependencySynchronize();
#endif
}

__device__ void fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  __threadfence();
#endif
}
"""

JIT_MOVED = '''\
"""JIT specs of the comm kernels."""

import os

from .utils import get_nvcc_flags_list


def debug():
    return os.environ.get("COMM_DEBUG") == "1"


def gen_comm_module():
    return get_nvcc_flags_list(
        supported_major_versions=[9, 10],
    )
'''

UTILS = '''\
"""Build helpers."""


def get_nvcc_flags_list(supported_major_versions=None):
    return ["-O3"]
'''


class Repo:
    """A throwaway git repository with a commit helper."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir()
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        return subprocess.run(
            [
                "git",
                "-C",
                str(self.path),
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "-c",
                "commit.gpgsign=false",
                *args,
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.rstrip()

    def commit(self, message: str, files: dict[str, str]) -> str:
        for name, text in files.items():
            dest = self.path / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Repo, dict[str, str]]:
    r = Repo(tmp_path_factory.mktemp("pr") / "repo")
    revs = {
        "base": r.commit("base", {"comm/comm.cuh": COMM_BASE, "comm/jit.py": JIT_BASE, "comm/utils.py": UTILS}),
        "gated": r.commit("gate the comm kernels", {"comm/comm.cuh": COMM_GATED, "comm/jit.py": JIT_GATED}),
        "moved": r.commit("move code around", {"comm/comm.cuh": COMM_MOVED, "comm/jit.py": JIT_MOVED}),
    }
    return r, revs


def pr_json(repo_path: Path, base: str, head: str, capsys, *extra: str) -> tuple[int, dict]:
    code = main(
        ["pr", "--repo", str(repo_path), "--base", base, "--head", head, "--no-cache", "--format", "json", *extra]
    )
    return code, json.loads(capsys.readouterr().out)


def test_pr_lists_exactly_the_two_added_gates_with_verdicts(repo, capsys):
    r, revs = repo
    code, doc = pr_json(r.path, revs["base"], revs["gated"], capsys)
    assert code == 0
    assert doc["mode"] == "pr"
    got = sorted((c["status"], c["file"], c["line"], c["new"]["expression"]) for c in doc["changes"])
    assert got == [
        ("added", "comm/comm.cuh", 11, "(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"),
        ("added", "comm/jit.py", 7, "get_nvcc_flags_list(supported_major_versions=[9, 10])"),
    ]
    for c in doc["changes"]:
        assert c["verdicts"] == {
            "12.0": {"before": None, "after": "excludes"},
            "12.1": {"before": None, "after": "excludes"},
        }
        assert c["delta"] == ["newly excludes 12.0", "newly excludes 12.1"]
    jit = next(c for c in doc["changes"] if c["file"] == "comm/jit.py")
    assert jit["new"]["domain"] == "device" and jit["new"]["admits"] == ["9.0", "10.0", "10.1", "10.3", "10.7"]
    cuda = next(c for c in doc["changes"] if c["file"] == "comm/comm.cuh")
    assert "sm_120" not in cuda["new"]["admits"] and "sm_90" in cuda["new"]["admits"]
    assert [f["token"] for f in cuda["new"]["features"]] == ["cudaGridDependencySynchronize"]
    assert doc["old"]["inputs"] == [{"path": revs["base"], "kind": "git"}]
    assert doc["summary"]["unchanged"] == 1


def test_pr_markdown_comment_body(repo, capsys, tmp_path):
    r, revs = repo
    out = tmp_path / "archaudit-comment.md"
    code = main(
        [
            "pr",
            "--repo",
            str(r.path),
            "--base",
            revs["base"],
            "--head",
            revs["gated"],
            "--no-cache",
            "--format",
            "markdown",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    body = out.read_text()
    assert capsys.readouterr().out == body
    assert body.startswith("<!-- archaudit -->\n")
    assert "**2** added · **0** changed · **0** removed" in body
    assert "`comm/comm.cuh:11`" in body and "`comm/jit.py:7`" in body
    assert "⛔ 2 decisions newly turn `12.0` away" in body
    assert "`comm/comm.cuh:5`" not in body  # the gate the change did not touch


def test_pr_fail_on_new_findings(repo, capsys):
    r, revs = repo
    code, doc = pr_json(r.path, revs["base"], revs["gated"], capsys, "--fail-on", "high")
    assert code == 1
    assert doc["findings"] and {f["file"] for f in doc["findings"]} <= {"comm/comm.cuh", "comm/jit.py"}
    code, _ = pr_json(r.path, revs["gated"], revs["moved"], capsys, "--fail-on", "info")
    assert code == 0


def test_pr_of_a_commit_that_only_moves_code_reports_nothing(repo, capsys):
    r, revs = repo
    code, doc = pr_json(r.path, revs["gated"], revs["moved"], capsys)
    assert code == 0
    assert doc["changes"] == [] and doc["definitions"] == []
    assert doc["summary"]["unchanged"] == 3
    main(["pr", "--repo", str(r.path), "--base", revs["gated"], "--head", revs["moved"], "--no-cache"])
    body = capsys.readouterr().out
    assert body.startswith("<!-- archaudit -->\n") and "No architecture gate was added, changed or removed" in body


def test_pr_reads_commits_not_the_work_tree(repo, capsys):
    r, revs = repo
    status = r.git("status", "--porcelain")
    (r.path / "comm" / "jit.py").write_text(
        JIT_BASE.replace("get_nvcc_flags_list()", "get_nvcc_flags_list(supported_major_versions=[8])")
    )
    try:
        code, doc = pr_json(r.path, revs["moved"], "HEAD", capsys)
        assert code == 0 and doc["changes"] == []
        assert r.git("status", "--porcelain") == " M comm/jit.py" != status
        assert r.git("rev-parse", "HEAD") == revs["moved"]
    finally:
        r.git("checkout", "--", "comm/jit.py")


def test_git_provider_reads_blobs_and_skips_links(repo, tmp_path):
    r, revs = repo
    files, errors = read_all(gitrev.GitRevisionProvider(gitrev.spec(str(r.path), revs["gated"])))
    assert {f.path: f.language for f in files} == {
        "comm/comm.cuh": "cuda",
        "comm/jit.py": "python",
        "comm/utils.py": "python",
    }
    assert next(f for f in files if f.path == "comm/jit.py").data == JIT_GATED.encode()
    assert errors == []
    other = Repo(tmp_path / "links")
    (other.path / "real.py").write_text("x = 1\n")
    (other.path / "link.py").symlink_to("real.py")
    other.git("add", "-A")
    other.git("commit", "-q", "-m", "links")
    files, errors = read_all(gitrev.GitRevisionProvider(f"git:{other.path}:HEAD"))
    assert [f.path for f in files] == ["real.py"]
    assert [(e.file, e.reason) for e in errors] == [("link.py", "symlink in the commit, not followed")]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--base", "no-such-branch"], "no-such-branch: no such commit in"),
        (["--base", "HEAD", "--head=-x"], "-x: not a revision"),
    ],
)
def test_pr_bad_revision_is_one_line_exit_2(repo, capsys, args, message):
    r, _ = repo
    assert main(["pr", "--repo", str(r.path), "--no-cache", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_pr_outside_a_repository_is_one_line_exit_2(tmp_path, capsys):
    assert main(["pr", "--repo", str(tmp_path), "--base", "HEAD", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "not a git repository" in err and len(err.strip().splitlines()) == 1
    assert main(["pr", "--repo", str(tmp_path / "absent"), "--base", "HEAD", "--no-cache"]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_split_spec():
    assert gitrev.split_spec("git:HEAD~1") == (".", "HEAD~1")
    assert gitrev.split_spec("git:/a/b:c:main") == ("/a/b:c", "main")
    with pytest.raises(InputError):
        gitrev.split_spec("git:/a/b:")
