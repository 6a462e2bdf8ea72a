"""The attention lab's engine side: one execution of engines/attention stepped tile by tile on
seeded Q, K, V, with the closed forms of all three beside it. Headless: no Qt here.

    settings.py  the lab's inputs (N, d, heads, causal, Br, Bc, on-chip memory, execution)
    records.py   AttentionRunInfo, AttentionSnapshot (a section as read) and the step
                 records' JSON form (snapshots)
    session.py   AttentionSession: step() -> AttentionStep; run_executions for the CLI
    section.py   the snapshot section: its writer and strict reader
    run.py       `inferlab run attention`
    bench.py     `inferlab bench attention` (timings and counted-vs-closed-form bytes; the
                 view's redraw time is app/benches/attention_view.py's)
"""
