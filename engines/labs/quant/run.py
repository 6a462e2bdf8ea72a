"""`inferlab run quant`: one scheme on the whole model beside the model as loaded, headless:
perplexity on each held-out text and their mean (and how it was computed: convention,
window, stride), weight and KV bytes, SQNR per linear, decode tokens/s, the calibration
tokens the scheme saw, a sample.

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

from pathlib import Path

from inferlab.engines.labs.quant.section import quant_section
from inferlab.engines.labs.quant.session import QuantSession
from inferlab.engines.labs.quant.settings import (
    FP32,
    LINEAR_CHOICES,
    QUANT_DEFAULTS,
    check_quant_settings,
    lab_schemes,
    layer_schemes,
)
from inferlab.engines.model.perplexity import CONVENTIONS
from inferlab.engines.quant.errors import QuantError

MAX_EVAL_BYTES = 4 << 20


def add_arguments(p) -> None:
    p.add_argument("--model", default="smollm2-135m",
                   help="smollm2-135m, gemma3-270m (loaded as fp32: its Q4_K_M codes are the "
                        "reference point), tiny, auto or a .gguf path; tiny-moe is refused "
                        "(Mixture-of-Experts layers) (default smollm2-135m)")
    p.add_argument("--scheme", default="int4-g128", metavar="NAME",
                   help=f"one of {', '.join(lab_schemes())} (default int4-g128)"
                   .replace("%", "%%"))  # argparse formats help: a scheme may hold a %
    p.add_argument("--eval-text", action="append", default=None, metavar="FILE",
                   help="score perplexity on this UTF-8 text, named by its file name; "
                        "repeatable (default: the three shipped held-out texts, "
                        "assets/text/clocks.txt, kiln.txt, backups.txt)")
    p.add_argument("--calibration-text", action="append", default=None, metavar="FILE",
                   help="calibrate GPTQ, AWQ and Wanda on this UTF-8 text instead of the "
                        "shipped set (assets/text/calibration/, 35k SmolLM2 tokens); "
                        "repeatable: your own corpus, file by file")
    p.add_argument("--ppl-convention", default=QUANT_DEFAULTS["ppl_convention"],
                   choices=CONVENTIONS,
                   help="sliding: windows of --ppl-window every --ppl-stride tokens, every "
                        "token scored once; llama.cpp: llama-perplexity's chunks of n_ctx = "
                        "--ppl-window, the second half of each scored (default sliding)")
    p.add_argument("--ppl-window", default=str(QUANT_DEFAULTS["ppl_window_tokens"]),
                   metavar="N|full",
                   help="perplexity window (llama.cpp: n_ctx) in tokens, or 'full' for the "
                        "model's whole context (default 1024)")
    p.add_argument("--ppl-stride", type=int, default=None, metavar="N",
                   help="tokens between sliding windows' starts (default window - 1)")
    p.add_argument("--layer", type=int, default=0, help="the layer drawn in the snapshot")
    p.add_argument("--linear", default="gate_up", choices=LINEAR_CHOICES,
                   help="the linear drawn in the snapshot (default gate_up)")
    p.add_argument("--decode-tokens", type=int, default=QUANT_DEFAULTS["decode_tokens"],
                   help="greedy tokens timed for decode tokens/s (default 32)")
    p.add_argument("--no-speed", action="store_true", help="skip the decode timing")
    p.add_argument("--device", default="cpu", help="where the model runs (default cpu)")


def _text_file(path: str, option: str) -> str:
    p = Path(path)
    try:
        if p.stat().st_size > MAX_EVAL_BYTES:
            raise ValueError(f"{option}: {path} is larger than {MAX_EVAL_BYTES >> 20} MiB")
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{option}: {path} is not UTF-8 text") from None
    except OSError as e:
        raise ValueError(f"{option}: cannot read {path}: {e.strerror or e}") from None
    if not text.strip():
        raise ValueError(f"{option}: {path} is empty")
    return text


def _eval_texts(paths: list[str] | None) -> dict[str, str] | None:
    """File name -> text of each --eval-text (None: the shipped held-out texts)."""
    if not paths:
        return None
    out = {}
    for path in paths:
        name = Path(path).name
        while name in out:
            name = f"{name}'"
        out[name] = _text_file(path, "--eval-text")
    return out


def _window(value: str) -> int | None:
    if value == "full":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"--ppl-window: expected a number of tokens or 'full', got "
                         f"{value!r}") from None


def run(args, recorder):
    if args.scheme not in lab_schemes():
        raise ValueError(f"--scheme: expected one of {', '.join(lab_schemes())}, got "
                         f"{args.scheme!r}")
    schemes = [FP32] if args.scheme == FP32 else [FP32, args.scheme]
    settings = check_quant_settings(dict(
        QUANT_DEFAULTS, model=args.model, layer=args.layer, linear=args.linear,
        layer_scheme=args.scheme if args.scheme in layer_schemes()
        else QUANT_DEFAULTS["layer_scheme"],
        schemes=schemes, measure_speed=not args.no_speed, decode_tokens=args.decode_tokens,
        ppl_convention=args.ppl_convention, ppl_window_tokens=_window(args.ppl_window),
        ppl_stride_tokens=args.ppl_stride))
    texts = _eval_texts(args.eval_text)
    calibration = None if not args.calibration_text else [
        _text_file(p, "--calibration-text") for p in args.calibration_text]
    progress = getattr(args, "progress", None)  # progress(fraction, message), when given one
    with recorder.span("load the model and tokenize the held-out texts", cat="quant",
                       args={"model": args.model}):
        session = QuantSession.open(args.model, args.device, texts,
                                    progress=None if progress is None
                                    else lambda _fraction, message: progress(None, message),
                                    calibration_texts=calibration)
    try:
        session.set_perplexity(settings["ppl_window_tokens"], settings["ppl_stride_tokens"],
                               settings["ppl_convention"])
    except ValueError as e:
        raise ValueError(f"--ppl-window / --ppl-stride: {e}") from None
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
    eval_texts = {k: len(v) for k, v in session.eval_sets.items()}
    section = quant_section(settings, session.model_name, eval_texts, layer, runs,
                            session.ppl_method())
    base, got = runs[0], runs[-1]
    summary = {
        "model": session.model_name, "scheme": got.scheme,
        "perplexity": got.perplexity, "fp32_perplexity": base.perplexity,
        "perplexity_by_text": got.perplexity_by_text,
        "fp32_perplexity_by_text": base.perplexity_by_text,
        "eval_tokens": session.eval_tokens, "eval_texts": eval_texts,
        **session.ppl_method(),
        "calibration_tokens": got.calibration_tokens,
        "weight_bytes": got.weight_bytes, "fp32_weight_bytes": base.weight_bytes,
        "kv_bytes_per_token": got.kv_bytes_per_token,
        "decode_tokens_per_s": got.decode_tokens_per_s,
        "fp32_decode_tokens_per_s": base.decode_tokens_per_s,
        "runs_as": got.runs_as, "quantize_seconds": got.quantize_s,
        "sample_text": got.sample_text, "sample_agree_tokens": got.sample_agree_tokens,
        "sqnr_db": got.sqnr_db,
    }
    return section, summary
