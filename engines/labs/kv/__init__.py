"""The KV lab's engine: scenarios (request streams) run by the real model through the paged KV
cache step by step, with the contiguous allocator on the same requests, handing out frozen
records per step. Headless: no Qt here.

    scenarios.py  the request streams (ragged, shared-prompt, fork, pressure) and `prepare`
    session.py    KVLabSession: step() -> KVStepRecord
    records.py    the frozen records and their JSON form (snapshots)

The model it runs comes from the app-wide cache, `engines/model/cache.py`.
"""
