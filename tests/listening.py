"""A test's helper processes (a broker, a TLS terminator, a proxy): waiting for one to listen,
and stopping it."""
from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest


def wait_listening(port: int, proc: subprocess.Popen, what: str, log: Path | None = None) -> None:
    """Return once 127.0.0.1:``port`` accepts a connection; fail the test (with the end of ``log``,
    or ``proc``'s exit code) when ``proc`` exits first or 30 s pass."""
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                said = log.read_text()[-800:] if log and log.exists() else f"exit code {proc.poll()}"
                pytest.fail(f"{what} did not start: {said}")
            time.sleep(0.1)


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it is still there after 10 s; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
