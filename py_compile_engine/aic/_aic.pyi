"""Type stubs for the native module ``aic._aic`` (Rust, PyO3).

Integer arguments are unsigned 32-bit at the boundary: a negative value, or one of 2**32 or
more, raises ``OverflowError`` before anything runs. Every estimate releases the GIL.
Latencies are in milliseconds, energies in watt-milliseconds.
"""

from __future__ import annotations

import os
from array import array
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, final

__all__ = [
    "AicEngine",
    "PerfDataNotAvailableError",
    "EmpiricalNotImplementedError",
    "MissingSystemFlopsError",
    "resolve_backend_version",
    "attention_lane_order",
    "encode_spec",
    "decode_spec",
    "default_systems_path",
    "estimate_kv_cache",
    "estimate_kv_cache_unbuilt",
    "serving_estimate",
    "serving_sweep",
    "serving_plan",
    "check_calibration",
    "__version__",
    "table_names",
    "table_coverage_json",
    "table_view",
    "systems_catalogue_json",
    "EngineOp",
    "engine_spec_schema_version",
    "engine_spec_bincode_from_json",
    "weights_ops_json",
    "ops_json_from_ops",
    "op_from_spec_json",
    "resolve_op_sources_report_json",
    "gemm_quant_util_levels",
    "moe_quant_util_levels",
    "table_view_attributes",
    "replay_available",
    "ForwardPassPerfModel",
    "RustForwardPassPerfModel",
]

__version__: str

_PathLike = Union[str, "os.PathLike[str]"]
_BytesLike = Union[bytes, bytearray]

#: ``(op_name, latency_ms, energy_wms, source)``; ``source`` is one of ``"silicon"``,
#: ``"empirical"``, ``"sol"``, ``"estimated"`` or ``"mixed"``.
OpRow = Tuple[str, float, float, str]
#: ``(op_name, sol_time_ms, sol_math_ms, sol_mem_ms)``: an op's SOL time with its compute and
#: memory parts.
SolRow = Tuple[str, float, float, float]

#: One load warning: ``kind`` (``"unparseable_version"``, ``"legacy_marker"``,
#: ``"unusable_dir"``, ``"malformed_sidecar"``, ``"malformed_reuse"``,
#: ``"uncovered_legacy_table"``, ``"missing_donor"``, ``"version_fallback"`` or
#: ``"low_fidelity_rows"``), ``path`` (file or directory, or ``None``), ``table`` (a table
#: basename such as ``"gemm_perf.parquet"``, or ``None``) and ``message``.
LoadWarning = Dict[str, Optional[str]]

class PerfDataNotAvailableError(RuntimeError):
    """A perf table, slice, key or anchor needed for the estimate is missing, or a data file is
    unreadable."""

class EmpiricalNotImplementedError(RuntimeError):
    """The empirical (utilisation transfer) estimate has no reference data to work from."""

class MissingSystemFlopsError(ValueError):
    """A quant mode needs a tensor-core FLOPS entry that the system description does not
    define."""

