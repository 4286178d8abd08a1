"""Which releases a history covers: the command line's specs, with a project's releases listed
from the package index (the PyPI JSON API) and chosen by a PEP 440 specifier or ``last:N``.

Only releases with a wheel that is not yanked are listed: ``name==version`` is fetched as a
wheel (:func:`auditor.sources.download`), never as an sdist, whose build would run its code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

INDEX = "https://pypi.org/pypi"
"""The JSON API root: ``{INDEX}/{project}/json`` lists a project's releases and their files."""
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_PINNED = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9.+!_-]+)$")
_LAST = re.compile(r"^last:(\d+)$")

Fetch = Callable[[str], Any]
"""Reads one JSON document of the index (a URL -> its decoded JSON); raises :class:`SpecError`."""


class SpecError(ValueError):
    """A spec or ``--versions`` that names no release: one line, exit 2."""


@dataclass(frozen=True, slots=True)
class Release:
    """One release of the history, in the order the history compares them."""

    spec: str
    """What is scanned: ``name==version``, a wheel, an sdist or a directory."""
    label: str
    """How the reports name it: the version, or the file or folder name."""


def normalise(name: str) -> str:
    """A project name as the index files it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def chooser(chosen: str) -> Callable[[Sequence[Version]], list[Version]]:
    """What ``--versions`` picks from a project's versions, oldest first: a PEP 440 specifier
    (pre-releases only when it names one) or ``last:N`` (the newest N final and post
    releases). Checked before the index is asked anything."""
    last = _LAST.match(chosen.strip())
    if last:
        count = int(last.group(1))
        if count < 1:
            raise SpecError(f"--versions {chosen}: N must be at least 1")
        return lambda versions: [v for v in sorted(set(versions)) if not v.is_prerelease][-count:]
    try:
        specifier = SpecifierSet(chosen)
    except InvalidSpecifier:
        raise SpecError(f"--versions {chosen!r}: not a PEP 440 specifier (e.g. '>=0.5,<0.8') or last:N") from None
    return lambda versions: list(specifier.filter(sorted(set(versions))))


def wheel_versions(document: Any) -> list[Version]:
    """The versions of a project's JSON document that have a wheel not yanked (others cannot
    be fetched without building them); versions PEP 440 cannot read are left out."""
    out = []
    for text, files in (document.get("releases") or {}).items():
        if not any(f.get("packagetype") == "bdist_wheel" and not f.get("yanked") for f in files or ()):
            continue
        try:
            out.append(Version(text))
        except InvalidVersion:
            continue
    return sorted(out)


def http_fetch(url: str) -> Any:
    """One JSON document of the index, over HTTPS."""
    import httpx

    try:
        response = httpx.get(url, timeout=30, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise SpecError(f"{url}: the package index could not be read ({exc})") from None
    if response.status_code == 404:
        raise SpecError(f"{url}: no such project on the package index")
    if response.status_code != 200:
        raise SpecError(f"{url}: the package index answered {response.status_code}")
    try:
        return response.json()
    except ValueError:
        raise SpecError(f"{url}: the package index sent something that is not JSON") from None


def _file_label(path: Path) -> str:
    """A wheel's or sdist's version as its file name states it, else the file or folder name."""
    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename

    name = path.resolve().name
    try:
        if name.endswith(".whl"):
            return str(parse_wheel_filename(name)[1])
        if name.endswith((".tar.gz", ".zip")):
            return str(parse_sdist_filename(name)[1])
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        pass
    return name


def releases(
    specs: Sequence[str], versions: str | None = None, index: str = INDEX, fetch: Fetch = http_fetch
) -> list[Release]:
    """The releases the specs name, in their order; a bare project name expands (oldest first)
    to the releases ``versions`` picks from the index. Raises :class:`SpecError` for a spec
    that names nothing, a bare name without ``versions``, or ``versions`` with no bare name."""
    pick = chooser(versions) if versions is not None else None
    out: list[Release] = []
    expanded = False
    for spec in specs:
        path = Path(spec)
        pinned = _PINNED.match(spec)
        if path.exists():
            if not (path.is_dir() or path.name.lower().endswith((".whl", ".zip", ".tar.gz", ".tgz", ".tar"))):
                raise SpecError(f"{spec}: not a wheel, an sdist or a directory")
            out.append(Release(spec, _file_label(path)))
        elif pinned:
            out.append(Release(spec, pinned.group(2)))
        elif _NAME.match(spec) and not spec.endswith((".whl", ".tar.gz", ".tgz", ".zip")):
            if pick is None:
                raise SpecError(
                    f"{spec}: give --versions (a specifier such as '>=0.6,<0.8', or last:N), or {spec}==VERSION"
                )
            expanded = True
            picked = pick(wheel_versions(fetch(f"{index.rstrip('/')}/{normalise(spec)}/json")))
            if not picked:
                raise SpecError(f"{spec}: no release with a wheel matches --versions {versions!r}")
            out += [Release(f"{spec}=={v}", str(v)) for v in picked]
        else:
            raise SpecError(f"{spec}: not name==version, a project name, a wheel, an sdist or a directory")
    if versions is not None and not expanded:
        raise SpecError("--versions applies to a bare project name, and none was given")
    specs_seen = [r.spec for r in out]
    twice = next((s for i, s in enumerate(specs_seen) if s in specs_seen[:i]), None)
    if twice:
        raise SpecError(f"{twice}: named twice")
    if len({r.label for r in out}) < len(out):  # one version of two projects: name them in full
        out = [Release(r.spec, r.spec) for r in out]
    return out
