"""`inferlab run speculative`: one prompt decoded speculatively to its end, headless: each step
a trace span (draft, verify inside it), the run's statistics and its token ids as the summary.

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

import argparse
import time

from inferlab.engines.fields import option_error
from inferlab.engines.labs.speculative.section import speculative_section
from inferlab.engines.labs.speculative.session import speculative_session
from inferlab.engines.labs.speculative.settings import (
    AUTO_K_MAX,
    SPECULATIVE_DEFAULTS,
    check_speculative_settings,
    speculative_defaults,
)
from inferlab.engines.labs.speculative.sweep import k_point, plain_decode
from inferlab.engines.labs.speculative.sweep_records import KSweep
from inferlab.engines.labs.speculative.trace import speculative_trace_step
from inferlab.engines.model.registry import MODEL_NAMES
from inferlab.engines.speculative.verify_cost import verify_cost_ratios

OPTIONS = {"model": "--model", "drafter": "--drafter", "k": "--k", "tree_width": "--tree-width",
           "temperature": "--temperature", "top_p": "--top-p", "prompt": "--prompt",
           "max_tokens": "--max-tokens", "raw": "--raw", "seed": "--seed"}




def _k_option(text: str):
    """--k: a whole number, or auto."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") \
            from None


def add_arguments(p) -> None:
    d = SPECULATIVE_DEFAULTS
    p.add_argument("--model", default=d["model"],
                   help=f"the target: {', '.join(MODEL_NAMES)}, auto or a path "
                        f"(default {d['model']})")
    p.add_argument("--drafter", default=d["drafter"],
                   help="ngram (prompt lookup), layerskip:N (the target's first N layers), "
                        "quant:int8 or quant:int4 (the target with low-bit weights), eagle or "
                        "medusa (a draft head trained for the target: the shipped one, or "
                        "`inferlab train-head`'s) or tiny (the byte-level tiny model, for the "
                        "tiny and tiny-moe targets) (default "
                        f"{d['drafter']})")
    p.add_argument("--k", type=_k_option, default=d["k"],
                   help=f"draft tokens per step, K (default {d['k']}); auto: chosen each step "
                        f"in 0..{AUTO_K_MAX} from the run's measured acceptance and costs")
    p.add_argument("--tree-width", type=int, default=d["tree_width"],
                   help="candidate continuations verified per step as one token tree, 1..8 "
                        f"(ngram or eagle; default {d['tree_width']}: a chain)")
    p.add_argument("--temperature", type=float, default=d["temperature"],
                   help="0 for greedy (default 0)")
    p.add_argument("--top-p", type=float, default=d["top_p"],
                   help="nucleus sampling, in (0, 1] (default 1)")
    p.add_argument("--prompt", default=None,
                   help="the prompt (default: the lab's first shipped prompt)")
    p.add_argument("--raw", action="store_true", help="do not apply the chat template")
    p.add_argument("--max-tokens", type=int, default=d["max_tokens"],
                   help=f"tokens to generate at most (default {d['max_tokens']})")
    p.add_argument("--seed", type=int, default=d["seed"], help="the verifier's seed (default 0)")
    p.add_argument("--device", default="cpu", help="where the models run (default cpu)")
    p.add_argument("--compare-plain", action="store_true",
                   help="also decode the same prompt plainly (the target alone, greedy, as "
                        "many tokens) in this run: plain_decode_s and speedup_wall")


def settings_of(args) -> dict:
    """The run's settings from its arguments, checked; ValueError names the option."""
    prompt = speculative_defaults()["prompt"] if args.prompt is None else args.prompt
    auto = args.k == "auto"
    settings = dict(SPECULATIVE_DEFAULTS, model=args.model, drafter=args.drafter,
                    k=AUTO_K_MAX if auto else args.k, adaptive_k=auto,
                    tree_width=getattr(args, "tree_width", SPECULATIVE_DEFAULTS["tree_width"]),
                    temperature=args.temperature, top_p=args.top_p, prompt=prompt,
                    max_tokens=args.max_tokens, raw=bool(args.raw), seed=args.seed)
    try:
        return check_speculative_settings(settings, "settings")
    except ValueError as e:
        raise option_error(e, OPTIONS) from None


