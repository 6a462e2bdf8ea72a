"""Speculative decoding against plain decoding, on SmolLM2 greedy, measured in one run.

For each drafter and K of a small sweep, the same prompts are decoded plainly
(`engines/model/generate`) and speculatively, alternately within each repeat (a machine that
gets busier mid-run slows both alike), and transformers' prompt-lookup assisted generation
(`prompt_lookup_num_tokens=10`) is timed against its own plain `generate` on the same
prompts. Every figure is a median over repeats of the whole prompt set:

    speedup_wall               = plain wall s / speculative wall s      (same prompts, tokens)
    verify_cost_ratios         v(K) = t(a K + 1-token target step) / t(a 1-token step), timed
                                 once before the rows (speculative.verify_cost)
    predicted_speedup          = sum_i E(k_i) / sum_i (k_i·c + v(k_i)) over the steps' own
                                 draft lengths k_i, c the row's measured draft cost per token
    predicted_speedup_wall     = the same with the prompts' prefill (`prefill_s`, timed in the
                                 plain decode) on both sides, as the wall clock has it: a
                                 prompt's forward is not sped up
    tokens_per_target_forward  = emitted tokens / target forwards
    alpha                      = accepted / drafts tested (a step stops testing at its first
                                 rejection: the geometric model's estimate)
    theory_tokens_per_forward  = (1 - alpha^(K+1)) / (1 - alpha)
    theory_drafted_tokens_per_forward   the same averaged over each step's own draft length
                                 (a drafter that proposes fewer than K, or none, emits less)
    yield_per_target_forward   = (accepted drafts + 1) per forward, before the end of an
                                 answer cuts a last step short (tokens_per_target_forward
                                 counts what was emitted, so it falls below the theory by
                                 that cut on short answers)
    theory_gap                 = yield_per_target_forward / theory_drafted − 1 per row, and
                                 each group's max_abs_theory_gap over its rows
    hf_prompt_lookup_speedup   = transformers plain s / transformers prompt-lookup s

Given prompt groups (the lab's: `grounded`, where the answer copies from the prompt, and
`open`, chat as the control), every figure is measured per group. Each group also gets an
`adaptive` row: the n-gram drafter with K chosen per step by `AdaptiveK` (0 = plain
decoding), a fresh policy per prompt, with the mean K it chose and its share of plain steps;
beside it `hf_heuristic_k`, the same drafter under transformers' heuristic K schedule (start
at 5, +2 after a fully accepted step, -1 otherwise, capped alike), and
`adaptive_vs_hf_heuristic_k`, the ratio of their speedups.
Where the target has a trained EAGLE head (the user cache's, else the one shipped for
SmolLM2: `head_path`), each group also gets `eagle`: the head drafting at each K of
`eagle_ks`, its rows, and the best row's `speedup_wall` and `accept_len_mean` (=
tokens_per_target_forward: tokens emitted per target forward, the acceptance length counting
the target's own token), with the head file it read. Where it has trained Medusa heads (the
user cache's: none ships), `medusa` likewise, at each K of `medusa_ks` (chains only).
The open group also gets `skip_auto`: the training-free skip self-draft (the layer set
searched on calibration text) against `layerskip:N` at the same draft cost and K.

Greedy speculative output equals plain greedy output (tests check it); the bench reports
whether it did here too (`outputs_equal`). Every decode, plain, speculative and transformers',
stops at the model's end of turn (or `new_tokens`), as a user's request does: the tokens a
model babbles past its answer (a new "user" turn) are not the workload being measured. Equal
greedy outputs mean plain and speculative decoding emit the same tokens, so the work compared
is the same. `stop_at_eos=False` emits exactly `new_tokens` tokens instead.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict

import torch

from inferlab.engines.labs.speculative.drafters import head_path, skip_auto
from inferlab.engines.labs.speculative.settings import AUTO_K_MAX, prompt_groups
from inferlab.engines.labs.speculative.sweep import PlainDecode, measure_k, plain_decode
from inferlab.engines.model.bench import load_transformers_gguf
from inferlab.engines.model.llama import resolve_dtype
from inferlab.engines.model.registry import SMOLLM2_ID, load_model, smollm2_gguf_path
from inferlab.engines.speculative.adaptive_k import AdaptiveK, HeuristicK, KPolicy
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.heads.build import from_nothing_s
from inferlab.engines.speculative.heads.head_file import read_record
from inferlab.engines.speculative.model_drafter import skip_spec
from inferlab.engines.speculative.verify_cost import verify_cost_ratios

DEFAULT_PROMPTS = (
    "Summarise in two sentences: The lighthouse keeper climbed the stairs every evening, lit "
    "the lamp, and wrote the weather in his log. Ships passed; storms came and went.",
    "Rewrite this Python function with a docstring and type hints:\n"
    "def area(width, height):\n    return width * height\n",
    "Hi! Can you tell me what a lighthouse does, in a few sentences?",
)
DEFAULT_DRAFTERS = ("ngram", "layerskip:8", "quant:int8")
EAGLE_KS = (1, 2, 3, 4, 5)
EAGLE_TREES = ((3, 2), (4, 3))
"""(K, W) of the EAGLE head's dynamic-tree rows: depth K, at most W paths and K·W nodes."""
MEDUSA_KS = (1, 2, 3, 4)
"""K of the Medusa heads' rows (train-head's default is 4 heads; a drafter with fewer drafts
at most as many as it has)."""


