"""`inferlab run attention --n N --d D --br BR --bc BC [--causal] --json`: the three
executions run to their end on the same seeded Q, K, V, each one's counted bytes, steps and
error against torch SDPA beside the closed forms."""

from __future__ import annotations

from inferlab.engines.fields import check_settings
from inferlab.engines.labs.attention.section import attention_section
from inferlab.engines.labs.attention.session import AttentionSession, run_executions
from inferlab.engines.labs.attention.settings import (
    ATTENTION_DEFAULTS,
    ATTENTION_SETTINGS,
    ELEMENT_BYTES,
)
from inferlab.engines.labs.attention.source import SOURCES


def add_arguments(p) -> None:
    d = ATTENTION_DEFAULTS
    p.add_argument("--n", type=int, default=d["n"], help=f"rows of Q, K, V (default {d['n']})")
    p.add_argument("--d", type=int, default=d["d"], help=f"head width (default {d['d']})")
    p.add_argument("--heads", type=int, default=d["heads"], help="heads (default 1)")
    p.add_argument("--br", type=int, default=d["br"], help=f"Q tile rows (default {d['br']})")
    p.add_argument("--bc", type=int, default=d["bc"],
                   help=f"K/V tile rows, and split-K's chunk (default {d['bc']})")
    p.add_argument("--on-chip-kib", type=int, default=0,
                   help="on-chip memory M in KiB: Br and Bc chosen from it as FlashAttention "
                        "does (default 0: --br and --bc as given)")
    p.add_argument("--causal", action="store_true", help="causal mask")
    p.add_argument("--seed", type=int, default=d["seed"], help="seed of Q, K, V (default 0)")
    p.add_argument("--source", default=d["source"], choices=SOURCES,
                   help="Q, K, V: seeded normal values (default), or one layer of a model on "
                        "the shipped texts (its own d; N at most the text's ~7,700 tokens)")
    p.add_argument("--layer", type=int, default=d["layer"],
                   help="the model layer whose Q, K, V are used (--source a model)")
    p.add_argument("--device", default="cpu", help="where the model runs (default cpu)")
    p.add_argument("--stepped", default=d["execution"], choices=("naive", "tiled", "split_k"),
                   help="the execution whose steps the snapshot keeps (default tiled)")


def run(args, recorder):
    settings = check_settings(
        {"n": args.n, "d": args.d, "heads": args.heads, "causal": bool(args.causal),
         "br": args.br, "bc": args.bc, "on_chip_kib": args.on_chip_kib,
         "execution": args.stepped, "seed": args.seed, "source": args.source,
         "layer": args.layer},
        ATTENTION_SETTINGS, ATTENTION_DEFAULTS, "options")
    progress = getattr(args, "progress", None)
    executions = {}
    for execution in ("naive", "tiled", "split_k"):
        if progress is not None:
            progress(None, f"{execution}")
        with recorder.span(f"attention {execution}", cat="attention"):
            executions |= run_executions(settings, (execution,), device=args.device)
    session = AttentionSession(settings, args.device)  # the stepped one's records, for the snapshot
    records = []
    while not session.done:
        records.append(session.step())
    section = attention_section(settings, session.info, records)
    info = session.info
    summary = {"source": info.source, "n": info.n, "d": info.d, "heads": info.heads, "causal": info.causal,
               "br": info.br, "bc": info.bc, "element_bytes": ELEMENT_BYTES,
               "executions": executions}
    return section, summary