def run(args, recorder):
    """Decode the prompt to its end; (section, summary: statistics + token ids)."""
    settings = settings_of(args)
    progress = getattr(args, "progress", None)  # progress(fraction, message), when given one
    if progress is not None:
        progress(None, "loading the models")
    with recorder.span("load the models and encode the prompt", cat="speculative",
                       args={"model": settings["model"], "drafter": settings["drafter"]}):
        try:
            session = speculative_session(settings, args.device)
        except ValueError as e:
            text = str(e)
            if text.startswith(("drafter:", "prompt:")):
                raise ValueError(f"--{text}") from None
            raise
    emitted = 0
    decode_s = 0.0  # the draft-verify loop's wall time (its first step holds the prefill)
    while not session.done:
        start = recorder.now_s()
        t0 = time.perf_counter()
        step = session.step()
        decode_s += time.perf_counter() - t0
        speculative_trace_step(recorder, step, start)
        if progress is not None:
            emitted += len(step.token_ids)
            progress(emitted / settings["max_tokens"], f"{emitted} of at most "
                     f"{settings['max_tokens']} tokens")
    header = session.header()
    run_ = session.run()
    beside = (_plain_beside(session, run_, decode_s, settings, recorder, progress)
              if getattr(args, "compare_plain", False) else None)
    section = speculative_section(settings, header, session.records,
                                  None if beside is None else beside[1])
    m = section["metrics"]
    summary = {
        "token_ids": list(run_.token_ids),
        "text": session.tokenizer.decode(run_.token_ids),
        "acceptance_rate": m["acceptance_rate"],
        "tokens_per_target_forward": m["tokens_per_target_forward"],
        "target_forwards": m["target_forwards"],
        "mean_acceptance_length": m["mean_acceptance_length"],
        "alpha": m["alpha"],
        "theory_tokens_per_forward": m["theory_tokens_per_forward"],
        "theory_drafted_tokens_per_forward": m["theory_drafted_tokens_per_forward"],
        "acceptance_rate_by_position": m["acceptance_rate_by_position"],
        "finish_reason": run_.finish_reason,
        "model": header.model, "drafter": header.drafter, "k": header.k,
        "tree_width": header.tree_width,
        "decode_s": decode_s,
        "draft_lengths": [len(r.drafted) for r in session.records],
    }
    if session.note:
        summary["note"] = session.note
    policy = session.decoder.k_policy
    if policy is not None:
        summary["k_chosen"] = list(policy.chosen)  # per step; drafts may be fewer (n-grams)
    if beside is not None:
        summary.update(beside[0])
    return section, summary


def _plain_beside(session, run_, decode_s: float, settings: dict, recorder,
                  progress) -> tuple[dict, KSweep]:
    """The same prompt decoded plainly by the target (greedy, as many tokens): its wall time
    beside the speculative one's and whether the greedy outputs agree (the summary's
    fields), and the run as one point of a K sweep (the lab draws it on its speedup plot
    beside the model, with v(K) timed here)."""
    if progress is not None:
        progress(None, "plain decoding, for the comparison")
    target = session.decoder.target
    n = max(1, len(run_.token_ids))
    with recorder.span("plain decode (the comparison)", cat="speculative", args={"tokens": n}):
        plain = plain_decode(target, [session.decoder.prompt], n)
    plain_s, outs = plain.seconds, plain.outputs
    with recorder.span("time the verification steps, v(K)", cat="speculative"):
        verify_costs = verify_cost_ratios(target, range(1, run_.k + 1))
    greedy = settings["temperature"] == 0
    point = k_point(settings["drafter"], run_.k, [run_], plain_s, decode_s, outs,
                    run_.tree_width, verify_costs, plain.prefill_s)
    summary = {"plain_decode_s": plain_s,
               "speedup_wall": plain_s / decode_s if decode_s > 0 else None,
               "outputs_equal": (list(outs[0]) == list(run_.token_ids)) if greedy else None,
               "predicted_speedup": point.predicted_speedup,
               "predicted_speedup_wall": point.predicted_speedup_wall,
               "prefill_s": plain.prefill_s,
               "verify_cost_ratio": point.verify_cost_ratio, "draft_cost_ratio": point.cost_ratio}
    return summary, KSweep(session.header().model, settings["drafter"], settings["max_tokens"],
                           (point,))
