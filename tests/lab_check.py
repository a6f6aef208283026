"""Open every chapter in a real JupyterLab, run all its cells, and move each explorer's first slider.

Run by ``make test-lab``. It starts JupyterLab headless on 127.0.0.1 with a
random token passed through the environment (the kept server log has it
replaced), works on a copy of the notebooks so autosave cannot write outputs
into ``book/``, drives headless Chromium with Playwright, and stops the
server by its PID. For each chapter it checks that every code cell ran
without an error output, and that moving one ipywidgets slider of the
explorer changes the explorer's output. Exits 1 naming each failure.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = REPO_ROOT / "_build" / "lab"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
RUN_TIMEOUT_S = 240.0


def chapters() -> list[str]:
    """Notebook chapters in the order of the table of contents.

    The Reference part's pages are tables without explorers; nbval and the
    strict build run them.
    """
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    files = [entry["file"] for part in toc["parts"] if part.get("caption") != "Reference"
             for entry in part["chapters"]]
    return [f for f in files if (REPO_ROOT / f"{f}.ipynb").exists()]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_server(port: int, token: str, process: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/status",
                                     headers={"Authorization": f"token {token}"})
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


def check_chapter(page, base_url: str, chapter: str) -> list[str]:
    """Open one chapter, run it, move a slider; return what went wrong."""
    problems: list[str] = []
    page.goto(f"{base_url}/lab/tree/{chapter}.ipynb")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                           " && window.jupyterapp.shell.currentWidget.sessionContext"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
                           timeout=120_000)
    run_all = "() => window.jupyterapp.commands.execute('notebook:run-all-cells')"
    page.evaluate(run_all)
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
            page.evaluate(run_all)  # asked before the notebook was ready to run: ask again
            issued = time.monotonic()
    else:
        return [f"{chapter}: cells still running after {RUN_TIMEOUT_S:.0f} s"]
    for index, cell in enumerate(state["cells"]):
        for error in cell["errors"]:
            problems.append(f"{chapter}: cell {index} raised {error}")
    # Only this chapter's panel: JupyterLab keeps earlier chapters' tabs (hidden) in the page.
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
                arg=[panel, before], timeout=30_000)
            return problems
        except Exception:
            continue
    problems.append(f"{chapter}: moving the explorer's first slider to either end did not change its output")
    return problems


def main() -> int:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("lab check: chromium not found (install Debian's chromium package)", file=sys.stderr)
        return 1
    names = chapters()
    token = secrets.token_hex(24)
    port = _free_port()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="planner-lab-") as work:
        root = Path(work) / "root"
        # The whole book folder (chapters read pages beside them, such as lint_rules.md), without
        # the vendored scripts; the notebooks are copies, so autosave cannot write into book/.
        shutil.copytree(REPO_ROOT / "book", root / "book",
                        ignore=shutil.ignore_patterns("_vendor", "_build", ".ipynb_checkpoints", "__pycache__"))
        os.symlink(REPO_ROOT / "data", root / "data")
        raw_log = Path(work) / "server.log"
        env = dict(os.environ, JUPYTER_TOKEN=token, JUPYTER_CONFIG_DIR=str(Path(work) / "config"),
                   JUPYTERLAB_SETTINGS_DIR=str(Path(work) / "settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(Path(work) / "workspaces"))
        command = [str(Path(sys.executable).with_name("jupyter-lab")), "--no-browser", "--ip=127.0.0.1",
                   f"--port={port}", f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
                   "--ServerApp.port_retries=0"]
        if os.geteuid() == 0:
            command.append("--allow-root")
        with raw_log.open("w") as log:
            server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True)
        problems: list[str] = []
        started = time.monotonic()
        try:
            _wait_for_server(port, token, server)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                # Logs in once; the token stays in this process and the cookie jar.
                page.goto(f"http://127.0.0.1:{port}/lab?token={token}")
                for name in names:
                    found = check_chapter(page, f"http://127.0.0.1:{port}", name)
                    print(f"lab check: {name}: {'ok' if not found else f'{len(found)} problem(s)'}")
                    problems += found
                    page.evaluate("() => window.jupyterapp.commands.execute('kernelmenu:shutdown')")
                browser.close()
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
            kept = raw_log.read_text(errors="replace").replace(token, "<token>")
            (LOG_DIR / "server.log").write_text(kept)
    for problem in problems:
        print(problem, file=sys.stderr)
    elapsed = time.monotonic() - started
    if problems:
        print(f"lab check: {len(problems)} problem(s) in {len(names)} chapters ({elapsed:.0f} s)", file=sys.stderr)
        return 1
    print(f"lab check: {len(names)} chapters ran in JupyterLab and their explorers responded ({elapsed:.0f} s)")
    print(json.dumps({"chapters": names, "seconds": round(elapsed)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
