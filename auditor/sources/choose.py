"""Which provider reads an input the user named: a path, an archive, ``name==version``, a git revision."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from auditor.model import FileError
from auditor.sources.archives import TarProvider, ZipProvider
from auditor.sources.directory import DirectoryProvider, InstalledProvider, SingleFileProvider, site_packages
from auditor.sources.files import Filters, InputError, Provider
from auditor.sources.git import GitRevisionProvider, is_spec

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
    # On a terminal, pip's own progress bar goes to stderr (its stdout, not the report's).
    shown = sys.stderr.isatty()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            *(() if shown else ("-q",)),
            "-d",
            str(slot),
            requirement,
        ],
        stdout=sys.stderr if shown else subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    found = sorted(slot.glob("*.whl"))
    if proc.returncode == 0 and found:
        return found[0]
    last = next((ln for ln in reversed(proc.stderr.splitlines()) if ln.startswith("ERROR")), "")
    raise InputError(f"{requirement}: no wheel could be downloaded ({last.removeprefix('ERROR: ') or 'pip failed'})")


def provider_for(spec: str, filters: Filters = Filters(), cache_dir: Path | None = None) -> Provider:
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
    if is_spec(spec):
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


def providers(specs: Sequence[str], filters: Filters = Filters(), cache_dir: Path | None = None) -> list[Provider]:
    """Providers for the command line's inputs; none given means this interpreter's site-packages."""
    if not specs:
        return [DirectoryProvider(p, filters, kind="installed") for p in site_packages()]
    return [provider_for(s, filters, cache_dir) for s in specs]


def read_all(provider: Provider) -> tuple[list, list[FileError]]:
    """Drain a provider into files (:class:`SourceFile` or :class:`LazyFile`) and errors."""
    files: list = []
    errors: list[FileError] = []
    for item in provider.collect():
        if isinstance(item, FileError):
            errors.append(item)
        else:
            files.append(item)
    return files, errors
