import numpy as np
import pytest

from inferlab.engines.hardware.ring_buffer import RingBuffer


def test_fills_in_order_before_wrapping():
    ring = RingBuffer(4)
    for value in (1.0, 2.0, 3.0):
        ring.append(value)
    assert len(ring) == 3
    assert ring.values().tolist() == [1.0, 2.0, 3.0]
    assert ring.latest() == 3.0


def test_wraps_around_dropping_the_oldest():
    ring = RingBuffer(4)
    for value in range(1, 11):  # 1..10 into 4 slots
        ring.append(float(value))
    assert len(ring) == 4
    assert ring.values().tolist() == [7.0, 8.0, 9.0, 10.0]
    ring.append(11.0)
    assert ring.values().tolist() == [8.0, 9.0, 10.0, 11.0]
    assert ring.latest() == 11.0


def test_exactly_full_is_in_order():
    ring = RingBuffer(3)
    for value in (5.0, 6.0, 7.0):
        ring.append(value)
    assert ring.values().tolist() == [5.0, 6.0, 7.0]


def test_rows_keep_their_shape_and_order():
    ring = RingBuffer(2, (3,))
    ring.append([1, 2, 3])
    ring.append([4, 5, 6])
    ring.append([7, 8, 9])
    assert ring.values().tolist() == [[4, 5, 6], [7, 8, 9]]
    assert ring.values().shape == (2, 3)
    assert RingBuffer(5, (3,)).values().shape == (0, 3)


def test_values_is_a_copy():
    ring = RingBuffer(2)
    ring.append(1.0)
    snapshot = ring.values()
    snapshot[0] = 99.0
    ring.append(2.0)
    assert ring.values().tolist() == [1.0, 2.0]


def test_clear_and_empty():
    ring = RingBuffer(2)
    with pytest.raises(IndexError):
        ring.latest()
    ring.append(1.0)
    ring.clear()
    assert len(ring) == 0 and ring.values().size == 0
    ring.append(3.0)
    assert ring.values().tolist() == [3.0]


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity"):
        RingBuffer(0)
    assert RingBuffer(1, dtype=np.int64).capacity == 1
