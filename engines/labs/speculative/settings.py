"""The speculative lab's settings: the shipped prompts, the settings table and its defaults,
the limits a snapshot is read against, and the drafter names (`parse_drafter`).

    ngram          prompt lookup (no model)
    layerskip:N    the target's first N layers + its final norm and head (drafts well only
                   from a checkpoint trained for early exit: LayerSkip's layer dropout and
                   early-exit loss)
    skip:3,5-9     the target without those layers (0-based): training-free self-draft
    skip:auto      the skipped set searched on the shipped calibration text, kept per model
                   in the user cache (engines.speculative.skip_search)
    quant:int8     the target with INT8 weights (per channel) on the low-bit kernels
    quant:int4     the target with INT4 weights (groups of 128): a cheaper, less faithful draft
    tiny           the seeded tiny model (1 layer, other weights): a smaller model with the
                   byte tokenizer of the tiny and tiny-moe targets; SmolLM2 and Gemma 3
                   refuse it by name (their own vocabularies, 49,152 and 262,144 tokens)

With `tree_width` W > 1 (ngram or eagle) each step verifies up to W candidate continuations
as one token tree: the n-gram drafter's W matches, or the EAGLE head's dynamic tree (EAGLE-2:
the most confident nodes, at most K · W of them, in at most W paths).
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass

from inferlab.engines.fields import Setting, check_settings
from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.speculative.sampling import GREEDY, SamplingSettings

PROMPTS_FILE = "speculative_prompts.txt"
MAX_K = 32
AUTO_K_MAX = 8
"""`--k auto` (and the bench's adaptive row) chooses each step's K in 0..AUTO_K_MAX
(engines.speculative.adaptive_k)."""
MAX_TREE_WIDTH = 8
MAX_TOKENS = 1024
STEPS_LIMIT = MAX_TOKENS  # a step emits at least one token


PROMPT_GROUPS = {"grounded": ("summarise", "code", "edit", "quote"), "open": ("chat",)}
"""Prompt kinds by what prompt lookup can copy: input-grounded work (the answer repeats the
prompt: where prompt lookup's authors report its gains) and open-ended chat (the control)."""


@dataclass(frozen=True)
class ShippedPrompt:
    kind: str  # one of PROMPT_GROUPS' kinds
    title: str
    text: str

    @property
    def group(self) -> str:
        return next(g for g, kinds in PROMPT_GROUPS.items() if self.kind in kinds)


def prompt_groups() -> dict[str, list[str]]:
    """The shipped prompts' texts by group (grounded, open), in file order."""
    prompts = speculative_prompts()
    return {g: [p.text for p in prompts if p.group == g] for g in PROMPT_GROUPS}


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
    "model": "tiny",  # engines.model.cache names (registry.MODEL_NAMES), auto, or a path
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
    "tree_width": Setting("int", 1, MAX_TREE_WIDTH),  # > 1 needs a TREE_DRAFTERS drafter
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


def _index(text: str) -> int | None:
    return int(text) if text.isdigit() and text.isascii() and len(text) <= 4 else None


def _layer_set(text: str) -> tuple[int, ...] | None:
    """`3,5-9,12` as sorted distinct layer indices; None when it is not such a list."""
    out: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.partition("-")
        a, b = _index(lo), _index(hi) if dash else _index(lo)
        if a is None or b is None or b < a or b - a > 9999:
            return None
        out += range(a, b + 1)
    return tuple(sorted(out)) if len(set(out)) == len(out) else None


HEAD_DRAFTERS = ("eagle", "medusa")
"""The drafters that read a trained draft head (engines.speculative.heads)."""


def parse_drafter(spec: str, where: str = "drafter"
                  ) -> tuple[str, int | tuple[int, ...] | str | None]:
    """("ngram" | "layerskip" | "skip" | "quant" | "tiny" | "eagle" | "medusa", layers or bits
    or the skipped layers or "auto" or None); ValueError naming `where`. Layer indices are
    checked against the model when the drafter is built; "eagle" and "medusa" draft with the
    model's trained head of that kind (the user cache's, else a shipped one:
    heads/shipped.py)."""
    if spec in ("ngram", "tiny", *HEAD_DRAFTERS):
        return spec, None
    if spec in QUANT_DRAFTERS:
        return "quant", QUANT_DRAFTERS[spec]
    kind, sep, n = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if kind == "layerskip" and sep and _index(n) is not None and int(n) >= 1:
        return kind, int(n)
    if kind == "skip" and sep and (n == "auto" or _layer_set(n) is not None):
        return kind, n if n == "auto" else _layer_set(n)
    raise ValueError(f"{where}: expected ngram, layerskip:N (N >= 1 layers), skip:auto, "
                     f"skip:<layers> (e.g. skip:3,5-9), quant:int8, quant:int4, tiny, eagle or "
                     f"medusa, got {spec!r}")


TREE_DRAFTERS = ("ngram", "eagle")
"""The drafters that propose token trees (`propose_candidates`)."""


def check_speculative_settings(settings, where: str = "settings") -> dict:
    """The settings, strictly checked (ValueError naming the field)."""
    s = check_settings(settings, SPECULATIVE_SETTINGS, SPECULATIVE_DEFAULTS, where)
    kind, _ = parse_drafter(s["drafter"], f"{where}.drafter")
    if s["adaptive_k"] and s["tree_width"] > 1:
        raise ValueError(f"{where}.adaptive_k: chooses a chain's length; expected tree_width "
                         f"1, got {s['tree_width']}")
    if s["tree_width"] > 1 and kind not in TREE_DRAFTERS:
        raise ValueError(f"{where}.tree_width: expected 1 with the {s['drafter']} drafter "
                         "(token trees are the n-gram drafter's candidates or the EAGLE "
                         f"head's), got {s['tree_width']}")
    if not s["top_p"] > 0:
        raise ValueError(f"{where}.top_p: expected a number in (0, 1], got {s['top_p']!r}")
    if not s["prompt"].strip():
        raise ValueError(f"{where}.prompt: expected some text, got an empty prompt")
    if not s["model"].strip():
        raise ValueError(f"{where}.model: expected a model name or path, got {s['model']!r}")
    return s


def sampling_of(settings: dict):
    if settings["temperature"] == 0:
        return GREEDY
    return SamplingSettings(temperature=float(settings["temperature"]),
                            top_p=float(settings["top_p"]))
