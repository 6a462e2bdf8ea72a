"""Each lab's headline figures, described once in its registry entry: a comparison (the CLI's
text and --json) lists them first, in the entry's order, marked better or worse by their
direction; a headline a snapshot lacks is skipped; every lab's headlines name figures its
real section holds."""

from __future__ import annotations

import functools
import json

import pytest

from inferlab.app.cli import main
from inferlab.app.labs.registry import LABS, lab_headlines, lab_spec
from inferlab.engines.trace.compare import BETTER, compare_snapshots, flatten_numbers
from inferlab.engines.trace.snapshot import lab_section, make_snapshot, write_snapshot
from tests.app.lab_sections import BUILDERS


def batching_metrics(scale: float) -> dict:
    """Serving metrics in an order unlike the registry's, plus figures it does not name;
    `prefix_hit_rate`, a batching headline, left out."""
    return {"iterations": 40 * scale, "e2e_s": {"p99": 2.0 * scale, "p50": 1.0},
            "ttft_s": {"p99": 0.5 * scale, "p50": 0.1}, "preemptions": 3 * scale,
            "output_tokens_per_s": 100.0 / scale, "total_input_tokens": 500}


def snap(scale: float):
    return make_snapshot("0.1.0", {"cpu": "x86"}, [],
                         {"batching": lab_section({}, {}, batching_metrics(scale))},
                         created_utc="2026-12-02T00:00:00+00:00")


def test_headline_rows_come_in_the_registrys_order_with_their_marks(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_snapshot(a, snap(1.0))
    write_snapshot(b, snap(2.0))  # everything twice as slow, half the throughput
    assert main(["compare", str(a), str(b), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["figures"]
    heads = [r for r in rows if r["headline"]]
    order = [h.figure for h in lab_spec("batching").headlines]
    held = flatten_numbers(batching_metrics(1.0))
    assert [r["figure"] for r in heads] == [f for f in order if f in held]
    assert [r["figure"] for r in heads] == ["output_tokens_per_s", "ttft_s.p50", "ttft_s.p99",
                                            "e2e_s.p50", "e2e_s.p99", "preemptions"]
    assert "prefix_hit_rate" not in {r["figure"] for r in rows}  # in neither: skipped
    first = heads[0]
    assert (first["label"], first["unit"], first["better"], first["b_over_a"]) == \
        ("output throughput", "tokens/s", "higher", 0.5)
    assert [r["figure"] for r in rows[len(heads):]] == ["iterations", "total_input_tokens"]
    assert not any(r["headline"] or r["label"] for r in rows[len(heads):])
    assert main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out.splitlines()
    i = text.index(next(line for line in text if line.startswith("headline figures")))
    assert text[i + 2].startswith("batching:output_tokens_per_s  output throughput (tokens/s)")
    assert text[i + 2].endswith("0.5000 ▼ worse")
    assert text[i + 3].startswith("batching:ttft_s.p50") and text[i + 3].endswith("1.0000")
    assert text[i + 4].endswith("2.0000 ▲ worse")  # TTFT p99 up: lower is better
    j = text.index("other figures, the furthest moved first:")
    assert text[j + 2].startswith("batching:iterations") and text[j + 2].endswith("2.0000 ▲")


def test_a_headline_one_snapshot_lacks_is_no_crash():
    a = make_snapshot("0.1.0", {}, [], {"batching": lab_section({}, {}, {})},
                      created_utc="2026-12-02T00:00:00+00:00")
    c = compare_snapshots(a, snap(1.0), headlines=lab_headlines())
    top = c.rows[0]
    assert (top.figure, top.a, top.b, top.b_over_a, top.ratio_text()) == \
        ("output_tokens_per_s", None, 100.0, None, "–")
    assert compare_snapshots(a, a, headlines=lab_headlines()).rows == ()


def test_every_lab_describes_its_headlines_with_a_direction_or_none():
    for spec in LABS:
        assert spec.headlines, spec.id
        assert all(h.better in (*BETTER, None) and h.label for h in spec.headlines), spec.id
        names = [h.figure for h in spec.headlines]
        assert len(set(names)) == len(names), spec.id


@functools.cache
def real_figures(lab: str) -> tuple[str, ...]:
    return tuple(flatten_numbers(BUILDERS[lab]()["metrics"]))


@pytest.mark.parametrize("lab", [spec.id for spec in LABS])
def test_every_headline_names_a_figure_of_the_labs_real_section(lab):
    figures = real_figures(lab)
    assert [h.figure for h in lab_spec(lab).headlines if not h.matches(figures)] == []
