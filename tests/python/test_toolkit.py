"""The CUDA toolkit as a second coordinate: what reads it (the data in predicate-names.json),
versions compared as Python compares them, results cached per toolkit, and a scan that walks
a scope under every toolkit only when the scope read one."""

from __future__ import annotations

import pytest

from auditor import arch
from auditor.python.core import NEWEST
from auditor.python.gates import scan_module
from auditor.python.values import Ver, capability, version
from tests.python.program import expression, interp, program

PRELUDE = """
import torch
from packaging import version as pkg_version
from packaging.version import Version
from .cpp_ext import get_cuda_version, is_cuda_version_at_least, version_at_least
"""


OLDER = tuple(k.release for k in arch.toolkits()[:-1])


def test_the_newest_toolkit_is_evaluated_by_default():
    it = interp(program(**{"m.py": "x = 1\n"}))
    assert it.newest == NEWEST == arch.toolkits()[-1].release
    assert it.others == OLDER


@pytest.mark.parametrize(
    "text,want",
    [
        ("torch.version.cuda", NEWEST),
        ('torch.version.cuda >= "12.8"', True),
        ("torch.version.cuda is not None", True),
        ('Version(torch.version.cuda) >= Version("12.9")', True),
        ("pkg_version.parse(torch.version.cuda).release[:2] < (13, 0)", False),
        ('tuple(map(int, torch.version.cuda.split(".")))[0]', int(NEWEST.split(".")[0])),
        ("get_cuda_version().major >= 13", True),
        ("get_cuda_version() >= (12, 4)", True),
        ('is_cuda_version_at_least("99.0")', False),
        ('_is_cuda_version_at_least("12.8")', True),  # a private wrapper, by its public name
        ('version_at_least(torch.version.cuda, "12.9")', True),
        ("torch._C._cuda_getCompiledVersion() >= 12080", True),
    ],
)
def test_what_reads_the_toolkit(text, want):
    assert expression(text, prelude=PRELUDE).elems == {want}


def test_versions_compare_as_packaging_and_tuples_as_tuples():
    assert version("13") == version("13.0") and hash(version("13")) == hash(version("13.0"))
    assert version("12.9") < version("13.0") < version("13.0.1")
    assert Ver((13, 0)) >= (13, 0) and not Ver((13,)) >= (13, 0)  # a plain tuple compares as a tuple
    assert version("13.0rc1") is version("x") is version(None)  # UNKNOWN


def test_results_that_read_the_toolkit_are_cached_per_toolkit():
    prog = program(
        **{
            "m.py": PRELUDE
            + """
def ready():
    major, _ = torch.cuda.get_device_capability()
    return major == 12 and torch.version.cuda >= "12.9"

def plain():
    return torch.cuda.get_device_capability()[0] == 12
"""
        }
    )
    mod = prog.by_path["m.py"]
    it = interp(prog)
    answers = {}
    for toolkit in ("12.8", "12.9"):
        for name in ("ready", "plain"):
            f = it.global_value(mod, name).only()
            v, dep, tdep, _ = it.observe(capability("12.0"), lambda st, f=f: it.call_func(f, [], {}), None, toolkit)
            answers[toolkit, name] = (v.elems, dep, tdep)
    assert answers["12.8", "ready"] == ({False}, True, True)
    assert answers["12.9", "ready"] == ({True}, True, True)  # a cache hit would say False
    assert answers["12.8", "plain"] == answers["12.9", "plain"] == ({True}, True, False)


SCOPES = (
    PRELUDE
    + """
def gated():
    major, _ = torch.cuda.get_device_capability()
    if torch.version.cuda >= "12.9" and major == 12:
        return 1
    else:
        return 2

def plain():
    major, _ = torch.cuda.get_device_capability()
    if major == 12:
        return 1
"""
)


def test_only_scopes_that_read_the_toolkit_are_walked_per_toolkit():
    prog = program(**{"kern/m.py": SCOPES})
    found = {g.line: g for g in scan_module(interp(prog), prog.by_path["kern/m.py"], lambda m, n: True)}
    line = {text.strip(): i + 1 for i, text in enumerate(SCOPES.splitlines())}
    newer = tuple(r for r in (*OLDER, NEWEST) if r >= "12.9")
    assert found[line['if torch.version.cuda >= "12.9" and major == 12:']].admits == ("12.0", "12.1")
    assert dict(found[line['if torch.version.cuda >= "12.9" and major == 12:']].toolkits) == {
        "12.0": newer,
        "12.1": newer,
    }
    # the else branch: every capability under the newest toolkit, 12.x not under 12.8
    assert dict(found[line["else:"]].toolkits) == {"12.0": ("12.8",), "12.1": ("12.8",)}
    assert found[line["if major == 12:"]].admits == ("12.0", "12.1") and found[line["if major == 12:"]].toolkits == ()
