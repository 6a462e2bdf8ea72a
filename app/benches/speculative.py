"""`inferlab bench speculative --json`: engines.labs.speculative.bench.run_speculative_bench on
SmolLM2 greedy (fp32, CPU): per drafter and K of a small sweep (and, for the n-gram drafter, token
trees of width 1 and 3), acceptance_rate,
mean_acceptance_length, tokens_per_target_forward, theory_tokens_per_forward and speedup_wall
against plain decoding of the same prompts in the same run; hf_prompt_lookup_speedup
(transformers' prompt lookup, prompt_lookup_num_tokens=10) measured in the same run.

The lab's shipped prompts (assets/text/speculative_prompts.txt) are the bench's prompts, in
their two groups: `grounded` (the answer copies from the prompt) and `open` (chat), each with
its own figures, best row, adaptive-K row and transformers' prompt lookup. Each decode runs to
the model's end of turn, at most `new_tokens` tokens."""

from __future__ import annotations

from collections.abc import Sequence

from inferlab.engines.labs.speculative.bench import DEFAULT_DRAFTERS, run_speculative_bench


def run_speculative_lab_bench(new_tokens: int = 128, ks: Sequence[int] = (2, 4, 8),
                              drafters: Sequence[str] = DEFAULT_DRAFTERS,
                              repeats: int = 1, tree_widths: Sequence[int] = (1, 3)) -> dict:
    from inferlab.engines.labs.speculative.settings import prompt_groups

    return run_speculative_bench(prompt_groups(), new_tokens=new_tokens, drafters=drafters,
                                 ks=ks, repeats=repeats, tree_widths=tree_widths)
