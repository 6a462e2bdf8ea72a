"""The KV lab's engine: scenarios (request streams) run by the real model through the paged KV
cache step by step, with the contiguous allocator on the same requests, handing out frozen
records per step. Headless: no Qt here.

    settings.py       the settings table and defaults
    scenarios.py      the request streams (ragged, shared-prompt, fork, pressure) and `prepare`
    session.py        KVLabSession: step() -> KVStepRecord; kv_lab_model, kv_session, kv_run
    records.py        the frozen records, KVSnapshot, and their JSON form (snapshots)
    metrics.py        a run's headline figures over its steps
    section.py        the snapshot section `labs.kv`: writer and strict reader
    trace.py          a step as trace events
    run.py            `inferlab run kv`
    bench.py          `inferlab bench kv` (the engine figures; the grid's draw time is
                      app/benches/kv_view.py)
    compare_plots.py  its side of a snapshot comparison's plots

The model it runs comes from the app-wide cache, `engines/model/cache.py`.
"""
