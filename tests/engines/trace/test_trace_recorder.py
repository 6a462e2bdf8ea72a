"""TraceRecorder: exact Chrome events from a fake clock, threads, bounds."""

import threading

import pytest

from inferlab.engines.trace.recorder import TraceRecorder


class FakeClock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self, now_s: float = 100.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


def run_in_thread(name: str, fn) -> None:
    thread = threading.Thread(target=fn, name=name)
    thread.start()
    thread.join()


def test_span_counter_instant_from_two_threads_exact():
    clock = FakeClock(100.0)
    rec = TraceRecorder("InferLab test", clock=clock)  # t0 = 100 s

    clock.now_s = 100.25
    with rec.span("step", cat="engine", args={"batch": 4}) as args:
        clock.now_s = 100.75
        args["tokens"] = 32

    def worker():
        rec.counter("kv blocks", {"used": 3, "free": 5}, ts_s=101.0)
        clock.now_s = 101.5
        rec.instant("preempt", args={"request": 7}, scope="p")

    run_in_thread("kv-worker", worker)
    rec.add_span("measured", 100.5, 100.5 + 2e-6, args={"bytes": 64})

    assert rec.events() == [
        {"name": "process_name", "ph": "M", "ts": 0.0, "pid": 1, "tid": 0,
         "args": {"name": "InferLab test"}},
        {"name": "thread_name", "ph": "M", "ts": 0.0, "pid": 1, "tid": 1,
         "args": {"name": "MainThread"}},
        {"name": "thread_name", "ph": "M", "ts": 0.0, "pid": 1, "tid": 2,
         "args": {"name": "kv-worker"}},
        {"name": "step", "ph": "X", "ts": 250000.0, "dur": 500000.0, "pid": 1, "tid": 1,
         "cat": "engine", "args": {"batch": 4, "tokens": 32}},
        {"name": "measured", "ph": "X", "ts": 500000.0, "dur": 2.0, "pid": 1, "tid": 1,
         "args": {"bytes": 64}},
        {"name": "kv blocks", "ph": "C", "ts": 1000000.0, "pid": 1, "tid": 2,
         "args": {"used": 3.0, "free": 5.0}},
        {"name": "preempt", "ph": "i", "ts": 1500000.0, "s": "p", "pid": 1, "tid": 2,
         "args": {"request": 7}},
    ]  # fmt: skip


def test_events_sorted_by_ts_parent_before_child_at_equal_ts():
    clock = FakeClock(0.0)
    rec = TraceRecorder(clock=clock)
    with rec.span("parent"):
        with rec.span("child"):
            clock.now_s = 1.0
        clock.now_s = 2.0
    rec.add_span("earlier", -1.0, -0.5)
    names = [(e["name"], e["ts"], e.get("dur")) for e in rec.events() if e["ph"] == "X"]
    assert names == [
        ("earlier", -1000000.0, 500000.0),
        ("parent", 0.0, 2000000.0),
        ("child", 0.0, 1000000.0),
    ]


def test_span_records_failure_and_reraises():
    clock = FakeClock(0.0)
    rec = TraceRecorder(clock=clock)
    with pytest.raises(KeyError), rec.span("load"):
        clock.now_s = 0.001
        raise KeyError("missing")
    (span,) = [e for e in rec.events() if e["ph"] == "X"]
    assert span["args"] == {"error": "KeyError"}
    assert span["dur"] == 1000.0


def test_caller_args_are_copied():
    rec = TraceRecorder(clock=FakeClock())
    args = {"n": 1}
    rec.instant("mark", args=args)
    args["n"] = 2
    assert rec.events()[-1]["args"] == {"n": 1}
    rec.events()[-1]["args"]["n"] = 3  # events() hands out copies
    assert rec.events()[-1]["args"] == {"n": 1}


def test_counter_drops_non_finite_values():
    rec = TraceRecorder(clock=FakeClock())
    rec.counter("c", {"ok": 1.5, "bad": float("nan"), "worse": float("inf")})
    rec.counter("all bad", {"x": float("nan")})
    counters = [e for e in rec.events() if e["ph"] == "C"]
    assert [(e["name"], e["args"]) for e in counters] == [("c", {"ok": 1.5})]


