"""Man pages are current and render; every example in the help really runs; completion works."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from cli_run import ROOT, kwire, pipeline

MINE = ("decode", "encode", "diff", "describe", "list")


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


def _gen_man():
    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_man
    return gen_man


def test_man_pages_are_current():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_man.py"), "--check"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_a_page_per_command():
    pages = _gen_man().pages()
    for name in MINE:
        assert f"kwire-{name}.1" in pages
        assert (ROOT / "man" / f"kwire-{name}.1").is_file()
    assert "kwire.1" in pages


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
@pytest.mark.parametrize("page", ["kwire.1"] + [f"kwire-{n}.1" for n in MINE])
def test_man_renders(page):
    env = dict(os.environ, MANWIDTH="100", MANPAGER="cat", PAGER="cat", LANG="C.UTF-8")
    r = subprocess.run(["man", "-l", str(ROOT / "man" / page)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr.lower()
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS"):
        assert section in r.stdout
    if page != "kwire.1":
        assert "EXAMPLES" in r.stdout and "--format" in r.stdout.replace("‐", "-")
    else:
        assert '_KWIRE_COMPLETE=bash_source kwire' in r.stdout


def _examples():
    gen = _gen_man()
    import click

    from kwire_cli.cli import cli
    ctx = click.Context(cli, info_name="kwire")
    out = []
    for name in MINE:
        for ex in gen.command_examples(cli.get_command(ctx, name)):
            out.append((name, ex))
    return out


EXAMPLES = _examples()


def test_every_command_has_examples():
    assert {n for n, _ in EXAMPLES} == set(MINE)


@pytest.mark.parametrize("name,example", EXAMPLES, ids=[e for _, e in EXAMPLES])
def test_examples_really_run(name, example, tmp_path):
    example = example.replace("/tmp/", f"{tmp_path}/")
    r = pipeline(example)
    assert r.code == 0, (example, r)
    assert r.out or r.out_bytes or "-o" in example.split()


@pytest.mark.parametrize("name", MINE)
def test_help_has_an_example(name):
    r = kwire(name, "--help")
    assert r.code == 0 and "Examples:" in r.out and f"kwire {name}" in r.out
    assert kwire(name, "-h").out == r.out


def test_shell_completion_through_click():
    env = {"_KWIRE_COMPLETE": "bash_source"}
    r = subprocess.run(["kwire"], capture_output=True, text=True, env=dict(os.environ, **env))
    if r.returncode != 0 or not r.stdout:  # console script not on PATH: go through python -m
        r = subprocess.run([sys.executable, "-m", "kwire_cli"], capture_output=True, text=True,
                           env=dict(os.environ, **env))
    assert "_kwire_completion" in r.stdout and "complete -o nosort -F _kwire_completion kwire" in r.stdout
    env = dict(os.environ, _KWIRE_COMPLETE="bash_complete", COMP_WORDS="kwire de", COMP_CWORD="1")
    r = subprocess.run([sys.executable, "-c", "from kwire_cli.cli import main; main()"], capture_output=True,
                       text=True, env=env)
    assert r.stdout.split() == ["plain,decode", "plain,describe"]
    env.update(COMP_WORDS="kwire decode --api Meta", COMP_CWORD="3")
    r = subprocess.run([sys.executable, "-c", "from kwire_cli.cli import main; main()"], capture_output=True,
                       text=True, env=env)
    assert r.stdout.split() == ["plain,Metadata"]


def _complete(words: str, cword: int) -> list[str]:
    env = dict(os.environ, _KWIRE_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(cword))
    r = subprocess.run([sys.executable, "-c", "from kwire_cli.cli import main; main()"], capture_output=True,
                       text=True, env=env, cwd=ROOT)
    return r.stdout.split()


def test_completion_of_at_files_versions_and_files():
    # @FILE: the path after the @ (the shell's own file completion cannot see past it)
    got = _complete("kwire decode @fixtures/hex/metadata-req", 2)
    assert got == ["plain,@fixtures/hex/metadata-request-v1.hex", "plain,@fixtures/hex/metadata-request-v12.hex"]
    assert _complete("kwire decode @fixtures/he", 2) == ["plain,@fixtures/hex/"]
    assert _complete("kwire decode --request @fixtures/hex/produce-req", 3) == \
        ["plain,@fixtures/hex/produce-request-v9.hex"]
    # a bare word: left to the shell's file completion
    assert _complete("kwire decode fixt", 2) == ["file,fixt"]
    # versions of the API the command line names
    assert _complete("kwire describe Heartbeat ", 3) == [f"plain,{v}" for v in range(5)]
    assert _complete("kwire decode --api Heartbeat --version ", 5) == [f"plain,{v}" for v in range(5)]
    assert _complete("kwire decode --version ", 3) == []  # no API named yet
    # capture files: Click's path type, completed by the shell
    assert _complete("kwire pcap fix", 2) == ["file,fix"]


def test_man_pages_carry_the_help_epilogs():
    pcap = (ROOT / "man" / "kwire-pcap.1").read_text()
    name = pcap.split(".SH NAME\n", 1)[1].split("\n", 1)[0]
    assert "  " not in name and name.startswith("kwire\\-pcap \\- Decode Kafka conversations")
    assert ".SH FILTER" in pcap and "transactional_id" in pcap.split(".SH FILTER", 1)[1]
    examples = pcap.split(".SH EXAMPLES", 1)[1].split(".SH", 1)[0]
    assert "\\-\\-filter 'topic~gzip and partition=1'" in examples  # from the epilog
    status = pcap.split(".SH EXIT STATUS", 1)[1].split(".SH", 1)[0]
    assert "a FILE that does not exist (nothing is read then)" in status
    spark = (ROOT / "man" / "kwire-spark-decode.1").read_text()
    assert "spark://10.0.0.5:7077" in spark.split(".SH EXAMPLES", 1)[1]
    assert "_kwire_summary.json" in spark.split(".SH DESCRIPTION", 1)[1].split(".SH OPTIONS", 1)[0]
    for page in (ROOT / "man").glob("*.1"):
        line = page.read_text().split(".SH NAME\n", 1)[1].split("\n", 1)[0]
        assert "  " not in line, page.name


def test_docs_cli_md_says_how_to_turn_completion_on():
    text = (ROOT / "docs" / "cli.md").read_text()
    assert 'eval "$(_KWIRE_COMPLETE=bash_source kwire)"' in text


def test_completion_of_diff_arguments_and_client_profiles():
    assert _complete("kwire diff Heartb", 2) == ["plain,Heartbeat"]            # API V1 V2: the API...
    assert _complete("kwire diff Heartbeat ", 3) == [f"plain,{v}" for v in range(5)]  # ...then its versions
    assert _complete("kwire diff Heartbeat 0 ", 4) == [f"plain,{v}" for v in range(5)]
    assert _complete("kwire diff --what-if-tagged ErrorCode @fixtures/hex/produce-req", 4) == \
        ["plain,@fixtures/hex/produce-request-v9.hex"]
    assert "plain,librdkafka" in _complete("kwire negotiate --client lib", 3)
