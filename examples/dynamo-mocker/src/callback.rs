//! [`AicAisCallback`]: aic's step latencies behind Dynamo's mocker `AisCallback`, so that
//! `dynamo-mocker`'s schedulers (aisimulate-core's, reached through
//! `PerfModel::from_ais_callback`) run on aic's measured kernel tables.
//!
//! It exists because the mocker does not hand a callback the arguments of aisimulate-core's
//! `TimingModel` trait unchanged: `dynamo-mocker` 1.6.1 wraps every callback in its
//! `PerfModel::Ais`, which reshapes the scheduler's numbers before they arrive here. This module
//! undoes that reshaping, so an aic-backed mocker prices exactly the steps that
//! [`aic_replay::AicTimingModel`] prices when it sits directly behind the trait (see that
//! type's module docs for the trait-side mapping).
//!
//! # How the mocker's arguments map onto aic's estimates
//!
//! * `predict_prefill(batch_size, effective_isl, prefix)`: the scheduler asked the trait for
//!   `(batch, mean_isl, mean_prefix)`, where `mean_isl` is the prompt length reached after this
//!   pass (earlier chunks included) and `mean_prefix` what is already in the KV cache; the mocker
//!   passes on the **new tokens only**, `effective_isl = mean_isl − mean_prefix`. aic's prefill
//!   takes the full prompt length and the cached prefix, so the prefix is added back:
//!   [`Engine::prefill_latency_ms`]`(batch, effective_isl + prefix, prefix)`. The mocker never
//!   calls with a zero batch or zero new tokens (it answers 0 ms itself); this callback answers
//!   0 ms for them too.
//! * `predict_decode(batch_size, isl, osl)`: the mocker passes the scheduler's
//!   `mean_context_length` (the sequence length *including* the token fed in this step, call it
//!   `L`) as `isl`, and always `osl = 2`. Read in the AIS convention that argument pair names
//!   the one decode step of a request with an `isl`-token prompt and two output tokens, whose
//!   sequence length is `isl + 1`: **one token later** than the step the scheduler is running.
//!   The callback therefore prices the step at sequence length `L`, the same one the trait meant:
//!   [`Engine::decode_step_latency_ms`]`(batch, L − 1, 0, 1.0)` (aic puts a decode step's
//!   attention at `max(isl, 1) + max(osl, 1) / 2 + 1 = L`), with `L` below 2 priced at 2, exactly
//!   as [`aic_replay::AicTimingModel`] does. Any `osl` other than 2 is refused
//!   ([`CallbackError::UnexpectedDecodeOsl`]): it would mean a mocker whose convention this
//!   mapping was not written for.
//!
//! The mocker drops the decode pass's `active_kv_tokens` and `total_kv_tokens` before calling
//! (aic does not use them either) and floors every decode answer at 1 ms; aic's steps are longer
//! than that for any real model, so the floor does not change a replay in practice. What the
//! trait itself cannot express (a vLLM pass mixing a prefill chunk with decodes is priced as the
//! sum of a prefill and a decode call; batches are priced at their integer means) holds here
//! unchanged.
//!
//! Every answer is a direct engine call (no memo): an estimate costs about a microsecond, and a
//! replay makes a few thousand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use aic_core::{AicError, Engine};
use dynamo_mocker::common::perf_model::AisCallback;

/// Why the callback could not answer a call.
#[derive(Debug, thiserror::Error)]
pub enum CallbackError {
    /// An argument does not fit aic's 32-bit batch and length arguments.
    #[error("{argument} = {value} exceeds what aic's estimates take (at most {max}); the mocker passed an out-of-range {argument}", max = u32::MAX)]
    ArgumentTooLarge {
        /// Which argument (after the prefix was added back for prefill).
        argument: &'static str,
        /// Its value.
        value: u64,
    },
    /// The mocker asked for a decode step with an `osl` other than the 2 that `dynamo-mocker`
    /// 1.6.1 always passes.
    #[error(
        "predict_decode got osl = {osl}; this callback maps dynamo-mocker 1.6.1's decode calls, which \
         always pass osl = 2 (one decode step at sequence length isl + 1); check the dynamo-mocker \
         version and update the mapping in callback.rs"
    )]
    UnexpectedDecodeOsl {
        /// The `osl` received.
        osl: usize,
    },
    /// aic's engine refused the estimate (e.g. its tables do not cover the shape).
    #[error("aic {call}: {source}")]
    Estimate {
        /// The engine call, with its arguments.
        call: String,
        /// The engine's error.
        #[source]
        source: AicError,
    },
}

/// Calls answered and time spent inside aic's engine since the callback was built.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallbackStats {
    /// Prefill calls answered.
    pub prefill_calls: u64,
    /// Decode calls answered.
    pub decode_calls: u64,
    /// Wall time inside the callback, ms.
    pub time_in_aic_ms: f64,
}

/// aic's [`Engine`] as a `dynamo-mocker` [`AisCallback`] (module docs: the argument mapping).
///
/// ```no_run
/// use std::sync::Arc;
/// use dynamo_mocker::common::perf_model::PerfModel;
/// use dynamo_mocker::config::MockerConfig;
/// use aic_dynamo_mocker::AicAisCallback;
///
/// let engine = aic_core::Engine::from_spec_file("qwen3-32b_h200_vllm_tp2.json".as_ref(), None)?;
/// let mut args = MockerConfig::default();
/// args.perf_model = Arc::new(PerfModel::from_ais_callback(Arc::new(AicAisCallback::new(Arc::new(engine)))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AicAisCallback {
    engine: Arc<Engine>,
    prefill_calls: AtomicU64,
    decode_calls: AtomicU64,
    nanos_in_aic: AtomicU64,
}

