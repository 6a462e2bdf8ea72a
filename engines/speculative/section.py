"""The speculative lab's settings, session, snapshot section and trace events.

A session is one prompt decoded speculatively by the lab's model (`engines.model.cache`:
tiny or SmolLM2-135M) with one drafter, one `SpeculativeDecoder.step()` per `step()`:

    ngram          prompt lookup (no model)
    layerskip:N    the target's first N layers + its final norm and head
    quant:int8     the target with INT8 weights (per channel) on the low-bit kernels
    quant:int4     the target with INT4 weights (groups of 128): a cheaper, less faithful draft
    tiny           the seeded tiny model (1 layer, other weights): a smaller model with the
                   tiny target's byte tokenizer; SmolLM2 refuses it (another vocabulary)

With `tree_width` W > 1 (ngram only) each step verifies up to W candidate continuations as
one token tree; a tree step's dict adds `tree_tokens`, `tree_parents` and `tree_path`.

The snapshot section (`labs.speculative`) holds the settings, the run's header (model,
drafter, prompt ids, the text of every token seen) and every step as a dict, and the
statistics; `read_speculative_section` reads it strictly (ValueError naming the field).
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass, field

from inferlab.engines import kernels
from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.settings import Setting, check_settings
from inferlab.engines.speculative.adaptive_k import AdaptiveK
from inferlab.engines.speculative.decoder import SpeculativeStep
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.statistics import acceptance_stats, expected_tokens_per_forward
from inferlab.engines.speculative.verification import TokenFate
from inferlab.engines.trace.snapshot import lab_section, section_field

PROMPTS_FILE = "speculative_prompts.txt"
MAX_K = 32
MAX_TREE_WIDTH = 8
MAX_TOKENS = 1024
STEPS_LIMIT = MAX_TOKENS  # a step emits at least one token


@dataclass(frozen=True)
class ShippedPrompt:
    kind: str  # summarise, code or chat
    title: str
    text: str


def speculative_prompts() -> tuple[ShippedPrompt, ...]:
    """The lab's prompts (assets/text/speculative_prompts.txt; see assets/text/SOURCES.md)."""
    raw = (importlib.resources.files("inferlab.assets") / "text" / PROMPTS_FILE).read_text(
        encoding="utf-8")
    out: list[ShippedPrompt] = []
    head: tuple[str, str] | None = None
    lines: list[str] = []
    for line in [*raw.splitlines(), "== end: end"]:
        if line.startswith("== "):
            if head is not None:
                out.append(ShippedPrompt(head[0], head[1], "\n".join(lines).strip("\n")))
            kind, _, title = line[3:].partition(":")
            head, lines = (kind.strip(), title.strip()), []
        elif head is not None:
            lines.append(line)
    return tuple(out)


SPECULATIVE_DEFAULTS = {
    "model": "tiny",  # engines.model.cache names: tiny, smollm2-135m, auto, or a path
    "drafter": "ngram",
    "k": 4,
    "tree_width": 1,  # > 1: token trees of that many n-gram candidates per step
    "temperature": 0.0,  # 0: greedy
    "top_p": 1.0,
    "prompt": "",  # "" here: the first shipped prompt (filled in by speculative_defaults)
    "max_tokens": 64,
    "raw": False,  # True: no chat template (as `inferlab generate --raw`)
    "seed": 0,
    "kernels": "auto",  # the target's kernel path (engines.kernels); its drafters share it
    "adaptive_k": False,  # True: each step's K chosen in 0..k (engines.speculative.adaptive_k)
}

SPECULATIVE_SETTINGS = {
    "model": Setting("str"),
    "drafter": Setting("str"),
    "k": Setting("int", 1, MAX_K),
    "tree_width": Setting("int", 1, MAX_TREE_WIDTH),  # > 1 needs the ngram drafter
    "temperature": Setting("float", 0, 10),
    "top_p": Setting("float", 0, 1),  # > 0 too: check_speculative_settings
    "prompt": Setting("str"),
    "max_tokens": Setting("int", 1, MAX_TOKENS),
    "raw": Setting("bool"),
    "seed": Setting("int", 0, 2**31 - 1),
    "kernels": Setting("str", choices=KERNEL_SETTING_CHOICES),
    "adaptive_k": Setting("bool"),
}


