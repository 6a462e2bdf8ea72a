import pytest
import torch

from inferlab.engines.hardware.timing import median_call_s


def test_warmup_then_repeated_samples():
    calls = []
    seconds = median_call_s(lambda: calls.append(1), torch.device("cpu"), repeats=3, warmup=2)
    assert seconds > 0
    # 2 warm-up calls, then 3 samples of as many calls as fill the shortest sample
    assert len(calls) >= 2 + 3 and (len(calls) - 2) % 3 == 0


def test_zero_warmup_still_sizes_the_samples_with_one_call():
    calls = []
    median_call_s(lambda: calls.append(1), torch.device("cpu"), repeats=1, warmup=0)
    assert len(calls) >= 2


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="repeats"):
        median_call_s(lambda: None, torch.device("cpu"), repeats=0)
    with pytest.raises(ValueError, match="warmup"):
        median_call_s(lambda: None, torch.device("cpu"), warmup=-1)
