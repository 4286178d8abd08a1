"""Inputs -> source files: directories, wheels/zips, sdists, installed distributions, site-packages.

One provider per kind, each yielding :class:`SourceFile` records and :class:`FileError`s for
files it could not read. Archives are read in memory: nothing is extracted to disk, nothing
scanned is imported or executed, and hostile member paths (absolute, ``..``) are refused.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Iterator, Optional, Sequence, Union

import pathspec

from auditor.model import FileError, InputInfo, SourceFile

C_EXTENSIONS = frozenset({".cu", ".cuh", ".h", ".hpp", ".hh", ".inl", ".cpp", ".cc", ".cxx", ".c"})
TEMPLATE_EXTENSIONS = frozenset({".jinja", ".jinja2", ".in"})
MAX_FILE_BYTES = 64 * 1024 * 1024
"""Larger source files are listed as errors, not read (a 100 MB header is not source)."""
MAX_BINARY_BYTES = 1024 * 1024 * 1024
"""Shared objects (read for their embedded GPU code) may be larger: CUDA kernels libraries
ship .so files of hundreds of MB."""
_SHARED_OBJECT = re.compile(r"\.so(?:\.\d+)*$", re.I)
MAX_ARCHIVE_BYTES = 4 * 1024 * 1024 * 1024
"""Total uncompressed bytes read from one archive before it is refused as a bomb."""
MAX_ARCHIVE_MEMBERS = 100_000
"""Members read from one tar archive: each costs ~0.15 ms in tarfile, and 100,000 empty ones fit in 0.5 MB."""
_TEMPLATE_HINT = re.compile(rb"^[ \t]*#[ \t]*(?:include|if|ifdef|ifndef|pragma)\b|__global__", re.M)

Item = Union[SourceFile, "LazyFile", FileError]


class InputError(Exception):
    """An input that cannot be read at all (exit 2)."""


def language_of(path: str, head: bytes = b"") -> Optional[str]:
    """``python``, ``cuda``, ``binary`` (a shared object) or None (not scanned), from the name
    and, for templates, the text."""
    if _SHARED_OBJECT.search(path):
        return "binary"
    suffix = _suffix(path)
    if suffix == ".py":
        return "python"
    if suffix in C_EXTENSIONS:
        return "cuda"
    if suffix in TEMPLATE_EXTENSIONS:
        inner = _suffix(path[:len(path) - len(suffix)])
        if inner in C_EXTENSIONS:
            return "cuda"
        if inner == "" and _TEMPLATE_HINT.search(head):
            return "cuda"
    return None


def _suffix(path: str) -> str:
    """The extension of a '/'-separated path's last part, lower case (as PurePosixPath.suffix)."""
    return posixpath.splitext(path.rpartition("/")[2])[1].lower()


_WANTED = C_EXTENSIONS | TEMPLATE_EXTENSIONS | {".py"}


def wanted(path: str) -> bool:
    """Could the file be scanned (cheap, by name)?"""
    return _suffix(path) in _WANTED or bool(_SHARED_OBJECT.search(path))


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


def _make(path: str, data: bytes, origin: str) -> Optional[Item]:
    lang = language_of(path, data[:4096])
    if lang is None:
        return None
    return SourceFile(path=path, data=data, language=lang, input=origin)


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
        raise ReadError(_os_reason(exc)) from None
    if len(data) > cap:
        raise ReadError(f"file too large (more than {cap} bytes)")
    return data


def _os_reason(exc: OSError) -> str:
    return "symlink loop" if exc.errno == 40 else (exc.strerror or str(exc)).lower()


_ZIPS: dict[tuple[int, str], zipfile.ZipFile] = {}
"""Archives open in this process (workers read many members of the same few), by process id:
a forked worker must not share the parent's open file (and its file position)."""


