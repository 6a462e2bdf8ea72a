"""The cluster lab (engines/cluster on the simulated clock): its settings, session, snapshot
section, `inferlab run cluster` and `inferlab bench cluster`.

    settings.py       the settings table and defaults, the ClusterConfig and requests they name
    records.py        ClusterState (a run as the snapshot holds it), the search's summary,
                      ClusterSnapshot (the section as read once)
    session.py        ClusterSession: the settings' cluster run or searched; a run's metrics
    section.py        the snapshot's labs.cluster: its writer and its reader
    trace.py          a run's trace events (a track per instance and the link)
    expert_counts.py  a MoE lab run's measured router counts as the expert load (--expert-counts)
    run.py            `inferlab run cluster`
    bench.py          `inferlab bench cluster`
    compare_plots.py  a snapshot comparison's plots
    formulas.py       a report's formulas with the snapshot's numbers
"""
