"""The hardware lab: its settings, records (`HardwareSnapshot`), what it measures
(`session`: device discovery, telemetry, the roofs), snapshot section and headless run
(`inferlab run hardware`), from engines/hardware."""
