"""A test of a value chosen upstream repeats that choice (``fixtures/python/settled``): the backend
version is chosen by the arch and checked by ``assert ready(v)``, so 12.x is always given v2, and
``(v == 3 and major == 9) or (v == 4 and major == 10)`` would turn it away even with its own
capability tests widened. The decision is where the version is chosen, not there."""

from __future__ import annotations

from auditor.pipeline import Options, audit
from tests.conftest import FIXTURES

TREE = FIXTURES / "python" / "settled"


def _scan():
    return audit([str(TREE)], Options(jobs=1))


def test_a_gate_that_tests_a_chosen_value_is_settled_upstream():
    result = _scan()
    settled = {(g.file, g.line): g.settled for g in result.gates}
    assert {"12.0", "12.1"} <= set(settled["pkg/cache.py", 11])  # the test of the version
    assert {"12.0", "12.1"} <= set(settled["pkg/serve.py", 7])  # ... and the predicate that returns it
    assert "10.0" not in settled["pkg/cache.py", 11]  # 10.x passes there
    assert settled["pkg/cache.py", 16] == ()  # a plain flag beside a capability test
    assert settled["pkg/backends.py", 34] == ()  # where the version is chosen
    assert {"12.0", "12.1"} <= set(settled["pkg/cache.py", 21])  # a rejection of every version 12.x gets


def test_only_the_gate_that_decides_is_reported():
    findings = {(f.file, f.line) for f in _scan().findings}
    assert ("pkg/cache.py", 11) not in findings
    assert ("pkg/serve.py", 7) not in findings
    assert ("pkg/cache.py", 21) not in findings
    assert ("pkg/serve.py", 13) in findings  # `use_wide and major in (9, 10)` does turn 12.x away
