"""Shared by the report tests: a scan of a fixture tree as the CLI hands it to the renderers, and Chromium."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from auditor import cli, pipeline
from auditor.model import AuditResult
from tests.conftest import FIXTURES, ROOT

REPORTS = FIXTURES / "reports"
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def scan(*inputs: str | Path, formats=("html",), extra_args: tuple[str, ...] = ()) -> AuditResult:
    """``archaudit scan INPUTS`` up to the point where the CLI calls the renderers."""
    args = cli.build_parser().parse_args(["scan", *map(str, inputs), *extra_args])
    result = pipeline.audit(args.inputs, cli._options(args, excerpts="html" in formats))
    return cli.report_inputs(result, args)


@contextmanager
def chromium() -> Iterator:
    """A headless Chromium page (the system browser; playwright never downloads one)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the dev extra installs playwright")
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium chromium-driver")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_report(browser, path: Path, problems: list[str], width: int = 1280, height: int = 800, timeout: int = 30_000):
    """A report opened in a new page, ready; page errors and console errors go to ``problems``."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready=true]", timeout=timeout)
    return page
