"""`inferlab train-head`: train an EAGLE or Medusa draft head for a model from its own outputs
(engines.speculative.heads), save it in the user cache and print its curve."""

from __future__ import annotations

from pathlib import Path

import platformdirs

from inferlab.app.cli import add_kernels_option, print_json
from inferlab.app.cli_progress import CliProgress
from inferlab.engines.model.registry import MODEL_NAMES, load_model
from inferlab.engines.speculative.heads.build import train_head
from inferlab.engines.speculative.heads.dims import KINDS
from inferlab.engines.speculative.heads.train import TrainSettings

DEFAULTS = TrainSettings()


def register(sub) -> None:
    p = sub.add_parser("train-head", help="train an EAGLE or Medusa draft head for a model")
    p.add_argument("--model", default="smollm2-135m",
                   help=f"{', '.join(MODEL_NAMES)} (default smollm2-135m), or a .gguf file / "
                        "Hugging Face folder")
    p.add_argument("--kind", choices=KINDS, default="eagle")
    p.add_argument("--epochs", type=int, default=DEFAULTS.epochs)
    p.add_argument("--seed", type=int, default=DEFAULTS.seed)
    p.add_argument("--lr", type=float, default=DEFAULTS.lr)
    p.add_argument("--batch-windows", type=int, default=DEFAULTS.batch_windows)
    p.add_argument("--window-tokens", type=int, default=DEFAULTS.window_tokens)
    p.add_argument("--draft-vocab", type=int, default=DEFAULTS.draft_vocab_size,
                   help="the draft vocabulary's size (the most frequent target tokens; "
                        f"default {DEFAULTS.draft_vocab_size}, clipped to the vocabulary)")
    p.add_argument("--medusa-heads", type=int, default=DEFAULTS.n_medusa)
    p.add_argument("--second-step-weight", type=float, default=DEFAULTS.step2_weight,
                   help="EAGLE: weight of the training-time test, the head's second drafting "
                        "step trained on its own first outputs (EAGLE-3's; 0: off; default "
                        f"{DEFAULTS.step2_weight:g}). About twice the training time; drafts "
                        "past the first pay for it")
    p.add_argument("--max-new-tokens", type=int, default=DEFAULTS.max_new_tokens,
                   help="the longest answer the model writes per training prompt")
    p.add_argument("--out", default=None,
                   help="the head file (default: the user cache, keyed by the model's hash)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_kernels_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import torch

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError("--threads must be at least 1")
        torch.set_num_threads(args.threads)
    settings = TrainSettings(kind=args.kind, seed=args.seed, epochs=args.epochs, lr=args.lr,
                             batch_windows=args.batch_windows,
                             window_tokens=args.window_tokens,
                             draft_vocab_size=args.draft_vocab, n_medusa=args.medusa_heads,
                             step2_weight=args.second_step_weight,
                             max_new_tokens=args.max_new_tokens)
    settings.check()  # named errors before the model loads
    model, tok = load_model(args.model)
    cache = Path(platformdirs.user_cache_dir("inferlab"))
    out = Path(args.out).expanduser() if args.out else None
    with CliProgress(f"train-head {args.kind}") as bar:
        def progress(stage: str, done: int, total: int, loss: float | None) -> None:
            bar(done / total if total else None,
                f"{stage} {done}/{total}" + ("" if loss is None else f" loss {loss:.3f}"))

        build = train_head(model, tok, settings, cache, out, progress)
    head = build.head
    summary = {"model": model.config.id, "kind": head.kind, "path": str(build.path),
               "model_hash": head.model_hash, "draft_vocab_size": head.vocab.size,
               "features_s": build.features_s, "features_cached": build.features_cached,
               "train_s": build.train_s, "training": head.training}
    if args.json:
        print_json(summary)
        return 0
    t = head.training
    print(f"{head.kind} head for {model.config.id}: {build.path}")
    print(f"  data: {t['train_sequences']} sequences, {t['train_tokens']:,} tokens; draft "
          f"vocabulary {head.vocab.size:,} (covers {t['draft_vocab_coverage_held_out']:.1%} of "
          "held-out greedy tokens)")
    print(f"  features {build.features_s:.1f} s{' (cached)' if build.features_cached else ''}, "
          f"training {build.train_s:.1f} s")
    print("  epoch  loss     tokens/forward  first-token agreement  (held-out answers)")
    for p in t["curve"]:
        loss = "-" if p["train_loss"] is None else f"{p['train_loss']:.4f}"
        print(f"  {p['epoch']:>5}  {loss:<8} {p['tokens_per_forward']:>14.3f}  "
              f"{p['first_token_agreement']:>21.3f}")
    return 0
