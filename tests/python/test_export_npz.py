"""``aic.export.npz`` (the numpy-free ``.npz`` writer) and ``aic.export.grids`` (where the Dynamo
export samples the engine): pure Python, no engine."""

from __future__ import annotations

import struct
import zipfile

import pytest

from aic.export import grids
from aic.export.npz import NpzValueError, npy_bytes, read_npz, write_npz


def test_npy_header_is_numpys_format_1_0():
    raw = npy_bytes("a", [1.0, 2.5, 3.0])
    assert raw[:8] == b"\x93NUMPY\x01\x00"
    (length,) = struct.unpack("<H", raw[8:10])
    header = raw[10:10 + length].decode("ascii")
    # numpy.save writes exactly this text for a float64 (3,) array
    assert header.rstrip() == "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"
    assert header.endswith("\n") and (10 + length) % 64 == 0
    assert struct.unpack("<3d", raw[10 + length:]) == (1.0, 2.5, 3.0)


def test_two_dimensional_and_integer_arrays_round_trip(tmp_path):
    path = tmp_path / "t.npz"
    write_npz(path, {"grid": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]], "count": [774640]})
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["count.npy", "grid.npy"]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in archive.infolist())
        assert b"'descr': '<i8'" in archive.read("count.npy")
        assert b"'shape': (2, 3)" in archive.read("grid.npy")
    assert read_npz(path) == {"grid": ((2, 3), [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]),
                              "count": ((1,), [774640])}


@pytest.mark.parametrize("values, message", [
    ([[1.0, 2.0], [3.0]], "rows of different lengths"),
    ([], "an empty array"),
    ([1.0, float("nan")], "is not finite"),
    ([1.0, "x"], "is not a number"),
    ("abc", "expected a list"),
])
def test_bad_arrays_are_refused_by_name(values, message):
    with pytest.raises(NpzValueError, match=message) as info:
        npy_bytes("decode_itl", values)
    assert "decode_itl" in str(info.value)


def test_a_refused_array_leaves_no_file(tmp_path):
    path = tmp_path / "t.npz"
    with pytest.raises(NpzValueError):
        write_npz(path, {"ok": [1.0], "bad": [float("inf")]})
    assert not path.exists()


def test_batch_list_is_dense_then_about_12_percent_apart():
    batches = grids.batch_list(256)
    assert batches[:8] == list(range(1, 9)) and batches[-1] == 256
    assert all(b > a for a, b in zip(batches, batches[1:]))
    assert all(b / a <= 1.2 for a, b in zip(batches[8:], batches[9:]))
    assert grids.batch_list(3) == [1, 2, 3]
    with pytest.raises(ValueError):
        grids.batch_list(0)


def test_prefill_axis_covers_one_request_beyond_the_pass_budget():
    # isl 2048 under an 8192-token budget: a pass holds 4 requests; the axis goes to 5.
    batches = grids.prefill_batches(2048, 8192)
    assert batches == [1, 2, 3, 4, 5]
    assert grids.prefill_axis(2048, batches) == [0, 2048, 4096, 6144, 8192, 10240]
    # a prompt longer than the budget is chunked: still two requests, for the slope
    assert grids.prefill_batches(32768, 8192) == [1, 2]


def test_context_axis_is_dense_over_the_workload_and_reaches_the_max_length():
    axis = grids.context_axis(2048, 256, 40960)
    assert grids.workload_lengths(2048, 256) == [2049, 2081, 2113, 2145, 2177, 2208, 2240,
                                                 2272, 2304]
    assert set(grids.workload_lengths(2048, 256)) <= set(axis)
    assert axis[0] == 16 and axis[-1] == 40960
    assert all(b > a for a, b in zip(axis, axis[1:]))
    assert grids.workload_lengths(100, 1) == [101]


def test_active_axis_puts_every_batch_at_every_workload_length_on_the_grid():
    lengths = grids.workload_lengths(2048, 256)
    batches = grids.batch_list(256)
    axis = grids.active_axis(batches, lengths)
    assert all(b * c in axis for b in batches for c in lengths)
    assert all(b > a for a, b in zip(axis, axis[1:]))
    # on the grid the batch is exact; off it, the nearest one within the scheduler's limits
    assert grids.decode_batch(4 * 2049, 2049, 256) == 4
    assert grids.decode_batch(10, 2049, 256) == 1
    assert grids.decode_batch(10**9, 16, 256) == 256


def test_planner_sweeps_follow_dynamos_profiler():
    lengths = grids.planner_prefill_lengths(40960, 2048)
    assert lengths[0] == 100 and 2048 in lengths and lengths[-1] < 40960 - 512
    assert grids.planner_decode_lengths(40960, 2048, 256)[0] == 100
    assert grids.planner_concurrencies(356, 1) == [1, 72, 143, 214, 285, 356]
    # attention DP: multiples of the DP size
    assert all(n % 4 == 0 for n in grids.planner_concurrencies(400, 4))
    assert grids.planner_concurrencies(3, 4) == []
