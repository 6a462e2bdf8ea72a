"""Policies side by side on one seeded workload, and the throughput-latency sweep over rate.

    compare_policies(settings, ("static", "continuous"))
    compare_policies(settings, ({"prefix_cache": "hash"}, {"prefix_cache": "radix"}))
        every variant (a policy, or settings overrides: policy, prefix_cache, schedule) runs
        the SAME requests (the settings' workload, generated once) to the end; per variant
        its metrics and every finished request's TTFT and TPOT (the CDFs)
    rate_sweep(settings, rates, policies)
        for each rate (Poisson arrivals, the same seed, lengths and request count) and
        policy, a full run: achieved output tokens/s against p50/p99 TTFT and TPOT, as
        guidellm and `vllm bench serve` plot it (compare_records.knee: the largest rate whose
        p99 TTFT and TPOT both meet the SLOs)
    latency_cdf(values)
        the empirical CDF: sorted values and the fraction of requests at or below each

Both take `progress(fraction, message)` and `should_stop()` (raising Cancelled through
engines.hardware.cancel.check_stop) so the lab can run them in a worker with a progress bar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from inferlab.engines.hardware.cancel import check_stop
from inferlab.engines.labs.batching.compare_records import VARIANT_KEYS, PolicyRun, SweepPoint
from inferlab.engines.labs.batching.session import batching_metrics, batching_session
from inferlab.engines.labs.batching.settings import check_batching_settings
from inferlab.engines.serve import workload
from inferlab.engines.serve.metrics import tpot_s, ttft_s
from inferlab.engines.serve.scenarios import lognormal_workload

Progress = Callable[[float, str], None]
MAX_SWEEP_RATES = 24


def latency_cdf(values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(sorted values, fraction of values <= each): i / n for the i-th smallest."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    return x, np.arange(1, len(x) + 1, dtype=np.float64) / max(len(x), 1)


def run_policy(settings: dict, items, device: str = "cpu", should_stop=None) -> PolicyRun:
    """`settings`' policy over the workload `items` to the end."""
    session = batching_session(settings, device, items)
    while not session.done:
        check_stop(should_stop)
        session.step()
    timings = [t for t in session.timings() if t.ok]
    tpots = [tpot_s(t) for t in timings if t.output_tokens > 1]
    return PolicyRun(settings["policy"], batching_metrics(session.serving_metrics(),
                                                          session.records,
                                                          session.prefix_hit_rate()),
                     tuple(ttft_s(t) for t in timings), tuple(tpots),
                     settings["prefix_cache"], settings["schedule"])


def variant_settings(settings: dict, variant: str | dict) -> dict:
    """`settings` with a variant's overrides: a policy name, or a dict of VARIANT_KEYS."""
    if isinstance(variant, str):
        variant = {"policy": variant}
    unknown = sorted(set(variant) - set(VARIANT_KEYS))
    if unknown:
        raise ValueError(f"compare: {unknown[0]!r} is not one of {', '.join(VARIANT_KEYS)}")
    return dict(settings, **variant)


def varied_keys(variants: Sequence[dict]) -> list[str]:
    """The VARIANT_KEYS whose value is not the same in every one of `variants`."""
    return [k for k in VARIANT_KEYS if len({v.get(k) for v in variants}) > 1]


def variant_label(variant: dict, differs: Sequence[str] = VARIANT_KEYS,
                  names: dict | None = None, sep: str = " · ") -> str:
    """A run's name from the keys its comparison varies ("radix · lpm"; the policy where none
    does); `names[key]` maps a value to what to write instead (a view's labels)."""
    keys = [k for k in VARIANT_KEYS if k in differs and k in variant] or ["policy"]
    names = names or {}
    return sep.join(str(names.get(k, {}).get(variant[k], variant[k])) for k in keys)


def compare_policies(settings: dict,
                     policies: Sequence[str | dict] = ("static", "continuous"),
                     device: str = "cpu", progress: Progress | None = None,
                     should_stop=None) -> list[PolicyRun]:
    """Each variant (a policy name, or a dict of VARIANT_KEYS overrides) over the same
    requests (`settings`' workload), in order."""
    settings = check_batching_settings(settings)
    # a scenario's requests depend on the model's vocabulary: each run makes them (seeded,
    # the same every time); the seeded stream is made once here
    items = (workload.generate(lognormal_workload(settings))
             if settings["scenario"] == "lognormal" else None)
    report = progress or (lambda fraction, message: None)
    runs = []
    variants = [check_batching_settings(variant_settings(settings, v)) for v in policies]
    differs = varied_keys(variants)
    for i, s in enumerate(variants):
        name = variant_label(s, differs)
        report(i / len(variants), f"running {name} ({i + 1}/{len(variants)})")
        runs.append(run_policy(s, items, device, should_stop))
    report(1.0, "compared")
    return runs


def sweep_rates(low_per_s: float, high_per_s: float, n: int) -> list[float]:
    """`n` rates spaced evenly on a log scale from low to high (both included)."""
    if not (0 < low_per_s <= high_per_s):
        raise ValueError(f"rates: need 0 < low <= high, got {low_per_s:g} and {high_per_s:g}")
    if not 1 <= n <= MAX_SWEEP_RATES:
        raise ValueError(f"rates: between 1 and {MAX_SWEEP_RATES} points, got {n}")
    if n == 1:
        return [float(low_per_s)]
    return [float(r) for r in np.geomspace(low_per_s, high_per_s, n)]


def rate_sweep(settings: dict, rates: Sequence[float],
               policies: Sequence[str | dict] = ("static", "continuous"), device: str = "cpu",
               progress: Progress | None = None, should_stop=None) -> list[SweepPoint]:
    """One full run per (rate, variant: a policy or VARIANT_KEYS overrides) of the seeded
    stream (a scenario sets its own arrivals: the sweep runs the stream of the settings'
    lengths); points in rate order, variants in the given order."""
    report = progress or (lambda fraction, message: None)
    total = len(rates) * len(policies)
    points = []
    for i, rate in enumerate(rates):
        s = check_batching_settings(dict(settings, rate_per_s=float(rate)))
        items = workload.generate(lognormal_workload(s))
        variants = [check_batching_settings(variant_settings(s, v)) for v in policies]
        differs = varied_keys(variants)
        for j, v in enumerate(variants):
            done = i * len(policies) + j
            report(done / total, f"{variant_label(v, differs)} at {rate:.3g} req/s "
                                 f"({done + 1}/{total})")
            m = run_policy(v, items, device, should_stop).metrics
            points.append(SweepPoint(
                v["policy"], float(rate), m["output_tokens_per_s"], m["ttft_s"]["p50"],
                m["ttft_s"]["p99"], m["tpot_s"]["p50"], m["tpot_s"]["p99"],
                m["goodput_requests_per_s"], v["prefix_cache"], v["schedule"]))
    report(1.0, "swept")
    return points
