"""Tests for engines/model (package marker: keeps test module names unique)."""