@final
class AicEngine:
    """A compiled engine: one spec bound to its perf tables. Immutable and thread-safe."""

    @staticmethod
    def from_spec(spec_bytes: _BytesLike, systems_path: Optional[_PathLike] = None, *,
                  quant_transfer: bool = False) -> AicEngine:
        """Builds an engine from a compiled spec (binary wire form, or spec JSON as bytes).

        The systems folder is the spec's own ``systems_path``, else ``systems_path``, else the
        default (see :func:`default_systems_path`). ``quant_transfer=True`` (beyond the
        reference, the calibrated estimate's rule): in the HYBRID and EMPIRICAL modes a DSA module
        whose GEMM quant mode has no measured slice is read from a sibling quant's slice (the
        GEMM transfer ladder: same bytes/compute profile first, else the nearest profile
        rescaled by the GEMM utilisation levels) instead of raising
        ``EmpiricalNotImplementedError``. With strict provenance (the spec's
        ``strict_provenance``, or ``AIC_STRICT_PROVENANCE=1``) a data directory of the requested
        version whose ``collection_meta.yaml`` is missing, malformed or does not list one of its
        tables, or a malformed ``reuse.yaml``, raises ``ValueError``.
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
    def evaluate_ops_sol_json(
        self,
        ops_json: str,
        is_context: bool,
        batch_size: int,
        s: int,
        prefix: int = 0,
        imbalance_correction_scale: float = 1.0,
        x: Optional[int] = None,
    ) -> List[SolRow]:
        """The same pass under the analytic SOL view (whatever the engine's database mode): one
        row per op name with its SOL time and the compute / memory parts. At a single roofline
        the time is the larger part; sums inside an op and scale factors apply to all three.
        An op whose SOL path publishes no split (MoeDispatch, Overlap, a Fallback answered by
        its chain) raises ``ValueError`` naming it, unless its SOL result is zero."""
    def estimate_batch(
        self,
        kind: str,
        a: Sequence[int],
        b: Sequence[int],
        c: Sequence[int],
        threads: Optional[int] = None,
    ) -> "array[float]": ...
    def spec_json(self) -> str:
        """The spec this engine was built from, as JSON text."""
    def last_provenance(self) -> Optional[str]:
        """The worst provenance tier of the empirical estimates behind the last compute call made
        through this object: ``"empirical"`` (own table slice), then the transfers ``"xshape"``,
        ``"xquant"``, ``"xprofile"``, ``"xop"`` (worst last); ``None`` when every answer came
        from a table or an analytic formula. Per object: when threads share one object, the call
        that finished last wins."""
    def load_warnings(self) -> List[LoadWarning]:
        """What the loader skipped, relaxed or worked around for this engine's perf data
        (unparseable version names, legacy markers, malformed sidecars, version fallbacks,
        low-fidelity cross-backend rows, ...), in first-seen order. Provenance is checked when
        the data opens; the other warnings come with each table's first load."""
    def decode_step_per_op(
        self, gen_tokens: int, isl: int, osl: int, gen_seq_imbalance_correction_scale: float = 1.0
    ) -> List[OpRow]:
        """Per-op list of :meth:`decode_step_latency` (same arguments), folded by op name."""
    def mixed_step_breakdown_per_op(
        self,
        ctx_tokens: int,
        gen_tokens: int,
        isl: int,
        osl: int,
        prefix: int = 0,
        seq_imbalance_correction_scale: float = 1.0,
        gen_seq_imbalance_correction_scale: float = 1.0,
    ) -> Tuple[List[OpRow], List[OpRow], List[OpRow]]:
        """Per-op lists of :meth:`mixed_step_breakdown` (same arguments):
        ``(shared_non_attention, context_attention, decode_attention)``, each folded by op name.
        The context-attention list holds only top-level ``context_attention`` ops (empty for
        MLA models, whose attention sits inside ``*_mla_block``)."""
    def evaluate_context_ops(
        self,
        indices: List[int],
        batch_size: int,
        s: int,
        prefix: int = 0,
        seq_imbalance_correction_scale: float = 1.0,
        x: Optional[int] = None,
    ) -> List[OpRow]:
        """Evaluates the compiled context ops at ``indices`` (positions in ``context_ops``, in
        the given order, repeats allowed) at one context shape, folded by op name (a repeated
        op's values add into its first entry). ``s`` is used as given. An index out of range
        raises ``ValueError``."""
    def evaluate_generation_ops(
        self,
        indices: List[int],
        batch_size: int,
        s: int,
        gen_seq_imbalance_correction_scale: float = 1.0,
        prefix: int = 0,
        x: Optional[int] = None,
    ) -> List[OpRow]:
        """As :meth:`evaluate_context_ops`, over the generation ops at the decode shape (beam 1,
        KV position ``s``)."""
    def table_view_json(self, attribute: str) -> Optional[str]:
        """One perf table as nested JSON text under the reference's attribute name (see
        :func:`table_view_attributes`): one object level per key component and grid axis,
        leaves ``{"latency", "power", "energy"}``. ``None`` when no source file of it exists.
        An unknown attribute raises ``PerfDataNotAvailableError``; attributes whose nested
        layout aic does not write (all but ``_gemm_data``, ``_custom_allreduce_data``,
        ``_nccl_data``) raise ``ValueError``."""
    def attention_lane_density(self, attribute: str) -> List[Tuple[str, int, int]]:
        """``(lane, slice_count, row_count)`` per kernel lane of one attention table
        (``"_context_attention_data"`` or ``"_generation_attention_data"``; anything else raises
        ``ValueError``), over every resolved source, lanes sorted by name."""
    def __repr__(self) -> str: ...

#: One FPM v1 record (one attention-DP rank of one iteration); see spec 42 §2.
FpmRecord = Mapping[str, Any]
#: One iteration: an FPM record, a list of them (one per rank), or JSON text of either.
FpmIteration = Union[FpmRecord, Sequence[FpmRecord], str, bytes]
#: Tuning input: a record (one single-rank iteration), a list of records (one iteration), a
#: list of such lists, or JSON text of an array of arrays.
FpmIterations = Union[FpmRecord, Sequence[FpmRecord], Sequence[Sequence[FpmRecord]], str, bytes]
#: A mapping argument (engine config, options) as a dict or JSON text.
_JsonMapping = Union[Mapping[str, Any], str, bytes]
#: Compiles a request (keyword arguments of ``aic.compile_engine``) into spec bytes.
Compiler = Callable[[Dict[str, Any]], Union[bytes, str]]

@final
class ForwardPassPerfModel:
    """Forward-pass time of one serving-engine iteration from its scheduler telemetry (FPM v1),
    with online correction from measured wall times, or a regression fallback (spec 42).

    Thread-safe; every call releases the GIL. Options (all optional): ``max_observations``
    (64), ``min_observations`` (5), ``min_faster_correction_factor`` (0.5, ``None`` =
    unbounded), ``max_slower_correction_factor`` (2.0), ``bucket_count`` (16, a perfect
    square), ``max_num_tokens`` (8192), ``max_batch_size`` (512), ``max_kv_tokens`` (2000000).
    Invalid input raises ``ValueError``; a missing perf table ``PerfDataNotAvailableError``.
    """

    @staticmethod
    def from_engine(engine: AicEngine, options: Optional[_JsonMapping] = None) -> ForwardPassPerfModel:
        """A native model over an already compiled engine."""
    @staticmethod
    def from_native(
        config: _JsonMapping,
        options: Optional[_JsonMapping] = None,
        compiler: Optional[Compiler] = None,
    ) -> ForwardPassPerfModel:
        """A native model compiled from an EngineConfig (``schema_version``, ``model_name``,
        ``system_name``, ``backend``, ``tp_size``, ``pp_size`` required). ``compiler`` defaults
        to :func:`aic.fpm.compile_request`. Raises ``ValueError`` ("unsupported model for Rust
        core estimator: compile_engine: ...") when the model cannot be compiled."""
    @staticmethod
    def best_available(
        config: _JsonMapping,
        options: Optional[_JsonMapping] = None,
        compiler: Optional[Compiler] = None,
    ) -> ForwardPassPerfModel:
        """:meth:`from_native`, or a regression model with :attr:`last_warning` set when the
        model cannot be compiled or its data is unavailable."""
    @staticmethod
    def from_regression(options: Optional[_JsonMapping] = None) -> ForwardPassPerfModel:
        """A regression-only model (no engine)."""
    def estimate_forward_pass_time_ms(self, metrics: FpmIteration) -> Optional[float]:
        """Predicted forward-pass time of one iteration, ms; ``None`` when a regression model
        has no fit for the iteration's kind yet; 0.0 for an empty iteration."""
    def tune_with_fpms(self, iterations: FpmIterations) -> None:
        """Learns from measured iterations (``wall_time`` in seconds). Stops at the first
        error; earlier updates stay."""
    def diagnostics(self) -> Dict[str, Any]:
        """``source``, ``readiness``, ``retained_observations``, ``correction_ready_buckets``,
        ``last_warning``."""
    def diagnostics_json(self) -> str:
        """:meth:`diagnostics` as compact JSON text."""
    def min_correction_factor(self) -> Optional[float]:
        """Smallest bucket correction factor over the ready kinds (``None``: none, or a
        regression model)."""
    def max_correction_factor(self) -> Optional[float]:
        """Largest bucket correction factor over the ready kinds."""
    def avg_correction_factor(self) -> Optional[float]:
        """Mean bucket correction factor over the ready kinds."""
    def get_min_correction_factor(self) -> Optional[float]:
        """:meth:`min_correction_factor` (the reference facade's name)."""
    def get_max_correction_factor(self) -> Optional[float]:
        """:meth:`max_correction_factor` (the reference facade's name)."""
    def get_avg_correction_factor(self) -> Optional[float]:
        """:meth:`avg_correction_factor` (the reference facade's name)."""
    @property
    def last_warning(self) -> Optional[str]:
        """Why the native estimator is unavailable (after a ``best_available`` fallback)."""
    @property
    def is_native(self) -> bool:
        """Whether estimates come from a compiled engine."""
    @property
    def options(self) -> Dict[str, Any]:
        """The options in force."""
    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
    def close(self) -> None:
        """Drops the model; later calls raise ``ValueError``."""
    def __enter__(self) -> ForwardPassPerfModel: ...
    def __exit__(self, *exc: object) -> bool: ...
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

def serving_estimate(request_json: str, systems_path: Optional[str] = None) -> str:
    """One serving-level estimate (spec 50, ``cli_estimate``) from compiled worker specs: JSON
    text ``{"result", "memory", "oom", "per_ops"}``. ``RuntimeError`` when the deployment does
    not fit (agg, disagg), ``ZeroDivisionError`` for ``ctx_tokens = 0``. Use
    :func:`aic.serving.estimate`."""

def check_calibration(text: str) -> None:
    """Checks a calibration constants document (JSON text, ``data/calibration/serving.json``
    layout): ``ValueError`` naming the first problem, ``None`` when it is usable."""

def serving_sweep(request_json: str, systems_path: Optional[str] = None) -> str:
    """The deployment sweep (spec 50 §9, ``cli_default``) from compiled layouts: JSON text with
    the candidate tables, Pareto fronts and picks. Use :func:`aic.serving_sweep.sweep`."""

def serving_plan(request_json: str, systems_path: Optional[str] = None) -> str:
    """Several sweeps answered together, merged per serving mode when asked (spec 51).
    Use :mod:`aic.serving.planning`."""

def system_sm_version(systems_path: Optional[_PathLike], system: str) -> Optional[int]:
    """The GPU's ``sm_version`` from a system's YAML (``None`` when not given); raises like the
    other system readers when the file is missing or invalid."""

def prefetch_tables(systems_path: Optional[_PathLike], system: str, backend: str, version: str,
                    enable_shared_layer: bool) -> bool:
    """Starts loading the GEMM and communication tables of a perf database on a background
    thread, so an engine built later finds them loaded; returns whether a load was started
    (never raises for a database that cannot be opened)."""

def table_names() -> List[str]:
    """The perf tables of a database, in display order (``"gemm"``, ``"context_attention"``,
    ..., ``"scale_matrix"``)."""

def table_coverage_json(
    systems_path: Optional[_PathLike],
    system: str,
    backend: str,
    version: Optional[str] = None,
    enable_shared_layer: bool = True,
) -> str:
    """What each perf table of (system, backend, version) covers, as JSON text (schema
    ``aic-table-coverage/1``): ``schema``, ``system``, ``backend``, ``version``,
    ``shared_layer``, ``data_root`` and ``tables``, each with ``table``, ``family``, ``file``,
    ``error`` (``None`` when loaded), ``rows``, ``slices``, ``keys`` (``name``, distinct
    ``values``), ``axes`` (``name``, ``min``, ``max``, ``count``) and ``sources`` (``path``,
    ``framework``, ``version``, ``rows``). ``version`` ``None`` is the current slot; an unknown
    system, backend or version raises ``ValueError`` listing the valid ones."""

def systems_catalogue_json(systems_path: Optional[_PathLike] = None) -> str:
    """Every system of the systems folder as JSON text: a list of objects with ``name``,
    ``sm_version`` (``None`` off NVIDIA), ``gpus_per_node``, ``gpus_per_rack``,
    ``mem_capacity``, ``error`` and ``backends`` (``backend``, ``current``, ``previous``,
    ``next``, ``versions_with_data``); ``current`` ``None`` means the backend has no perf data
    on that system."""

def table_view(
    systems_path: Optional[_PathLike],
    system: str,
    backend: str,
    table: str,
    version: Optional[str] = None,
    enable_shared_layer: bool = True,
) -> Dict[str, Any]:
    """One perf table as loaded: ``table``, ``family``, ``file``, ``system``, ``backend``,
    ``version``, ``sources`` and ``slices``; each slice has ``key`` (component -> value),
    ``axes`` (outer first), ``coords`` (axis -> ``array('Q')``) and ``latency_ms``,
    ``power_w``, ``energy_wms`` (``array('d')``), one entry per collected point. An unknown
    table name raises ``ValueError`` listing :func:`table_names`."""

# ---------------------------------------------------------------------------------------------
# The rest of aiconfigurator-core's module surface (same names and signatures)

class EngineOp:
    """One op of an engine spec. Each variant is a subclass named after it (``Gemm``,
    ``Embedding``, ``Fallback``, ...), built on first use by :func:`op_from_spec_json`."""

    def __new__(cls, spec_json: str) -> EngineOp: ...
    @property
    def variant(self) -> str:
        """The op variant (its tag in the spec encoding)."""
    def to_json(self) -> str:
        """The op as JSON in the spec encoding, ``{"<Variant>": {...}}``."""
    def __repr__(self) -> str: ...

def engine_spec_schema_version() -> int:
    """The op-list wire schema version the engine reads (15)."""

def engine_spec_bincode_from_json(spec_json: str) -> bytes:
    """Encodes spec JSON into the binary wire form :meth:`AicEngine.from_spec` reads (the
    reference's stub says ``list[int]``; the call returns ``bytes`` in both)."""

def weights_ops_json(ops_json: str) -> List[float]:
    """Weight bytes per GPU of each op of a JSON op list (times its ``scale_factor``), in op
    order. An invalid list raises ``ValueError``."""

def ops_json_from_ops(ops: List[EngineOp]) -> str:
    """JSON array text (externally tagged ops) of a list of op objects."""

def op_from_spec_json(spec_json: str) -> EngineOp:
    """One op object from its JSON, of the class named after its variant. An invalid op raises
    ``ValueError``."""

def resolve_op_sources_report_json(
    systems_root: _PathLike,
    system_data_root: _PathLike,
    backend: str,
    version: str,
    op_file_basename: str,
    primary_path: Optional[_PathLike] = None,
    enable_shared_layer: bool = True,
    strict: bool = False,
) -> str:
    """The files that would feed one perf table (e.g. ``"gemm_perf.parquet"``) of the system
    whose data folder is ``system_data_root``, as JSON text ``{"records": [{"path", "exists",
    "channel", "kernel_sources"}], "warnings": [{"kind", "path", "table", "message"}]}``.
    ``primary_path`` replaces the requested version's own file; with ``strict`` provenance
    violations raise ``ValueError``."""

def gemm_quant_util_levels() -> List[Tuple[float, float, float]]:
    """GEMM utilisation levels ``(bytes_per_elem, compute_multiplier, level)`` of the quant
    profiles, used by cross-quant empirical transfers."""

def moe_quant_util_levels() -> List[Tuple[float, float, float]]:
    """MoE utilisation levels ``(bytes_per_elem, compute_multiplier, level)``."""

def replay_available() -> bool:
    """Whether this build has the replay (cargo feature ``replay``)."""

def replay_json(request_json: str, systems_path: Optional[_PathLike] = None) -> str:
    """Runs the replay a request JSON describes (crate aic-replay); only in a build with the
    cargo feature ``replay``. Answers ``{"report", "stats", "table"}`` as JSON."""

def table_view_attributes() -> List[Tuple[str, List[str]]]:
    """Every :meth:`AicEngine.table_view_json` attribute with the parquet basenames feeding
    it."""

@final
class RustForwardPassPerfModel:
    """:class:`ForwardPassPerfModel` under the reference's low-level JSON-text API: every
    argument, and the diagnostics, are JSON text."""

    @staticmethod
    def from_native(config_json: str, options_json: Optional[str] = None) -> RustForwardPassPerfModel:
        """A native model compiled from EngineConfig JSON; ``ValueError`` if it cannot be."""
    @staticmethod
    def best_available(config_json: str, options_json: Optional[str] = None) -> RustForwardPassPerfModel:
        """``from_native``, or a regression model when the native one cannot be built."""
    @staticmethod
    def from_regression(options_json: Optional[str] = None) -> RustForwardPassPerfModel:
        """A regression-only model."""
    def estimate_forward_pass_time_ms(self, fpm_json: str) -> Optional[float]:
        """Predicted forward-pass time (ms) of one iteration (FPM JSON object or list)."""
    def tune_with_fpms(self, iterations_json: str) -> None:
        """Learns from measured iterations (JSON array of arrays of FPM objects)."""
    def diagnostics(self) -> str:
        """The diagnostics as compact JSON text."""
    def min_correction_factor(self) -> Optional[float]: ...
    def max_correction_factor(self) -> Optional[float]: ...
    def avg_correction_factor(self) -> Optional[float]: ...
