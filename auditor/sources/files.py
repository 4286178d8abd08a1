"""What every provider shares: which files are scanned and their size caps, the
``--include``/``--exclude`` filters, and lazy reads that a worker process does itself."""

from __future__ import annotations

import io
import os
import posixpath
import re
import stat
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import IO, Union

import pathspec

from auditor.model import FileError, InputInfo, SourceFile

C_EXTENSIONS = frozenset({".cu", ".cuh", ".h", ".hpp", ".hh", ".inl", ".cpp", ".cc", ".cxx", ".c"})
TEMPLATE_EXTENSIONS = frozenset({".jinja", ".jinja2", ".in"})
SNIFFED_EXTENSIONS = TEMPLATE_EXTENSIONS | {".json"}
"""Files whose language their first bytes decide (:func:`language_of`)."""


def quoted_path(*extensions: str) -> str:
    """A regex for a path with one of these extensions written in a string (group 1), as a JIT
    spec names its sources (``"softmax.cu"``, ``f"moe_{arch}.cu"``)."""
    return rf"""["']([^"'\n]*\.(?:{"|".join(extensions)}))["']"""


MAX_FILE_BYTES = 64 * 1024 * 1024
"""Larger source files are listed as errors, not read (a 100 MB header is not source)."""
MAX_BINARY_BYTES = 4 * 1024 * 1024 * 1024
"""Shared objects (read for their embedded GPU code, a section at a time) may be larger: CUDA
kernel libraries ship .so files of a gigabyte and more (sglang-kernel 0.4.10's flash_ops:
1.05 GiB)."""
MAX_MANIFEST_BYTES = 8 * 1024 * 1024
"""A JSON build manifest is small (flashinfer's largest: 1.1 MB); a larger JSON file is data
(a tokenizer, a tuning table) and is not read."""
_SHARED_OBJECT = re.compile(r"\.so(?:\.\d+)*$", re.I)
BUILD_TARGET = r"\b(?:sm|compute)_(\d{2,3})[af]?\b"
"""An nvcc build target as a manifest or a build call writes it (``sm_103a``, ``compute_90``)."""
_MANIFEST_HINT = re.compile(BUILD_TARGET.encode())
_TEMPLATE_HINT = re.compile(rb"^[ \t]*#[ \t]*(?:include|if|ifdef|ifndef|pragma)\b|__global__", re.M)

Item = Union[SourceFile, "LazyFile", FileError]


class InputError(Exception):
    """An input that cannot be read at all (exit 2)."""


def language_of(path: str, head: bytes = b"") -> str | None:
    """``python``, ``cuda``, ``binary`` (a shared object), ``manifest`` (a JSON file that names
    build targets: what the package builds its sources for) or None (not scanned), from the
    name and, for templates and JSON, the text."""
    if _SHARED_OBJECT.search(path):
        return "binary"
    suffix = suffix_of(path)
    if suffix == ".py":
        return "python"
    if suffix in C_EXTENSIONS:
        return "cuda"
    if suffix == ".json":
        return "manifest" if _MANIFEST_HINT.search(head) else None
    if suffix in TEMPLATE_EXTENSIONS:
        inner = suffix_of(path[: len(path) - len(suffix)])
        if inner in C_EXTENSIONS:
            return "cuda"
        if inner == "" and _TEMPLATE_HINT.search(head):
            return "cuda"
    return None


def suffix_of(path: str) -> str:
    """The extension of a '/'-separated path's last part, lower case (as PurePosixPath.suffix)."""
    return posixpath.splitext(path.rpartition("/")[2])[1].lower()


_WANTED = C_EXTENSIONS | SNIFFED_EXTENSIONS | {".py"}


def wanted(path: str, size: int = 0) -> bool:
    """Could the file be scanned (cheap, by name, and by size where it is known)? A JSON file
    larger than :data:`MAX_MANIFEST_BYTES` is data, not a build manifest: not read, no error."""
    if size > MAX_MANIFEST_BYTES and suffix_of(path) == ".json":
        return False
    return suffix_of(path) in _WANTED or bool(_SHARED_OBJECT.search(path))


def max_bytes(path: str) -> int:
    """The size cap for one file: larger for shared objects than for source."""
    return MAX_BINARY_BYTES if _SHARED_OBJECT.search(path) else MAX_FILE_BYTES


@dataclass(frozen=True, slots=True)
class Filters:
    """``--include``/``--exclude`` globs (gitignore syntax), matched on reported paths."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def accepts(self, path: str) -> bool:
        """Whether a reported path passes the globs."""
        if self.include and not _spec(self.include).match_file(path):
            return False
        return not (self.exclude and _spec(self.exclude).match_file(path))


@cache
def _spec(patterns: tuple[str, ...]) -> pathspec.PathSpec:
    """Compiled once per pattern list, not once per file."""
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def make_file(path: str, data: bytes, origin: str) -> Item | None:
    lang = language_of(path, data[:4096])
    if lang is None:
        return None
    return SourceFile(path=path, data=data, language=lang, input=origin)


def stat_key(st: os.stat_result) -> tuple[int, ...]:
    """What names a file's bytes on disk without reading them: device, inode, size, and the
    modification and change times (ns)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class ReadError(Exception):
    """A file that could not be read; the message is the one-line reason."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where one file's bytes are: small and picklable, so a worker process reads the file itself."""

    name: str
    """The file's path on disk, or the member's name in ``archive``."""
    archive: str = ""
    """The zip archive holding the file ('' for a file on disk)."""
    index: int = -1
    """The member's position in the archive's directory (member names may repeat)."""
    size: int = 0
    """Size declared by the archive (members only)."""
    listed: tuple[int, ...] = ()
    """A file on disk: its :func:`stat_key` when it was listed, so that the first reads name it
    without a second ``stat`` (a tree holds tens of thousands); empty for an archive member."""


