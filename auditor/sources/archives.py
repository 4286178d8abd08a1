"""Wheels, zips and sdists, read in memory: nothing is extracted, hostile member paths are refused."""

from __future__ import annotations

import os
import re
import tarfile
import zipfile
import zlib
from collections.abc import Iterator

from auditor.model import FileError
from auditor.sources.files import (
    SNIFFED_EXTENSIONS,
    InputError,
    Item,
    LazyFile,
    Origin,
    Provider,
    ReadError,
    language_of,
    make_file,
    max_bytes,
    one_line,
    read_origin,
    suffix_of,
    wanted,
)

MAX_ARCHIVE_BYTES = 4 * 1024 * 1024 * 1024
"""Total uncompressed bytes read from one archive before it is refused as a bomb."""
MAX_ARCHIVE_MEMBERS = 100_000
"""Members read from one tar archive: each costs ~0.15 ms in tarfile, and 100,000 empty ones fit in 0.5 MB."""


def _safe_member(name: str) -> str | None:
    """A member path fit to report, or None when it is absolute or climbs out (zip-slip)."""
    name = name.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return None
    return "/".join(parts)


class ZipProvider(Provider):
    """A wheel or zip: members are listed here and inflated when read (:class:`LazyFile`)."""

    kind = "wheel"

    def collect(self) -> Iterator[Item]:
        try:
            zf = zipfile.ZipFile(self.location)
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            raise InputError(f"{self.spec}: not a readable zip archive ({one_line(exc)})") from None
        total = 0
        location = os.path.abspath(self.location)
        with zf:
            for index, info in sorted(enumerate(zf.infolist()), key=lambda e: e[1].filename):
                if info.is_dir():
                    continue
                path = _safe_member(info.filename)
                if path is None:
                    yield FileError(info.filename, "unsafe archive path (absolute or '..'), skipped", self.spec)
                    continue
                if not wanted(path, info.file_size) or not self.filters.accepts(path):
                    continue
                if info.file_size > max_bytes(path):
                    yield FileError(path, f"member too large ({info.file_size} bytes > {max_bytes(path)})", self.spec)
                    continue
                total += info.file_size
                if total > MAX_ARCHIVE_BYTES:
                    yield FileError(
                        path, f"archive expands past {MAX_ARCHIVE_BYTES} bytes; rest not read (zip bomb?)", self.spec
                    )
                    return
                origin = Origin(info.filename, location, index, info.file_size)
                head = b""
                if suffix_of(path) in SNIFFED_EXTENSIONS:
                    try:
                        head = read_origin(origin)[:4096]
                    except ReadError as exc:
                        yield FileError(path, str(exc), self.spec)
                        continue
                lang = language_of(path, head)
                if lang is not None:
                    yield LazyFile(path, lang, self.spec, origin)


class TarProvider(Provider):
    """An sdist (``.tar.gz``/``.tgz``), read in memory; its single top folder is stripped."""

    kind = "sdist"

    def collect(self) -> Iterator[Item]:
        try:
            tf = tarfile.open(self.location, "r:*")
        except (OSError, tarfile.TarError, EOFError, ValueError, zlib.error) as exc:
            raise InputError(f"{self.spec}: not a readable tar archive ({one_line(exc)})") from None
        # One pass in archive order, reading each member where the stream already is: reading
        # in name order made a compressed stream rewind and re-inflate per member (quadratic).
        read: list[tuple[str, tarfile.TarInfo, bytes | str]] = []  # (name, member, data or reason)
        tops: set[str] = set()  # first path parts, and whether any member sits in a folder
        nested = False
        count = total = 0
        stop: tuple[str, str] | None = None  # (member, reason) where reading stopped
        with tf:
            while True:
                try:
                    m = tf.next()
                except (OSError, tarfile.TarError, EOFError, ValueError, zlib.error) as exc:
                    if not count:
                        raise InputError(f"{self.spec}: not a readable tar archive ({one_line(exc)})") from None
                    stop = ("", f"archive truncated or corrupt after {count} members ({one_line(exc)}); rest not read")
                    break
                if m is None:
                    break
                count += 1
                tf.members.clear()  # type: ignore[attr-defined]  # tarfile keeps every header otherwise (a header bomb)
                path = _safe_member(m.name)
                if path:  # a refused member (absolute, '..') does not decide the top folder
                    tops.add(path.split("/", 1)[0])
                    nested = nested or m.isdir() or "/" in path
                if count > MAX_ARCHIVE_MEMBERS:
                    stop = (m.name, f"archive has more than {MAX_ARCHIVE_MEMBERS} members; rest not read (tar bomb?)")
                    break
                if path is not None and not wanted(path, m.size):
                    continue
                if path is None or not m.isfile() or m.size > max_bytes(path):
                    read.append((m.name, m, b""))  # reported (or skipped) below, once the paths are known
                    continue
                total += m.size
                if total > MAX_ARCHIVE_BYTES:
                    stop = (m.name, f"archive expands past {MAX_ARCHIVE_BYTES} bytes; rest not read (tar bomb?)")
                    break
                try:
                    fh = tf.extractfile(m)
                    data: bytes | str = fh.read() if fh else b""
                except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
                    data = f"corrupt archive member ({one_line(exc)})"
                read.append((m.name, m, data))
        strip = len(tops) == 1 and nested
        for name, m, data in sorted(read, key=lambda r: r[0]):
            path = _safe_member(name)
            if path is None:
                yield FileError(name, "unsafe archive path (absolute or '..'), skipped", self.spec)
                continue
            if strip:
                path = path.split("/", 1)[1] if "/" in path else ""
            if not path or m.isdir():
                continue
            if not wanted(path, m.size) or not self.filters.accepts(path):
                continue
            if m.issym() or m.islnk():
                yield FileError(path, f"link in archive (to {m.linkname!r}), not followed", self.spec)
                continue
            if not m.isfile():
                continue
            if m.size > max_bytes(path):
                yield FileError(path, f"member too large ({m.size} bytes > {max_bytes(path)})", self.spec)
                continue
            if isinstance(data, str):
                yield FileError(path, data, self.spec)
                continue
            item = make_file(path, data, self.spec)
            if item is not None:
                yield item
        if stop:
            yield FileError(stop[0], stop[1], self.spec)
