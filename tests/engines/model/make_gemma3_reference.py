"""Write data/gemma3_transformers_greedy.json: transformers' own greedy tokens for Gemma 3 270M
(its fp32 model of the shipped GGUF), the reference test_gemma3.py compares ours with.

transformers takes about a minute to dequantize the file, too long for every `make test`, so
its answer is recorded here; run `python -m tests.engines.model.make_gemma3_reference` again
after changing the prompts, the file or transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from inferlab.engines.model.bench import load_transformers_gguf
from inferlab.engines.model.gemma_file import gemma3_gguf_path
from inferlab.engines.model.gguf_file import GGUFFile
from inferlab.engines.model.gguf_tokenizer import tokenizer_from_gguf
from inferlab.engines.quant.calibration import eval_text

OUT = Path(__file__).parent / "data" / "gemma3_transformers_greedy.json"
NEW_TOKENS = 8
LONG_PROMPT_TOKENS = 700  # past the 512-token sliding window


def reference_prompts(tok) -> list[list[int]]:
    return [tok.encode("The capital of France is"),
            tok.encode(eval_text())[:LONG_PROMPT_TOKENS]]


def main() -> None:
    import transformers

    path = gemma3_gguf_path()
    tok = tokenizer_from_gguf(GGUFFile(path))
    prompts = reference_prompts(tok)
    hf = load_transformers_gguf(path)
    greedy = []
    with torch.inference_mode():
        for ids in prompts:
            seq = list(ids)
            for _ in range(NEW_TOKENS):
                seq.append(int(hf(torch.tensor([seq])).logits[0, -1].argmax()))
            greedy.append(seq[len(ids):])
    OUT.write_text(json.dumps({
        "transformers": transformers.__version__, "torch": torch.__version__,
        "file_bytes": path.stat().st_size, "new_tokens": NEW_TOKENS,
        "prompts": prompts, "greedy": greedy}) + "\n")
    print(f"wrote {OUT}: {greedy}")


if __name__ == "__main__":
    main()
