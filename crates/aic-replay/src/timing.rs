//! [`AicTimingModel`]: aic's step latencies behind aisimulate-core's
//! [`TimingModel`] trait, so the replay engine's vLLM,
//! SGLang and TRT-LLM schedulers run on aic's measured kernel tables instead of a polynomial.
//!
//! # How each trait argument maps onto an aic estimate
//!
//! aisimulate-core's schedulers call the trait once per forward pass of a scheduler rank
//! (an attention-DP rank; one rank when the engine has no attention DP), with per-batch
//! means rounded down to integers by the scheduler:
//!
//! * `predict_prefill_ms(batch, mean_isl, mean_prefix)`: `mean_isl` is the prompt length the
//!   batch's requests reach at the end of this pass (earlier chunks of a chunked prefill
//!   included) and `mean_prefix` the tokens already in the KV cache before the pass (earlier
//!   chunks plus prefix-cache hits). That is exactly aic's context phase with a cached prefix:
//!   [`Engine::prefill_latency_ms`]`(batch, mean_isl, mean_prefix)`, which prices
//!   `mean_isl − mean_prefix` new tokens per request attending over `mean_isl` positions. The
//!   scheduler never calls it without new tokens (`mean_isl > mean_prefix`), and a batch of 0
//!   costs 0 ms.
//! * `predict_decode_ms(batch, active_kv_tokens, mean_context_length, total_kv_tokens)`:
//!   `mean_context_length` is the mean sequence length of the decoding requests *including* the
//!   token fed in this step. aic prices a decode step's attention at the KV position
//!   `max(isl, 1) + max(osl, 1) / 2 + 1`, so a step at exact sequence length `L` is
//!   [`Engine::decode_step_latency_ms`]`(batch, L − 1, 0, 1.0)`. Lengths below 2 (a request that
//!   has not produced a token cannot decode) are priced at 2. `active_kv_tokens` (the batch's
//!   summed context, `≈ batch × mean_context_length`) and `total_kv_tokens` (the cache capacity)
//!   are not used: aic's step cost depends on the batch and the per-request context, not on
//!   cache occupancy.
//!
//! Every prediction is a pure function of those integers, so it is memoised: the first call
//! with a given argument tuple asks the engine, later calls return the same bits from a map.
//!
//! # What the trait cannot express
//!
//! * **Mixed passes.** A vLLM (and TRT-LLM) pass that runs a prefill chunk together with
//!   ongoing decodes is priced by the scheduler as one `predict_prefill_ms` call plus one
//!   `predict_decode_ms` call and their sum is the pass time. aic has a true mixed-step estimate
//!   ([`Engine::mixed_step_latency_ms`]: GEMMs see the prefill and decode tokens at once), which
//!   is cheaper than the sum because the weights are read once; the trait has no call for it, so
//!   a replay of a mixed-batch scheduler slightly overestimates those passes.
//! * **Means, not requests.** Batches of unequal prompts or contexts are priced at their
//!   integer-rounded means: attention cost is not linear in the length, so a batch mixing a short
//!   and a long request is priced like two medium ones.
//! * **Speculative decoding.** A spec compiled with MTP (`nextn > 0`) prices every decode step
//!   with its draft tokens, while the replay emits one token per step unless its own
//!   `aic_nextn` acceptance model is configured; this crate does not configure it.
//! * **Cache state.** Occupancy (`active_kv_tokens / total_kv_tokens`) does not change an aic
//!   step; host offload or transfer costs are not modelled by aic.
//!
//! # Calibrated step times
//!
//! [`AicTimingModel::with_calibration`] applies a [`StepCalibration`] to every answer: a prefill
//! pass × `prefill_scale`, a decode step × `decode_scale` + `decode_overhead_ms` (the step-level
//! part of aic's calibrated serving estimate, measured / table-priced time and host time per
//! iteration). The memo and the per-op evidence keep the engine's own (table-priced) numbers.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use aic_core::Engine;
use aisimulate_core::engine::{TimingEvidenceSummary, TimingModel};
use serde::{Deserialize, Serialize};

