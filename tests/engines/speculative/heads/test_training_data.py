"""The training list never holds the speculative bench's prompts."""

from __future__ import annotations

from inferlab.engines.labs.speculative.settings import prompt_groups
from inferlab.engines.speculative.heads import prompt_bank, training_data


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
    chat = training_data.chat_train_prompts()
    assert len(chat) == 42 - 2 - training_data.HELD_OUT_COUNT  # prompts.txt has 42 lines
    assert set(chat) <= train


def test_templated_prompts_stay_off_the_bench_subjects():
    templated = prompt_bank.topic_prompts() + prompt_bank.paragraph_prompts(
        training_data.paragraph_sources())
    assert len(templated) > 700  # ~20x the chat prompts: the data the head needs
    assert set(templated) <= set(training_data.train_prompts())
    for p in templated:
        assert not prompt_bank.mentions_bench_subject(p), p
    # the check itself: each bench open prompt names one of the words
    bench_open = prompt_groups()["open"]
    assert all(prompt_bank.mentions_bench_subject(p) for p in bench_open), bench_open
    assert "ferry.txt" not in training_data.paragraph_sources()


def test_paragraphs_hand_worked():
    text = "short\n\n" + "a " * 60 + "\n\nThe cat sat " + "b " * 50 + "\n\n" + "c" * 800
    assert prompt_bank.paragraphs(text) == [("a " * 60).strip()]
