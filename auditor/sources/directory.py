"""Inputs on disk: a directory tree, one file, installed distributions and site-packages."""

from __future__ import annotations

import os
import stat
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from auditor.model import FileError
from auditor.sources.files import (
    SNIFFED_EXTENSIONS,
    Filters,
    InputError,
    Item,
    LazyFile,
    Origin,
    Provider,
    language_of,
    max_bytes,
    os_reason,
    stat_key,
    suffix_of,
    wanted,
)


class DirectoryProvider(Provider):
    """A tree on disk; symlinked files inside the tree are read, symlinked directories and
    links that leave the tree are not followed. Files are listed, not read (:class:`LazyFile`)."""

    kind = "dir"

    def __init__(self, spec: str, filters: Filters = Filters(), root: Path | None = None, kind: str = "dir"):
        super().__init__(spec, filters)
        self.root = Path(root or spec)
        self.kind = kind

    def collect(self) -> Iterator[Item]:
        root = self.root
        if not root.is_dir():
            raise InputError(f"{self.spec}: not a directory")
        real_root = os.path.realpath(root)
        for dirpath, dirnames, filenames in os.walk(root, onerror=None):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, root)
            for d in list(dirnames):
                full = os.path.join(dirpath, d)
                if os.path.islink(full):
                    dirnames.remove(d)
                    target = os.path.realpath(full)
                    rel = _rel(rel_dir, d)
                    if real_root == target or real_root.startswith(target + os.sep) or dirpath.startswith(target):
                        yield FileError(rel, "symlink loop: directory link points to its own ancestor", self.spec)
            for name in sorted(filenames):
                rel = _rel(rel_dir, name)
                if not wanted(rel) or not self.filters.accepts(rel):
                    continue
                item = self.entry(os.path.join(dirpath, name), rel, real_root)
                if item is not None:
                    yield item

    def entry(self, full: str, rel: str, inside: str | None = None) -> Item | None:
        """One file as a :class:`LazyFile`, or why it cannot be scanned (stat only; the bytes are
        read later). With ``inside``, a symlink whose target lies outside that directory is refused."""
        try:
            st = os.lstat(full)  # a file's own stat, one call (a tree holds tens of thousands)
            if stat.S_ISLNK(st.st_mode):
                target = os.path.realpath(full)
                if inside is not None and not (target + os.sep).startswith(inside.rstrip(os.sep) + os.sep):
                    os.stat(full)  # a loop or a dangling link says so first
                    return FileError(rel, "symlink to a file outside the scanned tree, not followed", self.spec)
                st = os.stat(full)
                if inside is not None:
                    full = target
        except OSError as exc:
            return FileError(rel, os_reason(exc), self.spec)
        if not stat.S_ISREG(st.st_mode):
            return FileError(rel, "not a regular file", self.spec)
        if not wanted(rel, st.st_size):
            return None
        cap = max_bytes(rel)
        if st.st_size > cap:
            return FileError(rel, f"file too large ({st.st_size} bytes > {cap})", self.spec)
        head = b""
        if suffix_of(rel) in SNIFFED_EXTENSIONS:
            try:
                with open(os.open(full, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
                    head = fh.read(4096)
            except OSError as exc:
                return FileError(rel, os_reason(exc), self.spec)
        lang = language_of(rel, head)
        return None if lang is None else LazyFile(rel, lang, self.spec, Origin(full, listed=stat_key(st)))


def _rel(rel_dir: str, name: str) -> str:
    return name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")


class InstalledProvider(Provider):
    """An installed distribution by name: the files its metadata lists, relative to site-packages."""

    kind = "installed"

    def collect(self) -> Iterator[Item]:
        from importlib import metadata

        try:
            dist = metadata.distribution(self.spec)
        except metadata.PackageNotFoundError:
            raise InputError(
                f"{self.spec}: no such input (not a path, and no installed distribution of that name)"
            ) from None
        files = dist.files or []
        reader = DirectoryProvider(self.spec, self.filters)
        base = os.path.realpath(str(dist.locate_file("")))
        for f in sorted(files, key=str):
            rel = str(f).replace(os.sep, "/")
            if rel.startswith("..") or not wanted(rel) or not self.filters.accepts(rel):
                continue
            item = reader.entry(str(dist.locate_file(f)), rel, base)
            if item is not None:
                yield item


def site_packages() -> list[str]:
    """The running interpreter's purelib and platlib (once each)."""
    paths = sysconfig.get_paths()
    out: list[str] = []
    for key in ("purelib", "platlib"):
        p = paths.get(key)
        if p and os.path.isdir(p) and os.path.realpath(p) not in map(os.path.realpath, out):
            out.append(p)
    return out


class SingleFileProvider(Provider):
    """One source file named directly (pre-commit passes file names)."""

    kind = "dir"

    def collect(self) -> Iterator[Item]:
        p = Path(self.spec)
        item = DirectoryProvider(self.spec, self.filters).entry(str(p), p.name)
        if item is None:
            return
        if isinstance(item, LazyFile):
            item = LazyFile(self.spec.replace(os.sep, "/"), item.language, self.spec, item.origin)
        yield item
