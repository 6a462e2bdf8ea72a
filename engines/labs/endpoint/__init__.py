"""The endpoint lab: the user's own OpenAI-compatible server under the batching lab's
workloads. The server-facing mechanism (client, load, scrape, sweep) is engines/endpoint,
which imports nothing from here.

    settings.py       the settings table and defaults; the load runner's settings and requests
    records.py        EndpointRecord (a run as the lab draws it), its JSON form read back
                      strictly, EndpointSnapshot (the section as read once)
    session.py        a load run, the rate sweep (SweepPlan), a run in flight's record
    section.py        the snapshot's labs.endpoint: its writer and its reader
    timeline.py       a run's requests as the batching lab's Gantt segments
    trace.py          a run's trace events (a track per request, the scraped counters)
    side_by_side.py   the same requests through the in-app engine and the simulated GPU
    run.py            `inferlab run endpoint`
    bench.py          `inferlab bench endpoint`
    compare_plots.py  a snapshot comparison's plots

No key is ever in a setting, record, section or trace event: only the name of the
environment variable holding it.
"""
