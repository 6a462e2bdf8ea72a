"""What the lab and `inferlab run quant` measure against: the model as loaded, the held-out
text's tokens, the sample prompt and the fp32 model's own sample (the agreement reference).

    session = QuantSession.open("auto", "cpu")
    run = session.run("int4-g128")            # a SchemeRun
    session.analyse("layers.3.gate_up", "q4_1")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from inferlab.engines import kernels
from inferlab.engines.quant.errors import QuantError

SAMPLE_PROMPT = "In two sentences, how does a pendulum clock keep time?"


@dataclass
class QuantSession:
    model_name: str
    device: str
    model: object
    tokenizer: object
    eval_ids: list[int]
    prompt_ids: list[int]
    reference_ids: list[int] | None = None
    runs: dict[str, object] = field(default_factory=dict)

    @classmethod
    def open(cls, spec: str, device: str = "cpu", eval_text: str | None = None,
             progress: Callable | None = None, kernel_setting: str = "auto") -> QuantSession:
        """Load `spec` (cached between sessions) on the kernel path `kernel_setting` (a lab's
        `kernels` setting) and tokenize the held-out text (default the shipped passage, never
        the calibration text)."""
        from inferlab.engines.kvlab.models import load_lab_model, resolve_model_name
        from inferlab.engines.quant.calibration import eval_text as shipped_eval_text

        if progress is not None:
            progress(0.05, f"loading {spec}")
        with kernels.chosen(kernel_setting):
            model, tokenizer = load_lab_model(spec, device)
        text = shipped_eval_text() if eval_text is None else eval_text
        if not text.strip():
            raise QuantError("eval text is empty")
        eval_ids = tokenizer.encode(text)
        if len(eval_ids) < 2:
            raise QuantError("eval text must be at least 2 tokens long")
        prompt_ids = tokenizer.encode_prompt(SAMPLE_PROMPT)
        return cls(resolve_model_name(spec), device, model, tokenizer, eval_ids, prompt_ids)

    @property
    def n_layers(self) -> int:
        return self.model.config.n_layers

    def weight(self, layer: int, linear: str):
        if not 0 <= layer < self.n_layers:
            raise QuantError(f"layer must be in 0..{self.n_layers - 1}, got {layer}")
        return getattr(self.model.layers[layer], linear).weight

    def analyse(self, layer: int, linear: str, scheme_name: str):
        from inferlab.engines.quantlab.layer import analyse_layer

        return analyse_layer(self.weight(layer, linear), scheme_name,
                             f"layers.{layer}.{linear}")

    def reference(self) -> list[int]:
        from inferlab.engines.quantlab.evaluation import sample_ids

        if self.reference_ids is None:
            self.reference_ids = sample_ids(self.model, self.prompt_ids)
        return self.reference_ids

    def run(self, name: str, decode_tokens: int | None = 32,
            progress: Callable | None = None):
        """`name` applied, scored, timed and sampled (a SchemeRun), remembered by name."""
        from inferlab.engines.quantlab.evaluation import run_scheme

        out = run_scheme(self.model, self.tokenizer, name, self.eval_ids, self.prompt_ids,
                         self.reference(), decode_tokens, progress)
        self.runs[name] = out
        return out
