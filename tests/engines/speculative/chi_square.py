"""Pearson's chi-square goodness-of-fit test without scipy: the survival function of the
chi-square distribution with d degrees of freedom is the regularised upper incomplete gamma
function Q(d / 2, x / 2), which torch has (torch.special.gammaincc)."""

from __future__ import annotations

import torch

MIN_EXPECTED = 5.0
"""Cells expected to hold fewer samples are pooled into one (the usual rule for the test)."""


def chi_square_p_value(samples: torch.Tensor, probs: torch.Tensor) -> float:
    """The p-value of `samples` (int, any shape, values in [0, len(probs))) being drawn from
    `probs` [C]. A sample in a cell of probability 0 fails the test outright (p = 0)."""
    probs = probs.double().flatten()
    probs = probs / probs.sum()
    counts = torch.bincount(samples.flatten(), minlength=probs.numel()).double()
    if bool((counts[probs == 0] > 0).any()):
        return 0.0
    expected = probs * counts.sum()
    big = expected >= MIN_EXPECTED
    small = ~big & (probs > 0)
    observed, expected = counts[big].clone(), expected[big].clone()
    assert observed.numel() >= 2, "the test needs at least two well-filled cells"
    if bool(small.any()):  # pool the thin cells; too thin still: into the thinnest big cell
        pooled_o, pooled_e = counts[small].sum(), (probs[small] * counts.sum()).sum()
        if float(pooled_e) >= MIN_EXPECTED:
            observed = torch.cat([observed, pooled_o[None]])
            expected = torch.cat([expected, pooled_e[None]])
        else:
            thinnest = int(expected.argmin())
            observed[thinnest] += pooled_o
            expected[thinnest] += pooled_e
    statistic = ((observed - expected) ** 2 / expected).sum()
    dof = torch.tensor(expected.numel() - 1, dtype=torch.float64)
    return float(torch.special.gammaincc(dof / 2, statistic / 2))
