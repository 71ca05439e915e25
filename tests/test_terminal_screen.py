"""What a terminal shows of `kwire pcap` and `kwire dump-log` run on it: kwire under a pseudo-terminal
(stdout and stderr the same terminal, as in a shell), its bytes replayed through a terminal
emulator (pyte), the screen's lines compared with the lines the same run writes to a pipe. The
progress bar of files being read must never land in the rows."""
from __future__ import annotations

import fcntl
import math
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import threading

import pytest

from conftest import FIXTURES, ROOT

pyte = pytest.importorskip("pyte")

CAPS = FIXTURES / "captures"
WIDTH = 300


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KWIRE_NO_PROGRESS", "NO_COLOR", "COLUMNS", "LINES")}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color", **extra)
    return env


def _on_terminal(args: list[str], rows: int, stdout_pipe: bool = False) -> tuple[list[str], bytes]:
    """The screen's lines after ``kwire ARGS`` ran with a terminal for stderr (and stdout, unless
    ``stdout_pipe``: then stdout's bytes are returned apart)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, WIDTH, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "kwire_cli", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE if stdout_pipe else slave, stderr=slave, env=_env(),
                            cwd=str(ROOT))
    os.close(slave)
    data = bytearray()
    got: list[bytes] = []
    if stdout_pipe:  # read as it comes: a full pipe would stop kwire while the bar goes on redrawing
        reader = threading.Thread(target=lambda: got.append(proc.stdout.read()), daemon=True)
        reader.start()
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        assert ready, "kwire wrote nothing for 60 s"
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: every writer of the terminal closed it
            break
        if not chunk:
            break
        data += chunk
    out = b""
    if stdout_pipe:
        reader.join(60)
        out = got[0]
    assert proc.wait(60) == 0
    os.close(master)
    screen = pyte.Screen(WIDTH, rows)
    pyte.ByteStream(screen).feed(bytes(data))
    return [line.rstrip() for line in screen.display], out


def _piped(args: list[str]) -> tuple[list[str], list[str]]:
    """The lines of stdout and of stderr of ``kwire ARGS`` with both to pipes."""
    res = subprocess.run([sys.executable, "-m", "kwire_cli", *args], capture_output=True, env=_env(
        KWIRE_NO_PROGRESS="1", COLUMNS=str(WIDTH)), cwd=str(ROOT), check=True)
    return res.stdout.decode().splitlines(), res.stderr.decode().splitlines()


def _unwrapped(screen: list[str], lines: list[str]) -> list[str]:
    """The screen's lines joined back where the terminal wrapped a line longer than its width."""
    out, i = [], 0
    for line in lines:
        k = max(1, math.ceil(len(line) / WIDTH))
        out.append("".join(s.ljust(WIDTH) for s in screen[i:i + k]).rstrip())
        i += k
    assert not any(screen[i:]), screen[i:i + 3]  # nothing after the last line (no bar left behind)
    return out


@pytest.mark.parametrize("args", [
    ["pcap", str(CAPS / "confluent-kafka-consume.pcap")],
    ["pcap", *(str(CAPS / n) for n in ("kafka-python-consume.pcap", "kafka-python-produce.pcap",
                                       "confluent-kafka-produce.pcap"))],
    ["pcap", str(CAPS / "kafkajs-consume.pcap"), "--format", "jsonl"],
    ["pcap", str(CAPS / "kafkajs-produce.pcap"), "--format", "records"],
    ["dump-log", str(FIXTURES / "logs" / "kwire-produce-gzip-0")],
], ids=["table", "table-of-files", "jsonl", "records", "dump-log"])
def test_rows_on_a_terminal_are_the_rows_of_a_pipe(args):
    out, err = _piped(args)
    want = out + err  # the diagnostics after the rows (stdout is flushed first)
    assert len(out) > 5
    screen, _ = _on_terminal(args, rows=sum(max(1, math.ceil(len(x) / WIDTH)) for x in want) + 10)
    assert _unwrapped(screen, want) == [x.rstrip() for x in want]  # (a terminal keeps no trailing blanks)


def test_the_bar_still_shows_when_rows_go_to_a_pipe():
    """stdout to a file or a pipe, stderr a terminal: the bar is drawn (on stderr) and stdout holds
    the rows alone; the bar is gone from the screen at the end."""
    args = ["pcap", str(CAPS / "confluent-kafka-consume.pcap"), "--format", "jsonl"]
    screen, out = _on_terminal(args, rows=50, stdout_pipe=True)
    want, err = _piped(args)
    assert out.decode().splitlines() == want
    assert [x for x in screen if x] == err  # the bar is transient: nothing of it left on the terminal
