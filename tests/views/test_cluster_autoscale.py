"""The autoscaling tab draws an autoscaled run's ticks and the peak fleet, and says why it is
empty otherwise."""

from __future__ import annotations

import numpy as np

from inferlab.engines.cluster.autoscale_records import AutoscaleRun, ReplicaLife, ScaleTick
from inferlab.views.cluster_autoscale import NOTHING, ClusterAutoscale

RUN = AutoscaleRun({"target_concurrency": 4.0, "min_replicas": 1, "max_replicas": 3,
                    "stable_window_s": 60.0, "panic_window_s": 6.0}, 10.0, 2, 0.0, 7.0,
                   (ReplicaLife(0, 0.0, 0.0, None, None), ReplicaLife(1, 2.0, 12.0, None, None)),
                   (ScaleTick(0.0, 3, 3.0, 3.0, 1, 1, 0, 0, False),
                    ScaleTick(2.0, 9, 5.0, 9.0, 3, 1, 1, 0, True),
                    ScaleTick(4.0, 8, 6.0, 8.5, 3, 1, 1, 0, True)))
FIGURES = {"gpu_hours": RUN.gpu_hours, "slo_attainment": 0.95, "peak_replicas": 2,
           "replicas_started": 2, "cold_start_s": 10.0, "gpu_hours_vs_peak_fleet": 0.5,
           "peak_fleet": {"replicas": 3, "slo_attainment": 0.97, "gpu_hours": 0.02,
                          "basis": "smallest fixed fleet meeting the attainment",
                          "probes": [[1, 0.2, 0.004], [2, 0.8, 0.008], [3, 0.97, 0.02]]}}


def test_draws_replicas_in_flight_and_the_cost_points(qtbot):
    view = ClusterAutoscale()
    qtbot.addWidget(view)
    view.draw(RUN, FIGURES)
    x, y = view.serving.getData()
    assert list(x) == [0.0, 2.0, 2.0, 4.0, 4.0] and list(y) == [1, 1, 1, 1, 1]
    assert list(view.held.getData()[1]) == [1, 1, 2, 2, 2]
    assert list(view.in_flight.getData()[1]) == [3, 9, 8]
    assert list(view.capacity.getData()[1]) == [4, 4, 4, 4, 4]  # target × serving
    assert list(view.fixed.getData()[0]) == [20.0, 80.0, 97.0]
    assert np.allclose(view.scaled.getData()[0], [95.0])
    assert list(view.peak.getData()[1]) == [0.02]
    assert "autoscaled / peak = 0.50×" in view.note.text()
    assert "2 replicas started, at most 2 at once" in view.note.text()
    view.draw(None, None)
    assert view.note.text() == NOTHING and len(view.serving.getData()[0] or []) == 0
