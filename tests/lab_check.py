"""Open every chapter in a real JupyterLab, run all its cells, and move each explorer's first slider.

Run by ``make test-lab``. It starts JupyterLab headless on 127.0.0.1 with a
random token passed through the environment (the kept server log has it
replaced), works on a copy of the notebooks so autosave cannot write outputs
into ``book/``, drives headless Chromium with Playwright, and stops the
server by its PID. Two chapters are checked at once (``LAB_WORKERS``), each
in a worker process with its own Chromium; a worker stops only its own
chapter's kernel. A worker's first chapter opens in a workspace of its own;
each later one replaces the last one's tab in the loaded app (the app is not
loaded again). The kernels are python3 kernels forked from a process that
has already imported what the chapters import (``tests/kernel_fork.py``;
``PLANNER_FRESH_KERNELS=1`` starts each afresh). For each chapter it checks
that every code cell ran without an error output, and that moving one
ipywidgets slider of the explorer changes the explorer's output. Exits 1
naming each failure.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = REPO_ROOT / "_build" / "lab"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RUN_TIMEOUT_S = 240.0
# A chapter's whole budget: open, run, move a slider. Past it the watchdog closes the browser,
# which fails the call Playwright is blocked in (page.evaluate has no timeout of its own).
CHAPTER_BUDGET_S = RUN_TIMEOUT_S + 180.0


def chapters() -> list[str]:
    """Notebook chapters in the order of the table of contents.

    The Reference part's pages are tables without explorers; nbval and the
    strict build run them.
    """
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    files = [entry["file"] for part in toc["parts"] if part.get("caption") != "Reference" for entry in part["chapters"]]
    # LAB_CHAPTERS=lab,forecasts checks only those (while working on a chapter).
    only = {name.strip() for name in os.environ.get("LAB_CHAPTERS", "").split(",") if name.strip()}
    return [f for f in files if (REPO_ROOT / f"{f}.ipynb").exists() and (not only or Path(f).name in only)]


def longest_first(names: list[str], seconds: dict[str, float | None]) -> list[str]:
    """``names`` with the longest build runs first (unknown ones after, in their order), so no
    worker starts a long chapter when the others are done."""
    return sorted(names, key=lambda name: -(seconds.get(name) or 0.0))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_server(port: int, token: str, process: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/status", headers={"Authorization": f"token {token}"})
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with status {process.returncode} before it answered")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"JupyterLab did not answer on 127.0.0.1:{port} within {timeout_s:.0f} s")


# Runs in the page: the open notebook's cells, as the model holds them.
_CELLS_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.content.model) return null;
  const cells = [];
  for (const cell of panel.content.model.cells) {
    const json = cell.toJSON();
    cells.push({type: json.cell_type, count: json.execution_count ?? null,
                errors: (json.outputs || []).filter(o => o.output_type === "error")
                                             .map(o => o.ename + ": " + o.evalue)});
  }
  return {cells, busy: panel.sessionContext.session?.kernel?.status !== "idle"};
}"""


# JupyterLab commands return a promise that settles when the command is done: run-all-cells
# only when every cell has run, which never happens if the kernel was not ready to take the
# cells. Start the command and return at once; the caller polls the notebook's state.
_FIRE_JS = """(command) => {
  window.jupyterapp.commands.execute(command).catch(() => {});
  return true;
}"""


_OPEN_IN_PLACE_JS = """(path) => {
  const app = window.jupyterapp;
  for (const widget of Array.from(app.shell.widgets("main"))) widget.dispose();
  app.commands.execute("docmanager:open", {path}).catch(() => {});
  return true;
}"""
# The chapter's notebook is the current tab and its kernel is idle.
_OPENED_JS = """(path) => {
  const widget = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = widget && widget.context && widget.context.path === path && widget.sessionContext
    && widget.sessionContext.session && widget.sessionContext.session.kernel;
  return Boolean(kernel && kernel.status === "idle");
}"""


def _fire(page, command: str) -> None:
    page.evaluate(_FIRE_JS, command)