def _read_member(o: Origin) -> bytes:
    zf = _ZIPS.get((os.getpid(), o.archive))
    if zf is None:
        try:
            zf = zipfile.ZipFile(o.archive)
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            raise ReadError(f"archive no longer readable ({_reason(exc)})") from None
        if len(_ZIPS) >= 4:
            close_archives()
        _ZIPS[(os.getpid(), o.archive)] = zf
    try:
        infos = zf.infolist()
        info = infos[o.index] if 0 <= o.index < len(infos) else None
        if info is None or info.filename != o.name or info.file_size != o.size:
            raise ReadError("archive changed during the scan")
        with zf.open(info) as fh:  # inflates at most what the header declares
            data = fh.read(info.file_size + 1)
    except ReadError:
        raise
    except Exception as exc:  # zipfile raises many kinds on corrupt members
        raise ReadError(f"corrupt archive member ({_reason(exc)})") from None
    if len(data) > info.file_size:
        raise ReadError("member expands past its declared size (zip bomb?)")
    return data


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


class DirectoryProvider(Provider):
    """A tree on disk; symlinked files inside the tree are read, symlinked directories and
    links that leave the tree are not followed. Files are listed, not read (:class:`LazyFile`)."""

    kind = "dir"

    def __init__(self, spec: str, filters: Filters = Filters(), root: Optional[Path] = None, kind: str = "dir"):
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

    def entry(self, full: str, rel: str, inside: Optional[str] = None) -> Optional[Item]:
        """One file as a :class:`LazyFile`, or why it cannot be scanned (stat only; the bytes are
        read later). With ``inside``, a symlink whose target lies outside that directory is refused."""
        try:
            if inside is not None and os.path.islink(full):
                target = os.path.realpath(full)
                if not (target + os.sep).startswith(inside.rstrip(os.sep) + os.sep):
                    os.stat(full)  # a loop or a dangling link says so first
                    return FileError(rel, "symlink to a file outside the scanned tree, not followed", self.spec)
                full = target
            st = os.stat(full)
        except OSError as exc:
            return FileError(rel, _os_reason(exc), self.spec)
        if not stat.S_ISREG(st.st_mode):
            return FileError(rel, "not a regular file", self.spec)
        cap = max_bytes(rel)
        if st.st_size > cap:
            return FileError(rel, f"file too large ({st.st_size} bytes > {cap})", self.spec)
        head = b""
        if _suffix(rel) in TEMPLATE_EXTENSIONS:
            try:
                with open(os.open(full, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
                    head = fh.read(4096)
            except OSError as exc:
                return FileError(rel, _os_reason(exc), self.spec)
        lang = language_of(rel, head)
        return None if lang is None else LazyFile(rel, lang, self.spec, Origin(full))


def _rel(rel_dir: str, name: str) -> str:
    return name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")


def _safe_member(name: str) -> Optional[str]:
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
            raise InputError(f"{self.spec}: not a readable zip archive ({_reason(exc)})") from None
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
                if not wanted(path) or not self.filters.accepts(path):
                    continue
                if info.file_size > max_bytes(path):
                    yield FileError(path, f"member too large ({info.file_size} bytes > {max_bytes(path)})", self.spec)
                    continue
                total += info.file_size
                if total > MAX_ARCHIVE_BYTES:
                    yield FileError(path, f"archive expands past {MAX_ARCHIVE_BYTES} bytes; rest not read (zip bomb?)", self.spec)
                    return
                origin = Origin(info.filename, location, index, info.file_size)
                head = b""
                if _suffix(path) in TEMPLATE_EXTENSIONS:
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
            raise InputError(f"{self.spec}: not a readable tar archive ({_reason(exc)})") from None
        # One pass in archive order, reading each member where the stream already is: reading
        # in name order made a compressed stream rewind and re-inflate per member (quadratic).
        read: list[tuple[str, tarfile.TarInfo, Union[bytes, str]]] = []  # (name, member, data or reason)
        tops: set[str] = set()  # first path parts, and whether any member sits in a folder
        nested = False
        count = total = 0
        stop: Optional[tuple[str, str]] = None  # (member, reason) where reading stopped
        with tf:
            while True:
                try:
                    m = tf.next()
                except (OSError, tarfile.TarError, EOFError, ValueError, zlib.error) as exc:
                    if not count:
                        raise InputError(f"{self.spec}: not a readable tar archive ({_reason(exc)})") from None
                    stop = ("", f"archive truncated or corrupt after {count} members ({_reason(exc)}); rest not read")
                    break
                if m is None:
                    break
                count += 1
                tf.members.clear()  # tarfile keeps every header otherwise (a header bomb)
                path = _safe_member(m.name)
                if path:  # a refused member (absolute, '..') does not decide the top folder
                    tops.add(path.split("/", 1)[0])
                    nested = nested or m.isdir() or "/" in path
                if count > MAX_ARCHIVE_MEMBERS:
                    stop = (m.name, f"archive has more than {MAX_ARCHIVE_MEMBERS} members; rest not read (tar bomb?)")
                    break
                if path is not None and not wanted(path):
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
                    data: Union[bytes, str] = fh.read() if fh else b""
                except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
                    data = f"corrupt archive member ({_reason(exc)})"
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
            if not wanted(path) or not self.filters.accepts(path):
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
            item = _make(path, data, self.spec)
            if item is not None:
                yield item
        if stop:
            yield FileError(stop[0], stop[1], self.spec)


class InstalledProvider(Provider):
    """An installed distribution by name: the files its metadata lists, relative to site-packages."""

    kind = "installed"

    def collect(self) -> Iterator[Item]:
        from importlib import metadata

        try:
            dist = metadata.distribution(self.spec)
        except metadata.PackageNotFoundError:
            raise InputError(f"{self.spec}: no such input (not a path, and no installed distribution of that name)") from None
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


_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")


def download(requirement: str, cache_dir: Path) -> Path:
    """``name==version`` -> the archive ``pip download --no-deps`` fetches, cached per requirement.

    Only wheels: fetching an sdist makes pip run its build backend, and archaudit never
    executes scanned code. Give an sdist as a file instead.
    """
    name, version = requirement.split("==", 1)
    slot = cache_dir / f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"
    cached = sorted(slot.glob("*.whl")) if slot.is_dir() else []
    if cached:
        return cached[0]
    slot.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(slot), requirement],
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )
    found = sorted(slot.glob("*.whl"))
    if proc.returncode == 0 and found:
        return found[0]
    last = next((ln for ln in reversed(proc.stderr.splitlines()) if ln.startswith("ERROR")), "")
    raise InputError(f"{requirement}: no wheel could be downloaded ({last.removeprefix('ERROR: ') or 'pip failed'})")


