"""The roofline lab: its settings, records (`RooflineSnapshot`), measurements (`session`:
roofs, operation points, the model's steps), snapshot section, headless run and bench; above
engines/hardware (measured roofs) and engines/roofline (costs)."""
