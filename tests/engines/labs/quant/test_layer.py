"""The layer drawing's numbers: grids worked out from the schemes' own formulas, histograms
that count every weight, the scale strip's shape."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.labs.quant.layer import MAX_SCALE_ROWS, analyse_layer
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.metrics import sqnr_db
from inferlab.engines.quant.schemes import scheme


@pytest.fixture(scope="module")
def weight():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(300, 256, generator=g) * 0.05
    w[7, 3] = 1.5  # an outlier: its row and group get a coarser grid
    return w


def test_int8_per_channel_grid_is_s_times_q_minus_z_of_the_median_row():
    # Hand-worked rows: [0, 2.55] and [-1.275, 0] and [-0.51, 0.51]; the steps are
    # 2.55/255 = 0.01, 0.005 and 0.004: the median step is row 1's.
    w = torch.tensor([[0.0, 2.55, 1.0, 0.5], [-1.275, 0.0, -0.5, -1.0], [-0.51, 0.51, 0.0, 0.1]])
    a = analyse_layer(w, "int8", "t")
    assert a.unit.startswith("row 1 ")
    s, z = 1.275 / 255, round(1.275 / (1.275 / 255)) - 128
    assert len(a.levels) == 256
    assert a.levels[0] == pytest.approx(s * (-128 - z), abs=1e-6)
    assert a.levels[-1] == pytest.approx(s * (127 - z), abs=1e-6)
    assert a.clip_range == (a.levels[0], a.levels[-1])
    assert [len(r) for r in a.scales] == [1, 1, 1]


def test_q4_1_grid_is_sixteen_levels_d_u_plus_m(weight):
    a = analyse_layer(weight, "q4_1", "layers.0.o")
    rec = scheme("q4_1").quantize(weight)
    r, g = (int(x) for x in a.unit.split(" (")[0].replace("row ", "").split(", group "))
    d, m = float(rec.scales[r, g]), float(rec.mins[r, g])
    assert list(a.levels) == pytest.approx([d * u + m for u in range(16)], rel=1e-6)
    assert "coarser" in a.unit  # the outlier's group is wider than the median's


def test_histograms_count_every_weight_and_the_error_is_the_schemes(weight):
    for name in ("int8-sym", "fp8-e4m3", "int4-g128", "sparse-2:4"):
        a = analyse_layer(weight, name)
        assert sum(a.hist_counts) == weight.numel() == sum(a.error_counts)
        assert len(a.hist_edges) == len(a.hist_counts) + 1
        assert a.error.sqnr_db == pytest.approx(sqnr_db(weight, scheme(name).round_trip(weight)))
        assert a.nbytes == scheme(name).quantize(weight).nbytes


def test_fp8_grid_is_the_formats_values_times_one_scale(weight):
    a = analyse_layer(weight, "fp8-e4m3")
    assert a.clip_range == pytest.approx((-1.5, 1.5))  # max|x| lands on 448
    assert 0.0 in a.levels and len(a.levels) == 253  # 256 codes, ±NaN, ±0 once
    assert a.scales == ((pytest.approx(1.5 / 448),),)


def test_scale_strip_rows_are_thinned_and_pruning_has_no_grid(weight):
    a = analyse_layer(weight, "int4-g128")
    assert len(a.scales) <= MAX_SCALE_ROWS and len(a.scales[0]) == 2
    assert a.scale_rows[:2] == (0, 2)
    pruned = analyse_layer(weight, "sparse-2:4")
    assert pruned.levels == () and pruned.clip_range is None and pruned.scales == ()


def test_bad_input_is_named():
    with pytest.raises(QuantError, match="2-d"):
        analyse_layer(torch.ones(4), "int8")
    with pytest.raises(QuantError, match="scheme must be one of"):
        analyse_layer(torch.ones(4, 4), "int3")
