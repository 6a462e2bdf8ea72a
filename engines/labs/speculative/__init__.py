"""The speculative lab, one module per job (the mechanism, drafters to decoder, is
engines/speculative, which imports nothing from here):

    settings.py       the shipped prompts, the settings table and defaults, drafter names
    drafters.py       make_drafter: the drafter a setting names, for its target
    session.py        SpeculativeSession: step() -> SpeculativeStep, header()
    metrics.py        a run's numbers over its steps
    records.py        SpeculativeHeader, SpeculativeSnapshot (a section as read), and a step
                      as a snapshot dict and back, read strictly
    section.py        the snapshot section `labs.speculative`: writer and strict reader
    trace.py          a step as trace events
    sweep.py          the K sweep (sweep_records.py: its records and their snapshot form)
    run.py            `inferlab run speculative`
    bench.py          `inferlab bench speculative`: speculative against plain decoding, and
                      transformers' prompt lookup
"""
