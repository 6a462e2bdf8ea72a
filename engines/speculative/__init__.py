"""Speculative decoding, headless: drafters propose, the target verifies, and the rejection
sampler keeps the target's output distribution exactly. No Qt here.

    sampling.py        SamplingSettings (temperature, top-k, top-p) and filtered_probs
    mass.py            the two operations both samplers share: the residual, the inverse-CDF draw
    verification.py    the frozen records a verify step hands out (Verification, TokenFate)
    rejection.py       the exact rejection sampler over K drafted positions; greedy verify
    tree.py            TokenTree: draft candidates as a tree of parent indices; the tree
                       attention mask and positions of its verify forward
    tree_rejection.py  multi-candidate (SpecInfer) rejection sampling over a tree; greedy tree
    drafter.py         the Drafter protocol and its Proposal
    ngram.py           NgramDrafter: prompt lookup, no model
    model_drafter.py   ModelDrafter (a smaller model, same tokenizer), LayerSkipDrafter (the
                       target's first layers + its head, shared weights), SkipDrafter (the
                       target without a set of its layers); each its own cache
    skip_search.py     which layers a skip self-draft leaves out (skip:auto): a greedy search
                       on calibration text, cached per model
    head_drafter.py    EagleDrafter, MedusaDrafter: drafts from a trained head (heads/) reading
                       the target's last hidden states, handed over after each verify forward
    heads/             EAGLE and Medusa heads trained on the target's own outputs: the training
                       list, cached features, training, head files (heads/__init__.py's map)
    adaptive_k.py      AdaptiveK: each step's K from the measured alpha, draft cost and v(K)
    decoder.py         SpeculativeDecoder: draft K, verify K + 1 in one target forward, roll
                       back; or (tree_width > 1) a token tree of n-gram candidates verified in
                       one masked forward, its accepted path kept in place in the cache;
                       SpeculativeStep / SpeculativeRun records
    statistics.py      acceptance rates, alpha, mean acceptance length, the speedup model
    checks.py          input checks shared by the samplers
    errors.py          SpeculativeError

The speculative lab (settings, session, snapshot section, K sweep, run, bench) is
engines/labs/speculative; nothing here imports it.
"""
