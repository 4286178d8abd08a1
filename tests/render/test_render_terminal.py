"""The terminal: colour on a TTY, plain text in pipes and with NO_COLOR, a progress bar on stderr."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys

from rich.console import Console

from auditor.render import terminal, text
from tests.render.render_support import REPORTS, scan

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_colour_is_the_text_report_with_styles():
    result = scan(REPORTS, formats=("text",))
    coloured = terminal.render(result)
    assert "\x1b[1;31m12.0:EXCLUDED\x1b[0m" in coloured
    assert "\x1b[32m12.0:ok\x1b[0m" in coloured
    assert "\x1b[1;31m[high]\x1b[0m" in coloured
    assert ANSI.sub("", coloured) == text.render(result)
    assert re.match(
        r"15 gates, 13 exclude 12\.0/12\.1, \d+ findings \(\d+ high", ANSI.sub("", coloured).splitlines()[-1]
    )


def _cli(env: dict, tty: bool) -> str:
    """``archaudit scan`` of the fixture, its stdout a pseudo-terminal or a pipe."""
    cmd = [sys.executable, "-m", "auditor", "scan", str(REPORTS), "--jobs", "1"]
    env = {**os.environ, **env}
    if not tty:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, env=env, stdout=follower, stderr=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait() == 0
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def test_cli_colours_a_tty_only_without_no_color():
    env = {"NO_COLOR": ""}
    assert ANSI.search(_cli(env, tty=True))
    assert not ANSI.search(_cli(env, tty=False))
    assert not ANSI.search(_cli({"NO_COLOR": "1"}, tty=True))


def test_progress_bar_appears_for_long_work_and_clears():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with terminal.progress_bar(console, delay=0) as update:
        for done in range(1, 6):
            update("c/cuda", done, 10)
        assert "scanning c/cuda" in out.getvalue()
    quick = io.StringIO()
    with terminal.progress_bar(Console(file=quick, force_terminal=True), delay=60) as update:
        update("c/cuda", 1, 2)
        update("c/cuda", 2, 2)
    assert "scanning" not in quick.getvalue(), "a moment's work shows no bar"
