"""The report formats: one registry for ``scan``, ``diff`` and ``pr``, and for ``-o FILE``.

Each format names its renderer of a scan and of a diff, and the file extensions that choose
it. The renderers are imported when first used: the command line builds its choices from
this module before it knows which reports (and their templates and lexers) it needs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath

from auditor.model import AuditResult, DiffResult, Word


class Format(Word):
    """A report format, in the order the command line offers them."""

    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"
    MARKDOWN = "markdown"
    HTML = "html"

    @classmethod
    def of_path(cls, path: str) -> Format | None:
        """The format a file name's extension asks for (None: none does)."""
        return BY_SUFFIX.get(PurePath(path).suffix.lower())

    def renderer(self) -> Callable[[AuditResult], str]:
        """The pure renderer of a scan's result."""
        from auditor.render import html, json, markdown, sarif, text

        return {
            Format.TEXT: text.render,
            Format.JSON: json.render,
            Format.SARIF: sarif.render,
            Format.MARKDOWN: markdown.render,
            Format.HTML: html.render,
        }[self]

    def diff_renderer(self) -> Callable[[DiffResult], str]:
        """The pure renderer of a diff."""
        from auditor.render import diff

        return {
            Format.TEXT: diff.render_text,
            Format.JSON: diff.render_json,
            Format.SARIF: diff.render_sarif,
            Format.MARKDOWN: diff.render_markdown,
            Format.HTML: diff.render_html,
        }[self]


SUFFIXES: dict[Format, tuple[str, ...]] = {
    Format.TEXT: (".txt",),
    Format.JSON: (".json",),
    Format.SARIF: (".sarif",),
    Format.MARKDOWN: (".md",),
    Format.HTML: (".html", ".htm"),
}
"""The extensions ``-o FILE`` infers each format from."""
BY_SUFFIX: dict[str, Format] = {s: f for f, suffixes in SUFFIXES.items() for s in suffixes}
