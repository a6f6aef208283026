"""tests/kernel_fork.py: a forked kernel behaves as a fresh ``python3`` kernel where the notebook tests can tell."""

from __future__ import annotations

import os
import time

import pytest
from jupyter_client.manager import start_new_kernel

from tests.kernel_fork import KERNEL_NAME, kernel_name


def _run(client, code: str) -> tuple[str, str | None]:
    """Execute ``code``; its printed text and the name of the error it raised, if any."""
    printed, error = [], None
    reply = client.execute_interactive(
        code,
        timeout=60,
        output_hook=lambda message: (
            printed.append(message["content"].get("text", "")) if message["msg_type"] == "stream" else None
        ),
    )
    if reply["content"]["status"] == "error":
        error = reply["content"]["ename"]
    return "".join(printed), error


def _pid(client) -> int:
    """The kernel's process id, from the execute reply (not from printed output)."""
    reply = client.execute("", user_expressions={"pid": "__import__('os').getpid()"}, reply=True, timeout=30)
    return int(reply["content"]["user_expressions"]["pid"]["data"]["text/plain"])


def _gone_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` has exited (and been reaped) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    if os.environ.get("PLANNER_FRESH_KERNELS"):
        pytest.skip("PLANNER_FRESH_KERNELS is set: the chapters run in fresh python3 kernels")
    assert kernel_name() == KERNEL_NAME
    monkeypatch.setenv("PLANNER_KERNEL_FORK_PROBE", "from the test")
    manager, client = start_new_kernel(kernel_name=KERNEL_NAME, cwd=str(tmp_path))
    yield manager, client, tmp_path
    client.stop_channels()
    if manager.is_alive():
        manager.shutdown_kernel(now=True)


def test_a_forked_kernel_runs_in_the_runs_folder_with_its_environment_and_a_fresh_namespace(kernel):
    _, client, folder = kernel
    printed, error = _run(
        client,
        "import os, sys\n"
        "print(os.getcwd(), sys.path[0], os.environ['PLANNER_KERNEL_FORK_PROBE'], 'PLANNER_KERNEL_FORK_SOCKET' in "
        "os.environ, [n for n in ('manager', 'client', 'request') if n in globals()])",
    )
    assert error is None
    assert printed.split() == [str(folder), str(folder), "from", "the", "test", "False", "[]"]
    assert _run(client, "1 / 0")[1] == "ZeroDivisionError"  # an error reaches the caller as an error


def test_an_interrupt_reaches_the_forked_kernel_and_a_shutdown_ends_it(kernel):
    manager, client, _ = kernel
    # stop_on_error=False: an interrupted cell's error must not make the kernel abort the next request.
    msg_id = client.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(60)", stop_on_error=False)
    while True:  # interrupted inside the sleep, not while the kernel is still starting the cell
        message = client.get_iopub_msg(timeout=30)
        if message["parent_header"].get("msg_id") == msg_id and "sleeping" in message["content"].get("text", ""):
            break
    manager.interrupt_kernel()
    reply = client.get_shell_msg(timeout=20)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    pid = _pid(client)
    manager.shutdown_kernel(now=False)
    assert not manager.is_alive()
    assert _gone_within(pid, 10.0), f"the forked kernel {pid} outlived its shutdown"


def test_a_killed_kernel_command_takes_its_forked_kernel_with_it(kernel):
    manager, client, _ = kernel
    pid = _pid(client)
    manager.shutdown_kernel(now=True)  # SIGKILL to the kernel command, which cannot forward it
    assert _gone_within(pid, 10.0), f"the forked kernel {pid} outlived its killed kernel command"
