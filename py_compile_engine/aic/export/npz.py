"""A small writer of NumPy ``.npz`` archives, so the Dynamo export needs no numpy.

An ``.npz`` file is a zip archive with one ``NAME.npy`` member per array; an ``.npy`` member is
the documented NumPy format 1.0: the magic ``\\x93NUMPY``, the version bytes ``1 0``, a
little-endian ``uint16`` header length, an ASCII header (a Python dict literal with ``descr``,
``fortran_order`` and ``shape``, padded with spaces to a multiple of 64 bytes and ended by a
newline) and the raw C-order data. ``numpy.load`` and Rust's ``ndarray-npy`` (which Dynamo's
mocker uses) read what this writes. Only what the export needs is supported: 1-D and 2-D arrays
of float64 (``<f8``) or int64 (``<i8``).
"""

from __future__ import annotations

import math
import struct
import zipfile
from typing import Mapping, Sequence

_MAGIC = b"\x93NUMPY\x01\x00"
_FORMATS = {"<f8": "<d", "<i8": "<q"}


class NpzValueError(ValueError):
    """An array the writer cannot store (ragged, empty, non-finite, or of another type)."""


def _shape_and_flat(name: str, values) -> tuple[tuple[int, ...], list]:
    if not isinstance(values, Sequence) or isinstance(values, (str, bytes)):
        raise NpzValueError(f"{name}: expected a list of numbers or a list of rows")
    if values and all(isinstance(row, Sequence) and not isinstance(row, (str, bytes))
                      for row in values):
        widths = {len(row) for row in values}
        if len(widths) != 1:
            raise NpzValueError(f"{name}: rows of different lengths {sorted(widths)}")
        width = widths.pop()
        flat = [v for row in values for v in row]
        shape: tuple[int, ...] = (len(values), width)
    else:
        flat = list(values)
        shape = (len(flat),)
    if not flat:
        raise NpzValueError(f"{name}: an empty array")
    return shape, flat


def _dtype(name: str, flat: list) -> str:
    if all(isinstance(v, int) and not isinstance(v, bool) for v in flat):
        return "<i8"
    for v in flat:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise NpzValueError(f"{name}: {v!r} is not a number")
        if not math.isfinite(v):
            raise NpzValueError(f"{name}: {v!r} is not finite")
    return "<f8"


def npy_bytes(name: str, values) -> bytes:
    """The ``.npy`` (format 1.0) bytes of ``values``: a list of numbers (1-D) or a list of
    equally long rows (2-D). All-integer values are stored as int64, anything else as float64."""
    shape, flat = _shape_and_flat(name, values)
    descr = _dtype(name, flat)
    shape_text = f"({shape[0]},)" if len(shape) == 1 else f"({shape[0]}, {shape[1]})"
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}"
    # Magic (8) + length (2) + header + "\n" is padded to a multiple of 64 bytes.
    pad = -(len(_MAGIC) + 2 + len(header) + 1) % 64
    header_bytes = (header + " " * pad + "\n").encode("ascii")
    cast = int if descr == "<i8" else float
    data = struct.pack(f"<{len(flat)}{_FORMATS[descr][1]}", *(cast(v) for v in flat))
    return _MAGIC + struct.pack("<H", len(header_bytes)) + header_bytes + data


def write_npz(path, arrays: Mapping[str, object]) -> None:
    """Writes ``arrays`` (name → values, see :func:`npy_bytes`) to the ``.npz`` file ``path``
    (uncompressed, as ``numpy.savez`` does). Every array is checked before the file is opened."""
    members = {name: npy_bytes(name, values) for name, values in arrays.items()}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(f"{name}.npy", data)


def read_npz(path) -> dict[str, tuple[tuple[int, ...], list]]:
    """Reads an ``.npz`` file this module wrote: name → (shape, flat C-order values). For tests
    and for checking an export without numpy."""
    import ast

    out = {}
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            raw = archive.read(member)
            if raw[:8] != _MAGIC:
                raise NpzValueError(f"{member}: not an .npy format 1.0 member")
            (length,) = struct.unpack("<H", raw[8:10])
            header = ast.literal_eval(raw[10:10 + length].decode("ascii"))
            shape = tuple(header["shape"])
            count = math.prod(shape)
            fmt = _FORMATS[header["descr"]][1]
            values = list(struct.unpack(f"<{count}{fmt}", raw[10 + length:]))
            out[member[:-len(".npy")]] = (shape, values)
    return out
