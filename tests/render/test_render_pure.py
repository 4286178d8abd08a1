"""Every renderer is a pure function: the same result gives the same bytes, and no clock is read."""

from __future__ import annotations

import datetime
import time

import pytest

from auditor import cli
from auditor.render import terminal
from auditor.render.formats import Format
from tests.render.render_support import REPORTS, scan

RENDERERS = {**{f.value: f.renderer() for f in Format}, "terminal": terminal.render}
ALL = tuple(Format)


@pytest.fixture(scope="module")
def twins():
    """Two results of the same scan, built independently (so no shared caches or object ids)."""
    return scan(REPORTS, formats=ALL), scan(REPORTS, formats=ALL)


class _Stopped(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        raise AssertionError("a renderer read the clock")

    utcnow = today = now


def _no_clock(*_args, **_kwargs):
    raise AssertionError("a renderer read the clock")


@pytest.mark.parametrize("name", sorted(RENDERERS))
def test_same_input_same_bytes_without_a_clock(name, twins, monkeypatch):
    render = RENDERERS[name]
    first = render(twins[0])  # warm caches (templates, lexers) before the clock stops
    for attr in ("time", "time_ns", "localtime", "gmtime", "ctime", "strftime"):
        monkeypatch.setattr(time, attr, _no_clock)
    monkeypatch.setattr(datetime, "datetime", _Stopped)
    again, twin = render(twins[0]), render(twins[1])
    monkeypatch.undo()
    assert first == again == twin
    assert first.strip()


def test_every_format_the_cli_offers_has_a_renderer():
    formats = next(
        a for a in cli.build_parser()._subparsers._group_actions[0].choices["scan"]._actions if a.dest == "format"
    ).choices
    assert set(formats) == set(Format)
