"""The concurrency autoscaler's arithmetic by hand (autoscale.py), the in-flight meter's
window means by hand (concurrency.py), and the policy across ticks."""

from __future__ import annotations

import pytest

from inferlab.engines.cluster.autoscale import (
    AutoscalePolicy,
    Autoscaler,
    cold_start_s,
    desired_replicas,
    over_panic_threshold,
)
from inferlab.engines.cluster.concurrency import ConcurrencyMeter
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.roofline.parallel import gpu_share

P = AutoscalePolicy(target_concurrency=10, min_replicas=1, max_replicas=8)


def test_desired_replicas_by_hand():
    assert desired_replicas(P, 25, 25, 2) == 3  # ⌈25 / 10⌉
    assert desired_replicas(P, 30, 30, 3) == 3  # exactly k × target: k
    assert desired_replicas(P, 30.000000000001, 0, 3) == 3  # a rounding error is not k + 1
    assert desired_replicas(P, 30.01, 0, 3) == 4
    assert desired_replicas(P, 200, 200, 4) == 8  # max_replicas
    assert desired_replicas(P, 0, 0, 1) == 1  # min_replicas
    # at most halve per tick (max_scale_down_rate 2): ⌊6 / 2⌋ = 3 however idle
    assert desired_replicas(P, 0, 0, 6) == 3
    assert desired_replicas(P, 0, 0, 7) == 3  # ⌊7 / 2⌋
    # panic mode: the panic window's count, never below the floor
    assert desired_replicas(P, 10, 45, 2, panicking=True) == 5
    assert desired_replicas(P, 10, 45, 2, panicking=True, panic_floor=6) == 6
    assert desired_replicas(P, 10, 45, 2, panicking=False, panic_floor=6) == 1
    # a scale-up cap of 1.5 × ready: ⌈1.5 × 2⌉ = 3 at most
    capped = AutoscalePolicy(10, 1, 8, max_scale_up_rate=1.5)
    assert desired_replicas(capped, 80, 80, 2) == 3
    zero = AutoscalePolicy(10, 0, 4)
    assert desired_replicas(zero, 0, 0, 0) == 0
    assert desired_replicas(zero, 0.001, 0, 0) == 1  # any traffic asks for one


def test_panic_threshold_by_hand():
    # ⌈panic / target⌉ / ready ≥ 2
    assert over_panic_threshold(P, 40, 2)  # 4 / 2
    assert over_panic_threshold(P, 31, 2)  # ⌈3.1⌉ = 4
    assert not over_panic_threshold(P, 30, 2)  # 3 / 2
    assert over_panic_threshold(P, 11, 0)  # 2 / max(1, 0)


def test_policy_refuses_bad_knobs_naming_them():
    for kw, name in (({"min_replicas": 3, "max_replicas": 2}, "max_replicas"),
                     ({"max_replicas": 0, "min_replicas": 0}, "max_replicas"),
                     ({"min_replicas": -1}, "min_replicas"),
                     ({"panic_window_s": 61.0}, "panic_window_s"),
                     ({"tick_s": 0}, "tick_s"), ({"scale_down_delay_s": -1}, "scale_down")):
        with pytest.raises(ValueError, match=name):
            AutoscalePolicy(10, **kw)
    with pytest.raises(ValueError, match="target_concurrency"):
        AutoscalePolicy(0)


def test_constant_concurrency_of_k_targets_settles_at_k_and_stays():
    for k in (1, 3, 5):
        scaler, ready = Autoscaler(P), 1
        counts = []
        for tick in range(100):  # the fleet becomes what was asked for by the next tick
            ready = scaler.decide(2.0 * tick, 10.0 * k, 10.0 * k, ready)
            counts.append(ready)
        assert counts[-60:] == [k] * 60


def test_panic_mode_holds_the_fleet_for_a_stable_window_after_the_burst():
    scaler = Autoscaler(P)
    assert scaler.decide(0.0, 10, 10, 1) == 1
    assert scaler.decide(2.0, 12, 60, 1) == 6 and scaler.panicking  # 6 / 1 ≥ 2
    assert scaler.decide(4.0, 15, 20, 6) == 6  # in panic: never below the high mark
    # the burst is gone; panic lasts until 60 s after the last tick over the threshold (2 s)
    assert scaler.decide(60.0, 10, 10, 6) == 6 and scaler.panicking
    assert scaler.decide(62.0, 10, 10, 6) == 3 and not scaler.panicking  # ⌊6/2⌋ floor
    assert scaler.decide(64.0, 10, 10, 3) == 1


def test_scale_down_delay_keeps_the_highest_count_of_the_window():
    scaler = Autoscaler(AutoscalePolicy(10, 1, 8, scale_down_delay_s=10.0))
    assert scaler.decide(0.0, 40, 40, 4) == 4
    assert scaler.decide(2.0, 10, 10, 4) == 4  # wants 2 (halving floor), 4 held
    assert scaler.decide(8.0, 10, 10, 4) == 4
    assert scaler.decide(10.0, 10, 10, 4) == 2  # the 4 of 0 s left the window
    assert scaler.decide(12.0, 50, 50, 2) == 5  # a rise is at once


def test_cold_start_is_the_weights_per_gpu_over_the_load_bandwidth_plus_the_start_up():
    cfg = load_model_preset("llama-3-8b")
    per_gpu = gpu_share(cfg, 2, 1, "fp16", "fp16").weight_bytes
    assert cold_start_s(cfg, 2, 4.0, 30.0) == pytest.approx(per_gpu / 4e9 + 30.0)
    assert cold_start_s(cfg, 1, 2.0, 0.0) == pytest.approx(2 * cold_start_s(cfg, 1, 4.0, 0.0))
    with pytest.raises(ValueError, match="load bandwidth"):
        cold_start_s(cfg, 1, 0.0, 1.0)


def test_meter_means_by_hand():
    m = ConcurrencyMeter(0.0)
    m.arrive(1.0)
    m.arrive(1.0)
    m.finish(4.0)  # told before an earlier event: taken in time order
    m.arrive(3.0)
    m.advance(5.0)
    # c = 0 on [0,1), 2 on [1,3), 3 on [3,4), 2 on [4,5]: area 0 + 4 + 3 + 2 = 9
    assert m.area(5.0) == pytest.approx(9.0)
    assert m.mean(0.0, 5.0) == pytest.approx(9 / 5)
    assert m.mean(2.0, 4.0) == pytest.approx((2 + 3) / 2)
    assert m.mean(-10.0, 2.0) == pytest.approx(2 / 2)  # cut at the origin
    assert m.level == 2 and m.level_at(3.5) == 3
    assert m.mean(5.0, 5.0) == 2.0  # an empty window: the level then
    m.finish(6.0)
    with pytest.raises(ValueError, match="before the meter"):
        m.arrive(4.5)
    with pytest.raises(ValueError, match="past the meter"):
        m.mean(0.0, 6.0)