def _hf_times(model, prompts: list[list[int]], new_tokens: int, repeats: int,
              stops: Sequence[int]):
    """(plain s, prompt-lookup s) of transformers' `generate` over `prompts`, medians; each
    up to `new_tokens` or one of `stops` (none: exactly `new_tokens`)."""
    length = ({"eos_token_id": list(stops), "pad_token_id": stops[0]} if stops
              else {"min_new_tokens": new_tokens})

    def run(**kw) -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            for ids in prompts:
                model.generate(torch.tensor([ids]), max_new_tokens=new_tokens,
                               do_sample=False, **length, **kw)
        return time.perf_counter() - t0

    run(prompt_lookup_num_tokens=10)  # warm up
    plain, lookup = [], []
    for _ in range(repeats):
        plain.append(run())
        lookup.append(run(prompt_lookup_num_tokens=10))
    return statistics.median(plain), statistics.median(lookup)


def _row(model, tok, spec: str, k: int, ids, new_tokens: int, plain: Sequence[PlainDecode],
         repeats: int, **options) -> dict:
    """One row's figures (`measure_k`) against the plain decodes timed beside it: their wall
    times, the last one's outputs as the reference and its prefill time."""
    return measure_k(model, tok, spec, k, ids, new_tokens, [p.seconds for p in plain],
                     plain[-1].outputs, repeats, prefill_s=plain[-1].prefill_s,
                     **options).figures()


def _adaptive_row(model, tok, ids, new_tokens: int, plain, repeats: int,
                  stops: Sequence[int], verify_costs: Mapping[int, float],
                  make_policy: Callable[[], KPolicy] | None = None) -> dict:
    """The n-gram drafter with K chosen per step (a fresh policy per prompt: `AdaptiveK` on
    this machine's measured v(K) by default, or transformers' heuristic schedule): its row, K
    "auto", the mean K chosen and how often it chose plain decoding (K = 0)."""
    if make_policy is None:
        def make_policy() -> KPolicy:
            return AdaptiveK(k_max=AUTO_K_MAX, probe_k=2, verify_prior=verify_costs)
    policies: list[KPolicy] = []

    def policy() -> KPolicy:
        policies.append(make_policy())
        return policies[-1]

    row = _row(model, tok, "ngram", AUTO_K_MAX, ids, new_tokens, plain, repeats,
               k_policy=policy, stop_token_ids=stops, verify_costs=verify_costs)
    chosen = [k for p in policies for k in p.chosen]
    row.update(k="auto", theory_tokens_per_forward=None, verify_cost_ratio=None,
               k_chosen_mean=statistics.fmean(chosen) if chosen else 0.0,
               plain_step_frac=chosen.count(0) / len(chosen) if chosen else 0.0)
    return row


