"""The PR-comment poster against a real local HTTP server that speaks GitHub's comment API.

Why a real server: the retry, pagination and error paths are about HTTP
status codes and headers, and only a socket shows that the token goes where
it should and nowhere else. Everything listens on 127.0.0.1; no test touches
the network beyond it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from auditor import github

TOKEN = "ghp_FAKE_archaudit_T0KEN_do_not_leak_7c1e"
REPO = "octo/gates"
PR = 7
_CHECKED_HEADERS = ("Authorization", "Accept", "X-GitHub-Api-Version", "User-Agent")
MAX_PER_PAGE = 2
"""The fake serves at most this many comments a page, so a few comments already span pages."""


class FakeGitHub:
    """State of the fake API: comments, injected failures and a log of what was asked."""

    def __init__(self) -> None:
        self.comments: list[dict] = []
        self.failures: list[tuple[str | None, tuple[int, dict, dict]]] = []
        """(method or None for any, (status, headers, json)): replies sent instead of the real one, in order."""
        self.requests: list[tuple[str, str]] = []
        self.headers: list[dict[str, str | None]] = []
        self.next_link_host: str | None = None
        self.url = ""
        self._lock = threading.Lock()

    def seed(self, *bodies: str) -> None:
        for body in bodies:
            self.comments.append({"id": len(self.comments) + 1, "body": body, "user": {"login": "someone"}})

    def fail(self, status: int, body: dict | None = None, *, on: str | None = None, **headers: str) -> None:
        """Answer the next request (the next ``on`` request, if given) with this instead."""
        reply = (status, {k.replace("_", "-"): v for k, v in headers.items()}, body or {})
        self.failures.append((on, reply))

    def handle(self, method: str, target: str, headers, payload: dict | None) -> tuple[int, dict, object]:
        with self._lock:
            self.requests.append((method, target))
            self.headers.append({key: headers.get(key) for key in _CHECKED_HEADERS})
            if headers.get("Authorization") != f"Bearer {TOKEN}":
                return 401, {}, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}
            for i, (on, reply) in enumerate(self.failures):
                if on in (None, method):
                    del self.failures[i]
                    return reply
            return self._route(method, target, payload)

    def _route(self, method: str, target: str, payload: dict | None) -> tuple[int, dict, object]:
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments", parts.path)
        if m and m.group(1) == REPO and int(m.group(2)) == PR:
            if method == "GET":
                return self._page(parts.path, query)
            if method == "POST":
                return self._write(None, payload)
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/comments/(\d+)", parts.path)
        if m and m.group(1) == REPO and method == "PATCH":
            return self._write(int(m.group(2)), payload)
        return 404, {}, {"message": "Not Found"}

    def _page(self, path: str, query: dict) -> tuple[int, dict, object]:
        per_page = min(int(query.get("per_page", ["30"])[0]), MAX_PER_PAGE)
        page = int(query.get("page", ["1"])[0])
        last = max(1, -(-len(self.comments) // per_page))
        headers = {}
        if page < last:
            host = self.next_link_host or self.url
            url = f"{host}{path}?per_page={per_page}"
            headers["Link"] = f'<{url}&page={page + 1}>; rel="next", <{url}&page={last}>; rel="last"'
        return 200, headers, self.comments[(page - 1) * per_page : page * per_page]

    def _write(self, comment_id: int | None, payload: dict | None) -> tuple[int, dict, object]:
        body = (payload or {}).get("body")
        if not body:
            return 422, {}, {"message": "Validation Failed", "errors": [{"field": "body", "code": "missing_field"}]}
        if comment_id is None:
            comment = {"id": len(self.comments) + 1, "body": body, "user": {"login": "github-actions[bot]"}}
            self.comments.append(comment)
            return 201, {}, comment
        for comment in self.comments:
            if comment["id"] == comment_id:
                comment["body"] = body
                return 200, {}, comment
        return 404, {}, {"message": "Not Found"}


def _handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            payload = json.loads(raw) if raw else None
            status, headers, body = fake.handle(self.command, self.path, self.headers, payload)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = _serve

        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

    return Handler


@pytest.fixture
def fake():
    state = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def slept(monkeypatch):
    """Record the waits ``run`` asks for instead of sleeping through them."""
    waits: list[float] = []
    monkeypatch.setattr(github.time, "sleep", waits.append)
    return waits


@pytest.fixture
def body_file(tmp_path):
    path = tmp_path / "comment.md"
    path.write_text("## archaudit\n\nNo new gates.\n", encoding="utf-8")
    return path


def _args(fake: FakeGitHub, body_file, *extra: str, repo: str = REPO, pr: int = PR) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="archaudit comment")
    github.add_arguments(parser)
    argv = ["--repo", repo, "--pr", str(pr), "--body-file", str(body_file), "--api-url", fake.url, *extra]
    return parser.parse_args(argv)


def _upsert(fake: FakeGitHub, waits: list[float] | None = None, **overrides) -> tuple[str, int]:
    """``upsert_comment`` against the fake; waits go into ``waits`` instead of being slept."""
    sleep = (waits if waits is not None else []).append
    kwargs = {"api_url": fake.url, "repo": REPO, "pr": PR, "body": "x", "token": TOKEN, "sleep": sleep}
    return github.upsert_comment(**{**kwargs, **overrides})


def _run(fake, body_file, capsys, monkeypatch, *extra, token: str = TOKEN, **where) -> tuple[int, str, str]:
    """``run`` as the CLI calls it; checks that the token never shows in the output."""
    monkeypatch.setenv("GITHUB_TOKEN", token)
    code = github.run(_args(fake, body_file, *extra, **where))
    out, err = capsys.readouterr()
    assert TOKEN not in out and TOKEN not in err
    assert "Traceback" not in err
    return code, out, err


def test_first_run_creates_then_updates_the_same_comment_on_page_two(fake, body_file, capsys, monkeypatch, slept):
    fake.seed("LGTM", "please rebase", "nice")
    code, out, err = _run(fake, body_file, capsys, monkeypatch)
    assert (code, out, err) == (0, "created comment 4\n", "")
    assert fake.comments[3]["body"].startswith("<!-- archaudit -->\n## archaudit")

    body_file.write_text("## archaudit\n\n1 new gate.\n", encoding="utf-8")
    code, out, err = _run(fake, body_file, capsys, monkeypatch)
    assert (code, out, err) == (0, "updated comment 4\n", "")
    assert len(fake.comments) == 4 and "1 new gate." in fake.comments[3]["body"]
    # The list was read page by page (per_page honoured, Link followed) before the PATCH.
    assert fake.requests[-3:] == [
        ("GET", f"/repos/{REPO}/issues/{PR}/comments?per_page=100"),
        ("GET", f"/repos/{REPO}/issues/{PR}/comments?per_page=2&page=2"),
        ("PATCH", f"/repos/{REPO}/issues/comments/4"),
    ]
    assert slept == []
    for headers in fake.headers:
        assert headers["Authorization"] == f"Bearer {TOKEN}"
        assert headers["Accept"] == "application/vnd.github+json"
        assert headers["X-GitHub-Api-Version"] == "2022-11-28"
        assert headers["User-Agent"].startswith("archaudit/")


def test_same_body_again_is_unchanged_and_sends_no_write(fake, body_file, capsys, monkeypatch):
    for expected in ("created comment 1\n", "unchanged comment 1\n"):
        assert _run(fake, body_file, capsys, monkeypatch)[:2] == (0, expected)
    assert [method for method, _ in fake.requests] == ["GET", "POST", "GET"]


def test_body_that_already_has_the_marker_keeps_it_once(fake, tmp_path):
    body = "intro\n<!-- archaudit -->\nrest"
    assert _upsert(fake, body=body) == ("created", 1)
    assert fake.comments[0]["body"] == body


def test_custom_marker_keeps_two_sticky_comments_apart(fake):
    assert _upsert(fake, body="a", marker="<!-- one -->") == ("created", 1)
    assert _upsert(fake, body="b", marker="<!-- two -->") == ("created", 2)
    assert _upsert(fake, body="c", marker="<!-- one -->") == ("updated", 1)


def test_a_502_is_retried_with_backoff(fake, body_file, capsys, monkeypatch, slept):
    fake.fail(502, {"message": "Server Error"})
    code, out, err = _run(fake, body_file, capsys, monkeypatch)
    assert (code, out, err) == (0, "created comment 1\n", "")
    assert slept == [1.0]
    assert [method for method, _ in fake.requests] == ["GET", "GET", "POST"]


def test_503_with_retry_after_waits_that_long(fake):
    fake.fail(503, {"message": "Service Unavailable"}, retry_after="5")
    waits: list[float] = []
    assert _upsert(fake, waits) == ("created", 1)
    assert waits == [5.0]


def test_5xx_every_time_gives_up_after_bounded_attempts(fake):
    for _ in range(github.MAX_ATTEMPTS):
        fake.fail(503, {"message": "Service Unavailable"})
    waits: list[float] = []
    with pytest.raises(github.GitHubError) as info:
        _upsert(fake, waits)
    assert f"after {github.MAX_ATTEMPTS} attempts" in str(info.value) and "503" in str(info.value)
    assert waits == [1.0, 2.0, 4.0] and len(fake.requests) == github.MAX_ATTEMPTS


@pytest.mark.parametrize("status", [429, 403])
def test_rate_limit_with_retry_after_waits_that_long(fake, body_file, capsys, monkeypatch, slept, status):
    fake.fail(status, {"message": "You have exceeded a secondary rate limit."}, retry_after="7")
    code, out, _ = _run(fake, body_file, capsys, monkeypatch)
    assert (code, out) == (0, "created comment 1\n")
    assert slept == [7.0]


def test_spent_quota_waits_until_the_reset_time(fake):
    reset = int(time.time()) + 20
    fake.fail(403, {"message": "API rate limit exceeded"}, x_ratelimit_remaining="0", x_ratelimit_reset=str(reset))
    waits: list[float] = []
    assert _upsert(fake, waits) == ("created", 1)
    assert len(waits) == 1 and 15 <= waits[0] <= 22


def test_secondary_limit_without_headers_waits_a_minute(fake):
    fake.fail(403, {"message": "You have exceeded a secondary rate limit."})
    waits: list[float] = []
    assert _upsert(fake, waits) == ("created", 1)
    assert waits == [github.SECONDARY_LIMIT_WAIT]


def test_rate_limit_resetting_in_an_hour_fails_fast_instead_of_hanging(fake, body_file, capsys, monkeypatch, slept):
    reset = int(time.time()) + 3600
    spent = {"x_ratelimit_remaining": "0", "x_ratelimit_reset": str(reset)}
    fake.fail(403, {"message": "API rate limit exceeded for installation."}, **spent)
    code, out, err = _run(fake, body_file, capsys, monkeypatch)
    assert (code, out) == (2, "") and slept == []
    assert "rate limit exceeded" in err and "resets in" in err and err.count("\n") == 1


def test_403_forbidden_is_a_clear_error_not_retried(fake, body_file, capsys, monkeypatch, slept):
    fake.fail(403, {"message": "Resource not accessible by integration"}, x_ratelimit_remaining="4999")
    code, out, err = _run(fake, body_file, capsys, monkeypatch)
    assert (code, out) == (2, "") and slept == [] and len(fake.requests) == 1
    assert err.count("\n") == 1 and err.startswith("archaudit comment: ")
    assert "403" in err and "Resource not accessible by integration" in err and "pull-requests: write" in err


def test_bad_token_is_401_with_a_clear_message(fake, body_file, capsys, monkeypatch):
    code, out, err = _run(fake, body_file, capsys, monkeypatch, token="ghp_wrong")
    assert (code, out) == (2, "") and len(fake.requests) == 1
    assert "401" in err and "GITHUB_TOKEN" in err and "ghp_wrong" not in err


@pytest.mark.parametrize("where", [{"repo": "octo/missing"}, {"pr": 999}])
def test_unknown_repo_or_pr_is_404(fake, body_file, capsys, monkeypatch, where):
    code, out, err = _run(fake, body_file, capsys, monkeypatch, **where)
    assert (code, out) == (2, "") and "404" in err and "not found" in err and err.count("\n") == 1


def test_422_includes_githubs_message(fake, body_file, capsys, monkeypatch):
    errors = [{"message": "Body is too long (maximum is 65536 characters)"}]
    fake.fail(422, {"message": "Validation Failed", "errors": errors}, on="POST")
    code, out, err = _run(fake, body_file, capsys, monkeypatch)
    assert (code, out) == (2, "") and "422" in err
    assert "Validation Failed; Body is too long (maximum is 65536 characters)" in err


def test_missing_token_is_exit_2_unless_dry_run(fake, body_file, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert github.run(_args(fake, body_file)) == 2
    out, err = capsys.readouterr()
    assert out == "" and "GITHUB_TOKEN is not set" in err

    assert github.run(_args(fake, body_file, "--dry-run")) == 0
    out, err = capsys.readouterr()
    assert out == "<!-- archaudit -->\n## archaudit\n\nNo new gates.\n" and err == ""
    assert fake.requests == []


def test_body_from_stdin(fake, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("from a pipe\n"))
    code, out, _ = _run(fake, "-", capsys, monkeypatch)
    assert (code, out) == (0, "created comment 1\n")
    assert fake.comments[0]["body"] == "<!-- archaudit -->\nfrom a pipe\n"


def test_unreadable_body_file_is_exit_2(fake, tmp_path, capsys, monkeypatch):
    code, out, err = _run(fake, tmp_path / "nope.md", capsys, monkeypatch)
    assert (code, out) == (2, "") and "cannot read" in err and fake.requests == []


def test_oversized_body_is_cut_to_githubs_limit_and_keeps_the_marker():
    posted = github.prepare_body("x" * 100_000)
    assert len(posted) <= github.MAX_BODY
    assert posted.startswith(github.DEFAULT_MARKER) and "truncated" in posted
    tail_marker = github.prepare_body("y" * 100_000 + github.DEFAULT_MARKER)
    assert len(tail_marker) <= github.MAX_BODY and github.DEFAULT_MARKER in tail_marker


def test_pagination_link_to_another_host_is_not_followed(fake):
    fake.seed("a", "b", "c")
    fake.next_link_host = fake.url.replace("127.0.0.1", "127.0.0.2")
    with pytest.raises(github.GitHubError, match="another host"):
        _upsert(fake)
    assert len(fake.requests) == 1


def test_unreachable_api_is_retried_then_reported(fake):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    waits: list[float] = []
    with pytest.raises(github.GitHubError) as info:
        _upsert(fake, waits, api_url=f"http://127.0.0.1:{port}")
    assert "cannot reach" in str(info.value) and waits == [1.0, 2.0, 4.0]
    assert TOKEN not in str(info.value) and TOKEN not in repr(info.value)


def test_token_never_in_any_error_text(fake):
    """Even if GitHub echoed the token back, the message would not carry it."""
    fake.fail(422, {"message": f"Validation Failed for {TOKEN}"})
    with pytest.raises(github.GitHubError) as info:
        _upsert(fake)
    assert TOKEN not in str(info.value) and TOKEN not in repr(info.value) and "***" in str(info.value)


def test_bad_arguments_are_argparse_errors():
    parser = argparse.ArgumentParser()
    github.add_arguments(parser)
    for repo, pr in (("nope", "1"), ("a/b/c", "1"), ("a/b", "x"), ("a/b", "0")):
        argv = ["--repo", repo, "--pr", pr, "--body-file", "f"]
        with pytest.raises(SystemExit) as info:
            parser.parse_args(argv)
        assert info.value.code == 2


def test_in_a_real_process_403_is_one_line_and_exit_2(fake, body_file):
    """Across a process boundary: stdin body, real env var, exit code, no traceback."""
    fake.fail(403, {"message": "Resource not accessible by integration"})
    script = (
        "import argparse, sys\n"
        "from auditor.github import add_arguments, run\n"
        "p = argparse.ArgumentParser(prog='archaudit comment'); add_arguments(p)\n"
        "sys.exit(run(p.parse_args(sys.argv[1:])))\n"
    )
    argv = [sys.executable, "-c", script, "--repo", REPO, "--pr", str(PR), "--body-file", "-", "--api-url", fake.url]
    env = {**os.environ, "GITHUB_TOKEN": TOKEN}
    done = subprocess.run(argv, input="hello\n", capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "403" in done.stderr and "Traceback" not in done.stderr
    assert TOKEN not in done.stderr

    done = subprocess.run(argv, input="hello\n", capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "created comment 1\n", "")
