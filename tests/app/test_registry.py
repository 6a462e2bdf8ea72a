"""The lab registry: one entry is all a new lab needs, and the README's list comes from it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from inferlab.app.cli import main
from inferlab.app.labs import registry
from inferlab.app.labs.registry import LABS, LabSpec, lab_spec, readme_lab_list, resolve

ROOT = Path(__file__).resolve().parents[2]
TOY = LabSpec(
    id="toy", title="Toy lab", summary="A lab made up by the registry test",
    description="a made-up lab.", controller="tests.app.toy_lab:ToyLab",
    read_section="tests.app.toy_lab:read_toy_section",
    run_arguments="tests.app.toy_lab:add_arguments", run="tests.app.toy_lab:run",
    bench="tests.app.toy_lab:bench", screenshot_size=(1200, 700), screenshot_settle_s=0.1)


@pytest.fixture
def with_toy(monkeypatch):
    monkeypatch.setattr(registry, "LABS", (*LABS, TOY))


def test_every_reference_resolves_and_ids_are_unique():
    assert len({spec.id for spec in LABS}) == len(LABS)
    for spec in LABS:
        for ref in (spec.controller, spec.read_section, spec.run_arguments, spec.run, spec.bench):
            if ref is not None:
                assert callable(resolve(ref)), ref
        assert resolve(spec.controller).lab_id == spec.id
        assert (spec.run is None) == (spec.run_arguments is None)
    with pytest.raises(ValueError, match="unknown lab 'nope'; labs: hardware, roofline"):
        lab_spec("nope")


def test_readme_lab_list_is_the_registrys():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_lab_list() in readme
    assert registry.replace_readme_lab_list(readme) == readme
    stale = readme.replace(LABS[0].description, "an old text.")
    assert registry.replace_readme_lab_list(stale) == readme


def test_one_entry_adds_a_lab_to_the_window(with_toy, make_window, tmp_path):
    window = make_window()
    rows = [window.sidebar.item(i).text() for i in range(window.sidebar.count())]
    assert rows[-1] == "Toy lab" and len(rows) == len(LABS) + 1
    window.show_lab("toy")
    assert window.current_lab().title == "Toy lab"
    assert window.current_lab().summary == "A lab made up by the registry test"
    path = window.export_snapshot(tmp_path / "snap.json")
    data = json.loads(path.read_text())
    data["inferlab"]["labs"]["toy"]["state"]["count"] = 7
    path.write_text(json.dumps(data))
    window.open_snapshot(path)
    assert window.lab("toy").read_only and window.lab("toy").count == 7
    data["inferlab"]["labs"]["toy"]["state"]["count"] = -1
    path.write_text(json.dumps(data))
    window.show_live()
    window.open_snapshot(path)  # the toy section is refused by its reader, the rest opens
    assert "labs.toy.state.count" in window.snapshot_problems["toy"]


@pytest.mark.slow  # a whole-window screenshot
def test_one_entry_adds_run_bench_and_screenshot(with_toy, capsys, tmp_path):
    assert main(["run", "toy", "--count", "5", "--snapshot", str(tmp_path / "t.json"),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"] == {"count": 5}
    from inferlab.engines.trace.snapshot import read_snapshot

    snap = read_snapshot(tmp_path / "t.json")
    assert snap.labs["toy"]["state"] == {"count": 5}
    assert any(e.get("name") == "toy run" for e in snap.trace_events)
    assert main(["bench", "toy", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert "cpu_flags" in got.pop("kernels")  # added to every bench's figures
    assert got == {"toy_ratio": 1.0}
    out = tmp_path / "toy.png"
    assert main(["screenshot", "--lab", "toy", "--out", str(out)]) == 0
    from PySide6.QtGui import QImage

    image = QImage(str(out))
    assert (image.width(), image.height()) == (1200, 700)


def test_a_bench_whose_package_is_absent_says_so(with_toy, monkeypatch, capsys):
    absent = dataclasses.replace(TOY, bench_requires=("no_such_package_xyz",))
    monkeypatch.setattr(registry, "LABS", (*LABS, absent))
    assert main(["bench", "toy", "--json"]) == 0
    assert "not available: needs no_such_package_xyz" in json.loads(capsys.readouterr().out)["error"]


def test_a_bench_that_breaks_keeps_its_traceback(with_toy, monkeypatch):
    broken = dataclasses.replace(TOY, bench="tests.app.no_such_module:bench")
    monkeypatch.setattr(registry, "LABS", (*LABS, broken))
    with pytest.raises(ModuleNotFoundError, match="tests.app.no_such_module"):
        main(["bench", "toy", "--json"])


def test_a_bug_is_not_turned_into_a_one_line_error(monkeypatch):
    import inferlab.app.commands.bench as bench

    def bug():
        raise KeyError("a bug")

    monkeypatch.setattr(bench, "benches", bug)
    with pytest.raises(KeyError):
        main(["bench", "roofline"])
