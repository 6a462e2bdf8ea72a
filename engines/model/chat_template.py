"""A model's own chat template (Jinja text from its GGUF or tokenizer_config.json), rendered.

The template is code shipped inside a model file, so it runs in Jinja's immutable sandbox
(no attribute starting with "_", no mutating `messages`) with the environment transformers'
`apply_chat_template` gives it, so that the same conversation gives the same text:
`trim_blocks` and `lstrip_blocks` on, the `loopcontrols` extension (`break`, `continue`),
`raise_exception(message)`, `strftime_now(format)`, a `tojson` that keeps non-ASCII text and
takes `indent`, `separators` and `sort_keys`, and as variables `messages`,
`add_generation_prompt`, `bos_token`, `eos_token` (plus `tools` and `documents`, None).

A template that does not compile, refuses a conversation (`raise_exception`), or fails while
rendering raises `ChatTemplateError` (a ValueError) naming the template line; so does one that
tries to build a huge string or number, or to write more than `MAX_OUTPUT_CHARS`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_OUTPUT_CHARS = 1 << 24  # what one render may write: far above any real prompt
_MAX_REPEAT_ITEMS = 1 << 24  # "ab" * n, [x] * n: at most this many characters / items
_MAX_EXPONENT = 4096  # n ** k with integers: |k| at most this (9 ** 9 ** 9 would never end)
_TEMPLATE_FILE = "<template>"  # the file name Jinja gives the code of `from_string`


class ChatTemplateError(ValueError):
    """A chat template that cannot be compiled or rendered for a conversation."""


class _Refused(jinja2.TemplateError):
    """The template's own `raise_exception(message)`."""


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, also bounding `*` (repetition) and `**` (integer powers)."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if (isinstance(seq, str | list | tuple) and isinstance(n, int)
                        and len(seq) * n > _MAX_REPEAT_ITEMS):
                    raise jinja2.sandbox.SecurityError(
                        f"repetition of {len(seq):,} items {n:,} times is too large")
        elif (isinstance(left, int) and isinstance(right, int)
              and abs(right) > _MAX_EXPONENT and abs(left) > 1):
            raise jinja2.sandbox.SecurityError(f"power {left} ** {right} is too large")
        return super().call_binop(context, operator, left, right)


def _raise_exception(message: Any) -> None:
    raise _Refused(str(message))


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | str | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    # Jinja's own tojson escapes <, >, & and ' for HTML; a prompt wants the text itself.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _environment() -> _Sandbox:
    env = _Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


_ENV = _environment()


class JinjaChatTemplate:
    """A chat template as its model wrote it. `kind` names the format its markers show
    ("chatml", "gemma", or "jinja" for any other); `render` is what `Tokenizer.apply_chat`
    calls. The text is compiled once; a template that does not compile keeps its error and
    raises it on every `render`, so the model still loads and works in raw mode."""

    def __init__(self, source: str, bos_token: str | None = None,
                 eos_token: str | None = None) -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.kind = ("chatml" if "<|im_start|>" in source and "<|im_end|>" in source
                     else "gemma" if "<start_of_turn>" in source else "jinja")
        self._template: jinja2.Template | None = None
        self._error: str | None = None
        try:
            self._template = _ENV.from_string(source)
        except jinja2.TemplateSyntaxError as e:
            self._error = f"does not compile (line {e.lineno}: {e.message})"
        except (jinja2.TemplateError, RecursionError, MemoryError) as e:
            self._error = f"does not compile ({type(e).__name__}: {e})"

    def __repr__(self) -> str:
        return f"JinjaChatTemplate(kind={self.kind!r}, {len(self.source):,} characters)"

    def render(self, messages: Sequence[Mapping], add_generation_prompt: bool = True,
               **variables: Any) -> str:
        """The conversation as prompt text; `variables` are passed to the template too."""
        if self._error is not None:
            raise ChatTemplateError(f"the model's chat template {self._error}")
        if isinstance(messages, str | bytes) or not all(isinstance(m, Mapping)
                                                        for m in messages):
            raise ChatTemplateError("messages must be a list of {'role': ..., 'content': ...} "
                                    "mappings")
        context = {"bos_token": self.bos_token, "eos_token": self.eos_token,
                   "tools": None, "documents": None, **variables,
                   "messages": [dict(m) for m in messages],
                   "add_generation_prompt": bool(add_generation_prompt)}
        out: list[str] = []
        size = 0
        try:
            for piece in self._template.generate(**context):
                size += len(piece)
                if size > MAX_OUTPUT_CHARS:
                    raise ChatTemplateError(f"the model's chat template wrote more than "
                                            f"{MAX_OUTPUT_CHARS:,} characters")
                out.append(piece)
        except ChatTemplateError:
            raise
        except _Refused as e:
            raise ChatTemplateError(f"the model's chat template refused the conversation"
                                    f"{_line(e)}: {e}") from None
        except Exception as e:  # any failure of the template's code is the template's
            raise ChatTemplateError(f"the model's chat template failed{_line(e)} "
                                    f"({type(e).__name__}: {e})") from None
        return "".join(out)


def load_chat_template(source: str | None, bos_token: str | None = None,
                       eos_token: str | None = None) -> JinjaChatTemplate | None:
    """The template of a model file, None when it has none."""
    if not source or not source.strip():
        return None
    return JinjaChatTemplate(source, bos_token, eos_token)


def _line(error: BaseException) -> str:
    """" at line N" of the template where `error` was raised (Jinja maps its frames to the
    template's lines), or "" when no frame of the template is on the traceback."""
    line = None
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == _TEMPLATE_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" at line {line}" if line is not None else ""
