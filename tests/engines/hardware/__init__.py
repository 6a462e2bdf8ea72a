"""Tests for engines/hardware (package marker: keeps test module names unique)."""