use crate::evidence::{phase_evidence, PhaseKind};

/// Step-level corrections of measured over table-priced time, applied by
/// [`AicTimingModel::with_calibration`]: the replay's schedulers then see calibrated passes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepCalibration {
    /// Measured / priced time of a prefill pass.
    pub prefill_scale: f64,
    /// Measured / priced time of a decode step.
    pub decode_scale: f64,
    /// Host time per decode step that no kernel table holds (scheduler, sampling), ms.
    #[serde(default)]
    pub decode_overhead_ms: f64,
}

impl StepCalibration {
    /// No correction: the engine's numbers.
    pub const IDENTITY: StepCalibration =
        StepCalibration { prefill_scale: 1.0, decode_scale: 1.0, decode_overhead_ms: 0.0 };

    /// Refuses a scale that is not finite and in (0, 100], or an overhead outside [0, 1000] ms
    /// (the physical ranges of aic's calibration constants), naming the constant.
    pub fn check(&self) -> Result<(), String> {
        for (name, value) in [("prefill_scale", self.prefill_scale), ("decode_scale", self.decode_scale)] {
            if !(value.is_finite() && value > 0.0 && value <= 100.0) {
                return Err(format!("{name} must be a finite number in (0, 100], got {value}"));
            }
        }
        let o = self.decode_overhead_ms;
        if !(o.is_finite() && (0.0..=1000.0).contains(&o)) {
            return Err(format!("decode_overhead_ms must be a finite number of ms in [0, 1000], got {o}"));
        }
        Ok(())
    }
}

impl Default for StepCalibration {
    fn default() -> Self {
        StepCalibration::IDENTITY
    }
}

/// One call the replay made to the timing model, with the value it got back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum TimingCall {
    /// `predict_prefill_ms(batch, mean_isl, mean_prefix)`.
    Prefill {
        /// Requests in the pass.
        batch: usize,
        /// Mean prompt length reached after the pass.
        mean_isl: usize,
        /// Mean tokens already cached before the pass.
        mean_prefix: usize,
        /// What the model answered, ms.
        latency_ms: f64,
    },
    /// `predict_decode_ms(batch, active_kv_tokens, mean_context_length, total_kv_tokens)`.
    Decode {
        /// Requests in the step.
        batch: usize,
        /// Summed context of the batch.
        active_kv_tokens: usize,
        /// Mean sequence length including the token fed in this step.
        mean_context_length: usize,
        /// KV capacity of the rank, tokens.
        total_kv_tokens: usize,
        /// What the model answered, ms.
        latency_ms: f64,
    },
}

/// Counters of one timing model since it was built (not reset between replays or epochs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TimingStats {
    /// Prediction calls answered.
    pub calls: u64,
    /// Calls the engine answered (new arguments; every call without the memo).
    pub engine_calls: u64,
    /// Wall time spent inside the predictions (memo lookups and engine calls), ms.
    pub time_in_model_ms: f64,
}

/// The integer arguments of one memoised estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum StepKey {
    /// `prefill_latency_ms(batch, isl, prefix)`.
    Prefill { batch: u32, isl: u32, prefix: u32 },
    /// `decode_step_latency_ms(batch, isl, 0, 1.0)` with `isl = L − 1`.
    Decode { batch: u32, isl: u32 },
}

/// A memoised estimate and how often the current evidence epoch used it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Memo {
    pub(crate) latency_ms: f64,
    pub(crate) uses: u64,
}

