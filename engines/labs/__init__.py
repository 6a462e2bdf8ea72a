"""The labs' engine side: one package per lab, named by the lab's id (`engines/labs/<id>/`).

The rule: a lab's session (what steps the engines), settings table, state records, snapshot
section (writer and strict reader), headless run and bench glue live together in its package
here, so that a reader finds any of them by the lab's id alone. The mechanism packages
(`engines/kv`, `serve`, `speculative`, `quant`, `mcu`, `board`, `endpoint`, `hardware`,
`roofline`, `model`, …) hold no lab concerns and never import `engines.labs`: the labs stand
above every mechanism package (an import-linter contract in pyproject.toml says so). A record
type that a mechanism hands out (the serving engine's `IterationRecord`, say) lives with that
mechanism; the model cache every lab loads through is `engines/model/cache.py`.

    hardware     devices, telemetry and measured roofs      (section)
    roofline     measured and datasheet rooflines           (section)
    memory       KV-cache and weight memory on a device     (section)
    mcu          planned tensor arenas, runs on a board     (records, section, run, bench)
    kv           paged KV blocks of a real model            (scenarios, session, records, …)
    batching     static vs continuous batching              (session, records, compare, …)
    speculative  draft and verify                           (session, settings, records, …)
    quant        quantization schemes on a real model       (session, section, run, bench)
    endpoint     a real server under load                   (section, run, side by side, …)

Qt-free like all of engines/; the controllers are `app/labs/<id>.py`.
"""
