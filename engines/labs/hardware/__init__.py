"""The hardware lab: its settings and snapshot section (`section`): devices, telemetry
history and measured roofs, from engines/hardware."""
