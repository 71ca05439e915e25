"""A process keeps the memory it frees for reuse (kwire_cli/memory, _arenas.c; the proxy's decoding
process, spark-decode's Python workers): building and dropping a frame's tree again and again maps
no fresh object arenas, and large blocks freed are used again, not mapped afresh."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

CODE = """
from kwire_cli import memory
if not memory.keep_arenas(16):
    print("not built")
    raise SystemExit(0)
from kwire_cli.memory import _arenas
def frame():  # a Produce request's tree: 20,000 records
    return [{"Offset": i, "Key": None, "Value": "x" * 100, "Headers": []} for i in range(20000)]
for _ in range(3):
    t = frame()
    del t
kept, reused, mapped = _arenas.stats()
for _ in range(20):
    t = frame()
    del t
kept2, reused2, mapped2 = _arenas.stats()
print(kept, reused, mapped, kept2, reused2, mapped2)
assert 0 < kept2 <= 16
assert reused2 - reused >= 20 * 3                # each tree's arenas came from the kept ones
assert mapped2 - mapped <= 2, (mapped, mapped2)  # none fresh (give or take the interpreter's own)
_arenas.keep(0)  # fewer kept: the rest given back
assert _arenas.stats()[0] == 0
"""


def test_a_process_can_keep_the_arenas_they_free_for_reuse():
    env = dict(os.environ, KWIRE_NO_SPEEDUPS="0")
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    if r.stdout.strip() == "not built":
        pytest.skip("kwire_cli/memory/_arenas.c is not built")
    print(r.stdout)


def test_keep_arenas_does_nothing_with_the_speedups_off():
    env = dict(os.environ, KWIRE_NO_SPEEDUPS="1")
    r = subprocess.run([sys.executable, "-c", "from kwire_cli import memory; print(memory.keep_arenas())"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


MALLOC = """
import resource
from kwire_cli import memory
if not memory.keep_malloc():
    print("not built")
    raise SystemExit(0)
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
blocks = [bytearray(4 << 20) for _ in range(4)]  # the peak: 16 MiB of large blocks
del blocks
before = faults()
for _ in range(50):  # 50 x 4 MiB written into blocks freed before: no fresh pages
    b = bytearray(4 << 20)
    del b
print(faults() - before)
assert faults() - before < 200, faults() - before  # a fresh 4 MiB block is 1,024 pages
"""


def test_keep_malloc_reuses_large_blocks_instead_of_mapping_them_again():
    env = dict(os.environ, KWIRE_NO_SPEEDUPS="0")
    r = subprocess.run([sys.executable, "-c", MALLOC], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    if r.stdout.strip() == "not built":
        pytest.skip("kwire_cli/memory/_arenas.c is not built")


CHUNKS = """
import resource
from kwire_cli import memory
if not memory.keep_malloc(mmap=4 << 20, trim=32 << 20, top_pad=None):  # the proxy's forwarding process
    print("not built")
    raise SystemExit(0)
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
held = [bytes(256 << 10) for _ in range(8)]  # socket chunks of 256 KiB, freed as they are forwarded
del held
before = faults()
for _ in range(400):  # 100 MiB more through blocks freed before: no fresh pages
    held = [bytes(256 << 10), bytes(256 << 10)]
    del held
assert faults() - before < 200, faults() - before  # a fresh 256 KiB block is 64 pages
print(faults() - before)
"""


def test_keep_malloc_with_the_proxys_thresholds_reuses_socket_sized_chunks():
    r = subprocess.run([sys.executable, "-c", CHUNKS], capture_output=True, text=True,
                       env=dict(os.environ, KWIRE_NO_SPEEDUPS="0"), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    if r.stdout.strip() == "not built":
        pytest.skip("kwire_cli/memory/_arenas.c is not built")