def speculative_defaults() -> dict:
    """The defaults with the first shipped prompt."""
    return dict(SPECULATIVE_DEFAULTS, prompt=speculative_prompts()[0].text)


QUANT_DRAFTERS = {"quant:int8": 8, "quant:int4": 4}
"""The target itself with INT8 (per channel) or INT4 (groups of 128) weights."""


def parse_drafter(spec: str, where: str = "drafter") -> tuple[str, int | None]:
    """("ngram" | "layerskip" | "quant" | "tiny", layers or bits or None); ValueError naming
    `where`."""
    if spec in ("ngram", "tiny"):
        return spec, None
    if spec in QUANT_DRAFTERS:
        return "quant", QUANT_DRAFTERS[spec]
    kind, sep, n = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if kind == "layerskip" and sep and n.isdigit() and n.isascii() and len(n) <= 4 \
            and int(n) >= 1:
        return kind, int(n)
    raise ValueError(f"{where}: expected ngram, layerskip:N (N >= 1 layers), quant:int8, "
                     f"quant:int4 or tiny, got {spec!r}")


def check_speculative_settings(settings, where: str = "settings") -> dict:
    """The settings, strictly checked (ValueError naming the field)."""
    s = check_settings(settings, SPECULATIVE_SETTINGS, SPECULATIVE_DEFAULTS, where)
    kind, _ = parse_drafter(s["drafter"], f"{where}.drafter")
    if s["adaptive_k"] and s["tree_width"] > 1:
        raise ValueError(f"{where}.adaptive_k: chooses a chain's length; expected tree_width "
                         f"1, got {s['tree_width']}")
    if s["tree_width"] > 1 and kind != "ngram":
        raise ValueError(f"{where}.tree_width: expected 1 with the {s['drafter']} drafter "
                         "(token trees are the n-gram drafter's candidates), got "
                         f"{s['tree_width']}")
    if not s["top_p"] > 0:
        raise ValueError(f"{where}.top_p: expected a number in (0, 1], got {s['top_p']!r}")
    if not s["prompt"].strip():
        raise ValueError(f"{where}.prompt: expected some text, got an empty prompt")
    if not s["model"].strip():
        raise ValueError(f"{where}.model: expected a model name or path, got {s['model']!r}")
    return s


def sampling_of(settings: dict):
    from inferlab.engines.speculative.sampling import GREEDY, SamplingSettings

    if settings["temperature"] == 0:
        return GREEDY
    return SamplingSettings(temperature=float(settings["temperature"]),
                            top_p=float(settings["top_p"]))


def make_drafter(spec: str, model, tokenizer, sampling, seed: int, max_tokens: int,
                 device: str = "cpu"):
    """The drafter `spec` names for target `model` (SpeculativeError when it cannot be)."""
    from inferlab.engines.speculative.model_drafter import LayerSkipDrafter, ModelDrafter
    from inferlab.engines.speculative.ngram import NgramDrafter

    kind, n = parse_drafter(spec)
    if kind == "ngram":
        return NgramDrafter()
    if kind == "layerskip":
        return LayerSkipDrafter(model, n, settings=sampling, seed=seed, tokenizer=tokenizer,
                                max_tokens=max_tokens)
    if kind == "quant":
        from inferlab.engines.speculative.model_drafter import quantized_self_draft

        return ModelDrafter(quantized_self_draft(model, n), settings=sampling, seed=seed,
                            tokenizer=tokenizer, max_tokens=max_tokens, name=spec)
    from inferlab.engines.model.tiny import tiny_model

    draft, draft_tok = tiny_model(seed=1, n_layers=1, device=device)
    return ModelDrafter(draft, settings=sampling, seed=seed, tokenizer=draft_tok,
                        max_tokens=max_tokens, name="tiny")


@dataclass(frozen=True)
class SpeculativeHeader:
    """What is drawn beside a run's steps: the run's identity and the text of its tokens."""

    model: str
    drafter: str
    k: int
    prompt_token_ids: tuple[int, ...]
    token_texts: dict[int, str] = field(repr=False)
    """id -> text of every token the run saw (prompt, emitted, drafted)."""
    n_layers: int = 0  # the target's (drafter menus)
    tree_width: int = 1

    def text(self, token_id: int) -> str:
        return self.token_texts.get(token_id, f"<{token_id}>")


