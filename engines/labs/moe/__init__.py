"""The MoE lab's engine: a Mixture-of-Experts model decoding the shipped prompts at batch B,
each decode step's routing (tokens per expert, top-k weights, load imbalance), the experts it
touches beside E·(1 − (1 − k/E)^B), the weights it reads, and the grouped expert product timed
against the per-token loop. Headless: no Qt here.

    settings.py       the settings table and defaults
    session.py        MoESession: step() -> MoEStepRecord; moe_model, moe_run (the B sweep)
    records.py        the frozen records, MoESnapshot, and their JSON form
    metrics.py        a run's figures over its steps (the section's metrics)
    section.py        the snapshot section `labs.moe`: writer and strict reader
    uniform.py        a uniform router (the closed form's assumption), drawn by bench and tests
    formulas.py       the closed forms with a snapshot's numbers
    compare_plots.py  its side of a snapshot comparison's plots (the B sweep)
    run.py            `inferlab run moe`
    bench.py          `inferlab bench moe`
"""
