"""The speculative lab's snapshot section (`labs.speculative`): the settings, the run's header
(model, drafter, prompt ids, the text of every token seen), every step as a dict
(records.py), the statistics (metrics.py) and the K sweep if one ran;
`read_speculative_section` reads it strictly, once, into a `SpeculativeSnapshot` (ValueError
naming the field).
"""

from __future__ import annotations

from inferlab.engines.fields import Setting, read_list, read_name, read_object, read_probability
from inferlab.engines.labs.speculative.metrics import speculative_metrics
from inferlab.engines.labs.speculative.records import (
    SpeculativeHeader,
    SpeculativeSnapshot,
    step_from_dict,
    step_to_dict,
)
from inferlab.engines.labs.speculative.settings import (
    MAX_K,
    MAX_TREE_WIDTH,
    STEPS_LIMIT,
    check_speculative_settings,
)
from inferlab.engines.labs.speculative.sweep_records import sweep_from_dict, sweep_to_dict
from inferlab.engines.trace.snapshot import lab_section, section_field


def speculative_section(settings: dict, header: SpeculativeHeader | None, steps,
                        sweep=None) -> dict:
    """The snapshot's `labs.speculative` (no header: the lab had not run); `sweep`, a
    `KSweep`, is kept under state["sweep"]."""
    if header is None:
        return lab_section(settings, {}, {"target_forwards": 0})
    extra = {}
    if sweep is not None:
        extra["sweep"] = sweep_to_dict(sweep)
    state = {**extra, "model": header.model, "drafter": header.drafter, "k": header.k,
             "tree_width": header.tree_width, "n_layers": header.n_layers,
             "head_accept_by_position": list(header.head_accept_by_position),
             "prompt_token_ids": list(header.prompt_token_ids),
             "token_texts": {str(t): text for t, text in sorted(header.token_texts.items())},
             "steps": [step_to_dict(s) for s in steps]}
    return lab_section(settings, state, speculative_metrics(steps, header.k))


def read_speculative_section(sec) -> SpeculativeSnapshot:
    """The section as a `SpeculativeSnapshot`; ValueError names a bad field. The metrics are
    recomputed from the steps read."""
    where = "labs.speculative"
    settings = check_speculative_settings(section_field(sec, "settings", where),
                                          f"{where}.settings")
    state = read_object(section_field(sec, "state", where), f"{where}.state")
    read_object(section_field(sec, "metrics", where), f"{where}.metrics")  # recomputed
    if not state:
        return SpeculativeSnapshot(settings, None, (), {})
    w = f"{where}.state"
    strings = {key: read_name(section_field(state, key, w), f"{w}.{key}")
               for key in ("model", "drafter")}
    k = Setting("int", 1, MAX_K)(section_field(state, "k", w), f"{w}.k")
    width = Setting("int", 1, MAX_TREE_WIDTH)(state.get("tree_width", 1), f"{w}.tree_width")
    n_layers = Setting("int", 0, 100_000)(section_field(state, "n_layers", w), f"{w}.n_layers")
    texts_raw = read_object(section_field(state, "token_texts", w), f"{w}.token_texts")
    texts: dict[int, str] = {}
    for key, text in texts_raw.items():
        if not (key.isascii() and key.isdigit() and len(key) <= 9) \
                or not isinstance(text, str):
            raise ValueError(f"{w}.token_texts[{key[:20]!r}]: expected a token id's text")
        texts[int(key)] = text
    vocab = 2**31
    prompt = Setting("int-list", 0, vocab - 1)(section_field(state, "prompt_token_ids", w),
                                               f"{w}.prompt_token_ids")
    if not prompt:
        raise ValueError(f"{w}.prompt_token_ids: expected at least one token")
    raw_steps = read_list(section_field(state, "steps", w), read_object, f"{w}.steps",
                          STEPS_LIMIT)
    steps = [step_from_dict(d, f"{w}.steps[{i}]", i, vocab) for i, d in enumerate(raw_steps)]
    for i, s in enumerate(steps):
        if len(s.drafted) > k:
            raise ValueError(f"{w}.steps[{i}].drafted: {len(s.drafted)} drafts, more than "
                             f"k = {k}")
        if len(s.tree_tokens) > k * width or (s.tree_tokens and width == 1):
            raise ValueError(f"{w}.steps[{i}].tree_tokens: {len(s.tree_tokens)} nodes; a "
                             f"tree of width {width} and depth k = {k} holds at most "
                             f"{k * width if width > 1 else 0}")
        if s.finish_reason is not None and i != len(steps) - 1:
            raise ValueError(f"{w}.steps[{i}].finish_reason: a step after it ran")
    head_acc = read_list(state.get("head_accept_by_position", []), read_probability,
                         f"{w}.head_accept_by_position", 64)
    header = SpeculativeHeader(strings["model"], strings["drafter"], k, tuple(prompt), texts,
                               n_layers, width, tuple(head_acc))
    sweep = sweep_from_dict(state["sweep"], f"{w}.sweep") if "sweep" in state else None
    return SpeculativeSnapshot(settings, header, tuple(steps), speculative_metrics(steps, k),
                               sweep)