class SpeculativeSession:
    """One prompt decoded speculatively: `step()` runs one draft-verify step and returns its
    `SpeculativeStep`; `done`, `step_index`, `records`, `header()`, `run()`."""

    def __init__(self, settings: dict, device: str = "cpu") -> None:
        from inferlab.engines.model.cache import load_lab_model, resolve_model_name
        from inferlab.engines.speculative.decoder import SpeculativeDecoder

        self.settings = settings = check_speculative_settings(settings)
        with kernels.chosen(settings["kernels"]):
            model, tok = load_lab_model(settings["model"], device)
        self.model_id = resolve_model_name(settings["model"])
        self.device = device
        self.tokenizer = tok
        prompt_ids = tok.encode_prompt(settings["prompt"], chat=not settings["raw"])
        if not prompt_ids:
            raise ValueError("prompt: it encodes to no token")
        sampling = sampling_of(settings)
        need = len(prompt_ids) + settings["max_tokens"] + settings["k"] + 1
        try:
            with kernels.chosen(settings["kernels"]):  # a draft model loads on that path too
                drafter = make_drafter(settings["drafter"], model, tok, sampling,
                                       settings["seed"], need, device)
            policy = AdaptiveK(k_max=settings["k"], probe_k=min(2, settings["k"])) \
                if settings["adaptive_k"] else None
            self.decoder = SpeculativeDecoder(model, drafter, k=settings["k"], settings=sampling,
                                              k_policy=policy,
                                              seed=settings["seed"], tokenizer=tok,
                                              tree_width=settings["tree_width"])
        except SpeculativeError as e:
            text = str(e).removeprefix(f"drafter {settings['drafter']}: ")
            raise ValueError(f"drafter: {settings['drafter']} cannot draft for "
                             f"{self.model_id}: {text}") from None
        self.decoder.start(prompt_ids, settings["max_tokens"], tok.eos_token_ids)
        self._texts: dict[int, str] = {}
        self._see(prompt_ids)
        self._n_layers = model.config.n_layers

    def _see(self, ids) -> None:
        for t in ids:
            if t not in self._texts:
                self._texts[t] = self.tokenizer.token_text(t)

    @property
    def done(self) -> bool:
        return self.decoder.done

    @property
    def step_index(self) -> int:
        return len(self.decoder.steps)

    @property
    def records(self) -> list[SpeculativeStep]:
        return self.decoder.steps

    def step(self) -> SpeculativeStep:
        if self.done:
            raise RuntimeError("the run has ended: there is no step left")
        record = self.decoder.step()
        self._see(record.drafted)
        self._see(record.tree_tokens)
        self._see(record.token_ids)
        return record

    def header(self) -> SpeculativeHeader:
        return SpeculativeHeader(self.model_id, self.decoder.drafter_name, self.decoder.k,
                                 tuple(self.decoder.prompt), dict(self._texts), self._n_layers,
                                 self.decoder.tree_width)

    def run(self):
        return self.decoder.result()


def speculative_session(settings: dict, device: str = "cpu") -> SpeculativeSession:
    return SpeculativeSession(settings, device)


# ---- statistics ------------------------------------------------------------------------------

def geometric_alpha(steps) -> float:
    """alpha = accepted / drafts tested (a step stops testing at its first rejection): the
    per-draft acceptance rate of the geometric model behind (1 - alpha^(K+1)) / (1 - alpha)."""
    accepted = tested = 0
    for s in steps:
        n = sum(s.accepted)
        accepted += n
        tested += n + (1 if n < len(s.drafted) else 0)
    return accepted / tested if tested else 0.0


def speculative_metrics(steps, k: int) -> dict:
    """The run's numbers (statistics.py's definitions) over `steps`."""
    stats = acceptance_stats([s.accepted for s in steps])
    emitted = sum(len(s.token_ids) for s in steps)
    alpha = geometric_alpha(steps)
    drafting = [s for s in steps if s.drafted]
    return {
        "target_forwards": len(steps),
        "tokens": emitted,
        "acceptance_rate": stats.acceptance_rate,
        "acceptance_rate_by_position": list(stats.acceptance_rate_by_position),
        "mean_acceptance_length": stats.mean_acceptance_length,
        "tokens_per_target_forward": emitted / len(steps) if steps else 0.0,
        "tokens_per_drafting_forward": (sum(len(s.token_ids) for s in drafting) / len(drafting)
                                        if drafting else 0.0),
        "alpha": alpha,
        "theory_tokens_per_forward": expected_tokens_per_forward(alpha, k),
        "draft_s": sum(s.draft_s for s in steps),
        "target_forward_s": sum(s.target_forward_s for s in steps),
        "finish_reason": steps[-1].finish_reason if steps else None,
    }


