"""Seeded request streams for the batching lab and benches, JSONL traces, and prompt texts.

A `Workload` is a spec; `generate(workload)` turns it into a list of `WorkloadRequest`s sorted
by arrival. Arrivals (vLLM / guidellm `--burstiness` semantics), with rate r and burstiness b:

    poisson      gaps ~ Exponential(mean 1/r)
    gamma        gaps ~ Gamma(shape=b, scale=1/(r*b))   mean 1/r; b = 1 is Poisson, b < 1
                                                        burstier, b > 1 steadier
    all-at-zero  every request arrives at t = 0

The first request arrives at t = 0. Lengths come from `LengthDist` ("fixed", "uniform" low..high
inclusive, "lognormal" with numpy's mean/sigma of the underlying normal, median exp(mean)),
rounded to integers and clipped to 1..MAX_TOKENS. Arrivals, prompt lengths, output lengths and
prefix ids draw on four independent streams spawned from the seed, so changing one
distribution leaves the others' draws as they were.

A trace file is JSON Lines, one request per line: {"arrival_s": 0.5, "prompt_tokens": 812,
"output_tokens": 64, "prompt": "...", "prefix_id": 3}; prompt and prefix_id are optional,
other keys are ignored, blank lines skipped. A line may give the prompt's content instead of
its length, "prompt_token_ids": [12, 7, ...] (ints 0..MAX_TOKEN_ID, at most MAX_TOKENS of
them), so that a trace says what its requests share; prompt_tokens is then the list's length
(a line may give both, and they must agree).

Requests without token ids get made-up ones (`prompt_token_ids_for`): distinct per request,
except that requests with the same prefix_id share their first shared_prefix_tokens ids.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from inferlab.engines.serve.token_ids import MAX_TOKEN_ID, TokenIds
from inferlab.engines.trace.atomic import atomic_write_text

ARRIVALS = ("poisson", "gamma", "all-at-zero")
LENGTH_KINDS = ("fixed", "uniform", "lognormal")
MAX_TOKENS = 10_000_000  # a length beyond this is a mistake, not a workload
MAX_REQUESTS = 1_000_000
MAX_TRACE_BYTES = 64 * 2**20
MAX_TRACE_LINES = 1_000_000


class WorkloadError(ValueError):
    """A workload spec or trace file that cannot be used; the message names the field."""


# ---- checks shared by the spec, the records and the trace reader ------------------------------

def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_number(v) -> bool:
    return _is_int(v) or isinstance(v, (float, np.floating))


def _show(v) -> str:
    try:
        text = repr(v)
    except ValueError:  # an integer over Python's int-to-text digit limit
        return "an integer of thousands of digits"
    return text if len(text) <= 40 else text[:37] + "..."


def _count(name: str, v, low: int = 1, high: int = MAX_TOKENS) -> int:
    if not _is_int(v) or v < low:
        raise WorkloadError(f"field '{name}' must be an integer ≥ {low}, got {_show(v)}")
    if v > high:
        raise WorkloadError(f"field '{name}' must be at most {high:,}, got {_show(v)}")
    return int(v)


def _real(name: str, v, *, positive: bool = False, nonnegative: bool = False) -> float:
    try:
        finite = _is_number(v) and math.isfinite(v)
    except OverflowError:  # an integer too large for a float
        finite = False
    if not finite:
        raise WorkloadError(f"field '{name}' must be a finite number, got {_show(v)}")
    if positive and v <= 0:
        raise WorkloadError(f"field '{name}' must be > 0, got {_show(v)}")
    if nonnegative and v < 0:
        raise WorkloadError(f"field '{name}' must be ≥ 0, got {_show(v)}")
    return float(v)


def _token_ids(v) -> tuple[int, ...]:
    """A prompt's token ids as a tuple of ints, checked: a non-empty list (or tuple, or 1-D
    integer array) of at most MAX_TOKENS ints in 0..MAX_TOKEN_ID, bools refused. A non-empty
    TokenIds was checked when it was made: it is returned as it is."""
    name = "prompt_token_ids"
    if type(v) is TokenIds and 0 < len(v) <= MAX_TOKENS:
        return v
    if isinstance(v, np.ndarray):
        if v.ndim != 1 or not np.issubdtype(v.dtype, np.integer):
            raise WorkloadError(f"field '{name}' must be a 1-D array of integers, got an "
                                f"array of shape {v.shape} and dtype {v.dtype}")
        v = v.tolist()
    elif not isinstance(v, (list, tuple)):
        raise WorkloadError(f"field '{name}' must be a list of token ids, got {_show(v)}")
    if not v:
        raise WorkloadError(f"field '{name}' must not be empty")
    if len(v) > MAX_TOKENS:
        raise WorkloadError(f"field '{name}' must hold at most {MAX_TOKENS:,} ids, "
                            f"got {len(v):,}")
    if not all(type(t) is int for t in v):  # the fast path is JSON's lists of plain ints
        for i, t in enumerate(v):
            if not _is_int(t):
                raise WorkloadError(f"field '{name}' item {i} must be an integer token id, "
                                    f"got {_show(t)}")
        v = [int(t) for t in v]
    ids = tuple(v)
    for bad, ok in ((min(ids), lambda t: t >= 0), (max(ids), lambda t: t <= MAX_TOKEN_ID)):
        if not ok(bad):
            raise WorkloadError(f"field '{name}' item {ids.index(bad)} must be a token id in "
                                f"0..{MAX_TOKEN_ID:,}, got {_show(bad)}")
    return ids


# ---- records ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkloadRequest:
    """One request of a stream: when it arrives and how many tokens go in and come out.
    prompt_tokens includes a shared prefix (prefix_id names which one; None = no prefix).
    prompt_token_ids, when given, is the prompt itself (prompt_tokens is its length): what
    the request shares with others is then in its ids (see prefix_workloads.py)."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prompt: str = ""
    prefix_id: int | None = None
    prompt_token_ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        set_("arrival_s", _real("arrival_s", self.arrival_s, nonnegative=True))
        set_("prompt_tokens", _count("prompt_tokens", self.prompt_tokens))
        set_("output_tokens", _count("output_tokens", self.output_tokens))
        if not isinstance(self.prompt, str):
            raise WorkloadError(f"field 'prompt' must be a string, got {_show(self.prompt)}")
        try:
            self.prompt.encode("utf-8")
        except UnicodeEncodeError:
            raise WorkloadError("field 'prompt' is not valid Unicode text "
                                "(a lone surrogate)") from None
        if self.prefix_id is not None:
            set_("prefix_id", _count("prefix_id", self.prefix_id, low=0, high=MAX_REQUESTS))
        if self.prompt_token_ids is not None:
            ids = _token_ids(self.prompt_token_ids)
            set_("prompt_token_ids", ids)
            if self.prompt_tokens != len(ids):
                raise WorkloadError(f"field 'prompt_tokens' ({self.prompt_tokens:,}) does not "
                                    f"match 'prompt_token_ids', which holds {len(ids):,} ids")

    @classmethod
    def from_token_ids(cls, arrival_s: float, prompt_token_ids, output_tokens: int,
                       prompt: str = "", prefix_id: int | None = None) -> WorkloadRequest:
        """A request whose prompt is `prompt_token_ids` (prompt_tokens is their count)."""
        ids = _token_ids(prompt_token_ids)
        return cls(arrival_s, len(ids), output_tokens, prompt, prefix_id, ids)

    def clipped(self, max_prompt_tokens: int, max_output_tokens: int) -> WorkloadRequest:
        """This request with its prompt (its ids too: the leading ones are kept) and its
        output cut to at most the given lengths."""
        n = min(self.prompt_tokens, max_prompt_tokens)
        ids = None if self.prompt_token_ids is None else self.prompt_token_ids[:n]
        return dataclasses.replace(self, prompt_tokens=n, prompt_token_ids=ids,
                                   output_tokens=min(self.output_tokens, max_output_tokens))


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution: "fixed" (value), "uniform" (low..high inclusive) or
    "lognormal" (mean, sigma of the underlying normal, as numpy's; median = exp(mean))."""

    kind: str = "fixed"
    value: int = 128
    low: int = 1
    high: int = 1
    mean: float = 0.0
    sigma: float = 0.0

    @classmethod
    def fixed(cls, value: int) -> LengthDist:
        return cls("fixed", value=value)

    @classmethod
    def uniform(cls, low: int, high: int) -> LengthDist:
        return cls("uniform", low=low, high=high)

    @classmethod
    def lognormal(cls, mean: float, sigma: float) -> LengthDist:
        return cls("lognormal", mean=mean, sigma=sigma)

    def check(self, name: str) -> None:
        """Raise WorkloadError naming `name`.<field> for a bad parameter of this kind."""
        if self.kind not in LENGTH_KINDS:
            raise WorkloadError(f"field '{name}.kind' must be one of {', '.join(LENGTH_KINDS)}, "
                                f"got {_show(self.kind)}")
        if self.kind == "fixed":
            _count(f"{name}.value", self.value)
        elif self.kind == "uniform":
            low = _count(f"{name}.low", self.low)
            high = _count(f"{name}.high", self.high)
            if low > high:
                raise WorkloadError(f"field '{name}.low' ({low}) must not exceed "
                                    f"'{name}.high' ({high})")
        else:
            _real(f"{name}.mean", self.mean)
            _real(f"{name}.sigma", self.sigma, nonnegative=True)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n integer lengths, clipped to 1..MAX_TOKENS."""
        if self.kind == "fixed":
            values = np.full(n, float(self.value))
        elif self.kind == "uniform":
            values = rng.integers(self.low, self.high, size=n, endpoint=True).astype(float)
        else:
            with np.errstate(over="ignore"):
                values = np.rint(rng.lognormal(self.mean, self.sigma, size=n))
        return np.clip(values, 1, MAX_TOKENS).astype(np.int64)


@dataclass(frozen=True)
class Workload:
    """A seeded request stream. shared_prefix_tokens > 0 gives multi-turn-chat-like traffic:
    each request picks one of n_prefixes prefixes (seeded, uniformly) and its prompt is that
    prefix followed by prompt_len tokens of its own. The records say which prefix, not its
    length: give the same shared_prefix_tokens to prompt_token_ids_for (or the engine's
    requests_from_workload) for ids that share it. Content-sharing scenarios (multi-turn,
    few-shot, ...) with the ids in the records are in prefix_workloads.py."""

    n_requests: int
    arrival: str = "poisson"
    rate_per_s: float = 1.0
    burstiness: float = 1.0
    prompt_len: LengthDist = field(default_factory=lambda: LengthDist.fixed(256))
    output_len: LengthDist = field(default_factory=lambda: LengthDist.fixed(128))
    shared_prefix_tokens: int = 0
    n_prefixes: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        _count("n_requests", self.n_requests, high=MAX_REQUESTS)
        if self.arrival not in ARRIVALS:
            raise WorkloadError(f"field 'arrival' must be one of {', '.join(ARRIVALS)}, "
                                f"got {_show(self.arrival)}")
        if self.arrival != "all-at-zero":
            _real("rate_per_s", self.rate_per_s, positive=True)
        _real("burstiness", self.burstiness, positive=True)
        for name in ("prompt_len", "output_len"):
            dist = getattr(self, name)
            if not isinstance(dist, LengthDist):
                raise WorkloadError(f"field '{name}' must be a LengthDist, got {_show(dist)}")
            dist.check(name)
        _count("shared_prefix_tokens", self.shared_prefix_tokens, low=0)
        _count("n_prefixes", self.n_prefixes, high=MAX_REQUESTS)
        if not _is_int(self.seed) or self.seed < 0:
            raise WorkloadError(f"field 'seed' must be an integer ≥ 0, got {_show(self.seed)}")


def arrival_times_s(workload: Workload, rng: np.random.Generator) -> np.ndarray:
    """The n arrival times: 0, then the cumulative sum of n - 1 gaps (see the module doc)."""
    n = workload.n_requests
    if workload.arrival == "all-at-zero":
        return np.zeros(n)
    rate = float(workload.rate_per_s)
    if workload.arrival == "poisson":
        gaps = rng.exponential(1.0 / rate, size=n - 1)
    else:
        b = float(workload.burstiness)
        gaps = rng.gamma(shape=b, scale=1.0 / (rate * b), size=n - 1)
    with np.errstate(over="ignore"):
        times = np.concatenate(([0.0], np.cumsum(gaps)))
    if not np.isfinite(times[-1]):
        raise WorkloadError(f"field 'rate_per_s' ({rate!r}) is too small: arrival times "
                            "overflow")
    return times


def generate(workload: Workload) -> list[WorkloadRequest]:
    """The workload's requests, in arrival order; the same spec gives the same list."""
    arrivals_rng, prompt_rng, output_rng, prefix_rng = (
        np.random.Generator(np.random.PCG64(s))
        for s in np.random.SeedSequence(int(workload.seed)).spawn(4))
    n = workload.n_requests
    arrivals = arrival_times_s(workload, arrivals_rng)
    prompts = workload.prompt_len.sample(prompt_rng, n)
    outputs = workload.output_len.sample(output_rng, n)
    prefix = workload.shared_prefix_tokens
    prefix_ids = prefix_rng.integers(0, workload.n_prefixes, size=n) if prefix else None
    return [
        WorkloadRequest(
            arrival_s=float(arrivals[i]),
            prompt_tokens=int(min(MAX_TOKENS, prefix + int(prompts[i]))),
            output_tokens=int(outputs[i]),
            prefix_id=None if prefix_ids is None else int(prefix_ids[i]),
        )
        for i in range(n)
    ]


# ---- JSONL traces -----------------------------------------------------------------------------

def _no_constant(token: str):
    raise ValueError(f"{token} is not a number JSON allows")


def _parse_line(text: str, where: str) -> WorkloadRequest:
    try:
        obj = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise WorkloadError(f"{where}: nested too deeply") from None
    except json.JSONDecodeError as e:  # its own "line 1" would contradict ours: column only
        raise WorkloadError(f"{where}: not valid JSON at column {e.colno} ({e.msg})") from None
    except ValueError as e:  # NaN/Infinity, an integer of thousands of digits
        raise WorkloadError(f"{where}: not valid JSON ({str(e).split(';')[0]})") from None
    if not isinstance(obj, dict):
        raise WorkloadError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    ids = obj.get("prompt_token_ids")
    for key in ("arrival_s", "prompt_tokens", "output_tokens"):
        if key not in obj and not (key == "prompt_tokens" and ids is not None):
            also = " (or 'prompt_token_ids')" if key == "prompt_tokens" else ""
            raise WorkloadError(f"{where}: missing field '{key}'{also}")
    try:
        if ids is not None:
            ids = _token_ids(ids)
        return WorkloadRequest(
            arrival_s=obj["arrival_s"],
            prompt_tokens=obj["prompt_tokens"] if "prompt_tokens" in obj else len(ids),
            output_tokens=obj["output_tokens"],
            prompt=obj.get("prompt", ""),
            prefix_id=obj.get("prefix_id"),
            prompt_token_ids=ids,
        )
    except WorkloadError as e:
        raise WorkloadError(f"{where}: {e}") from None


parse_trace_line = _parse_line
"""parse_trace_line(text, where) -> WorkloadRequest: one JSONL line (the streamed trace
readers in engines/serve/traces read InferLab's own format with it)."""


def read_trace_requests(path: str | os.PathLike, named: str | None = None
                        ) -> list[WorkloadRequest]:
    """`read_trace`, and a trace that holds no request is an error too (a run needs one):
    ValueError "<named or path>: the trace holds no request"."""
    items = read_trace(path)
    if not items:
        raise ValueError(f"{named or path}: the trace holds no request")
    return items


def read_trace(path: str | os.PathLike) -> list[WorkloadRequest]:
    """The requests of a JSONL trace, sorted by arrival (stable). Any bad line is a
    WorkloadError naming the file, the line number and the field; nothing half-read."""
    path = Path(path)
    name = path.name
    try:
        size = path.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise WorkloadError(f"{name}: {size:,} bytes, over the {MAX_TRACE_BYTES:,}-byte "
                                "limit for a trace")
        with open(path, "rb") as f:
            data = f.read(MAX_TRACE_BYTES + 1)
    except OSError as e:
        raise WorkloadError(f"{name}: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_TRACE_BYTES:
        raise WorkloadError(f"{name}: over the {MAX_TRACE_BYTES:,}-byte limit for a trace")
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) > MAX_TRACE_LINES:
        raise WorkloadError(f"{name}: {len(lines):,} lines, over the {MAX_TRACE_LINES:,}-line "
                            "limit for a trace")
    requests = []
    for number, raw in enumerate(lines, start=1):
        where = f"{name} line {number}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise WorkloadError(f"{where}: not UTF-8 text (byte {e.start})") from None
        if text.strip():
            requests.append(_parse_line(text, where))
    requests.sort(key=lambda r: r.arrival_s)
    return requests


def _trace_line(r: WorkloadRequest) -> str:
    obj: dict = {"arrival_s": r.arrival_s, "prompt_tokens": r.prompt_tokens,
                 "output_tokens": r.output_tokens}
    if r.prompt:
        obj["prompt"] = r.prompt
    if r.prefix_id is not None:
        obj["prefix_id"] = r.prefix_id
    if r.prompt_token_ids is not None:
        obj["prompt_token_ids"] = list(r.prompt_token_ids)
    return json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n"


def write_trace(path: str | os.PathLike, requests: Iterable[WorkloadRequest]) -> None:
    """Write `requests` as a JSONL trace that read_trace reads back equal, atomically."""
    lines = [_trace_line(r) for r in requests]
    if len(lines) > MAX_TRACE_LINES:
        raise WorkloadError(f"{Path(path).name}: {len(lines):,} requests, over the "
                            f"{MAX_TRACE_LINES:,}-line limit for a trace")
    size = sum(len(line.encode("utf-8")) for line in lines)
    if size > MAX_TRACE_BYTES:
        raise WorkloadError(f"{Path(path).name}: {size:,} bytes, over the "
                            f"{MAX_TRACE_BYTES:,}-byte limit for a trace")
    atomic_write_text(path, lines)


# ---- made-up prompt token ids ---------------------------------------------------------------

def prompt_token_ids_for(items: Iterable[WorkloadRequest], vocab_size: int,
                         shared_prefix_tokens: int = 0) -> list[tuple[int, ...]]:
    """Each request's prompt token ids, all below vocab_size.

    A request with prompt_token_ids gets them verbatim (WorkloadError if one is ≥ vocab_size).
    Otherwise request i's id at position j is made up, (i·7919 + j·104729 + 1) mod vocab_size,
    except that when it has a prefix_id p and shared_prefix_tokens = P > 0 its first
    min(P, prompt_tokens) ids are prefix p's, the same formula with i = −(p + 1). So requests
    with the same prefix_id share exactly their first P ids (when vocab_size is coprime to
    7919 and their indices differ by less than vocab_size), and the rest of each prompt is its
    own. Made-up ids can still agree by chance (a small vocab, a huge stream): measure what
    prompts share with prefix_workloads.longest_prefix_matches, never assume it."""
    vocab = _count("vocab_size", vocab_size, high=MAX_TOKEN_ID + 1)
    shared = _count("shared_prefix_tokens", shared_prefix_tokens, low=0)
    out = []
    for i, w in enumerate(items):
        if w.prompt_token_ids is not None:
            ids = w.prompt_token_ids
            top = ids.max_id if type(ids) is TokenIds else max(ids)
            if top >= vocab:
                raise WorkloadError(
                    f"request {i}: field 'prompt_token_ids' item {w.prompt_token_ids.index(top)} "
                    f"is {top:,}, not below the model's vocab_size of {vocab:,}")
            out.append(w.prompt_token_ids)
            continue
        j = np.arange(w.prompt_tokens, dtype=np.int64)
        row = np.full(w.prompt_tokens, i, dtype=np.int64)
        if w.prefix_id is not None and shared:
            row[: min(shared, w.prompt_tokens)] = -(w.prefix_id + 1)
        out.append(tuple(((row * 7919 + j * 104729 + 1) % vocab).tolist()))
    return out


# ---- prompt texts -----------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def prompt_texts() -> tuple[str, ...]:
    """Short everyday user prompts for real runs (assets/text/prompts.txt, one per line;
    see assets/text/SOURCES.md)."""
    text = (importlib.resources.files("inferlab.assets") / "text" / "prompts.txt").read_text(
        encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip())
