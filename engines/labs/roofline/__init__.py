"""The roofline lab's snapshot section: above engines/hardware (measured roofs) and engines/roofline (costs)."""
