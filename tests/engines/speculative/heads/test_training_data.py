"""The training list never holds the speculative bench's prompts."""

from __future__ import annotations

from inferlab.engines.labs.speculative.settings import prompt_groups
from inferlab.engines.speculative.heads import training_data


def test_bench_prompts_are_never_trained_on():
    bench = [p for group in prompt_groups().values() for p in group]
    assert bench  # both groups read
    trained = list(training_data.train_prompts()) + list(training_data.train_texts().values())
    for prompt in bench:
        assert all(prompt not in text for text in trained), prompt


def test_excluded_and_held_out_prompts_stay_out_of_training():
    train = set(training_data.train_prompts())
    held = set(training_data.held_out_prompts())
    assert len(held) == training_data.HELD_OUT_COUNT
    assert not train & held
    assert not (train | held) & set(training_data.EXCLUDED_PROMPTS)
    assert len(train) == 42 - 2 - training_data.HELD_OUT_COUNT  # prompts.txt has 42 lines