# ---- records as dicts --------------------------------------------------------------------------

def step_to_dict(s: SpeculativeStep) -> dict:
    d = {"index": s.index, "drafted": list(s.drafted), "accepted": list(s.accepted),
         "token_ids": list(s.token_ids), "fates": [f.value for f in s.fates],
         "p": list(s.p), "q": list(s.q), "target_tokens": s.target_tokens,
         "target_forward_s": s.target_forward_s, "draft_s": s.draft_s,
         "finish_reason": s.finish_reason}
    if s.tree_tokens:  # a tree step; a chain step's dict is as it always was
        d |= {"tree_tokens": list(s.tree_tokens), "tree_parents": list(s.tree_parents),
              "tree_path": list(s.tree_path)}
    return d


TREE_KEYS = ("tree_tokens", "tree_parents", "tree_path")


def _tree_fields(d: dict, where: str, vocab: int, drafted: list[int], n_accepted: int
                 ) -> dict:
    """A tree step's three fields, strictly: a valid tree whose path runs down from the
    root, its tokens the accepted drafts, `drafted` a path of the tree from the root."""
    from inferlab.engines.speculative.tree import ROOT, TokenTree

    if not any(key in d for key in TREE_KEYS):
        return {}
    tokens = [_int(t, f"{where}.tree_tokens[{i}]", 0, vocab - 1)
              for i, t in enumerate(_list(d, "tree_tokens", where))]
    if not 1 <= len(tokens) <= MAX_K * MAX_TREE_WIDTH:
        raise ValueError(f"{where}.tree_tokens: expected 1..{MAX_K * MAX_TREE_WIDTH} nodes, "
                         f"got {len(tokens)}")
    parents = [_int(t, f"{where}.tree_parents[{i}]", ROOT, len(tokens))
               for i, t in enumerate(_list(d, "tree_parents", where, len(tokens)))]
    try:
        tree = TokenTree(tuple(tokens), tuple(parents))
    except SpeculativeError as e:
        raise ValueError(f"{where}.tree_parents: {e}") from None
    path = [_int(t, f"{where}.tree_path[{i}]", 0, len(tokens) - 1)
            for i, t in enumerate(_list(d, "tree_path", where, n_accepted))]
    for j, node in enumerate(path):
        if parents[node] != (path[j - 1] if j else ROOT):
            raise ValueError(f"{where}.tree_path[{j}]: node {node} does not hang below the "
                             "node before it")
    node = ROOT
    for j, t in enumerate(drafted):
        node = next((i for i in tree.children(node) if tokens[i] == t), None)
        if node is None:
            raise ValueError(f"{where}.drafted[{j}]: the drafts are not a path of the tree")
        if j < n_accepted and node != path[j]:
            raise ValueError(f"{where}.tree_path[{j}]: not the accepted draft's node")
    return {"tree_tokens": tuple(tokens), "tree_parents": tuple(parents),
            "tree_path": tuple(path)}


def _int(value, where: str, low: int = 0, high: int = 2**31 - 1) -> int:
    return Setting("int", low, high).check(value, where)


_SECONDS = Setting("float", 0, 1e9)
_PROB = Setting("float", 0, 1)


def _seconds(value, where: str) -> float:
    return float(_SECONDS.check(value, where))


def _prob(value, where: str) -> float:
    return float(_PROB.check(value, where))


def _list(d: dict, key: str, where: str, n: int | None = None) -> list:
    value = section_field(d, key, where)
    if not isinstance(value, list):
        raise ValueError(f"{where}.{key}: expected a list, got {type(value).__name__}")
    if n is not None and len(value) != n:
        raise ValueError(f"{where}.{key}: expected {n} entries, got {len(value)}")
    return value


