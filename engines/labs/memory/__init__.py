"""The memory (KV/VRAM) lab: its settings and snapshot section (`section`), above
engines/roofline/memory.py (the calculator) and the model and hardware presets."""
