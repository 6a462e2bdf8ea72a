"""The endpoint lab: its settings and snapshot section (`section`: EndpointRecord, strict
reader), headless run and bench glue (`run`), the client's own cost against the fake server
(`bench`), and the same requests through the in-app engine and the simulated GPU
(`side_by_side`, through the batching lab). The server-facing mechanism (client, load, scrape,
sweep) is engines/endpoint, which imports nothing from here.
"""
