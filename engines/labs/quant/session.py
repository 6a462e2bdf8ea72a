"""What the lab and `inferlab run quant` measure against: the model as loaded, the held-out
texts' tokens, how perplexity is computed on them (`ppl`), the calibration texts GPTQ, AWQ
and Wanda see (None: the shipped set), the sample prompt and the fp32 model's own sample
(the agreement reference).

The model is always loaded with fp32 weights (`load_lab_model(..., weights="fp32")`): the
schemes quantize fp32 `Linear`s. A GGUF file's own quantization (SmolLM2's Q4_1, Gemma 3's
Q4_K_M) is thus the reference point: the fp32 row is those codes dequantized, the same
numbers the file's codes compute (`source_note` says so). A Mixture-of-Experts model
(tiny-moe) is refused by name: the schemes here quantize the four linears of dense layers
(`model_quant.check_dense`).

Held-out texts are tokenized as llama.cpp tokenizes a file: with the BOS its tokenizer adds
(Gemma 3: id 2, once; SmolLM2 adds none), and `ppl()` hands llama.cpp's convention that BOS
for each chunk's first token.

    session = QuantSession.open("auto", "cpu")
    run = session.run("int4-g128")            # a SchemeRun
    session.analyse("layers.3.gate_up", "q4_1")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from inferlab.engines.labs.quant.evaluation import run_scheme, sample_ids
from inferlab.engines.labs.quant.layer import analyse_layer
from inferlab.engines.model.cache import load_lab_model, resolve_model_name
from inferlab.engines.model.perplexity import SLIDING, WINDOW, resolve_window, windows
from inferlab.engines.quant.calibration import eval_texts
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.model_quant import check_dense

SAMPLE_PROMPT = "In two sentences, how does a pendulum clock keep time?"


def source_note(model) -> str:
    """For a model read from a GGUF file: that its fp32 weights are the file's codes
    dequantized, the reference point of every scheme; "" otherwise."""
    source = model.config.source or ""
    if not source.endswith(".gguf"):
        return ""
    return (f"{model.config.id}: the weights of {Path(source).name} dequantized to fp32 "
            f"({model.weight_bytes / 1e6:,.0f} MB): the fp32 row is the file's own "
            "quantization, the reference point; each scheme re-quantizes those weights")


@dataclass
class QuantSession:
    model_name: str
    device: str
    model: object
    tokenizer: object
    eval_sets: dict[str, list[int]]
    """Held-out text name -> its token ids."""
    prompt_ids: list[int]
    reference_ids: list[int] | None = None
    runs: dict[str, object] = field(default_factory=dict)
    calibration_texts: list[str] | None = None
    ppl_window: int | None = WINDOW
    ppl_stride: int | None = None
    ppl_convention: str = SLIDING
    source_note: str = ""
    """Where the fp32 weights come from, for a GGUF file: its codes dequantized."""

    @classmethod
    def open(cls, spec: str, device: str = "cpu",
             eval_text: str | Mapping[str, str] | None = None,
             progress: Callable | None = None, kernel_setting: str = "auto",
             calibration_texts: list[str] | None = None) -> QuantSession:
        """Load `spec` (cached between sessions) on the kernel path `kernel_setting` (a lab's
        `kernels` setting) and tokenize the held-out texts (default the shipped three; one
        string is one text named "eval"; never the calibration texts)."""
        if progress is not None:
            progress(0.05, f"loading {spec}")
        model, tokenizer = load_lab_model(spec, device, kernels=kernel_setting, weights="fp32")
        check_dense(model, "the quantization lab")
        texts = eval_texts() if eval_text is None else (
            {"eval": eval_text} if isinstance(eval_text, str) else dict(eval_text))
        eval_sets = {}
        for name, text in texts.items():
            if not text.strip():
                raise QuantError(f"eval text {name} is empty")
            ids = tokenizer.encode(text)  # the BOS its tokenizer adds, as llama.cpp's file
            if len(ids) < 2:
                raise QuantError(f"eval text {name} must be at least 2 tokens long")
            eval_sets[name] = ids
        prompt_ids = tokenizer.encode_prompt(SAMPLE_PROMPT)
        return cls(resolve_model_name(spec), device, model, tokenizer, eval_sets, prompt_ids,
                   calibration_texts=calibration_texts, source_note=source_note(model))

    @property
    def eval_tokens(self) -> int:
        """Held-out tokens over every text."""
        return sum(map(len, self.eval_sets.values()))

    def set_perplexity(self, window: int | None, stride: int | None, convention: str) -> None:
        """How perplexity is computed from now on (`engines.model.perplexity`); ValueError
        names a bad choice (e.g. a text too short for llama.cpp's 2 * n_ctx)."""
        w, s = resolve_window(self.model, window, stride, convention)
        for name, ids in self.eval_sets.items():
            try:
                windows(len(ids), w, s, convention)
            except ValueError as e:
                raise ValueError(f"held-out text {name}: {e}") from None
        self.ppl_window, self.ppl_stride, self.ppl_convention = window, stride, convention

    def ppl(self) -> dict:
        """`perplexity`'s keyword arguments as this session scores."""
        bos = self.tokenizer.bos_token_id if getattr(self.tokenizer, "add_bos", False) \
            else None
        return {"window": self.ppl_window, "stride": self.ppl_stride,
                "convention": self.ppl_convention, "bos_id": bos}

    def ppl_method(self) -> dict:
        """The window and stride as used (the model's context resolved), for reports:
        ppl_convention, ppl_window_tokens, ppl_stride_tokens."""
        w, s = resolve_window(self.model, self.ppl_window, self.ppl_stride,
                              self.ppl_convention)
        return {"ppl_convention": self.ppl_convention, "ppl_window_tokens": w,
                "ppl_stride_tokens": s}

    @property
    def n_layers(self) -> int:
        return self.model.config.n_layers

    def weight(self, layer: int, linear: str):
        if not 0 <= layer < self.n_layers:
            raise QuantError(f"layer must be in 0..{self.n_layers - 1}, got {layer}")
        return getattr(self.model.layers[layer], linear).weight

    def analyse(self, layer: int, linear: str, scheme_name: str):
        return analyse_layer(self.weight(layer, linear), scheme_name,
                             f"layers.{layer}.{linear}")

    def reference(self) -> list[int]:
        if self.reference_ids is None:
            self.reference_ids = sample_ids(self.model, self.prompt_ids)
        return self.reference_ids

    def run(self, name: str, decode_tokens: int | None = 32,
            progress: Callable | None = None):
        """`name` applied, scored, timed and sampled (a SchemeRun), remembered by name."""
        out = run_scheme(self.model, self.tokenizer, name, self.eval_sets, self.prompt_ids,
                         self.reference(), decode_tokens, progress, self.calibration_texts,
                         self.ppl())
        self.runs[name] = out
        return out