class Watchdog:
    """Kills this process's Chromium processes if a chapter overruns its budget.

    Playwright's page.evaluate waits as long as the page's promise does; killing the
    browser makes that call raise, so a hung page costs one chapter, not the whole run.
    """

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.fired = False
        self._timer: threading.Timer | None = None

    def _kill_browser(self) -> None:
        self.fired = True
        for child in psutil.Process().children(recursive=True):
            try:
                if "chrom" in child.name().lower():
                    child.kill()
            except psutil.Error:
                pass

    def __enter__(self) -> Watchdog:
        self.fired = False
        self._timer = threading.Timer(self.budget_s, self._kill_browser)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc_info) -> None:
        assert self._timer is not None
        self._timer.cancel()


def check_chapter(page, base_url: str, chapter: str, phases: dict[str, float]) -> list[str]:
    """Open one chapter, run it, move a slider; return what went wrong. Each phase's seconds go into ``phases``."""
    problems: list[str] = []
    phase_started = time.monotonic()
    path = f"{chapter}.ipynb"
    if page.evaluate("() => Boolean(window.plannerChapterOpened)"):
        # This page has opened a chapter: the last chapter's tab is disposed (its kernel is already shut
        # down, and disposing asks nothing) and this chapter opened in its place, without loading the app.
        page.evaluate(_OPEN_IN_PLACE_JS, path)
    else:
        # A workspace of its own, so JupyterLab restores no earlier tab (nor starts its kernel).
        page.goto(f"{base_url}/lab/workspaces/{Path(chapter).name}/tree/{path}")
    page.wait_for_function(_OPENED_JS, arg=path, timeout=120_000)
    page.evaluate("() => { window.plannerChapterOpened = true; }")
    phases["open"] = time.monotonic() - phase_started
    phase_started = time.monotonic()
    _fire(page, "notebook:run-all-cells")
    issued = time.monotonic()
    deadline = issued + RUN_TIMEOUT_S
    state = None
    while time.monotonic() < deadline:
        time.sleep(1.0)
        state = page.evaluate(_CELLS_JS)
        code = [c for c in state["cells"] if c["type"] == "code"] if state else []
        if not code or state["busy"]:
            continue
        if all(c["count"] is not None for c in code) or any(c["errors"] for c in code):
            break  # done, or stopped at an error (the cells after it never run)
        if all(c["count"] is None for c in code) and time.monotonic() - issued > 15.0:
            _fire(page, "notebook:run-all-cells")  # asked before the notebook was ready to run: ask again
            issued = time.monotonic()
    else:
        return [f"{chapter}: cells still running after {RUN_TIMEOUT_S:.0f} s"]
    phases["run"] = time.monotonic() - phase_started
    phase_started = time.monotonic()
    for index, cell in enumerate(state["cells"]):
        for error in cell["errors"]:
            problems.append(f"{chapter}: cell {index} raised {error}")
    # Only this chapter's panel (a restored layout may hold other tabs, hidden).
    panel = "#" + page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
    sliders = page.locator(f"{panel} .jp-OutputArea .widget-slider")
    if sliders.count() == 0:
        problems.append(f"{chapter}: no ipywidgets slider in the explorer")
        return problems
    summary = page.locator(f"{panel} .jp-OutputArea .widget-html-content").last
    before = summary.inner_text() if summary.count() else ""
    handle = sliders.first.locator(".noUi-handle").first
    # To one end of its range, then the other: a small move can leave a stepwise result unchanged.
    for key in ("End", "Home"):
        handle.focus()
        handle.press(key)
        try:
            page.wait_for_function(
                "([panel, before]) => { const el = [...document.querySelectorAll(panel + "
                "' .jp-OutputArea .widget-html-content')].pop(); return el && el.innerText !== before; }",
                arg=[panel, before],
                timeout=30_000,
            )
            phases["slider"] = time.monotonic() - phase_started
            return problems
        except Exception:
            continue
    problems.append(f"{chapter}: moving the explorer's first slider to either end did not change its output")
    return problems


