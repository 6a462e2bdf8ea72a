"""`inferlab generate`: run a model on a prompt, decoding through the paged KV cache."""

from __future__ import annotations

import sys

from inferlab.app.cli import add_kernels_option, print_json
from inferlab.engines.model.generate import generate
from inferlab.engines.model.registry import MODEL_NAMES, load_model
from inferlab.engines.model.sampler import GREEDY, SamplingParams


def register(sub) -> None:
    p = sub.add_parser("generate", help="generate text with a model (paged KV cache)")
    p.add_argument("--model", default="smollm2-135m",
                   help=f"{', '.join(MODEL_NAMES)} (default smollm2-135m), or a .gguf file / "
                        "Hugging Face folder")
    p.add_argument("--prompt", required=True, help="the user prompt")
    p.add_argument("--max-tokens", type=int, default=64, help="new tokens at most (default 64)")
    p.add_argument("--greedy", action="store_true", help="argmax decoding (the default sampling "
                   "is temperature 0.7, top-p 0.9, seeded)")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--raw", action="store_true",
                   help="do not apply the chat template (a model without one, such as the base "
                        "gemma3-270m, always runs raw)")
    p.add_argument("--no-cache", action="store_true",
                   help="recompute the whole sequence every step (the reference)")
    p.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"))
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: torch's choice; 1 is often fastest on a "
                        "busy machine)")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_kernels_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import torch


    if args.max_tokens < 1:
        raise ValueError("--max-tokens must be at least 1")
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError("--threads must be at least 1")
        torch.set_num_threads(args.threads)
    sampling = GREEDY if args.greedy else SamplingParams(args.temperature, args.top_p, args.seed)
    model, tokenizer = load_model(args.model, args.dtype, args.device)
    chat = not args.raw and tokenizer.chat_template is not None
    if not args.raw and not chat:
        print(f"[{model.config.id} has no chat template: the prompt runs raw, as with --raw]",
              file=sys.stderr)
    prompt_ids = tokenizer.encode_prompt(args.prompt, chat=chat)
    result = generate(model, [prompt_ids], args.max_tokens, sampling,
                      stop_token_ids=tokenizer.eos_token_ids, use_cache=not args.no_cache)
    gen = result.generations[0]
    text = tokenizer.decode(gen.token_ids)
    if args.json:
        print_json({"model": model.config.id, "prompt_token_ids": list(prompt_ids),
                    "token_ids": list(gen.token_ids), "text": text,
                    "tokens_per_s": result.tokens_per_s, "finish_reason": gen.finish_reason,
                    "prefill_s": result.prefill_s, "decode_s": result.decode_s,
                    "dtype": args.dtype, "device": str(model.device),
                    "threads": torch.get_num_threads(),
                    "cache": not args.no_cache, "chat_template": chat})
        return 0
    sys.stdout.write(text + "\n")
    print(f"[{len(gen.token_ids)} tokens, {result.tokens_per_s:.1f} tokens/s decode, "
          f"prefill {result.prefill_s * 1e3:.0f} ms, {gen.finish_reason}]", file=sys.stderr)
    return 0
