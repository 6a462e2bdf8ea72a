"""Progress of long command-line work: a bar on stderr when it is a terminal, else nothing."""

from __future__ import annotations

import io
import json
import sys
import time

from inferlab.app import cli_progress
from inferlab.app.cli import main
from inferlab.app.cli_progress import CliProgress


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_stream_that_is_not_a_terminal_gets_nothing():
    stream = io.StringIO()
    with CliProgress("run x", stream=stream, delay_s=0, tick_s=0.01) as progress:
        progress(0.5, "half")
        time.sleep(0.1)
    assert not progress.enabled and stream.getvalue() == ""


def test_a_terminal_gets_a_bar_with_the_fraction_and_message_then_a_clean_line():
    stream = FakeTerminal()
    with CliProgress("run x", stream=stream, delay_s=0, tick_s=0.01) as progress:
        progress(0.5, "5 of 10 requests")
        time.sleep(0.2)
    drawn = stream.getvalue()
    assert "run x:  50%|" in drawn and "5 of 10 requests" in drawn
    assert drawn.endswith("\r")  # the bar's line is cleared for what the command prints next


def test_work_that_reports_no_fraction_still_shows_it_is_running():
    stream = FakeTerminal()
    with CliProgress("bench x", stream=stream, delay_s=0, tick_s=0.01) as progress:
        progress(None, "loading")
        time.sleep(0.2)
    assert "bench x: 00:00, loading" in stream.getvalue()


def test_quick_work_draws_nothing_even_on_a_terminal():
    stream = FakeTerminal()
    with CliProgress("run x", stream=stream, delay_s=5) as progress:
        progress(1.0, "done")
    assert stream.getvalue() == ""


def test_run_json_without_a_terminal_leaves_stderr_empty_and_stdout_json(capsys, tmp_path):
    assert main(["run", "batching", "--requests", "30", "--snapshot", str(tmp_path / "b.json"),
                 "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["metrics"]["completed"] == 30 and err == ""


def test_run_json_on_a_terminal_draws_the_bar_there_and_stdout_stays_json(
        capsys, tmp_path, monkeypatch):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(cli_progress, "DELAY_S", 0)
    assert main(["run", "batching", "--requests", "30", "--snapshot", str(tmp_path / "b.json"),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["completed"] == 30
    assert "run batching: " in terminal.getvalue()


def test_bench_json_on_a_terminal_draws_the_bar_there_and_stdout_stays_json(
        capsys, monkeypatch):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(cli_progress, "DELAY_S", 0)
    assert main(["bench", "mcu", "--json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), dict)
    assert "bench mcu: " in terminal.getvalue()