def step_from_dict(d, where: str, index: int, vocab: int) -> SpeculativeStep:
    """A step read strictly: lengths agree, acceptance is a run from the start, ids in the
    vocabulary, probabilities in 0..1."""
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected an object, got {type(d).__name__}")
    if _int(section_field(d, "index", where), f"{where}.index") != index:
        raise ValueError(f"{where}.index: expected {index}, got {d['index']!r}")
    drafted = [_int(t, f"{where}.drafted[{i}]", 0, vocab - 1)
               for i, t in enumerate(_list(d, "drafted", where))]
    if len(drafted) > MAX_K:
        raise ValueError(f"{where}.drafted: expected at most {MAX_K} drafts, got {len(drafted)}")
    accepted = _list(d, "accepted", where, len(drafted))
    for i, a in enumerate(accepted):
        if not isinstance(a, bool):
            raise ValueError(f"{where}.accepted[{i}]: expected true or false, got {a!r}")
        if a and i and not accepted[i - 1]:
            raise ValueError(f"{where}.accepted[{i}]: a draft accepted after a rejected one")
    tokens = [_int(t, f"{where}.token_ids[{i}]", 0, vocab - 1)
              for i, t in enumerate(_list(d, "token_ids", where))]
    n = len(tokens)
    if n > sum(accepted) + 1:
        raise ValueError(f"{where}.token_ids: {n} tokens, more than the {sum(accepted)} "
                         "accepted drafts + 1")
    fates = []
    for i, f in enumerate(_list(d, "fates", where, n)):
        try:
            fates.append(TokenFate(f) if isinstance(f, str) else None)
        except ValueError:
            fates.append(None)
        if fates[-1] is None:
            raise ValueError(f"{where}.fates[{i}]: expected one of "
                             f"{', '.join(x.value for x in TokenFate)}, got {f!r}")
    p = [_prob(v, f"{where}.p[{i}]") for i, v in enumerate(_list(d, "p", where, n))]
    q = [None if v is None else _prob(v, f"{where}.q[{i}]")
         for i, v in enumerate(_list(d, "q", where, n))]
    reason = section_field(d, "finish_reason", where)
    if reason not in (None, "stop", "length"):
        raise ValueError(f"{where}.finish_reason: expected null, stop or length, got {reason!r}")
    tree = _tree_fields(d, where, vocab, drafted, sum(accepted))
    return SpeculativeStep(
        index=index, drafted=tuple(drafted), accepted=tuple(accepted), token_ids=tuple(tokens),
        fates=tuple(fates), p=tuple(p), q=tuple(q),
        target_tokens=_int(section_field(d, "target_tokens", where), f"{where}.target_tokens",
                           1),
        target_forward_s=_seconds(section_field(d, "target_forward_s", where),
                                  f"{where}.target_forward_s"),
        draft_s=_seconds(section_field(d, "draft_s", where), f"{where}.draft_s"),
        finish_reason=reason, **tree)


# ---- the section ---------------------------------------------------------------------------------

def speculative_section(settings: dict, header: SpeculativeHeader | None, steps,
                        sweep=None) -> dict:
    """The snapshot's `labs.speculative` (no header: the lab had not run); `sweep`, a
    `KSweep`, is kept under state["sweep"]."""
    if header is None:
        return lab_section(settings, {}, {"target_forwards": 0})
    extra = {}
    if sweep is not None:
        from inferlab.engines.speculative.sweep_records import sweep_to_dict

        extra["sweep"] = sweep_to_dict(sweep)
    state = {**extra, "model": header.model, "drafter": header.drafter, "k": header.k,
             "tree_width": header.tree_width, "n_layers": header.n_layers,
             "prompt_token_ids": list(header.prompt_token_ids),
             "token_texts": {str(t): text for t, text in sorted(header.token_texts.items())},
             "steps": [step_to_dict(s) for s in steps]}
    return lab_section(settings, state, speculative_metrics(steps, header.k))