def _skip_auto_figures(model, tok, ids: list[list[int]], new_tokens: int, repeats: int,
                       plain_now, stops: Sequence[int] = (),
                       verify_costs: Mapping[int, float] | None = None) -> dict:
    """`skip:auto` (the set searched on calibration text, from the user cache when this model
    was searched before) decoded at the search's K, beside `layerskip:N` keeping as many
    layers (the same draft cost) at the same K: alpha, c and speedup_wall measured on `ids`;
    the search's own path (teacher-forced agreement of each set and of the first N layers)."""
    t0 = time.perf_counter()
    search = skip_auto(model, tok)
    search_s = time.perf_counter() - t0
    best = search.best
    n_kept = model.config.n_layers - len(best.skipped)
    rows = {}
    for name, spec in (("skip", skip_spec(best.skipped)), ("layerskip", f"layerskip:{n_kept}")):
        plain = plain_now()
        rows[name] = _row(model, tok, spec, best.k, ids, new_tokens, plain, repeats,
                          stop_token_ids=stops, verify_costs=verify_costs)
    return {"drafter": skip_spec(best.skipped), "skipped": list(best.skipped), "k": best.k,
            "layers_kept": n_kept, "calibration_alpha": best.alpha,
            "calibration_first_layers_alpha": best.first_layers_alpha,
            "draft_cost_bytes": best.draft_cost, "predicted_speedup": best.predicted_speedup,
            "search_s": search_s, "search_tokens": search.tokens,
            "search_path": [dict(asdict(c), skipped=list(c.skipped)) for c in search.path],
            "alpha": rows["skip"]["alpha"], "c": rows["skip"]["cost_ratio"],
            "speedup_wall": rows["skip"]["speedup_wall"], "row": rows["skip"],
            "layerskip_same_cost": rows["layerskip"]}


def _train_s(path) -> float | None:
    """The head file's own record of its time from nothing (features built + trained), or
    None (no head, or a record that does not say how long its features took)."""
    record = None if path is None else read_record(path)
    return None if record is None else from_nothing_s(record.get("training") or {})


def _head_figures(kind: str, model, tok, ids, new_tokens: int, plain_now, repeats: int,
                  stops: Sequence[int], verify_costs, ks: Sequence[int], path) -> dict:
    """A trained head's chain rows at each K (`kind` "eagle" or "medusa"), the EAGLE head's
    dynamic-tree rows too (EAGLE_TREES), plain decoding timed beside each, and the best."""
    rows = [_row(model, tok, kind, k, ids, new_tokens, plain_now(), repeats,
                 stop_token_ids=stops, verify_costs=verify_costs) for k in ks]
    trees = EAGLE_TREES if kind == "eagle" else ()
    rows += [_row(model, tok, kind, k, ids, new_tokens, plain_now(), repeats,
                  tree_width=width, stop_token_ids=stops, verify_costs=verify_costs)
             for k, width in trees]
    best = max(rows, key=lambda r: r["speedup_wall"])
    return {"head_path": str(path), "k": best["k"], "tree_width": best["tree_width"],
            "speedup_wall": best["speedup_wall"],
            "accept_len_mean": best["tokens_per_target_forward"], "alpha": best["alpha"],
            "outputs_equal": all(r["outputs_equal"] for r in rows), "results": rows}


