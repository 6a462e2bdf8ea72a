"""`inferlab bench kv`'s window figures (the registry's `view_bench`): one full update of a
100,000-block grid, offscreen.

    grid_render_ms_100k   cell codes from a pool state, image upload and a synchronous
                          repaint (median of GRID_UPDATES; the selection toggles so every
                          update draws new cells)

The engine figures are engines/labs/kv/bench.py's."""

from __future__ import annotations

import statistics
import time

import numpy as np

from inferlab.app.gui import create_application
from inferlab.app.offscreen import ensure_platform
from inferlab.engines.labs.kv.bench import GRID_BLOCKS, synthetic_pool
from inferlab.views.kv_grid import KVGridPlot

GRID_UPDATES = 40


def grid_update_ms(n_blocks: int = GRID_BLOCKS, updates: int = GRID_UPDATES) -> dict:
    """Time full updates of the KV grid widget (offscreen): draw + synchronous repaint."""
    ensure_platform()
    app = create_application()
    pool = synthetic_pool(n_blocks)
    colors = np.arange(len(pool.seq_ids), dtype=np.int64)
    grid = KVGridPlot()
    grid.resize(900, 500)
    grid.show()
    app.processEvents()
    try:
        grid.draw(pool, colors)
        grid.viewport().repaint()
        times, draw_only = [], []
        for k in range(updates):
            selected = None if k % 2 == 0 else k % len(pool.seq_ids)
            t0 = time.perf_counter()
            grid.draw(pool, colors, selected)
            t1 = time.perf_counter()
            grid.viewport().repaint()
            t2 = time.perf_counter()
            times.append((t2 - t0) * 1e3)
            draw_only.append((t1 - t0) * 1e3)
        rows, cols = grid.image.shape
    finally:
        grid.close()
        grid.deleteLater()
    times.sort()
    return {"grid_render_ms_100k": statistics.median(times),
            "grid_render_ms_100k_p90": times[int(0.9 * (len(times) - 1))],
            "grid_codes_upload_ms_100k": statistics.median(draw_only),
            "grid_blocks": pool.n_blocks, "grid_cells": f"{rows}x{cols}"}
