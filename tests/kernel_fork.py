"""Kernels for the notebook tests, forked from a process that has already imported what the chapters import.

A papermill run in a fresh ``python3`` kernel spends about two seconds before the
chapter's first line: starting Python and ipykernel, importing numpy, pandas,
altair, ipywidgets, myst-nb and the planner, and loading the compiled simulation
kernels from numba's cache. The notebook tests make about a hundred such runs.
Here one *fork server* per test process pays that once: it imports those modules,
loads the kernels, and waits; each Jupyter kernel is a ``fork()`` of it that then
starts ipykernel on the connection file Jupyter wrote, in the run's folder and
environment, as ``python -m ipykernel_launcher -f FILE`` would. A forked kernel
shares no state with another run: it is a copy of a process that has only
imported modules and filled pure caches (nothing in the chapters depends on a
module being imported for the first time).

Jupyter launches the kernel spec's command, ``python -I tests/kernel_fork.py
kernel -f FILE``: a small process that hands its request and its standard streams
to the server, forwards the signals Jupyter sends it (an interrupt, a
termination) to the forked kernel, and exits with the kernel's exit status. When
it is killed, the server kills the kernel. ``PLANNER_FRESH_KERNELS=1`` runs every
chapter in a fresh ``python3`` kernel instead.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNEL_NAME = "planner-forked"
_SOCKET_ENV = "PLANNER_KERNEL_FORK_SOCKET"
_HEADER = struct.Struct("!I")
_LISTEN_TIMEOUT_S = 900.0
# What the chapters import besides the planner (all of it), imported once by the server; a module left out
# here is imported by the kernel that needs it.
_PRELOADED = (
    "numpy",
    "pandas",
    "yaml",
    "altair",
    "ipywidgets",
    "IPython.display",
    "myst_nb",
    "ipykernel.kernelapp",
)
_state: dict[str, object] = {}


def kernel_name() -> str:
    """The kernel spec to run chapters in: this module's, its server started on first use (``python3`` if
    ``PLANNER_FRESH_KERNELS`` is set)."""
    if os.environ.get("PLANNER_FRESH_KERNELS"):
        return "python3"
    if "name" not in _state:
        os.environ.update(forked_kernel_env(KERNEL_NAME))
        _state["name"] = KERNEL_NAME
    return KERNEL_NAME


def forked_kernel_env(spec_name: str) -> dict[str, str]:
    """Start a fork server (stopped when this process exits) and a kernel spec named ``spec_name`` that
    forks from it; return the environment a Jupyter process needs to find both.

    Named ``python3``, the spec stands in for the notebooks' own kernel in a Jupyter server started with
    this environment (its ``JUPYTER_PATH`` comes before the built-in kernel).
    """
    folder = Path(tempfile.mkdtemp(prefix="kernel-fork-"))
    path = folder / "server.sock"
    spec_dir = folder / "kernels" / spec_name
    spec_dir.mkdir(parents=True)
    spec = {
        # Run as a file (the kernel starts in the chapter's folder), isolated: it needs the standard library only.
        "argv": [sys.executable, "-I", str(Path(__file__).resolve()), "kernel", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "interrupt_mode": "signal",
        "metadata": {"debugger": False},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.kernel_fork", "serve", str(path)], cwd=root, start_new_session=True
    )
    # A few seconds once numba's cache holds the kernels; minutes when it compiles them (`make warm-kernels` first).
    deadline = time.monotonic() + _LISTEN_TIMEOUT_S
    while not path.exists():
        if server.poll() is not None:
            raise RuntimeError(f"the kernel fork server exited with status {server.returncode} before listening")
        if time.monotonic() > deadline:
            server.kill()
            raise RuntimeError(
                f"the kernel fork server did not listen within {_LISTEN_TIMEOUT_S:.0f} s "
                "(importing and loading the compiled kernels; run `make warm-kernels` first)"
            )
        time.sleep(0.02)

    def stop() -> None:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(folder, ignore_errors=True)

    atexit.register(stop)
    jupyter_path = os.pathsep.join(filter(None, [str(folder), os.environ.get("JUPYTER_PATH")]))
    return {_SOCKET_ENV: str(path), "JUPYTER_PATH": jupyter_path}


# -- the wire: a 4-byte length, then JSON ---------------------------------------------------------------------


def _send(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    payload = _HEADER.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [payload], fds)
    else:
        sock.sendall(payload)


def _receive(sock: socket.socket, with_fds: bool = False) -> tuple[dict | None, list[int]]:
    fds: list[int] = []
    if with_fds:
        data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
    else:
        data = sock.recv(1 << 20)
    if not data:
        return None, fds
    while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack_from(data)[0]:
        more = sock.recv(1 << 20)
        if not more:
            return None, fds
        data += more
    (length,) = _HEADER.unpack_from(data)
    return json.loads(data[_HEADER.size : _HEADER.size + length]), fds


# -- the kernel command Jupyter launches ----------------------------------------------------------------------


def _kernel_command(argv: list[str]) -> int:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ[_SOCKET_ENV])
    _send(sock, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}, [0, 1, 2])
    reply, _ = _receive(sock)
    if reply is None:
        return 1
    pid = int(reply["pid"])

    def forward(signum, _frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, forward)
    while True:
        try:
            reply, _ = _receive(sock)
        except InterruptedError:
            continue
        if reply is None:
            return 1
        return int(reply["status"])


# -- the server -----------------------------------------------------------------------------------------------


def _serve(path: str) -> dict | None:
    """Import, listen, fork a kernel per request; in a forked child, return its request."""
    import importlib
    import pkgutil
    import selectors

    import planner

    for name in _PRELOADED:
        importlib.import_module(name)
    for module in pkgutil.walk_packages(planner.__path__, "planner."):
        if not module.name.endswith(".__main__"):  # that one runs the command line
            importlib.import_module(module.name)
    # The compiled kernels the chapters call, loaded from numba's cache once (half a second per process).
    from tests.warm_kernels import engine_kernels, lockstep_kernels

    engine_kernels()
    lockstep_kernels()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    partial = path + ".partial"
    listener.bind(partial)
    listener.listen(16)
    os.replace(partial, path)  # the socket appears once it accepts
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listen")
    selector.register(wake_read, selectors.EVENT_READ, "wake")
    kernels: dict[int, socket.socket] = {}  # kernel pid -> its kernel command's connection
    parent = os.getppid()
    while not stopping and os.getppid() == parent:  # a test process killed outright leaves no server behind
        for key, _ in selector.select(timeout=1.0):
            if key.data == "listen":
                connection, _ = listener.accept()
                request, fds = _receive(connection, with_fds=True)
                if request is None:
                    connection.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    for signum in (signal.SIGCHLD, signal.SIGTERM):
                        signal.signal(signum, signal.SIG_DFL)
                    selector.close()
                    for open_socket in [listener, connection, *kernels.values()]:
                        open_socket.close()
                    os.close(wake_read)
                    os.close(wake_write)
                    for target, fd in enumerate(fds):
                        os.dup2(fd, target)
                        os.close(fd)
                    return request
                for fd in fds:
                    os.close(fd)
                kernels[pid] = connection
                selector.register(connection, selectors.EVENT_READ, pid)
                _send(connection, {"pid": pid})
            elif key.data == "wake":
                os.read(wake_read, 4096)
                while kernels:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                    if pid == 0:
                        break
                    connection = kernels.pop(pid, None)
                    if connection is not None:
                        selector.unregister(connection)
                        try:
                            _send(connection, {"status": os.waitstatus_to_exitcode(status)})
                        except OSError:
                            pass
                        connection.close()
            else:  # the kernel command's connection closed: it was killed, so its kernel goes too
                pid = key.data
                if key.fileobj.recv(1) == b"":
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
    for pid in kernels:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return None


def _run_kernel(request: dict) -> None:
    """In the forked child: become ``python -m ipykernel_launcher`` run with the request's folder, environment and
    arguments."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.pop(_SOCKET_ENV, None)
    sys.path[0] = request["cwd"]  # `python -m` puts the working folder first
    sys.argv = [sys.argv[0], *request["argv"]]
    from ipykernel.kernelapp import IPKernelApp

    # The app read JPY_PARENT_PID when the server imported it, before Jupyter set it for this kernel.
    IPKernelApp.launch_instance(argv=request["argv"], parent_handle=int(os.environ.get("JPY_PARENT_PID") or 0))


def main(argv: list[str]) -> int:
    """``serve SOCKET`` runs the fork server; ``kernel -f FILE`` is the kernel spec's command."""
    command, *rest = argv
    if command == "kernel":
        return _kernel_command(rest)
    if command == "serve":
        request = _serve(rest[0])
        if request is None:
            return 0
        status = 0
        try:
            _run_kernel(request)
        except SystemExit as error:
            status = error.code if isinstance(error.code, int) else 1
        # Exit handlers as at any exit, then no teardown of the server's thousands of modules (half a second).
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(status)
    raise SystemExit(f"usage: python -m tests.kernel_fork serve SOCKET | kernel -f CONNECTION_FILE (got {argv})")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
