"""A real OpenAI-compatible server under load, watched: the mechanism under the endpoint lab
(whose settings, section, run, side-by-side and bench are engines/labs/endpoint).

- `url`: the URL check and the one-sentence errors (EndpointError); `scrub` keeps the key out.
- `sse`: the incremental Server-Sent Events decoder (MalformedSSE).
- `fields`: strict reads of a server's JSON fields (FieldError names the field).
- `chunks`: one streamed chunk read strictly: only what the client uses, each field checked.
- `client`: one streaming request timed chunk by chunk (StreamResult -> RequestTiming).
- `probe`: before a run, is this an OpenAI-compatible server, which model, which kind.
- `prompts`: prompt texts of about the workload's length.
- `scrape`: the server's Prometheus /metrics, every series plus a common set.
- `load`: EndpointRun, fixed concurrency or arrival times, bounded, cancellable.
- `sweep`: the guidellm-style rate sweep and its knee.
- `fake_server`: a local misbehaving OpenAI-compatible server (tests, the lab's bench).
"""