impl AicAisCallback {
    /// A callback over a compiled engine (`Engine::from_spec_file` on a spec written by
    /// `aic-compile compile ... --json`).
    pub fn new(engine: Arc<Engine>) -> Self {
        AicAisCallback {
            engine,
            prefill_calls: AtomicU64::new(0),
            decode_calls: AtomicU64::new(0),
            nanos_in_aic: AtomicU64::new(0),
        }
    }

    /// The engine behind the callback.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Calls and time so far.
    pub fn stats(&self) -> CallbackStats {
        CallbackStats {
            prefill_calls: self.prefill_calls.load(Ordering::Relaxed),
            decode_calls: self.decode_calls.load(Ordering::Relaxed),
            time_in_aic_ms: self.nanos_in_aic.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }

    /// The prefill latency, ms, for the mocker's `(batch_size, effective_isl, prefix)`: aic's
    /// prefill of `effective_isl + prefix` prompt tokens with `prefix` of them cached.
    pub fn prefill_ms(
        &self,
        batch_size: usize,
        effective_isl: usize,
        prefix: usize,
    ) -> Result<f64, CallbackError> {
        if batch_size == 0 || effective_isl == 0 {
            return Ok(0.0);
        }
        let isl = (effective_isl as u64).saturating_add(prefix as u64);
        let (batch, isl, prefix) = (
            to_u32("prefill batch_size", batch_size as u64)?,
            to_u32("prefill effective_isl + prefix", isl)?,
            to_u32("prefill prefix", prefix as u64)?,
        );
        self.engine
            .prefill_latency_ms(batch, isl, prefix)
            .map_err(|source| CallbackError::Estimate {
                call: format!("prefill_latency_ms(batch={batch}, isl={isl}, prefix={prefix})"),
                source,
            })
    }

    /// The decode-step latency, ms, for the mocker's `(batch_size, isl, osl)` with `isl` the
    /// sequence length `L` including the fed token and `osl = 2`: aic's decode step at `L`.
    pub fn decode_ms(
        &self,
        batch_size: usize,
        isl: usize,
        osl: usize,
    ) -> Result<f64, CallbackError> {
        if osl != 2 {
            return Err(CallbackError::UnexpectedDecodeOsl { osl });
        }
        if batch_size == 0 {
            return Ok(0.0);
        }
        let batch = to_u32("decode batch_size", batch_size as u64)?;
        let context = to_u32("decode isl", isl.max(2) as u64 - 1)?;
        self.engine
            .decode_step_latency_ms(batch, context, 0, 1.0)
            .map_err(|source| CallbackError::Estimate {
                call: format!("decode_step_latency_ms(batch={batch}, isl={context}, osl=0)"),
                source,
            })
    }

    fn timed(
        &self,
        counter: &AtomicU64,
        answer: impl FnOnce() -> Result<f64, CallbackError>,
    ) -> anyhow::Result<f64> {
        let started = Instant::now();
        let result = answer();
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos_in_aic.fetch_add(nanos, Ordering::Relaxed);
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(result?)
    }
}

fn to_u32(argument: &'static str, value: u64) -> Result<u32, CallbackError> {
    u32::try_from(value).map_err(|_| CallbackError::ArgumentTooLarge { argument, value })
}

impl AisCallback for AicAisCallback {
    fn predict_prefill(
        &self,
        batch_size: usize,
        effective_isl: usize,
        prefix: usize,
    ) -> anyhow::Result<f64> {
        self.timed(&self.prefill_calls, || {
            self.prefill_ms(batch_size, effective_isl, prefix)
        })
    }

    fn predict_decode(&self, batch_size: usize, isl: usize, osl: usize) -> anyhow::Result<f64> {
        self.timed(&self.decode_calls, || self.decode_ms(batch_size, isl, osl))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn callback() -> AicAisCallback {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let spec = repo.join("crates/aic-core/examples/specs/qwen3-32b_h200_vllm_tp2.json");
        AicAisCallback::new(Arc::new(
            Engine::from_spec_file(&spec, Some(&repo.join("data/systems"))).unwrap(),
        ))
    }

    #[test]
    fn decode_with_another_osl_is_refused() {
        let err = callback().decode_ms(4, 1000, 3).unwrap_err();
        assert!(
            matches!(err, CallbackError::UnexpectedDecodeOsl { osl: 3 }),
            "{err}"
        );
    }

    #[test]
    fn empty_passes_cost_nothing_and_short_contexts_price_as_two() {
        let cb = callback();
        assert_eq!(cb.prefill_ms(0, 128, 0).unwrap(), 0.0);
        assert_eq!(cb.prefill_ms(2, 0, 128).unwrap(), 0.0);
        assert_eq!(cb.decode_ms(0, 128, 2).unwrap(), 0.0);
        let at_two = cb.engine().decode_step_latency_ms(3, 1, 0, 1.0).unwrap();
        assert_eq!(cb.decode_ms(3, 1, 2).unwrap().to_bits(), at_two.to_bits());
        assert_eq!(cb.decode_ms(3, 2, 2).unwrap().to_bits(), at_two.to_bits());
    }

    #[test]
    fn oversized_arguments_name_the_argument() {
        let err = callback().prefill_ms(1, u32::MAX as usize, 1).unwrap_err();
        assert!(
            matches!(
                err,
                CallbackError::ArgumentTooLarge {
                    argument: "prefill effective_isl + prefix",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn trait_calls_are_counted() {
        let cb = callback();
        cb.predict_prefill(2, 512, 256).unwrap();
        cb.predict_decode(8, 3000, 2).unwrap();
        cb.predict_decode(8, 3001, 2).unwrap();
        let stats = cb.stats();
        assert_eq!((stats.prefill_calls, stats.decode_calls), (1, 2));
        assert!(stats.time_in_aic_ms > 0.0);
    }
}