def _group(model, tok, ids: list[list[int]], new_tokens: int, drafters: Sequence[str],
           ks: Sequence[int], tree_widths: Sequence[int], repeats: int, adaptive: bool,
           hf_model, with_skip_auto: bool = False, stops: Sequence[int] = (),
           verify_costs: Mapping[int, float] | None = None,
           head_ks: Mapping[str, Sequence[int]] | None = None,
           head_paths: Mapping[str, object] | None = None) -> dict:
    """One prompt set's rows (per drafter, K and width), its best, the adaptive row and
    transformers' prompt-lookup speedup, all measured on these prompts in this run."""

    def plain_now():  # plain decoding timed right beside each row: a busier machine slows both
        return [plain_decode(model, ids, new_tokens, stops) for _ in range(max(1, repeats))]

    rows = []
    for spec in drafters:
        for k in ks:
            for width in tree_widths if spec == "ngram" else (1,):
                plain = plain_now()
                rows.append(_row(model, tok, spec, k, ids, new_tokens, plain, repeats,
                                 tree_width=width, stop_token_ids=stops,
                                 verify_costs=verify_costs))
    gaps = [abs(r["theory_gap"]) for r in rows if r["theory_gap"] is not None]
    out: dict = {"prompts": len(ids), "results": rows,
                 "best": max(rows, key=lambda r: r["speedup_wall"]) if rows else None,
                 "max_abs_theory_gap": max(gaps, default=None),
                 "adaptive": None, "hf_prompt_lookup_speedup": None}
    if adaptive and "ngram" in drafters:
        out["adaptive"] = _adaptive_row(model, tok, ids, new_tokens, plain_now(), repeats,
                                        stops, verify_costs)
        out["hf_heuristic_k"] = _adaptive_row(
            model, tok, ids, new_tokens, plain_now(), repeats, stops, verify_costs,
            lambda: HeuristicK(k_max=AUTO_K_MAX, start=5))
        out["adaptive_vs_hf_heuristic_k"] = (out["adaptive"]["speedup_wall"]
                                             / out["hf_heuristic_k"]["speedup_wall"])
    for kind, ks_of_kind in (head_ks or {}).items():
        path = (head_paths or {}).get(kind)
        if path is not None and ks_of_kind:
            out[kind] = _head_figures(kind, model, tok, ids, new_tokens, plain_now, repeats,
                                      stops, verify_costs, ks_of_kind, path)
    if with_skip_auto:
        try:
            out["skip_auto"] = _skip_auto_figures(model, tok, ids, new_tokens, repeats,
                                                  plain_now, stops, verify_costs)
        except SpeculativeError as e:  # e.g. a target without intermediate layers
            out["skip_auto"] = {"error": str(e)}
    if hf_model is not None:
        out["hf_plain_s"], out["hf_prompt_lookup_s"] = _hf_times(hf_model, ids, new_tokens,
                                                                 repeats, stops)
        out["hf_prompt_lookup_speedup"] = out["hf_plain_s"] / out["hf_prompt_lookup_s"]
    return out


