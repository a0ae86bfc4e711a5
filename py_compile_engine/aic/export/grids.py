"""Where the Dynamo export samples aic's engine: the axes of the mocker's timing profile and the
sweeps of the SLA planner's profile, and which aic estimate stands for each grid point.

The module exists so the choice of points is one documented, testable set of pure functions;
it prices nothing (:mod:`aic.export.dynamo` asks the engine at the points chosen here).

How Dynamo 1.6.1's mocker reads a timing profile (measured through its replay):

* a pass's prefill is looked up at **T = the new tokens of every request in the pass, summed**
  (batch × new tokens; chunks of a chunked prefill each count their own tokens), linearly
  interpolated along ``prefill_isl`` and extrapolated beyond it;
* a decode step is looked up bilinearly at **(active KV tokens = the batch's summed sequence
  lengths, context length = their mean)**, each sequence length counting the token fed in this
  step.

How the grid points are priced (the same estimates aic's own replay makes, see
``crates/aic-replay/src/timing.rs``):

* prefill point ``T = b · n`` (``n`` = the workload's new tokens per request, ``isl − prefix``):
  aic's prefill of ``b`` requests of ``isl`` tokens with ``prefix`` cached. Between two points
  the mocker interpolates, so a pass of ``T`` tokens costs ``T / n`` requests' worth: a chunk of
  one request costs its share of the request (the chunks of a long prompt add up to its whole
  prefill). A point ``T = 0`` costs 0 ms. Batches go up to one request beyond the pass budget.
* decode point ``(a, c)``: aic's decode step of ``round(a / c)`` requests (at least 1, at most
  the scheduler's ``max_num_seqs``) at sequence length ``c``. The context axis has 9 lengths
  evenly over the workload's decode steps ``isl + 1 … isl + osl`` and coarse (doubling) lengths
  below and above them up to the deployment's maximum length. The active axis is ``b · c`` for
  every batch ``b`` of the batch list (every batch to 8, then about 12 % apart, up to
  ``max_num_seqs``) and every one of those 9 lengths ``c``: a step of ``b`` requests at one of
  them is a grid point, and between two of them both neighbouring points on the active axis
  round to the same batch, so the mocker interpolates along the length at that batch.
"""

from __future__ import annotations

import math

#: Batches listed one by one before the lists thin out.
_DENSE_BATCHES = 8
#: Ratio between consecutive batches above the dense part.
_BATCH_RATIO = 1.12
#: Points of the context axis inside the workload's decode lengths.
_WORKLOAD_CONTEXTS = 9
#: The planner sweeps (Dynamo's profiler defaults: 16 prefill lengths, 6 decode lengths and 6
#: concurrency levels per length).
PLANNER_PREFILL_POINTS = 16
PLANNER_DECODE_POINTS = 6


def batch_list(largest: int) -> list[int]:
    """Batches 1 … ``largest``: every one up to 8, then about 12 % apart, ``largest`` always
    included."""
    if largest < 1:
        raise ValueError(f"largest batch must be >= 1, got {largest}")
    out = list(range(1, min(largest, _DENSE_BATCHES) + 1))
    b = float(out[-1])
    while out[-1] < largest:
        b *= _BATCH_RATIO
        nxt = min(largest, max(out[-1] + 1, round(b)))
        out.append(nxt)
    return out


def prefill_batches(new_tokens: int, budget: int) -> list[int]:
    """The batches of the prefill axis: up to one request beyond what a pass of ``budget``
    tokens holds (at least 2, so the mocker's extrapolation above has a slope)."""
    largest = max(2, math.ceil(budget / new_tokens) + 1)
    return batch_list(largest)


def prefill_axis(new_tokens: int, batches: list[int]) -> list[int]:
    """``prefill_isl``: 0, then ``b · new_tokens`` for each batch."""
    return [0] + [b * new_tokens for b in batches]


def workload_lengths(isl: int, osl: int) -> list[int]:
    """The dense part of the context axis: up to 9 sequence lengths evenly over the workload's
    decode steps ``isl + 1 … isl + osl``."""
    lo, hi = isl + 1, max(isl + osl, isl + 1)
    n = min(_WORKLOAD_CONTEXTS, hi - lo + 1)
    if n == 1:
        return [lo]
    return sorted({lo + round(i * (hi - lo) / (n - 1)) for i in range(n)})


def context_axis(isl: int, osl: int, max_length: int) -> list[int]:
    """``decode_context_length``: :func:`workload_lengths`, then doubling below them from 16
    and above them up to ``max_length``."""
    dense = workload_lengths(isl, osl)
    lo, hi = dense[0], dense[-1]
    below = []
    c = 16
    while c < lo // 2 + 1:
        below.append(c)
        c *= 2
    above = []
    c = hi * 2
    while c < max_length:
        above.append(c)
        c *= 2
    if max_length > hi and (not above or above[-1] != max_length):
        above.append(max_length)
    return sorted(set(below + dense + above))


def active_axis(batches: list[int], lengths: list[int]) -> list[int]:
    """``decode_active_kv_tokens``: ``b · c`` for each batch ``b`` and each workload length
    ``c`` (:func:`workload_lengths`), so a batch of ``b`` at any of those lengths is a grid point
    and between two of them the mocker interpolates at that batch."""
    return sorted({b * c for b in batches for c in lengths})


def decode_batch(active: int, context: int, max_batch: int) -> int:
    """The batch that grid point ``(active, context)`` is priced at: ``round(active / context)``
    within ``[1, max_batch]``."""
    return max(1, min(max_batch, int(active / context + 0.5)))


def planner_prefill_lengths(max_length: int, isl: int) -> list[int]:
    """The planner profile's prefill lengths: Dynamo's profiler sweep (100 up to
    ``max_length − 512`` in 16 steps) with the workload's ``isl`` added."""
    top = max_length - 512
    if top <= 100:
        return sorted({min(isl, max_length)})
    step = max(1, (top - 100) // PLANNER_PREFILL_POINTS)
    return sorted(set(range(100, top, step)) | {isl})


def planner_decode_lengths(max_length: int, isl: int, osl: int) -> list[int]:
    """The planner profile's decode prompt lengths: 100 up to ``max_length − osl`` in 6 steps,
    with the workload's ``isl`` added (each decoded for ``osl`` tokens)."""
    top = max_length - osl
    if top <= 100:
        return [isl]
    step = max(1, (top - 100) // PLANNER_DECODE_POINTS)
    return sorted(set(range(100, top, step)) | {isl})


def planner_concurrencies(max_concurrency: int, dp: int) -> list[int]:
    """Requests in flight per decode length (all attention-DP ranks together): 6 levels from
    ``dp`` up to ``max_concurrency``, multiples of ``dp`` (as Dynamo's profiler sweeps)."""
    per_rank = max_concurrency // dp
    if per_rank < 1:
        return []
    if per_rank < PLANNER_DECODE_POINTS:
        return [dp * k for k in range(1, per_rank + 1)]
    step = (per_rank - 1) / (PLANNER_DECODE_POINTS - 1)
    return sorted({dp + int(i * step) * dp for i in range(PLANNER_DECODE_POINTS)})