def provider_for(spec: str, filters: Filters = Filters(), cache_dir: Optional[Path] = None) -> Provider:
    """Pick the provider for one input as the user named it."""
    p = Path(spec)
    if p.is_dir():
        return DirectoryProvider(spec, filters)
    if p.exists():
        name = p.name.lower()
        if name.endswith((".whl", ".zip")):
            return ZipProvider(spec, filters)
        if name.endswith((".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz")):
            return TarProvider(spec, filters)
        if p.is_file():
            return SingleFileProvider(spec, filters)
    if spec.startswith("git:"):
        from auditor.gitrev import GitRevisionProvider

        return GitRevisionProvider(spec, filters)
    if _REQUIREMENT.match(spec) and cache_dir is not None:
        archive = download(spec, cache_dir)
        inner = provider_for(str(archive), filters)
        inner.spec = spec
        return inner
    if not p.exists() and not p.is_symlink() and re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", spec):
        return InstalledProvider(spec, filters)
    if p.is_symlink():
        raise InputError(f"{spec}: broken or looping symlink")
    raise InputError(f"{spec}: no such file, directory or installed distribution")


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


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def providers(specs: Sequence[str], filters: Filters = Filters(), cache_dir: Optional[Path] = None) -> list[Provider]:
    """Providers for the command line's inputs; none given means this interpreter's site-packages."""
    if not specs:
        return [DirectoryProvider(p, filters, kind="installed") for p in site_packages()]
    return [provider_for(s, filters, cache_dir) for s in specs]


def read_all(provider: Provider) -> tuple[list, list[FileError]]:
    """Drain a provider into files (:class:`SourceFile` or :class:`LazyFile`) and errors."""
    files: list = []
    errors: list[FileError] = []
    for item in provider.collect():
        (errors if isinstance(item, FileError) else files).append(item)
    return files, errors


