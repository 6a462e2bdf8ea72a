"""Many simulated GPUs: replicas behind a router, tensor parallelism, prefill/decode
disaggregation with the KV cache moved over a link preset; goodput per GPU and the search
over layouts. Every instance is `engines/serve`'s ServingEngine (its one scheduler) on the
simulated clock; this package only routes requests between them and times the links.

    links.py      link presets (assets/links: bandwidth, latency, sources)
    layout.py     a layout: replicas × t, P prefill : D decode instances × t, or expert-
                  parallel groups (TP × EP × DP; pd with EP)
    executor.py   the simulated executor of a tensor-parallel instance (all-reduces on the
                  link) and of a decode instance (KV arrives, it is not computed)
    ep_executor.py  the executor of an expert-parallel group (hottest GPU per MoE layer,
                  dispatch/combine, dual-batch overlap) and its KV pool
    all_to_all.py the dispatch/combine all-to-all closed form (bytes, seconds)
    expert_load.py experts' load (uniform, Zipf, measured counts) and its spread over GPUs
    eplb.py       the expert-parallel load balancer (redundant copies, greedy packing)
    deepep.py     the all-to-all closed form against DeepEP's measured low-latency table
    ray_bench.py  the layout search on Ray against the same search serially (bench moe)
    router.py     round-robin, least outstanding tokens, prefix-aware
    records.py    what a cluster run hands out (per request, per instance, per transfer)
    cluster.py    the cluster's event loop on the simulated clock
    goodput.py    SLO attainment and goodput per GPU (DistServe's definition)
    search.py     every layout under a GPU budget, one full run each
    fanout.py     a search's probes run serially or as Ray tasks (a local Ray on 127.0.0.1,
                  or the user's cluster by address)
"""
