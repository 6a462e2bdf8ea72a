"""The cluster lab (engines/cluster on the simulated clock): its settings, session, snapshot
section, `inferlab run cluster` and `inferlab bench cluster`.

    settings.py   the settings table and defaults, the ClusterConfig and requests they name
    section.py    the snapshot's labs.cluster and its reader
    run.py        `inferlab run cluster`
    bench.py      `inferlab bench cluster`
"""