/// Multiply-rotate hasher for the small integer keys of the memo (SipHash would cost as much
/// as a memo hit saves).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, word: u32) {
        self.write_u64(u64::from(word));
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }

    fn write_isize(&mut self, word: isize) {
        self.write_u64(word as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type MemoMap = HashMap<StepKey, Memo, BuildHasherDefault<KeyHasher>>;

#[derive(Default)]
struct State {
    memo: MemoMap,
    stats: TimingStats,
    log: Option<Vec<TimingCall>>,
}

/// aic's [`Engine`] as an aisimulate-core timing provider. See the module docs for the mapping.
///
/// Hand it to a replay with `ReplayEngineFactory::with_timing_model(Arc::new(model))` (or
/// through [`crate::run::Replay`], which does). It also exposes per-op evidence with energy
/// ([`TimingModel::evidence_summary`]), built from the engine's per-op results for every distinct
/// step the replay priced, weighted by how often it priced it.
pub struct AicTimingModel {
    engine: Arc<Engine>,
    state: Mutex<State>,
    memoize: bool,
    calibration: StepCalibration,
}

impl AicTimingModel {
    /// A timing model over a compiled engine.
    pub fn new(engine: Arc<Engine>) -> Self {
        AicTimingModel {
            engine,
            state: Mutex::new(State::default()),
            memoize: true,
            calibration: StepCalibration::IDENTITY,
        }
    }

    /// Answers calibrated step times (module docs, "Calibrated step times").
    pub fn with_calibration(mut self, calibration: StepCalibration) -> Self {
        self.calibration = calibration;
        self
    }

    /// The step calibration applied ([`StepCalibration::IDENTITY`] unless set).
    pub fn calibration(&self) -> StepCalibration {
        self.calibration
    }

    /// Asks the engine on every call instead of answering repeated arguments from the memo
    /// (same numbers, more time; for measuring what the memo saves).
    pub fn without_memo(mut self) -> Self {
        self.memoize = false;
        self
    }

    /// Like [`AicTimingModel::new`], and keeps every call with its answer (see
    /// [`AicTimingModel::calls`]): for tests and for inspecting what a scheduler asked.
    pub fn recording(engine: Arc<Engine>) -> Self {
        let model = AicTimingModel::new(engine);
        model.lock().log = Some(Vec::new());
        model
    }

    /// The engine behind the model.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The calls recorded so far, in call order (empty unless built with
    /// [`AicTimingModel::recording`]).
    pub fn calls(&self) -> Vec<TimingCall> {
        self.lock().log.clone().unwrap_or_default()
    }

    /// Call and time counters.
    pub fn stats(&self) -> TimingStats {
        self.lock().stats
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked mid-update of plain counters and
        // memo entries that are written whole; the data stays usable.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The memoised value of `key`, asking the engine on a miss.
    fn estimate(&self, key: StepKey) -> anyhow::Result<f64> {
        let mut state = self.lock();
        if let Some(memo) = state.memo.get_mut(&key).filter(|_| self.memoize) {
            memo.uses += 1;
            return Ok(memo.latency_ms);
        }
        let latency_ms = match key {
            StepKey::Prefill { batch, isl, prefix } => {
                self.engine.prefill_latency_ms(batch, isl, prefix)
            }
            StepKey::Decode { batch, isl } => self.engine.decode_step_latency_ms(batch, isl, 0, 1.0),
        }
        .map_err(|e| anyhow::anyhow!("aic {}: {e}", describe(key)))?;
        state.stats.engine_calls += 1;
        state.memo.entry(key).and_modify(|m| m.uses += 1).or_insert(Memo { latency_ms, uses: 1 });
        Ok(latency_ms)
    }

    fn finish_call(&self, started: Instant, call: Option<TimingCall>) {
        let mut state = self.lock();
        state.stats.calls += 1;
        state.stats.time_in_model_ms += started.elapsed().as_secs_f64() * 1e3;
        if let (Some(log), Some(call)) = (state.log.as_mut(), call) {
            log.push(call);
        }
    }

    /// The memo entries used in the current evidence epoch, in key order.
    pub(crate) fn used_steps(&self) -> Vec<(StepKey, Memo)> {
        let state = self.lock();
        let mut used: Vec<(StepKey, Memo)> =
            state.memo.iter().filter(|(_, m)| m.uses > 0).map(|(k, m)| (*k, *m)).collect();
        used.sort_by_key(|(k, _)| *k);
        used
    }
}

fn describe(key: StepKey) -> String {
    match key {
        StepKey::Prefill { batch, isl, prefix } => {
            format!("prefill_latency_ms(batch={batch}, isl={isl}, prefix={prefix})")
        }
        StepKey::Decode { batch, isl } => {
            format!("decode_step_latency_ms(batch={batch}, isl={isl}, osl=0)")
        }
    }
}

fn to_u32(name: &str, value: usize) -> anyhow::Result<u32> {
    u32::try_from(value).map_err(|_| {
        anyhow::anyhow!("{name} = {value} exceeds what aic's estimates take (at most {})", u32::MAX)
    })
}

/// The memo key of a prefill pass (see the module docs).
pub(crate) fn prefill_key(batch: usize, mean_isl: usize, mean_prefix: usize) -> anyhow::Result<StepKey> {
    Ok(StepKey::Prefill {
        batch: to_u32("prefill batch", batch)?,
        isl: to_u32("prefill mean_isl", mean_isl)?,
        prefix: to_u32("prefill mean_prefix", mean_prefix)?,
    })
}

/// The memo key of a decode step at mean sequence length `mean_context_length`.
pub(crate) fn decode_key(batch: usize, mean_context_length: usize) -> anyhow::Result<StepKey> {
    Ok(StepKey::Decode {
        batch: to_u32("decode batch", batch)?,
        isl: to_u32("decode mean_context_length", mean_context_length.max(2) - 1)?,
    })
}

impl TimingModel for AicTimingModel {
    fn prefill_batch_validation_can_fail(&self) -> bool {
        false
    }

    fn predict_prefill_ms(&self, batch_size: usize, mean_isl: usize, mean_prefix: usize) -> anyhow::Result<f64> {
        let started = Instant::now();
        let latency_ms = if batch_size == 0 || mean_isl <= mean_prefix {
            0.0
        } else {
            self.calibration.prefill_scale * self.estimate(prefill_key(batch_size, mean_isl, mean_prefix)?)?
        };
        let call = TimingCall::Prefill { batch: batch_size, mean_isl, mean_prefix, latency_ms };
        self.finish_call(started, Some(call));
        Ok(latency_ms)
    }

    fn predict_decode_ms(
        &self,
        batch_size: usize,
        active_kv_tokens: usize,
        mean_context_length: usize,
        total_kv_tokens: usize,
    ) -> anyhow::Result<f64> {
        let started = Instant::now();
        let c = self.calibration;
        let latency_ms = if batch_size == 0 {
            0.0
        } else {
            c.decode_scale * self.estimate(decode_key(batch_size, mean_context_length)?)? + c.decode_overhead_ms
        };
        let call = TimingCall::Decode {
            batch: batch_size,
            active_kv_tokens,
            mean_context_length,
            total_kv_tokens,
            latency_ms,
        };
        self.finish_call(started, Some(call));
        Ok(latency_ms)
    }

    fn evidence_summary(&self) -> Option<TimingEvidenceSummary> {
        // The trait has no error channel here; an evidence failure (an op whose per-op walk
        // fails although its total did not) withholds the evidence rather than inventing it.
        let used = self.used_steps();
        let prefill = phase_evidence(&self.engine, PhaseKind::Prefill, &used).ok()?;
        let decode = phase_evidence(&self.engine, PhaseKind::Decode, &used).ok()?;
        Some(TimingEvidenceSummary { prefill, decode })
    }

    fn reset_evidence(&self) -> anyhow::Result<()> {
        for memo in self.lock().memo.values_mut() {
            memo.uses = 0;
        }
        Ok(())
    }
}
