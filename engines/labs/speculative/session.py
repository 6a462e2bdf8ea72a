"""The speculative lab's session: one prompt decoded speculatively by the lab's model
(`engines.model.cache`: tiny, tiny-moe, SmolLM2-135M, Gemma 3 270M or a path) with one
drafter, one `SpeculativeDecoder.step()` per `step()`; its `header()` (records.py) is drawn
beside its steps. `note` says what the run does differently from what was asked or what it
costs: a model without a chat template (the base Gemma 3) encodes its prompt raw, and a
model held as a file's codes dequantizes where a call has more rows than its kernels take
(`engines.model.linear_costs`).
"""

from __future__ import annotations

from inferlab.engines.labs.speculative.drafters import make_drafter
from inferlab.engines.labs.speculative.records import SpeculativeHeader
from inferlab.engines.labs.speculative.settings import check_speculative_settings, sampling_of
from inferlab.engines.model import cache as model_cache
from inferlab.engines.model.linear_costs import linear_paths
from inferlab.engines.speculative.adaptive_k import AdaptiveK
from inferlab.engines.speculative.decoder import SpeculativeDecoder, SpeculativeStep
from inferlab.engines.speculative.errors import SpeculativeError


class SpeculativeSession:
    """One prompt decoded speculatively: `step()` runs one draft-verify step and returns its
    `SpeculativeStep`; `done`, `step_index`, `records`, `header()`, `run()`."""

    def __init__(self, settings: dict, device: str = "cpu") -> None:
        self.settings = settings = check_speculative_settings(settings)
        # through the module, read at call time: tests give it their own target
        model, tok = model_cache.load_lab_model(settings["model"], device,
                                                kernels=settings["kernels"])
        self.model_id = model_cache.resolve_model_name(settings["model"])
        self.device = device
        self.tokenizer = tok
        chat = not settings["raw"] and tok.chat_template is not None
        prompt_ids = tok.encode_prompt(settings["prompt"], chat=chat)
        raw_note = "" if chat or settings["raw"] else \
            f"{self.model_id} has no chat template: the prompt is encoded raw. "
        paths = linear_paths(model)
        quant_note = ""
        if settings["drafter"].startswith("quant:") and paths.holds_codes:
            quant_note = (f"{self.model_id}'s linears are a file's low-bit codes already: the "
                          f"{settings['drafter']} draft re-quantizes their dequantized weights "
                          "(its lm_head kept as the file's codes). ")
        self.note = (raw_note + quant_note + paths.fallback_note).strip()
        if not prompt_ids:
            raise ValueError("prompt: it encodes to no token")
        sampling = sampling_of(settings)
        need = len(prompt_ids) + settings["max_tokens"] + settings["k"] + 1
        try:
            # a draft model loads on the target's kernel path too
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
                                 self.decoder.tree_width, head_acceptance(self.decoder.drafter))

    def run(self):
        return self.decoder.result()


def head_acceptance(drafter) -> tuple[float, ...]:
    """A head drafter's held-out per-position acceptance (its training curve's last point),
    else ()."""
    head = getattr(drafter, "head", None)
    curve = (getattr(head, "training", None) or {}).get("curve") or [{}]
    values = curve[-1].get("accept_by_position") or ()
    return tuple(float(a) for a in values)


def speculative_session(settings: dict, device: str = "cpu") -> SpeculativeSession:
    return SpeculativeSession(settings, device)
