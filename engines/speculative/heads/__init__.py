"""Trained draft heads (EAGLE, Medusa), learned from the target's own outputs. No Qt here.

    training_data.py  THE list of prompts and texts a head is trained on (never the
                      speculative lab's bench prompts) and the held-out prompts
    prompt_bank.py    templated prompts (everyday subjects, the shipped texts' paragraphs)
    sequence.py       TrainingSequence: tokens, hidden states, greedy tokens
    distill.py        batched greedy generation keeping the hidden states as computed
    features.py       the target's last hidden states and greedy tokens per training
                      sequence (self-distilled answers, shipped texts), cached by model hash
    windows.py        sequences cut into padded training batches
    dims.py           HeadDims (read from the target), seeded init, unit_rms (the feature)
    eagle.py          EagleHead: fc(2d -> d) + one decoder layer predicting the next feature;
                      HeadCache, its K/V
    medusa.py         MedusaHeads: K residual blocks, head k -> the token k after the next
    draft_vocab.py    DraftVocab: the N most frequent target tokens (EAGLE-3), mapped back
    target_head.py    FrozenHead: the target's final norm + lm_head rows over the draft
                      vocabulary; the target's embeddings
    chain.py          a chain of K drafts from a head (drafters and evaluation share it)
    evaluate.py       tokens per target forward a head would give on held-out answers
    train.py          TrainSettings, fit: deterministic training, loss and acceptance curve
    head_file.py      TrainedHead on disk (safetensors + JSON header), refused by name when
                      it is for another model or corrupted
    model_hash.py     which model a head (and its features) belong to
    build.py          train_head: features -> fit -> save
    shipped.py        find_head: the user cache's head, else the one shipped in assets/heads

The drafters that run a head are engines/speculative/head_drafter.py.
"""
