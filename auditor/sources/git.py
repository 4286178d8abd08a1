"""Git revisions as inputs: a commit's files read straight from the object store.

Nothing is checked out: ``git ls-tree -r`` lists the commit's tree and one
``git cat-file --batch`` process reads every wanted blob, so the work tree, the index
and any uncommitted change stay untouched. Symlinks and submodules are not followed
(a symlink's blob is its target's name, not the file).

An input spec is ``git:REV`` (the repository holding the current directory) or
``git:PATH:REV``; ``archaudit pr`` builds them from ``--repo``, ``--base`` and ``--head``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

from auditor.model import FileError, InputInfo, SourceFile
from auditor.sources.archives import MAX_ARCHIVE_BYTES
from auditor.sources.files import MAX_FILE_BYTES, Filters, InputError, Item, Provider, language_of, wanted

PREFIX = "git:"
_SYMLINK, _SUBMODULE = "120000", "160000"


def is_spec(spec: str) -> bool:
    """Whether an input names a git revision."""
    return spec.startswith(PREFIX)


def spec(repo: str, rev: str) -> str:
    """The input spec for ``rev`` in the repository at ``repo``."""
    return f"{PREFIX}{repo}:{rev}"


def split_spec(text: str) -> tuple[str, str]:
    """``git:REV`` -> (".", REV); ``git:PATH:REV`` -> (PATH, REV). A commit-ish holds no ':'."""
    body = text[len(PREFIX) :]
    repo, sep, rev = body.rpartition(":")
    if not sep:
        repo = "."
    if not rev:
        raise InputError(f"{text}: no revision given (use git:REV or git:PATH:REV)")
    return repo or ".", rev


def _git(repo: str, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["git", "-C", repo, *args],
            input=data,
            capture_output=True,
            stdin=None if data is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise InputError("git is not installed (needed to read revisions)") from None
    except OSError as exc:
        raise InputError(f"cannot run git: {exc.strerror or exc}") from None


def _first_line(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[0].removeprefix("fatal: ") if lines else "git failed"


def resolve(repo: str, rev: str) -> str:
    """The full commit id ``rev`` names in ``repo``; a one-line :class:`InputError` when none."""
    if not os.path.isdir(repo):
        raise InputError(f"{repo}: no such directory (for --repo)")
    top = _git(repo, "rev-parse", "--git-dir")
    if top.returncode != 0:
        raise InputError(f"{repo}: not a git repository ({_first_line(top.stderr)})")
    if rev.startswith("-"):
        raise InputError(f"{rev}: not a revision")
    proc = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if proc.returncode != 0:
        raise InputError(f"{rev}: no such commit in {repo} (is it fetched? a shallow clone may lack it)")
    return proc.stdout.decode().strip()


@dataclass(frozen=True, slots=True)
class _Entry:
    mode: str
    kind: str
    sha: str
    size: int
    path: str


def _tree(repo: str, commit: str) -> list[_Entry]:
    proc = _git(repo, "ls-tree", "-r", "-z", "-l", "--full-tree", commit)
    if proc.returncode != 0:
        raise InputError(f"{commit}: cannot list the tree ({_first_line(proc.stderr)})")
    out = []
    for record in proc.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, kind, sha, size = meta.decode().split()
        out.append(_Entry(mode, kind, sha, int(size) if size.isdigit() else 0, path.decode("utf-8", "surrogateescape")))
    return sorted(out, key=lambda e: e.path)


def read_blobs(repo: str, shas: list[str]) -> dict[str, bytes]:
    """Contents of blobs by id, read by one ``git cat-file --batch``."""
    if not shas:
        return {}
    unique = list(dict.fromkeys(shas))
    proc = _git(repo, "cat-file", "--batch", data="".join(f"{s}\n" for s in unique).encode())
    if proc.returncode != 0:
        raise InputError(f"{repo}: cannot read objects ({_first_line(proc.stderr)})")
    out: dict[str, bytes] = {}
    buf, pos = proc.stdout, 0
    for sha in unique:
        end = buf.index(b"\n", pos)
        header = buf[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] == b"missing":
            continue
        size = int(header[2])
        out[sha] = buf[pos : pos + size]
        pos += size + 1
    return out


class GitRevisionProvider(Provider):
    """The scannable files of one commit (``git:REV`` or ``git:PATH:REV``)."""

    kind = "git"

    def __init__(self, spec: str, filters: Filters = Filters()):
        super().__init__(spec, filters)
        self.repo, self.rev = split_spec(spec)
        self.commit = resolve(self.repo, self.rev)

    def info(self) -> InputInfo:
        """The revision as the user named it."""
        return InputInfo(path=self.rev, kind=self.kind)

    def collect(self) -> Iterator[Item]:
        chosen: list[_Entry] = []
        total = 0
        for e in _tree(self.repo, self.commit):
            if e.kind != "blob" or not wanted(e.path, e.size) or not self.filters.accepts(e.path):
                continue
            if e.mode == _SYMLINK:
                yield FileError(e.path, "symlink in the commit, not followed", self.spec)
            elif e.size > MAX_FILE_BYTES:
                yield FileError(e.path, f"file too large ({e.size} bytes > {MAX_FILE_BYTES})", self.spec)
            elif total + e.size > MAX_ARCHIVE_BYTES:
                yield FileError(
                    e.path, f"revision holds more than {MAX_ARCHIVE_BYTES} bytes of source; rest not read", self.spec
                )
                break
            else:
                total += e.size
                chosen.append(e)
        blobs = read_blobs(self.repo, [e.sha for e in chosen])
        for e in chosen:
            data = blobs.get(e.sha)
            if data is None:
                yield FileError(e.path, "object missing from the repository", self.spec)
                continue
            lang = language_of(e.path, data[:4096])
            if lang is not None:
                yield SourceFile(path=e.path, data=data, language=lang, input=self.spec)
