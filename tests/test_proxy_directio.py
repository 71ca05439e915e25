"""--write-pcap past the page cache (kwire_cli/proxy/directio.py): the file holds exactly the bytes
given, whatever the sizes and wherever the writer catches up; the pcap is byte for byte the one the
ordinary writes made."""
from __future__ import annotations

import errno
import io
import os
import random
import sys

import pytest

from kwire_cli.proxy import directio, pcapout

pytestmark = pytest.mark.skipif(not hasattr(os, "O_DIRECT") or not sys.platform.startswith("linux"),
                                reason="O_DIRECT through /proc/self/fd is Linux's")


def _appender(path, head: bytes = b"") -> directio.DirectAppender:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, head)
    app = directio.open_direct(fd)
    if app is None:
        os.close(fd)
        pytest.skip("this file system takes no O_DIRECT")
    return app


def test_every_byte_given_is_in_the_file_and_nothing_more_at_each_sync(tmp_path):
    rng = random.Random(3)
    path = tmp_path / "f"
    head = b"H" * 24  # a pcap header written before, the ordinary way
    app = _appender(path, head)
    want = bytearray(head)
    sizes = [0, 1, 7, 4095, 4096, 4097, 65000, directio.SIZE - 1, directio.SIZE, directio.SIZE + 5, 3 * directio.SIZE]
    for step in range(60):
        pieces = [rng.randbytes(rng.choice(sizes)) for _ in range(rng.randrange(1, 4))]
        pieces = [memoryview(p) if rng.random() < 0.5 else p for p in pieces]
        assert app.write(pieces) == sum(len(p) for p in pieces)
        want += b"".join(pieces)
        assert app.end == len(want)
        if step % 3 != 1:  # (between syncs the file may lag, never hold anything else)
            app.sync()
            assert path.stat().st_size == len(want)
            assert path.read_bytes() == want
    assert app.direct  # the file system took the writes past the page cache
    app.sync()
    app.close()
    os.close(app.fd)
    assert path.read_bytes() == want


def test_a_file_system_that_refuses_the_direct_write_is_written_the_ordinary_way(tmp_path, monkeypatch):
    path = tmp_path / "f"
    app = _appender(path, b"x" * 10)
    real = os.pwrite

    def pwrite(fd, data, offset):
        if fd == app.dfd:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset)
    monkeypatch.setattr(directio.os, "pwrite", pwrite)
    data = random.Random(1).randbytes(directio.SIZE * 2 + 100)
    app.write([data])
    app.sync()
    assert not app.direct
    assert path.read_bytes() == b"x" * 10 + data
    app.close()
    os.close(app.fd)


def _capture(f, monkeypatch) -> pcapout.PcapOut:
    """The same conversations through a PcapOut on ``f`` (the clock fixed: the same bytes each time)."""
    clock = iter(range(10_000))
    monkeypatch.setattr(pcapout.time, "time", lambda: 1_700_000_000 + next(clock) / 1000)
    rng = random.Random(5)
    out = pcapout.PcapOut(f)
    for ends in ((("127.0.0.1", 40000), ("127.0.0.1", 9092)), (("::1", 40001), ("::1", 9092))):
        c = out.connection(*ends)
        for _ in range(40):
            c.data(rng.randrange(2), rng.randbytes(rng.choice((1, 100, 4096, 70001, 300_000))))
        c.close()
    out.close()
    return out


def test_the_pcap_is_byte_for_byte_the_one_written_without_o_direct(tmp_path, monkeypatch):
    plain = io.BytesIO()
    _capture(plain, monkeypatch)
    path = tmp_path / "p.pcap"
    with pcapout.open_pcap(str(path)) as f:
        out = _capture(f, monkeypatch)
    if out._direct is None:
        pytest.skip("this file system takes no O_DIRECT")
    assert out._direct.direct and out.error is None
    assert path.read_bytes() == plain.getvalue()

