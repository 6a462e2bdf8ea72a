"""A JSON document's event list cut into runs of whole elements as its bytes arrive, so that
each run is parsed at C speed in one call (msgspec) while the file streams.

The document is `{... "traceEvents": [e0, e1, ...] ...}` or the bare list `[e0, e1, ...]`.
`EventSplitter.feed(chunk)` scans the bytes with numpy: a structural character (quote,
bracket, brace, comma) counts where no odd run of backslashes escapes it, and a bracket or a
comma only outside strings, where an even number of real quotes precede it. Nesting is
counted as it goes and refused deeper than `max_depth`, before any parser sees it (a file
nested 100,000 deep would otherwise cost the parser its recursion). The commas at the list's
own depth separate its elements: each chunk yields the text up to the last of them, whole
elements only, with the offsets of the commas inside it. What lies outside the list (the
`skeleton`: the document with an empty list in its place) is kept and parsed at the end, so a
document broken anywhere is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

QUOTE, BACKSLASH, COMMA = ord('"'), ord("\\"), ord(",")
STRUCTURAL = np.zeros(256, bool)
STRUCTURAL[[QUOTE, ord("["), ord("]"), ord("{"), ord("}"), COMMA]] = True
STEP = np.zeros(256, np.int32)  # a byte's change of depth, outside strings
STEP[[ord("["), ord("{")]] = 1
STEP[[ord("]"), ord("}")]] = -1
OPEN_LIST, CLOSE_LIST = ord("["), ord("]")
EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*$')
KEY_WINDOW = 4096  # bytes before a `[` searched for its key (and the whitespace around it)
WHITESPACE = b" \t\r\n"
HEAD, EVENTS, TAIL = "head", "events", "tail"


class Run(NamedTuple):
    """Whole elements, comma-separated (`text`), and where those commas lie in it."""

    text: bytes
    comma_offsets: np.ndarray  # int64, ascending

    @property
    def count(self) -> int:
        return len(self.comma_offsets) + 1

    def element_at(self, offset: int) -> int:
        """The element (0-based, within the run) that byte `offset` of `text` belongs to."""
        return int(np.searchsorted(self.comma_offsets, offset, side="right"))


class EventSplitter:
    """Feed the document's bytes in order; take the element runs each chunk completes.

    `fail(field, problem)` is called (and must raise) for nesting beyond `max_depth` and for
    an empty element (`[1,,2]`, a trailing comma). `finish()` checks the document ended and
    returns the skeleton."""

    def __init__(self, max_depth: int, fail: Callable[[str, str], None],
                 bare_list: bool) -> None:
        self.max_depth, self.fail, self.bare_list = max_depth, fail, bare_list
        self.depth = 0
        self.in_string = False
        self.escape_next = False  # the previous chunk ended on an odd run of backslashes
        self.state = HEAD
        self.level = 0  # the list's own depth, once its `[` is found
        self.head = bytearray()
        self.tail = bytearray()
        self.pending = b""  # the list's text after its last complete element's comma
        self.elements = 0  # elements completed so far (emitted runs)

    def feed(self, data: bytes) -> list[Run]:
        if not data:
            return []
        a = np.frombuffer(data, np.uint8)
        mask = STRUCTURAL[a]
        if self.escape_next or BACKSLASH in data:
            self._unescape(data, mask)
        pos = np.flatnonzero(mask)
        kinds = a[pos]
        is_quote = kinds == QUOTE
        quotes_through = np.cumsum(is_quote, dtype=np.int64) + self.in_string
        outside = ~is_quote & ((quotes_through & 1) == 0)
        depth = np.cumsum(STEP[kinds] * outside, dtype=np.int64) + self.depth
        if len(pos):
            if depth.max() > self.max_depth:
                self.fail("json", f"nested deeper than {self.max_depth}")
            self.in_string = bool(quotes_through[-1] & 1)
            self.depth = int(depth[-1])
        return self._split(data, pos, kinds, outside, depth)

    def _unescape(self, data: bytes, mask: np.ndarray) -> None:
        """Clear `mask` where a character is escaped: after an odd run of backslashes (a
        backslash escapes the next character inside a string; outside one the parser refuses
        it anyway)."""
        backslashes = np.flatnonzero(np.frombuffer(data, np.uint8) == BACKSLASH)
        i, n = 0, len(backslashes)
        if self.escape_next:
            mask[0] = False
            if len(data) and data[0] == BACKSLASH:  # an escaped backslash: not a run start
                i = 1
        self.escape_next = False
        while i < n:
            start = int(backslashes[i])
            j = i
            while j + 1 < n and backslashes[j + 1] == backslashes[j] + 1:
                j += 1
            run = j - i + 1
            if run % 2:
                after = start + run
                if after < len(data):
                    mask[after] = False
                else:
                    self.escape_next = True
            i = j + 1

    def _split(self, data, pos, kinds, outside, depth) -> list[Run]:
        start = 0  # the first byte of `data` the events state owns
        if self.state == HEAD:
            opens = pos[outside & (kinds == OPEN_LIST)]
            opened_depth = depth[outside & (kinds == OPEN_LIST)]
            for p, d in zip(opens.tolist(), opened_depth.tolist(), strict=True):
                if self._is_event_list(data, p, d):
                    self.head += data[:p]
                    self.state, self.level, start = EVENTS, d, p + 1
                    break
            else:
                self.head += data
                return []
        if self.state == TAIL:
            self.tail += data
            return []
        # the events state, from `start`
        after = pos >= start
        closes = np.flatnonzero(after & outside & (kinds == CLOSE_LIST)
                                & (depth == self.level - 1))
        end = int(pos[closes[0]]) if len(closes) else len(data)
        commas = pos[after & (pos < end) & outside & (kinds == COMMA) & (depth == self.level)]
        runs = []
        if len(commas):
            cut = int(commas[-1])
            text = self.pending + data[start:cut]
            offsets = commas[:-1] - start + len(self.pending)
            runs.append(self._run(text, offsets.astype(np.int64)))
            self.pending = data[cut + 1:end]
        else:
            self.pending += data[start:end]
        if end < len(data):  # the list closed: its last element, then the tail
            last = self.pending
            self.pending = b""
            if last.strip(WHITESPACE):
                runs.append(self._run(last, np.zeros(0, np.int64)))
            elif self.elements:
                self.fail("json", "a trailing comma in the event list")
            self.state = TAIL
            self.tail += data[end + 1:]
        return runs

    def _run(self, text: bytes, offsets: np.ndarray) -> Run:
        if not text.strip(WHITESPACE):
            self.fail("json", "an empty element in the event list")
        run = Run(text, offsets)
        self.elements += run.count
        return run

    def _is_event_list(self, data: bytes, p: int, depth_after: int) -> bool:
        """Is the `[` at data[p] the document's event list: the bare list itself, or the
        value of the top-level key "traceEvents"?"""
        if self.bare_list:
            return depth_after == 1
        if depth_after != 2:
            return False
        before = (bytes(self.head[-KEY_WINDOW:]) + data[max(p - KEY_WINDOW, 0):p])
        return EVENTS_KEY.search(before[-KEY_WINDOW:]) is not None

    def finish(self) -> bytes:
        """The document outside its event list, the list left empty (`[]`); the list must
        have closed."""
        if self.state == EVENTS:
            self.fail("json", "the file ends early")
        if self.escape_next:
            self.fail("json", "the file ends on a backslash")
        if self.state == HEAD:
            return bytes(self.head)
        return bytes(self.head) + b"[]" + bytes(self.tail)
