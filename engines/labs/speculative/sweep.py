"""Speedup against K: the same prompts decoded plainly and speculatively with each K, timed in
one run, beside the model E / (K·c + v(K)) over the drafts the steps made, with c and v measured
in the same run.

    measure_k(model, tok, drafter_spec, k, prompts, new_tokens, plain_s, refs) -> KPoint
    k_sweep(settings, ks, device, progress, should_stop) -> KSweep     (the lab's sweep)

`engines/labs/speculative/bench.py` measures its rows with `measure_k` too. The cost ratio c is
what one draft token cost against one target forward in this run:

    c = (draft seconds / draft tokens proposed) / (target forward seconds / target forwards)
    v(K) = t(a target step scoring K + 1 tokens) / t(a step scoring 1)   (speculative.
           verify_cost, timed on this machine before the sweep)
    predicted_speedup = sum_i E(k_i) / sum_i (k_i·c + v(k_i))   over the steps' draft lengths
    predicted_speedup_wall = the same with the prompts' prefill, timed in the plain decode,
                             added to both sides unchanged (statistics.speedup_with_prefill)
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from inferlab.engines.hardware.cancel import check_stop
from inferlab.engines.labs.speculative.drafters import make_drafter
from inferlab.engines.labs.speculative.metrics import geometric_alpha
from inferlab.engines.labs.speculative.settings import check_speculative_settings
from inferlab.engines.labs.speculative.sweep_records import KPoint, KSweep
from inferlab.engines.model.cache import load_lab_model, resolve_model_name
from inferlab.engines.model.generate import generate
from inferlab.engines.speculative.decoder import SpeculativeDecoder, SpeculativeRun
from inferlab.engines.speculative.sampling import GREEDY
from inferlab.engines.speculative.statistics import (
    acceptance_stats,
    expected_tokens_per_forward,
    expected_tokens_per_forward_drafted,
    speedup_model_drafted,
)
from inferlab.engines.speculative.verify_cost import verify_cost_ratios

DEFAULT_KS = (1, 2, 3, 4, 6, 8)


class PlainDecode(NamedTuple):
    seconds: float
    outputs: list
    prefill_s: float
    """The prompts' forwards (each prompt's first step), within `seconds`: the part of a
    request that speculative decoding does not shorten."""


def plain_decode(model, prompts: Sequence[Sequence[int]], new_tokens: int,
                 stop_token_ids: Sequence[int] = ()) -> PlainDecode:
    """Greedy target decoding of every prompt, one after another, each up to `new_tokens`
    tokens or a stop token: its wall time, outputs and prefill time."""
    t0 = time.perf_counter()
    results = [generate(model, [list(p)], max_new_tokens=new_tokens,
                        stop_token_ids=stop_token_ids) for p in prompts]
    seconds = time.perf_counter() - t0
    return PlainDecode(seconds, [r.generations[0].token_ids for r in results],
                       sum(r.prefill_s for r in results))


def measure_k(model, tok, drafter_spec: str, k: int, prompts: Sequence[Sequence[int]],
              new_tokens: int, plain_s: Sequence[float], refs, repeats: int = 1,
              drafter=None, tree_width: int = 1, k_policy: Callable | None = None,
              stop_token_ids: Sequence[int] = (),
              verify_costs: Mapping[int, float] | None = None,
              prefill_s: float | None = None) -> KPoint:
    """Decode `prompts` speculatively with K = `k` (`repeats` times, the median wall time)
    against `plain_s`, the plain decode times of the same prompts in this run (each up to
    `new_tokens` or a stop token, as `plain_decode` was given); `tree_width` candidates per
    step as one token tree. `k_policy`: a factory of a fresh K policy (`AdaptiveK`, K up to
    `k`) for each prompt, as each request of a server gets its own. `verify_costs`: v(K) for
    K = 1..k (`verify_cost_ratios`); None takes v = 1 (verification as cheap as one token).
    `prefill_s`: the prompts' prefill within `plain_s` (`PlainDecode.prefill_s`)."""
    if drafter is None:
        drafter = make_drafter(drafter_spec, model, tok, GREEDY, 0, model.config.max_position)
    fresh = k_policy or (lambda: None)
    decoder = SpeculativeDecoder(model, drafter, k=k, tokenizer=tok, tree_width=tree_width,
                                 k_policy=fresh())  # the first prompt's policy
    spec_s, runs = [], []
    for rep in range(max(1, repeats)):
        t0 = time.perf_counter()
        runs = []
        for i, p in enumerate(prompts):
            if rep or i:
                decoder.k_policy = fresh()
            runs.append(decoder.generate(list(p), new_tokens, stop_token_ids))
        spec_s.append(time.perf_counter() - t0)
    return k_point(drafter_spec, k, runs, statistics.median(plain_s),
                   statistics.median(spec_s), refs, tree_width, verify_costs, prefill_s)