def read_speculative_section(sec):
    """(settings, SpeculativeHeader or None, [SpeculativeStep], metrics dict); ValueError
    names a bad field. The metrics are recomputed from the steps read."""
    where = "labs.speculative"
    settings = check_speculative_settings(section_field(sec, "settings", where),
                                          f"{where}.settings")
    state = section_field(sec, "state", where)
    if not isinstance(state, dict):
        raise ValueError(f"{where}.state: expected an object")
    if not isinstance(section_field(sec, "metrics", where), dict):
        raise ValueError(f"{where}.metrics: expected an object")
    if not state:
        return settings, None, [], {}
    w = f"{where}.state"
    strings = {}
    for key in ("model", "drafter"):
        value = section_field(state, key, w)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{w}.{key}: expected a name, got {value!r}")
        strings[key] = value
    k = _int(section_field(state, "k", w), f"{w}.k", 1, MAX_K)
    width = _int(state.get("tree_width", 1), f"{w}.tree_width", 1, MAX_TREE_WIDTH)
    n_layers = _int(section_field(state, "n_layers", w), f"{w}.n_layers", 0, 100_000)
    texts_raw = section_field(state, "token_texts", w)
    if not isinstance(texts_raw, dict):
        raise ValueError(f"{w}.token_texts: expected an object")
    texts: dict[int, str] = {}
    for key, text in texts_raw.items():
        if not (key.isascii() and key.isdigit() and len(key) <= 9) \
                or not isinstance(text, str):
            raise ValueError(f"{w}.token_texts[{key[:20]!r}]: expected a token id's text")
        texts[int(key)] = text
    vocab = 2**31
    prompt = [_int(t, f"{w}.prompt_token_ids[{i}]", 0, vocab - 1)
              for i, t in enumerate(_list(state, "prompt_token_ids", w))]
    if not prompt:
        raise ValueError(f"{w}.prompt_token_ids: expected at least one token")
    raw_steps = _list(state, "steps", w)
    if len(raw_steps) > STEPS_LIMIT:
        raise ValueError(f"{w}.steps: expected at most {STEPS_LIMIT} steps, got "
                         f"{len(raw_steps)}")
    steps = [step_from_dict(d, f"{w}.steps[{i}]", i, vocab) for i, d in enumerate(raw_steps)]
    for i, s in enumerate(steps):
        if len(s.drafted) > k:
            raise ValueError(f"{w}.steps[{i}].drafted: {len(s.drafted)} drafts, more than "
                             f"k = {k}")
        if len(s.tree_tokens) > k * width or (s.tree_tokens and width == 1):
            raise ValueError(f"{w}.steps[{i}].tree_tokens: {len(s.tree_tokens)} nodes; a "
                             f"tree of width {width} and depth k = {k} holds at most "
                             f"{k * width if width > 1 else 0}")
        if s.finish_reason is not None and i != len(steps) - 1:
            raise ValueError(f"{w}.steps[{i}].finish_reason: a step after it ran")
    header = SpeculativeHeader(strings["model"], strings["drafter"], k, tuple(prompt), texts,
                               n_layers, width)
    read_speculative_sweep(sec)
    return settings, header, steps, speculative_metrics(steps, k)


def read_speculative_sweep(sec):
    """The section's K sweep (a `KSweep`), or None when it holds none; ValueError names a
    bad field."""
    from inferlab.engines.speculative.sweep_records import sweep_from_dict

    state = sec.get("state") if isinstance(sec, dict) else None
    if not isinstance(state, dict) or "sweep" not in state:
        return None
    return sweep_from_dict(state["sweep"], "labs.speculative.state.sweep")


# ---- trace ----------------------------------------------------------------------------------------

def speculative_trace_step(recorder, record: SpeculativeStep, start_s: float) -> float:
    """One step as a span from `start_s` (the recorder's clock) holding its draft and verify
    (the target's one forward) spans, and acceptance counters at its end; returns its end."""
    draft_end = start_s + record.draft_s
    end = draft_end + record.target_forward_s
    args = {"drafted": len(record.drafted), "accepted": record.n_accepted,
            "emitted": len(record.token_ids), "target_tokens": record.target_tokens}
    if record.tree_tokens:
        args["tree_nodes"] = len(record.tree_tokens)
    recorder.add_span(f"step {record.index}", start_s, end, cat="speculative", args=args)
    recorder.add_span("draft", start_s, draft_end, cat="speculative",
                      args={"drafted": len(record.drafted)})
    recorder.add_span("verify", draft_end, end, cat="speculative",
                      args={"target_tokens": record.target_tokens})
    recorder.counter("speculative tokens", {"drafted": len(record.drafted),
                                            "accepted": record.n_accepted,
                                            "emitted": len(record.token_ids)},
                     ts_s=end, cat="speculative")
    return end