def test_invalid_input_is_refused():
    rec = TraceRecorder(clock=FakeClock())
    with pytest.raises(ValueError, match="before it starts"):
        rec.add_span("backwards", 2.0, 1.0)
    with pytest.raises(ValueError, match="scope"):
        rec.instant("x", scope="q")
    with pytest.raises(ValueError, match="max_events"):
        TraceRecorder(max_events=0)


def test_max_events_drops_oldest_and_counts():
    clock = FakeClock(0.0)
    rec = TraceRecorder(clock=clock, max_events=3)
    for i in range(5):
        clock.now_s = float(i)
        rec.instant(f"e{i}")
    assert rec.dropped == 2
    assert len(rec) == 3
    assert [e["name"] for e in rec.events() if e["ph"] == "i"] == ["e2", "e3", "e4"]
    assert [e["ph"] for e in rec.events()][:2] == ["M", "M"]  # metadata is never dropped


def test_clear_keeps_clock_zero_and_thread_ids():
    clock = FakeClock(10.0)
    rec = TraceRecorder(clock=clock, max_events=1)
    rec.instant("a")
    rec.instant("b")
    rec.clear()
    assert (len(rec), rec.dropped) == (0, 0)
    clock.now_s = 11.0
    rec.instant("c")
    assert rec.events()[-1] == {"name": "c", "ph": "i", "ts": 1000000.0, "s": "t", "pid": 1,
                                "tid": 1}  # fmt: skip
    assert rec.t0_s == 10.0


def test_renamed_thread_keeps_tid_and_takes_new_name():
    rec = TraceRecorder(clock=FakeClock())

    def worker():
        rec.instant("before")
        threading.current_thread().name = "decode-worker"
        rec.instant("after")

    run_in_thread("starting", worker)
    meta = [e for e in rec.events() if e["name"] == "thread_name"]
    assert [(e["tid"], e["args"]["name"]) for e in meta] == [(1, "decode-worker")]
    assert {e["tid"] for e in rec.events() if e["ph"] == "i"} == {1}


def test_many_threads_record_concurrently():
    rec = TraceRecorder()
    n_threads, per_thread = 8, 200
    barrier = threading.Barrier(n_threads)

    def worker():
        barrier.wait()
        for i in range(per_thread):
            with rec.span("step", args={"i": i}):
                pass
            rec.counter("n", {"i": i})

    threads = [threading.Thread(target=worker, name=f"w{k}") for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = rec.events()
    body = [e for e in events if e["ph"] != "M"]
    assert len(body) == n_threads * per_thread * 2
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert sorted(names.values()) == [f"w{k}" for k in range(n_threads)]
    assert sorted(names) == list(range(1, n_threads + 1))
    for tid in names:
        assert sum(e["tid"] == tid for e in body) == per_thread * 2
    assert [e["ts"] for e in body] == sorted(e["ts"] for e in body)
    assert all(e["ts"] >= 0 and e.get("dur", 0) >= 0 for e in body)


def test_named_tracks_get_their_own_tid_and_name_beside_the_threads():
    rec = TraceRecorder(clock=lambda: 0.0)
    rec.add_span("on the thread", 0.0, 1.0)
    rec.add_span("prefill", 0.0, 1.0, track="request a")
    rec.add_span("decode", 1.0, 2.0, track="request a")
    rec.add_span("prefill", 0.0, 3.0, track="request b")
    rec.add_span("again", 1.0, 2.0)
    events = rec.events()
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    tid = {e["name"] + "@" + names[e["tid"]]: e["tid"] for e in events if e["ph"] == "X"}
    assert len(set(names)) == len(names) == 3
    assert tid["prefill@request a"] == tid["decode@request a"] != tid["prefill@request b"]
    assert names[tid["again@" + threading.current_thread().name]] == \
        threading.current_thread().name
    assert tid["on the thread@" + threading.current_thread().name] not in (
        tid["prefill@request a"], tid["prefill@request b"])