def run_speculative_bench(prompts: Sequence[str] | Mapping[str, Sequence[str]] = DEFAULT_PROMPTS,
                          new_tokens: int = 128, drafters: Sequence[str] = DEFAULT_DRAFTERS,
                          ks: Sequence[int] = (2, 4, 8), dtype: str = "fp32",
                          repeats: int = 1, threads: int | None = 1,
                          transformers: bool = True, model_name: str | None = None,
                          tree_widths: Sequence[int] = (1,), adaptive: bool = True,
                          skip_auto_group: str | None = "open",
                          stop_at_eos: bool = True, eagle_ks: Sequence[int] = (),
                          medusa_ks: Sequence[int] = ()) -> dict:
    """Per drafter, K and tree width (`tree_widths` > 1: ngram only): acceptance_rate,
    mean_acceptance_length, tokens_per_target_forward, alpha, theory_tokens_per_forward,
    speedup_wall (against plain decoding of the same prompts, this run); the adaptive-K row
    (`adaptive`, n-gram drafter); and hf_prompt_lookup_speedup. Chat template applied.
    `skip_auto_group`: the group that also gets the `skip_auto` figures (None: none).
    `new_tokens`: the most each prompt emits (all of them, ignoring the end of turn, when not
    `stop_at_eos`); `emitted_tokens` in each row says how many were. `eagle_ks`: the K of
    the EAGLE head's rows (each group's `eagle`), where the model has a head (none: no rows;
    `eagle_head` says which file or null; `eagle_train_s` its record's time from nothing:
    features built + trained, null where the record does not say). `medusa_ks`: the same
    for Medusa heads (`medusa`, `medusa_head`, `medusa_train_s`).
    `prompts` a list (the figures at the top level) or groups of them by name (the figures
    under each name: `grounded`, `open`). `model_name`: another `load_model` name (default
    SmolLM2; transformers only runs that). fp32 by default: the CPU runtime's fastest path
    (every layer of a step in one native call; bf16 widens in registers and runs the small ops
    one by one: on an AVX2 EPYC, plain bf16 decode 94 ms a token against fp32's 45)."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        model_name = model_name or SMOLLM2_ID
        model, tok = load_model(model_name, dtype=dtype)
        groups = dict(prompts) if isinstance(prompts, Mapping) else {None: prompts}
        ids = {name: [tok.encode_prompt(p) for p in texts] for name, texts in groups.items()}
        stops = tuple(tok.eos_token_ids) if stop_at_eos else ()
        plain_decode(model, next(iter(ids.values())), new_tokens, stops)  # warm up
        verify_costs = verify_cost_ratios(
            model, range(1, max((*ks, *eagle_ks, *medusa_ks, AUTO_K_MAX)) + 1))
        head_ks = {"eagle": tuple(eagle_ks), "medusa": tuple(medusa_ks)}
        paths = {kind: head_path(model, kind) if kks else None for kind, kks in head_ks.items()}
        out: dict = {"model": model_name, "dtype": dtype, "new_tokens": new_tokens,
                     "stop_at_eos": bool(stops), "threads": torch.get_num_threads(),
                     "repeats": repeats,
                     "verify_cost_ratios": {str(k): v for k, v in verify_costs.items()},
                     **{f"{kind}_head": None if path is None else str(path)
                        for kind, path in paths.items()},
                     **{f"{kind}_train_s": _train_s(path) for kind, path in paths.items()}}
        hf_model = None
        if transformers and model_name == SMOLLM2_ID:
            try:
                hf_model = load_transformers_gguf(smollm2_gguf_path(), resolve_dtype(dtype))
            except ImportError as e:
                out["transformers_error"] = f"transformers not installed: {e}"
        for name, group_ids in ids.items():
            figures = _group(model, tok, group_ids, new_tokens, drafters, ks, tree_widths,
                             repeats, adaptive, hf_model, with_skip_auto=name == skip_auto_group,
                             stops=stops, verify_costs=verify_costs, head_ks=head_ks,
                             head_paths=paths)
            if name is None:
                out.update(figures)
            else:
                out[name] = figures
        if None not in ids:
            out["groups"] = list(ids)
        return out
    finally:
        torch.set_num_threads(before)


def run_speculative_lab_bench(new_tokens: int = 128, ks: Sequence[int] = (2, 4, 8),
                              drafters: Sequence[str] = DEFAULT_DRAFTERS,
                              repeats: int = 1, tree_widths: Sequence[int] = (1, 3),
                              eagle_ks: Sequence[int] = EAGLE_KS,
                              medusa_ks: Sequence[int] = MEDUSA_KS) -> dict:
    """`inferlab bench speculative --json`: `run_speculative_bench` on SmolLM2 greedy (fp32,
    CPU) over the lab's shipped prompts (assets/text/speculative_prompts.txt) in their two
    groups, `grounded` (the answer copies from the prompt) and `open` (chat), each with its own
    figures, best row, adaptive-K row and transformers' prompt lookup; the n-gram drafter also
    as token trees of width 1 and 3; the EAGLE head's rows at each K of `eagle_ks`, the Medusa
    heads' at each of `medusa_ks` (where the model has them). Each
    decode runs to the model's end of turn, at most `new_tokens` tokens."""
    return run_speculative_bench(prompt_groups(), new_tokens=new_tokens, drafters=drafters,
                                 ks=ks, repeats=repeats, tree_widths=tree_widths,
                                 eagle_ks=eagle_ks, medusa_ks=medusa_ks)
