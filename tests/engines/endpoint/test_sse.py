"""The SSE decoder: hand-worked events, and (hypothesis, seeded) the same events however the
bytes are cut, a clear MalformedSSE for garbage, never a hang or another exception."""

from __future__ import annotations

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from inferlab.engines.endpoint.sse import MAX_LINE_BYTES, MalformedSSE, SSEDecoder, SSEEvent


def decode(pieces) -> list[SSEEvent]:
    d = SSEDecoder()
    out = []
    for p in pieces:
        out.extend(d.feed(p))
    return out + d.close()


def cut(data: bytes, points) -> list[bytes]:
    points = sorted({p % (len(data) + 1) for p in points})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def test_events_fields_comments_and_line_ends():
    data = (b": keep-alive\r\n"
            b"event: ping\r\ndata: a\r\ndata:b\r\n\r\n"
            b"id: 7\nretry: 100\ndata: {\"x\": 1}\n\n"
            b"data: [DONE]\r\r")
    assert decode([data]) == [SSEEvent("a\nb", "ping"), SSEEvent('{"x": 1}'),
                              SSEEvent("[DONE]")]


def test_an_event_without_data_is_dropped_and_the_last_one_needs_no_blank_line():
    assert decode([b"event: x\n\n: c\n\ndata: last"]) == [SSEEvent("last")]


def test_crlf_split_between_pieces_is_one_line_end():
    assert decode([b"data: a\r", b"\ndata: b\n\n"]) == [SSEEvent("a\nb")]


@pytest.mark.parametrize("garbage, why", [
    (b"<html><body>502 Bad Gateway</body></html>\n\n", "is not an SSE field"),
    (b'{"choices": [{"text": "hi"}]}\n', "is not an SSE field"),
    (b"data: \xff\xfe\n\n", "not UTF-8"),
])
def test_garbage_is_named(garbage, why):
    with pytest.raises(MalformedSSE, match=f"malformed SSE: .*{why}"):
        decode([garbage])


def test_a_line_without_end_is_bounded():
    d = SSEDecoder()
    with pytest.raises(MalformedSSE, match="without a line end"):
        for _ in range(MAX_LINE_BYTES // 4096 + 2):
            d.feed(b"x" * 4096)


events = st.lists(st.tuples(st.sampled_from(["message", "ping", ""]),
                            st.lists(st.text(alphabet=st.characters(
                                blacklist_characters="\r\n", blacklist_categories=("Cs",)),
                                max_size=20), min_size=1, max_size=3)), max_size=8)
line_ends = st.sampled_from([b"\n", b"\r\n", b"\r"])


@seed(12)
@settings(max_examples=300, deadline=None)
@given(events, line_ends, st.lists(st.integers(0, 10_000), max_size=12))
def test_any_cutting_gives_the_same_events(evs, end, points):
    data = b""
    expected = []
    for name, lines in evs:
        if name:
            data += b"event: " + name.encode() + end
        for line in lines:
            data += b"data: " + line.encode() + end
        data += end
        expected.append(SSEEvent("\n".join(lines), name or "message"))
    assert decode([data]) == expected
    assert decode(cut(data, points)) == expected
    assert decode([data[i:i + 1] for i in range(len(data))]) == expected


@seed(13)
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(0, 10_000), max_size=8))
def test_arbitrary_bytes_decode_or_raise_malformed_the_same_way_however_cut(data, points):
    def outcome(pieces):
        try:
            return decode(pieces)
        except MalformedSSE as e:
            assert str(e).startswith("malformed SSE: ")
            return "malformed"

    assert outcome([data]) == outcome(cut(data, points))


def test_an_event_name_in_one_piece_names_the_data_of_the_next():
    """The fast path (a piece that is exactly one "data: ...\\n\\n" event) must not drop an
    "event:" line that came in the piece before (found by the cutting property above)."""
    assert decode([b"event: ping\n", b"data: x\n\n"]) == [SSEEvent("x", "ping")]
    assert decode([b"event: ping\n", b"data: \n\n", b"data: y\n\n"]) == [
        SSEEvent("", "ping"), SSEEvent("y")]
