"""Tests for engines/roofline (package marker: keeps test module names unique)."""
