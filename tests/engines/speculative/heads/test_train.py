"""Training: the same seed gives the same head bit for bit; training raises the held-out
acceptance; cancelling stops it; bad settings are named."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.hardware.cancel import Cancelled
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.heads.head_file import tensors_sha256
from inferlab.engines.speculative.heads.train import TrainSettings, fit
from tests.engines.speculative.heads.helpers import HELD_PROMPTS, tiny_sequences

FAST = dict(epochs=2, window_tokens=32, batch_windows=2, lr=3e-3, draft_vocab_size=128,
            eval_k=3)


@pytest.fixture(scope="module")
def data(tiny):
    model, tok = tiny
    return tiny_sequences(model, tok), tiny_sequences(model, tok, HELD_PROMPTS)


def _digest(head) -> str:
    return tensors_sha256({**head.module.state_dict(), "d2t": head.vocab.d2t})


@pytest.mark.parametrize("kind", ["eagle", "medusa"])
def test_same_seed_same_head_bit_for_bit(tiny, data, kind):
    model, _ = tiny
    s = TrainSettings(kind=kind, seed=7, n_medusa=3, **FAST)
    a, b = fit(model, *data, s), fit(model, *data, s)
    assert _digest(a) == _digest(b)
    for name, t in a.module.state_dict().items():
        assert torch.equal(t, b.module.state_dict()[name]), name
    def timeless(curve):
        return [{k: v for k, v in point.items() if k != "elapsed_s"} for point in curve]

    assert timeless(a.training["curve"]) == timeless(b.training["curve"])
    other = fit(model, *data, TrainSettings(kind=kind, seed=8, n_medusa=3, **FAST))
    assert _digest(other) != _digest(a)


def test_noise_and_second_step_are_seeded_and_change_the_head(tiny, data):
    """The noise and the second step train (other heads than without them), and a seed
    still fixes the head bit for bit."""
    model, _ = tiny
    s = TrainSettings(seed=7, step2_weight=1.0, **FAST)
    a, b = fit(model, *data, s), fit(model, *data, s)
    assert _digest(a) == _digest(b)
    no_step2 = fit(model, *data, TrainSettings(seed=7, step2_weight=0.0, **FAST))
    no_noise = fit(model, *data, TrainSettings(seed=7, step2_weight=1.0, feature_noise=0.0,
                                               **FAST))
    assert len({_digest(a), _digest(no_step2), _digest(no_noise)}) == 3


def test_training_raises_held_out_acceptance(tiny, data):
    model, _ = tiny
    head = fit(model, *data, TrainSettings(**dict(FAST, epochs=6)))
    curve = head.training["curve"]
    assert [p["epoch"] for p in curve] == list(range(7))
    assert curve[0]["train_loss"] is None and curve[-1]["train_loss"] < curve[1]["train_loss"]
    # untrained: the identity layer on W_fc's random output agrees nowhere on the answers
    assert curve[-1]["tokens_per_forward"] > curve[0]["tokens_per_forward"] + 0.05
    assert curve[-1]["first_token_agreement"] > 0.05


def test_progress_and_cancel(tiny, data):
    model, _ = tiny
    seen = []
    with pytest.raises(Cancelled):
        fit(model, *data, TrainSettings(**FAST),
            progress=lambda stage, done, total, loss: seen.append((stage, done, total)),
            should_stop=lambda: len(seen) >= 3)
    assert seen[:3] == [("train", 1, seen[0][2]), ("train", 2, seen[0][2]),
                        ("train", 3, seen[0][2])]


@pytest.mark.parametrize("field, value", [("kind", "hydra"), ("epochs", 0), ("lr", -1.0),
                                          ("draft_vocab_size", 0), ("warmup_share", 1.0),
                                          ("seed", True), ("feature_noise", -0.1),
                                          ("step2_weight", float("nan"))])
def test_bad_settings_named(tiny, data, field, value):
    model, _ = tiny
    with pytest.raises(SpeculativeError, match=field):
        fit(model, *data, TrainSettings(**{**FAST, field: value}))


def test_no_training_data_refused(tiny):
    with pytest.raises(SpeculativeError, match="no training sequence"):
        fit(tiny[0], [], [], TrainSettings(**FAST))