class LazyFile:
    """A file to scan whose bytes stay where they are until asked for.

    Same fields as :class:`SourceFile`; ``data`` reads the file each time it is asked for
    (nothing is kept), so a scan holds paths, not contents. A file that can no longer be read
    (removed during the scan) reads as empty: the pipeline reads every file once through
    :func:`read_origin` first and reports the unreadable ones.
    """

    __slots__ = ("path", "language", "input", "origin")

    def __init__(self, path: str, language: str, input: str, origin: Origin):
        self.path = path
        self.language = language
        self.input = input
        self.origin = origin

    @property
    def data(self) -> bytes:
        try:
            return read_origin(self.origin)
        except ReadError:
            return b""

    def __repr__(self) -> str:
        return f"LazyFile({self.path!r}, {self.language!r}, {self.input!r})"


def read_file(f) -> bytes:
    """A scanned file's bytes (a :class:`SourceFile`'s or a :class:`LazyFile`'s); raises ReadError."""
    return read_origin(f.origin) if isinstance(f, LazyFile) else f.data


def read_origin(o: Origin) -> bytes:
    """The bytes of one file, with the size caps and checks of the providers; raises ReadError."""
    if o.archive:
        return _read_member(o)
    cap = max_bytes(o.name)
    try:
        # O_NONBLOCK: a FIFO put in a file's place since it was listed must not block the open.
        with open(os.open(o.name, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ReadError("not a regular file")
            # Sized by stat (a read(n) allocates n up front), but stat can lie (/proc, a
            # file still growing): whatever follows is read up to the cap.
            size = st.st_size
            data = fh.read(size + 1)
            if len(data) > size:
                data += fh.read(cap + 1 - len(data))
    except OSError as exc:
        raise ReadError(os_reason(exc)) from None
    if len(data) > cap:
        raise ReadError(f"file too large (more than {cap} bytes)")
    return data


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def os_reason(exc: OSError) -> str:
    return "symlink loop" if exc.errno == 40 else (exc.strerror or str(exc)).lower()


_ZIPS: dict[tuple[int, str], zipfile.ZipFile] = {}
"""Archives open in this process (workers read many members of the same few), by process id:
a forked worker must not share the parent's open file (and its file position)."""


def _read_member(o: Origin) -> bytes:
    zf, info = _member(o)
    try:
        with zf.open(info) as fh:  # inflates at most what the header declares
            data = fh.read(info.file_size + 1)
    except Exception as exc:  # zipfile raises many kinds on corrupt members
        raise ReadError(f"corrupt archive member ({one_line(exc)})") from None
    if len(data) > info.file_size:
        raise ReadError("member expands past its declared size (zip bomb?)")
    return data


def _member(o: Origin) -> tuple[zipfile.ZipFile, zipfile.ZipInfo]:
    """The open archive and the member an origin names; raises ReadError."""
    zf = _ZIPS.get((os.getpid(), o.archive))
    if zf is None:
        try:
            zf = zipfile.ZipFile(o.archive)
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            raise ReadError(f"archive no longer readable ({one_line(exc)})") from None
        if len(_ZIPS) >= 4:
            close_archives()
        _ZIPS[(os.getpid(), o.archive)] = zf
    infos = zf.infolist()
    info = infos[o.index] if 0 <= o.index < len(infos) else None
    if info is None or info.filename != o.name or info.file_size != o.size:
        raise ReadError("archive changed during the scan")
    return zf, info


@contextmanager
def open_file(f) -> Iterator[IO[bytes]]:
    """A scanned file's bytes as a stream, for files too large to hold at once (shared objects):
    a file on disk opened, a zip member inflated as it is read, in-memory bytes wrapped. The
    checks of :func:`read_origin` apply; raises ReadError."""
    if not isinstance(f, LazyFile):
        yield io.BytesIO(f.data)
        return
    with open_origin(f.origin) as fh:
        yield fh


@contextmanager
def open_origin(o: Origin) -> Iterator[IO[bytes]]:
    """One file's bytes as a stream (:func:`open_file`); raises ReadError."""
    if o.archive:
        zf, info = _member(o)
        try:
            fh = zf.open(info)  # yields at most the declared size
        except Exception as exc:  # zipfile raises many kinds on corrupt members
            raise ReadError(f"corrupt archive member ({one_line(exc)})") from None
        with fh:
            yield fh
        return
    try:
        fd = os.open(o.name, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ReadError(os_reason(exc)) from None
    with open(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ReadError("not a regular file")
        if st.st_size > max_bytes(o.name):
            raise ReadError(f"file too large (more than {max_bytes(o.name)} bytes)")
        yield fh


def close_archives() -> None:
    """Close the archives :func:`read_origin` opened in this process."""
    for (pid, _), zf in _ZIPS.items():
        if pid == os.getpid():
            zf.close()
    _ZIPS.clear()


class Provider:
    """One input; ``collect()`` yields its files (and per-file errors)."""

    kind = ""

    def __init__(self, spec: str, filters: Filters = Filters()):
        self.spec = spec
        self.location = spec
        """Where the bytes are: the downloaded archive when ``spec`` is ``name==version``."""
        self.filters = filters

    def info(self) -> InputInfo:
        """How the input appears in the report."""
        return InputInfo(path=self.spec, kind=self.kind)

    def collect(self) -> Iterator[Item]:  # pragma: no cover - interface
        raise NotImplementedError
