"""`inferlab run step` headless: its summary lists every op's name, time, FLOPs and bytes and
the split; bad options are named by their flag."""

from __future__ import annotations

import argparse
import math

import pytest

from inferlab.engines.labs.step.run import add_arguments, run
from inferlab.engines.trace.recorder import TraceRecorder


def _args(*argv):
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def test_summary_lists_ops_and_split():
    section, summary = run(_args("--batch", "2", "--context", "8", "--execution", "native",
                                 "--repeats", "1", "--threads", "1"), TraceRecorder())
    (native,) = summary["executions"]
    assert native["execution"] == "native" and native["matches_eager"]
    assert math.fsum([native["at_roof_s"], native["inside_ops_s"], native["between_ops_s"]]) \
        == pytest.approx(native["step_s"], abs=1e-12)
    assert {"name", "time_s", "flops", "bytes"} <= set(native["ops"][0])
    assert section["metrics"]["executions"]["native"]["step_s"] == native["step_s"]


@pytest.mark.parametrize("argv, flag", [
    (("--phase", "train"), "--phase"), (("--execution", "eager,jit"), "--execution"),
    (("--batch", "0"), "--batch"), (("--context", "5000"), "--context"),
    (("--model", "nope"), "--model")])
def test_bad_option_named(argv, flag):
    with pytest.raises(ValueError, match=flag):
        run(_args(*argv, "--threads", "1"), TraceRecorder())
