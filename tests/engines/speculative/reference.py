"""Plain one-position-at-a-time reference samplers: Python floats and loops, no tensor tricks.

The engine's vectorised samplers must give exactly these results on the same numbers and
the same uniforms (same rules: accept when u * q(x) < p(x); draw the first token whose
running mass exceeds u * total mass; a residual with no mass falls back to p).
"""

from __future__ import annotations


def running_sum(values: list[float]) -> list[float]:
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def draw(mass: list[float], u: float) -> int:
    cumulative = running_sum(mass)
    threshold = u * cumulative[-1]
    for token, c in enumerate(cumulative):
        if c > threshold:
            return token
    return max(t for t, m in enumerate(mass) if m > 0)


def residual(p: list[float], q: list[float]) -> list[float]:
    mass = [max(0.0, a - b) for a, b in zip(p, q, strict=True)]
    total = running_sum(mass)[-1]
    if total <= 0:
        return list(p)
    return [m / total for m in mass]


def reference_rejection_sample(p: list[list[float]], q: list[list[float]], drafts: list[int],
                               u: list[float]) -> tuple[list[int], int, bool]:
    """(emitted tokens, number accepted, last token resampled?) for one chain of drafts."""
    k = len(drafts)
    emitted = []
    for i, x in enumerate(drafts):
        if u[i] * q[i][x] < p[i][x]:
            emitted.append(x)
            continue
        emitted.append(draw(residual(p[i], q[i]), u[k]))
        return emitted, i, True
    emitted.append(draw(p[k], u[k]))
    return emitted, k, False


def reference_tree_rejection_sample(parents: list[int], tokens: list[int], p: list[list[float]],
                                    q: list[list[float]], u: list[float]
                                    ) -> tuple[list[int], int, bool]:
    """(accepted path of nodes, last token, resampled?) for one tree, walked node by node."""
    n = len(tokens)
    node, r, path = -1, p[0], []
    while True:
        children = [i for i in range(n) if parents[i] == node]
        for c in children:
            x = tokens[c]
            if u[c] * q[c][x] < r[x]:
                path.append(c)
                node, r = c, p[c + 1]
                break
            r = residual(r, q[c])
        else:
            return path, draw(r, u[n]), bool(children)
