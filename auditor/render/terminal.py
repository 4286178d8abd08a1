"""The text report in colour for a terminal, and a progress bar for long scans.

Colour is the plain text report (``render.text``) with rich styles laid over it by
pattern, so the two never say different things and 40k gates colour in seconds. The CLI
picks this one when stdout is a terminal and ``NO_COLOR`` is unset. The progress bar is
driven by the pipeline's ``progress`` callback.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.color import ColorSystem
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.style import Style

from auditor.model import AuditResult
from auditor.render import text as plain

LINE_STYLES: tuple[tuple[str, str], ...] = (
    (r"^error:", "red"),
    (r"^\S", "bold"),
)
"""Whole lines: errors, and the file headers (the only other lines that start unindented)."""
TOKEN_STYLES: tuple[tuple[str, str], ...] = (
    (r"^\s+\d+(?=\s)", "cyan"),
    (r"\b[\w.]+:EXCLUDED\b", "bold red"),
    (r"\b[\w.]+:ok\b", "green"),
    (r"^\s+(?:admits|depends on|via|uses)\b", "dim"),
    (r"\[high\]", "bold red"),
    (r"\[medium\]", "yellow"),
    (r"\[low\]", "blue"),
    (r"\[info\]", "dim"),
    (r"\bARCH\d{3}\b", "magenta"),
)
"""Tokens inside a gate's lines; one pass, so styles never nest."""
_LINES = tuple((re.compile(p), Style.parse(s)) for p, s in LINE_STYLES)
_TOKENS = re.compile("|".join(f"({p})" for p, _ in TOKEN_STYLES))
_TOKEN_STYLE = tuple(Style.parse(s) for _, s in TOKEN_STYLES)


def _paint(text: str, style: Style) -> str:
    return style.render(text, color_system=ColorSystem.STANDARD)


def _styled(line: str) -> str:
    for pattern, style in _LINES:
        if pattern.match(line):
            return _paint(line, style)
    return _TOKENS.sub(lambda m: _paint(m.group(), _TOKEN_STYLE[(m.lastindex or 1) - 1]), line)


def render(result: AuditResult, only_excluding: bool = False) -> str:
    """The text report with ANSI colours (16 colours, so it suits any terminal theme); the summary in bold."""
    lines = plain.render(result, only_excluding).splitlines()
    body = [_styled(line) for line in lines[:-1]]
    return "\n".join(body + [_paint(line, Style(bold=True)) for line in lines[-1:]]) + "\n"


@contextmanager
def progress_bar(console: Console, delay: float = 0.5) -> Iterator[Callable[[str, int, int], None]]:
    """A ``(stage, done, total)`` callback drawing a transient bar, shown only if work outlasts ``delay``."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    tasks: dict[str, TaskID] = {}
    started: list[float] = []

    def update(stage: str, done: int, total: int) -> None:
        now = bar.get_time()
        if not started:
            started.append(now)
        if stage not in tasks:
            tasks[stage] = bar.add_task(f"scanning {stage}", total=total)
        bar.update(tasks[stage], completed=done, total=total)
        if not bar.live.is_started and now - started[0] >= delay and done < total:
            bar.start()

    try:
        yield update
    finally:
        bar.stop()


def stderr_console() -> Console | None:
    """A console for the progress bar, or None when stderr is not a terminal."""
    console = Console(stderr=True)
    return console if console.is_terminal else None
