"""The memory (KV/VRAM) lab: its settings, records (`MemorySnapshot`), plans (`session`),
snapshot section and headless run (`inferlab run memory`), above engines/roofline/memory.py
(the calculator) and the model and hardware presets."""
