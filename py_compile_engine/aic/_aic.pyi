"""Type stubs for the native module ``aic._aic`` (Rust, PyO3).

Integer arguments are unsigned 32-bit at the boundary: a negative value, or one of 2**32 or
more, raises ``OverflowError`` before anything runs. Every estimate releases the GIL.
Latencies are in milliseconds, energies in watt-milliseconds.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple, Union

__version__: str

_PathLike = Union[str, "os.PathLike[str]"]
_BytesLike = Union[bytes, bytearray]

#: ``(op_name, latency_ms, energy_wms, source)``; ``source`` is one of ``"silicon"``,
#: ``"empirical"``, ``"sol"``, ``"estimated"`` or ``"mixed"``.
OpRow = Tuple[str, float, float, str]

class PerfDataNotAvailableError(RuntimeError):
    """A perf table, slice, key or anchor needed for the estimate is missing, or a data file is
    unreadable."""

class EmpiricalNotImplementedError(RuntimeError):
    """The empirical (utilisation transfer) estimate has no reference data to work from."""

class MissingSystemFlopsError(ValueError):
    """A quant mode needs a tensor-core FLOPS entry that the system description does not
    define."""

class AicEngine:
    """A compiled engine: one spec bound to its perf tables. Immutable and thread-safe."""

    @staticmethod
    def from_spec(spec_bytes: _BytesLike, systems_path: Optional[_PathLike] = None) -> AicEngine:
        """Builds an engine from a compiled spec (binary wire form, or spec JSON as bytes).

        The systems folder is the spec's own ``systems_path``, else ``systems_path``, else the
        default (see :func:`default_systems_path`).
        """
    def predict_prefill_latency(self, bs: int, isl: int, prefix: int = 0) -> float:
        """Context-phase time of a batch of ``bs`` requests of ``isl`` tokens (including the
        cached ``prefix``), ms."""
    def predict_decode_latency(self, bs: int, isl: int, osl: int = 2) -> float:
        """Generation-phase time to produce ``osl`` tokens after the prefill, ms."""
    def mixed_step_latency(
        self,
        ctx_tokens: int,
        gen_tokens: int,
        isl: int,
        osl: int,
        prefix: int = 0,
        seq_imbalance_correction_scale: float = 1.0,
        gen_seq_imbalance_correction_scale: float = 1.0,
    ) -> float:
        """Time of one iteration mixing ``ctx_tokens`` prefill tokens with ``gen_tokens``
        decoding requests, ms."""
    def mixed_step_breakdown(
        self,
        ctx_tokens: int,
        gen_tokens: int,
        isl: int,
        osl: int,
        prefix: int = 0,
        seq_imbalance_correction_scale: float = 1.0,
        gen_seq_imbalance_correction_scale: float = 1.0,
    ) -> List[float]:
        """The four parts of :meth:`mixed_step_latency` (same arguments)."""
    def decode_step_latency(
        self,
        gen_tokens: int,
        isl: int,
        osl: int,
        gen_seq_imbalance_correction_scale: float = 1.0,
    ) -> float:
        """Time of one generation-only iteration with ``gen_tokens`` decoding requests, ms."""
    def run_static(
        self,
        batch_size: int,
        beam_width: int,
        isl: int,
        osl: int,
        prefix: int = 0,
        seq_imbalance_correction_scale: float = 1.0,
        gen_seq_imbalance_correction_scale: float = 1.0,
        mode: str = "static",
        stride: int = 32,
    ) -> Tuple[float, float, float]:
        """A static run: ``(context_ms, generation_ms, total_ms)``. ``mode`` is ``"static"``,
        ``"static_ctx"`` or ``"static_gen"`` (anything else raises ``ValueError``)."""
    def run_static_per_op(
        self,
        batch_size: int,
        beam_width: int,
        isl: int,
        osl: int,
        prefix: int = 0,
        seq_imbalance_correction_scale: float = 1.0,
        gen_seq_imbalance_correction_scale: float = 1.0,
        mode: str = "static",
        stride: int = 32,
    ) -> Tuple[List[OpRow], List[OpRow]]:
        """A static run per op: ``(context_rows, generation_rows)``, folded by op name."""
    def evaluate_ops_json(
        self,
        ops_json: str,
        is_context: bool,
        batch_size: int,
        s: int,
        prefix: int = 0,
        imbalance_correction_scale: float = 1.0,
        x: Optional[int] = None,
    ) -> List[OpRow]:
        """Evaluates a JSON list of ops in one context or generation pass; one row per op."""
    def spec_json(self) -> str:
        """The spec this engine was built from, as JSON text."""
    def __repr__(self) -> str: ...

def resolve_backend_version(
    systems_path: Optional[_PathLike],
    system: str,
    backend: str,
    requested: Optional[str] = None,
) -> Tuple[Optional[str], bool]:
    """Resolves a backend version request (``None``/``"current"``, ``"next"``, ``"previous"``
    or a literal) on a system: ``(literal_version, tolerate_dirless)``."""

def attention_lane_order(
    systems_path: Optional[_PathLike],
    system: str,
    backend: str,
    version: str,
    phase: str,
    enable_shared_layer: bool = True,
    attention_backend: Optional[str] = None,
) -> List[str]:
    """The attention kernel-lane order in ``phase`` (``"context"`` or ``"generation"``;
    anything else raises ``ValueError``)."""

def encode_spec(spec_json: str) -> bytes:
    """Spec JSON to the binary wire form read by :meth:`AicEngine.from_spec`."""

def decode_spec(spec_bytes: _BytesLike) -> str:
    """A spec (binary wire form or JSON bytes) to spec JSON text."""

def default_systems_path() -> Optional[str]:
    """The systems folder used when none is given: ``AIC_SYSTEMS_PATH``, else the data shipped
    inside the package, else the source checkout's ``data/systems``; ``None`` if none exists."""

def estimate_kv_cache(
    spec_json: str, facts_json: str, request_json: str, systems_path: Optional[str] = None
) -> str:
    """Per-GPU KV-cache capacity of a compiled spec (JSON) as ``KvCacheEstimate`` JSON text.
    ``facts_json`` is the ``ModelFacts`` JSON and ``request_json`` the ``KvCacheRequest`` JSON;
    the system comes from the spec's ``systems_path``, else ``systems_path``, else the
    default. Runs with the GIL released."""

def estimate_kv_cache_unbuilt(
    engine_json: str, facts_json: Optional[str], request_json: str, build_error: str
) -> str:
    """The KV-cache estimate of an engine whose spec could not be compiled (``build_error`` is
    the compile message): the naive estimate when the request allows it, else ``ValueError``
    ("unsupported model/backend/GPU for KV-cache estimation: ...")."""