def _server_api(base_url: str, token: str, path: str, method: str = "GET"):
    request = urllib.request.Request(
        f"{base_url}/api/{path}", method=method, headers={"Authorization": f"token {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


def chapter_kernel_ids(sessions: list[dict], chapter: str) -> set[str]:
    """The kernels the server runs for ``chapter``'s notebook, from ``/api/sessions``."""
    path = f"{chapter}.ipynb"
    return {s["kernel"]["id"] for s in sessions if s.get("path") == path and s.get("kernel")}


def _shutdown_kernels(base_url: str, token: str, kernel_ids: set[str], grace_s: float = 0.0) -> None:
    """Stop the kernels named (one chapter's), and no other: another worker's chapter may be running.

    Waits up to ``grace_s`` for the page's own shutdown before deleting what is left.
    """
    deadline = time.monotonic() + grace_s

    def alive() -> set[str]:
        return kernel_ids & {kernel["id"] for kernel in _server_api(base_url, token, "kernels")}

    while alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    for kernel_id in alive():
        try:
            _server_api(base_url, token, f"kernels/{kernel_id}", method="DELETE")
        except OSError:
            pass  # already gone


class BrowserSession:
    """One Chromium logged in to JupyterLab; replaced when the watchdog kills it."""

    def __init__(self, playwright, chromium: str, base_url: str, token: str) -> None:
        self.playwright, self.chromium, self.base_url, self.token = playwright, chromium, base_url, token
        self.browser = None
        self.page = None

    def _open(self) -> None:
        self.browser = self.playwright.chromium.launch(executable_path=self.chromium, args=CHROMIUM_ARGS)
        self.page = self.browser.new_page(viewport={"width": 1400, "height": 1000})
        # Logs in once per browser; the token stays in this process and the cookie jar.
        self.page.goto(f"{self.base_url}/lab?token={self.token}")

    def check(self, chapter: str, phases: dict[str, float], kernel_ids: set[str]) -> list[str] | None:
        """The chapter's problems, or None if the watchdog had to kill the browser.

        The chapter's kernels are added to ``kernel_ids`` as soon as it has one.
        """
        with Watchdog(CHAPTER_BUDGET_S) as watchdog:
            try:
                if self.page is None:
                    self._open()
                found = check_chapter(self.page, self.base_url, chapter, phases)
                kernel_ids |= self.kernels_of(chapter)
                # The notebook's own menu command, so the page shows no dead-kernel dialog.
                _fire(self.page, "kernelmenu:shutdown")
                return found
            except Exception:
                if not watchdog.fired:
                    raise
        self.close()
        kernel_ids |= self.kernels_of(chapter)
        return None

    def kernels_of(self, chapter: str) -> set[str]:
        return chapter_kernel_ids(_server_api(self.base_url, self.token, "sessions"), chapter)

    def close(self) -> None:
        if self.browser is not None:
            try:
                self.browser.close()
            except Exception:
                pass  # killed by the watchdog
        self.browser = self.page = None


def check_chapters(base_url: str, token: str, chromium: str, todo, results) -> None:
    """One worker: takes chapters from ``todo`` until it yields None, in a Chromium of its own.

    Puts ``(chapter, problems)`` on ``results`` for each, and prints its line as it finishes.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        session = BrowserSession(playwright, chromium, base_url, token)
        for name in iter(todo.get, None):
            chapter_started = time.monotonic()
            phases: dict[str, float] = {}
            kernel_ids: set[str] = set()
            try:
                found = session.check(name, phases, kernel_ids)
                if found is None:
                    # The watchdog closed a hung page: a fresh browser, one more try.
                    print(f"lab check: {name}: no answer within {CHAPTER_BUDGET_S:.0f} s; retrying once", flush=True)
                    _shutdown_kernels(base_url, token, kernel_ids)
                    found = session.check(name, phases, kernel_ids)
                # A killed page shuts nothing down; a live one was asked to.
                shutdown_started = time.monotonic()
                _shutdown_kernels(base_url, token, kernel_ids, grace_s=0.0 if found is None else 30.0)
                phases["shutdown"] = time.monotonic() - shutdown_started
                if found is None:
                    found = [f"{name}: the page did not answer within {CHAPTER_BUDGET_S:.0f} s, twice"]
            except Exception as error:  # one chapter's failure is reported, and the others still run
                found = [f"{name}: the check failed: {type(error).__name__}: {error}"]
            took_s = time.monotonic() - chapter_started
            phase_text = ", ".join(f"{phase} {seconds:.0f}" for phase, seconds in phases.items())
            result = "ok" if not found else f"{len(found)} problem(s)"
            print(f"lab check: {name}: {result} ({took_s:.0f} s: {phase_text})", flush=True)
            results.put((name, found))
        session.close()


def workers() -> int:
    """Chapters checked at once (``LAB_WORKERS``, default 2): one kernel runs while the other page renders."""
    text = os.environ.get("LAB_WORKERS", "2")
    try:
        count = int(text)
    except ValueError:
        raise SystemExit(f"lab check: LAB_WORKERS={text!r}: expected a whole number of chapters at once") from None
    if count < 1:
        raise SystemExit(f"lab check: LAB_WORKERS={count}: expected at least 1")
    return count


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("lab check: chromium not found (install Debian's chromium package)", file=sys.stderr)
        return 1
    from tests.execution_cache import execution_seconds
    from tests.kernel_fork import forked_kernel_env

    names = chapters()
    order = longest_first(names, {name: execution_seconds(REPO_ROOT / f"{name}.ipynb") for name in names})
    n_workers = min(workers(), max(len(names), 1))
    token = secrets.token_hex(24)
    port = _free_port()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="planner-lab-") as work:
        root = Path(work) / "root"
        # The whole book folder (chapters read pages beside them, such as lint_rules.md), without
        # the vendored scripts; the notebooks are copies, so autosave cannot write into book/.
        shutil.copytree(
            REPO_ROOT / "book",
            root / "book",
            ignore=shutil.ignore_patterns("_vendor", "_build", ".ipynb_checkpoints", "__pycache__"),
        )
        os.symlink(REPO_ROOT / "data", root / "data")
        raw_log = Path(work) / "server.log"
        # The chapters' python3 kernels are forked from a process that has imported what they import
        # (tests/kernel_fork.py), unless PLANNER_FRESH_KERNELS is set.
        forked = {} if os.environ.get("PLANNER_FRESH_KERNELS") else forked_kernel_env("python3")
        env = dict(
            os.environ,
            **forked,
            JUPYTER_TOKEN=token,
            JUPYTER_CONFIG_DIR=str(Path(work) / "config"),
            JUPYTERLAB_SETTINGS_DIR=str(Path(work) / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(Path(work) / "workspaces"),
        )
        command = [
            str(Path(sys.executable).with_name("jupyter-lab")),
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.port_retries=0",
        ]
        if os.geteuid() == 0:
            command.append("--allow-root")
        with raw_log.open("w") as log:
            server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        found_by_chapter: dict[str, list[str]] = {}
        started = time.monotonic()
        try:
            _wait_for_server(port, token, server)
            base_url = f"http://127.0.0.1:{port}"
            # Processes, not threads: Playwright's sync API holds one event loop per thread, and each
            # worker's watchdog kills only its own Chromium.
            context = multiprocessing.get_context("spawn")
            todo, results = context.Queue(), context.Queue()
            for name in order:
                todo.put(name)
            for _ in range(n_workers):
                todo.put(None)
            pool = [
                context.Process(target=check_chapters, args=(base_url, token, chromium, todo, results))
                for _ in range(n_workers)
            ]
            for process in pool:
                process.start()
            while len(found_by_chapter) < len(names):
                try:
                    name, found = results.get(timeout=5.0)
                    found_by_chapter[name] = found
                except queue.Empty:
                    if not any(process.is_alive() for process in pool):
                        break
            for process in pool:
                process.join(timeout=60)
                if process.is_alive():
                    process.kill()
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
            kept = raw_log.read_text(errors="replace").replace(token, "<token>")
            (LOG_DIR / "server.log").write_text(kept)
    problems = [problem for name in names for problem in found_by_chapter.get(name, [f"{name}: never checked"])]
    for problem in problems:
        print(problem, file=sys.stderr)
    elapsed = time.monotonic() - started
    if problems:
        print(f"lab check: {len(problems)} problem(s) in {len(names)} chapters ({elapsed:.0f} s)", file=sys.stderr)
        return 1
    print(
        f"lab check: {len(names)} chapters ran in JupyterLab, {n_workers} at a time,"
        f" and their explorers responded ({elapsed:.0f} s)"
    )
    print(json.dumps({"chapters": names, "workers": n_workers, "seconds": round(elapsed)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
