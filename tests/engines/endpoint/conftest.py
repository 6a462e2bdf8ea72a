"""Fake OpenAI-compatible servers on 127.0.0.1 (engines/endpoint/fake_server.py), one or more
per test, stopped after it; and short timeouts so that a hang fails fast."""

from __future__ import annotations

from inferlab.engines.endpoint.load import EndpointSettings
from inferlab.engines.serve.workload import WorkloadRequest


def quick_settings(url: str, **kwargs) -> EndpointSettings:
    kwargs.setdefault("read_timeout_s", 1.0)
    kwargs.setdefault("request_timeout_s", 10.0)
    kwargs.setdefault("max_duration_s", 20.0)
    kwargs.setdefault("scrape_hz", 0)
    return EndpointSettings(url=url, **kwargs)


def requests(n: int, output_tokens: int = 8, prompt: str = "", arrival_gap_s: float = 0.0):
    return [WorkloadRequest(arrival_s=i * arrival_gap_s, prompt_tokens=16,
                            output_tokens=output_tokens, prompt=prompt) for i in range(n)]
