"""Where the API model wins over the input's source (``data/api-models.json``).

A scan of a package together with its dependencies (``archaudit scan`` in a virtualenv, a
site-packages tree) holds torch's, NVML's and the platform layers' own source. Their
definitions cannot be reduced to a capability (``torch.cuda.get_device_capability`` reads a
C extension), so the names the model knows keep the model's meaning wherever they are
defined, and the audited device stays an NVIDIA device: its platform object is the CUDA
platform, its backend probes answer as on CUDA.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from auditor import datafiles
from auditor.facts import names as names_mod


@dataclass(frozen=True, slots=True)
class Models:
    owned: frozenset[str]
    """Dotted names the model evaluates even when the input defines them."""
    foreign: tuple[str, ...]
    """Modules whose capability queries read another accelerator, not the audited device."""
    objects: frozenset[str]
    """Module globals that hold the running platform (``current_platform``)."""
    platform_module: str
    """The submodule, beside the one binding the object, that holds the CUDA platform."""
    platform_classes: re.Pattern
    """Names of the CUDA platform classes in it."""
    probes: dict[str, bool]
    """Backend tests by bare name and their answer on the audited device."""


@cache
def models() -> Models:
    raw = datafiles.read_json("api-models.json")
    t = names_mod.table()
    bare = set(t.sources) | set(t.tests) | set(t.toolkit.calls) | set(t.toolkit.tests)
    owned = {f"{m}.{name}" for m in raw["owned"] for name in bare}
    owned |= set(t.constants) | set(t.returns) | set(t.toolkit.constants)
    return Models(
        owned=frozenset(owned),
        foreign=tuple(raw["foreign"]),
        objects=frozenset(raw["platform"]["objects"]),
        platform_module=raw["platform"]["module"],
        platform_classes=re.compile(raw["platform"]["classes"]),
        probes=dict(raw["probes"]),
    )


@cache
def _probe_words() -> re.Pattern:
    probes = sorted(map(re.escape, models().probes))
    absent = sorted(re.escape(k) for k, v in names_mod.table().constants.items() if v is None)
    names = "|".join(probes + absent)
    return re.compile(rb"(?<![A-Za-z0-9_])_*(?:" + names.encode() + rb")(?![A-Za-z0-9_])")


def names_probe(text: bytes) -> bool:
    """Whether code names a backend probe (``is_musa()``, ``_is_hip``, ``platform.is_rocm()``) or
    another backend's build constant (``torch.version.hip``, None on the CUDA builds audited): a
    branch it decides is another backend's code, not code an NVIDIA device might run."""
    return _probe_words().search(text) is not None


@cache
def owned(module: str, name: str) -> str | None:
    """The modelled dotted name ``module.name`` stands for, or None. A tree whose packages sit
    under a folder (``lib/site-packages/torch/cuda``) still names ``torch.cuda``: suffixes count."""
    parts = f"{module}.{name}".split(".") if module else [name]
    table = models().owned
    for i in range(len(parts) - 1):
        dotted = ".".join(parts[i:])
        if dotted in table:
            return dotted
    return None


@cache
def foreign(path: str) -> bool:
    """Whether a dotted name lies in a module of another accelerator (``torch.musa.x``)."""
    return any(path == m or path.startswith(m + ".") for m in models().foreign)


@cache
def foreign_name(module: str, name: str) -> str | None:
    """``module.name`` as the dotted name of another accelerator's module it lies in (by suffix,
    as :func:`owned`), or None."""
    parts = f"{module}.{name}".split(".") if module else [name]
    for i in range(len(parts)):
        dotted = ".".join(parts[i:])
        if foreign(dotted):
            return dotted
    return None
