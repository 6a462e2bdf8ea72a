"""From nothing to a head file: the target's features (cached), training, saving.

    train_head(target, tokenizer, settings, cache_dir) -> HeadBuild
        features   training_data's prompts (answered by the target) and texts, and the
                   held-out prompts, read by the target (features.cached_sequences; the
                   record keeps how long their first build took: features_build_s)
        fit        train.fit: the head and its curve
        save       head_file.save_head at <cache>/heads/<model hash>/<kind>.safetensors
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inferlab.engines.model.llama import Llama
from inferlab.engines.model.tokenizer import Tokenizer
from inferlab.engines.speculative.heads import training_data
from inferlab.engines.speculative.heads.features import cached_sequences
from inferlab.engines.speculative.heads.head_file import TrainedHead, head_path, save_head
from inferlab.engines.speculative.heads.model_hash import model_hash
from inferlab.engines.speculative.heads.train import CurvePoint, TrainSettings, fit


def from_nothing_s(training: dict) -> float | None:
    """Seconds from nothing to the head a training record describes: its features' first
    build plus its training (None where the record does not say how long the build took)."""
    build_s, train_s = training.get("features_build_s"), training.get("train_s")
    if not isinstance(build_s, int | float) or not isinstance(train_s, int | float):
        return None
    return float(build_s + train_s)


@dataclass(frozen=True, eq=False)
class HeadBuild:
    head: TrainedHead
    path: Path
    features_s: float
    features_cached: bool
    train_s: float


def train_head(target: Llama, tokenizer: Tokenizer, settings: TrainSettings, cache_dir: Path,
               out_path: Path | None = None,
               progress: Callable[[str, int, int, float | None], None] | None = None,
               should_stop: Callable[[], bool] | None = None,
               on_point: Callable[[CurvePoint], None] | None = None) -> HeadBuild:
    """Train a `settings.kind` head for `target` on the shipped training data and save it
    (to `out_path`, default `head_path(cache_dir, …)`)."""
    settings.check()
    t0 = time.perf_counter()
    mh = model_hash(target)
    distill_stats: dict = {}
    train_seqs, cached = cached_sequences(
        target, tokenizer, mh, cache_dir, training_data.train_prompts(),
        training_data.train_texts(), settings.max_new_tokens, settings.max_text_tokens,
        progress, should_stop, distill_stats)
    held_stats: dict = {}
    held_seqs, _ = cached_sequences(
        target, tokenizer, mh, cache_dir, training_data.held_out_prompts(), {},
        settings.max_new_tokens, settings.max_text_tokens, progress, should_stop, held_stats)
    features_s = time.perf_counter() - t0
    head = fit(target, train_seqs, held_seqs, settings, progress, should_stop, on_point)
    head.training["features_s"] = features_s
    head.training["features_cached"] = cached
    head.training.update(distill_stats)
    # the features' first build (this run's, or the cached file's record of it): with
    # train_s, the time from nothing (`from_nothing_s`)
    build_s = [st.get("features_build_s") for st in (distill_stats, held_stats)]
    if all(b is not None for b in build_s):
        head.training["features_build_s"] = sum(build_s)
    path = save_head(out_path or head_path(cache_dir, mh, settings.kind), head)
    return HeadBuild(head, path, features_s, cached, time.perf_counter() - t0 - features_s)
