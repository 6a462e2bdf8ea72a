"""`inferlab run quant`: one scheme on the whole model beside the model as loaded, headless:
perplexity on held-out text, weight and KV bytes, SQNR per linear, decode tokens/s, a sample.

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

from pathlib import Path

from inferlab.engines.quantlab.evaluation import FP32, lab_schemes
from inferlab.engines.quantlab.section import (
    LINEAR_CHOICES,
    QUANT_DEFAULTS,
    check_quant_settings,
    layer_schemes,
    quant_section,
)

MAX_EVAL_BYTES = 4 << 20


def add_arguments(p) -> None:
    p.add_argument("--model", default="smollm2-135m",
                   help="tiny, smollm2-135m, auto or a .gguf path (default smollm2-135m)")
    p.add_argument("--scheme", default="int4-g128", metavar="NAME",
                   help=f"one of {', '.join(lab_schemes())} (default int4-g128)")
    p.add_argument("--eval-text", default=None, metavar="FILE",
                   help="score perplexity on this UTF-8 text (default: the shipped held-out "
                        "passage, assets/text/clocks.txt)")
    p.add_argument("--layer", type=int, default=0, help="the layer drawn in the snapshot")
    p.add_argument("--linear", default="gate_up", choices=LINEAR_CHOICES,
                   help="the linear drawn in the snapshot (default gate_up)")
    p.add_argument("--decode-tokens", type=int, default=QUANT_DEFAULTS["decode_tokens"],
                   help="greedy tokens timed for decode tokens/s (default 32)")
    p.add_argument("--no-speed", action="store_true", help="skip the decode timing")
    p.add_argument("--device", default="cpu", help="where the model runs (default cpu)")


def _eval_text(path: str | None) -> str | None:
    if path is None:
        return None
    p = Path(path)
    try:
        if p.stat().st_size > MAX_EVAL_BYTES:
            raise ValueError(f"--eval-text: {path} is larger than {MAX_EVAL_BYTES >> 20} MiB")
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"--eval-text: {path} is not UTF-8 text") from None
    except OSError as e:
        raise ValueError(f"--eval-text: cannot read {path}: {e.strerror or e}") from None
    if not text.strip():
        raise ValueError(f"--eval-text: {path} is empty")
    return text


def run(args, recorder):
    from inferlab.engines.quant.errors import QuantError
    from inferlab.engines.quantlab.session import QuantSession

    if args.scheme not in lab_schemes():
        raise ValueError(f"--scheme: expected one of {', '.join(lab_schemes())}, got "
                         f"{args.scheme!r}")
    schemes = [FP32] if args.scheme == FP32 else [FP32, args.scheme]
    settings = check_quant_settings(dict(
        QUANT_DEFAULTS, model=args.model, layer=args.layer, linear=args.linear,
        layer_scheme=args.scheme if args.scheme in layer_schemes()
        else QUANT_DEFAULTS["layer_scheme"],
        schemes=schemes, measure_speed=not args.no_speed, decode_tokens=args.decode_tokens))
    text = _eval_text(args.eval_text)
    progress = getattr(args, "progress", None)  # progress(fraction, message), when given one
    with recorder.span("load the model and tokenize the held-out text", cat="quant",
                       args={"model": args.model}):
        session = QuantSession.open(args.model, args.device, text,
                                    progress=None if progress is None
                                    else lambda _fraction, message: progress(None, message))
    try:
        layer = session.analyse(settings["layer"], settings["linear"], settings["layer_scheme"])
    except QuantError as e:
        raise ValueError(f"--layer: {e}") from None
    decode = None if args.no_speed else settings["decode_tokens"]
    runs = []
    for i, name in enumerate(schemes):
        # GPTQ and AWQ report each layer; the schemes share the bar evenly
        share = None if progress is None else (
            lambda f, m, i=i: progress((i + f) / len(schemes), m))
        with recorder.span(f"{name}: quantize, score, time, sample", cat="quant",
                           args={"scheme": name}):
            runs.append(session.run(name, decode, share))
    section = quant_section(settings, session.model_name, len(session.eval_ids), layer, runs)
    base, got = runs[0], runs[-1]
    summary = {
        "model": session.model_name, "scheme": got.scheme,
        "perplexity": got.perplexity, "fp32_perplexity": base.perplexity,
        "eval_tokens": len(session.eval_ids),
        "weight_bytes": got.weight_bytes, "fp32_weight_bytes": base.weight_bytes,
        "kv_bytes_per_token": got.kv_bytes_per_token,
        "decode_tokens_per_s": got.decode_tokens_per_s,
        "fp32_decode_tokens_per_s": base.decode_tokens_per_s,
        "runs_as": got.runs_as, "quantize_seconds": got.quantize_s,
        "sample_text": got.sample_text, "sample_agree_tokens": got.sample_agree_tokens,
        "sqnr_db": got.sqnr_db,
    }
    return section, summary
