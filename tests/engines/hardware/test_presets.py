"""Hardware presets: every one loads, names its source, and holds the datasheet figures."""

import pytest

from inferlab.engines.dtypes import DTYPE_NAMES
from inferlab.engines.hardware.presets import (
    HardwarePreset,
    all_hardware_presets,
    list_hardware_presets,
    load_hardware_preset,
)

REQUIRED = {"h100-sxm", "h200", "a100-80gb", "l4", "rtx-4090", "mi300x", "cortex-m4-80mhz",
            "cortex-m7-480mhz", "esp32-s3"}


def test_required_presets_are_shipped():
    assert REQUIRED <= set(list_hardware_presets())


@pytest.mark.parametrize("preset_id", list_hardware_presets())
def test_every_preset_loads_with_a_source(preset_id):
    preset = load_hardware_preset(preset_id)
    assert preset.id == preset_id
    assert preset.source.strip() and preset.notes.strip()
    assert set(preset.peak_flops) <= set(DTYPE_NAMES)
    assert HardwarePreset.from_dict(preset.to_dict()) == preset


def test_h100_and_h200_dense_figures():
    h100, h200 = load_hardware_preset("h100-sxm"), load_hardware_preset("h200")
    assert h100.peak_flops_for("bf16") == h100.peak_flops_for("fp16") == 989.4e12
    assert h100.peak_flops_for("fp8") == 1978.9e12
    assert h100.bandwidth_bytes_per_s == 3.35e12 and h100.memory_bytes == 80_000_000_000
    assert h200.peak_flops == h100.peak_flops
    assert h200.bandwidth_bytes_per_s == 4.8e12 and h200.memory_bytes == 141_000_000_000


def test_a100_has_no_fp8_and_says_which_dtypes_it_has():
    a100 = load_hardware_preset("a100-80gb")
    assert a100.peak_flops_for("bf16") == 312e12 and a100.peak_flops_for("fp32") == 19.5e12
    assert a100.bandwidth_bytes_per_s == 2.039e12
    with pytest.raises(ValueError, match="fp8.*known: fp32"):
        a100.peak_flops_for("fp8")


def test_cortex_m4_counts_a_mac_as_two_flops():
    m4 = load_hardware_preset("cortex-m4-80mhz")
    assert m4.kind == "mcu"
    assert m4.peak_flops_for("int8") == 2 * 2 * 80e6  # SMLAD: 2 MACs per cycle
    assert m4.peak_flops_for("fp32") == 2 * 80e6  # one FMA per cycle
    assert m4.bandwidth_bytes_per_s == 4 * 80e6
    assert m4.memory_bytes == 256 * 1024


def test_all_presets_in_id_order_and_hashable():
    presets = all_hardware_presets()
    assert [p.id for p in presets] == list_hardware_presets()
    assert len({hash(p) for p in presets}) == len(presets)


def test_unknown_preset_lists_the_known_ids():
    with pytest.raises(ValueError) as e:
        load_hardware_preset("tpu-v9")
    assert "tpu-v9" in str(e.value) and "h100-sxm" in str(e.value)


def test_from_dict_names_the_bad_field():
    d = load_hardware_preset("l4").to_dict()
    with pytest.raises(ValueError, match="x.json: missing field 'source'"):
        HardwarePreset.from_dict({k: v for k, v in d.items() if k != "source"}, "x.json")
    with pytest.raises(ValueError, match="kind"):
        HardwarePreset.from_dict(dict(d, kind="tpu"), "x.json")
    with pytest.raises(ValueError, match="tf32"):
        HardwarePreset.from_dict(dict(d, peak_flops={"tf32": 1.0}), "x.json")
    with pytest.raises(ValueError, match="bandwidth_bytes_per_s"):
        HardwarePreset.from_dict(dict(d, bandwidth_bytes_per_s=0), "x.json")