def k_point(drafter_spec: str, k: int, runs: Sequence[SpeculativeRun], plain_s: float,
            spec_s: float, refs, tree_width: int = 1,
            verify_costs: Mapping[int, float] | None = None,
            prefill_s: float | None = None) -> KPoint:
    """One K's figures from its speculative runs (one per prompt, in the order of `refs`, the
    plain greedy outputs) and the two wall times of the same prompts: `plain_s` plainly,
    `spec_s` speculatively. `verify_costs` as `measure_k` takes them."""
    steps = [s for r in runs for s in r.steps]
    equal = all(r.token_ids == tuple(ref) for r, ref in zip(runs, refs, strict=True))
    st = acceptance_stats([s.accepted for s in steps])
    alpha = geometric_alpha(steps)
    forwards = len(steps)
    emitted = sum(len(r.token_ids) for r in runs)
    target_s = sum(r.target_forward_s for r in runs)
    draft_s = sum(r.draft_s for r in runs)
    lengths = [len(s.drafted) for s in steps]
    drafted = sum(lengths)
    cost = (draft_s / drafted) / (target_s / forwards) if drafted and target_s else 0.0
    v = dict(verify_costs) if verify_costs is not None else dict.fromkeys(range(1, k + 1), 1.0)
    return KPoint(drafter_spec, k, st.acceptance_rate, st.mean_acceptance_length, alpha,
                  emitted / forwards, expected_tokens_per_forward(alpha, k), forwards, cost,
                  speedup_model_drafted(alpha, lengths, cost, v), plain_s / spec_s, plain_s,
                  spec_s, draft_s, target_s, equal, tree_width,
                  expected_tokens_per_forward_drafted(alpha, lengths), emitted,
                  yield_per_target_forward=sum(s.n_accepted + 1 for s in steps) / forwards,
                  verify_cost_ratio=v[k], prefill_s=prefill_s)


def k_sweep(settings: dict, ks: Sequence[int] = DEFAULT_KS, device: str = "cpu",
            progress: Callable | None = None, should_stop: Callable | None = None) -> KSweep:
    """The lab's prompt (its settings: model, drafter, prompt, max_tokens) decoded plainly,
    then with each K, up to max_tokens or the end of the answer (as the lab's run stops);
    greedy whatever the lab's temperature, so the outputs must be equal."""

    s = check_speculative_settings(settings)
    report = progress or (lambda _f, _m="": None)
    report(0.0, f"loading {s['model']}")
    # the target on the settings' kernel path; a draft model follows the target's
    model, tok = load_lab_model(s["model"], device, kernels=s["kernels"])
    ids = [tok.encode_prompt(s["prompt"], chat=not s["raw"])]
    drafter = make_drafter(s["drafter"], model, tok, GREEDY, 0,
                           len(ids[0]) + s["max_tokens"] + max(ks) + 1, device)
    n = s["max_tokens"]
    plain_decode(model, ids, min(n, 4))  # warm up
    report(0.03, "timing the target's verification steps, v(K)")
    verify_costs = verify_cost_ratios(model, range(1, max(ks) + 1))
    report(0.05, "plain decoding (the baseline)")
    stops = tok.eos_token_ids
    plain = plain_decode(model, ids, n, stops)
    points = []
    for i, k in enumerate(ks):
        check_stop(should_stop)
        report(0.1 + 0.9 * i / len(ks), f"K = {k} ({i + 1} of {len(ks)})")
        drafter.reset()
        points.append(measure_k(model, tok, s["drafter"], k, ids, n, [plain.seconds],
                                plain.outputs, drafter=drafter, tree_width=s["tree_width"],
                                stop_token_ids=stops, verify_costs=verify_costs,
                                prefill_s=plain.prefill_s))
    report(1.0, "swept")
    return KSweep(resolve_model_name(s["model"]), s["drafter"], n, tuple(points))
