//! [`LatencyModel`]: the four estimates a serving simulator asks for on every scheduler
//! iteration, as a trait it can hold (`Arc<dyn LatencyModel>`) and swap for a stub in tests.

use std::sync::Arc;

use super::Engine;
use crate::error::Result;

/// Iteration latencies of one model replica (one engine: a model on a system and backend with
/// a fixed parallelism), in milliseconds of wall-clock GPU time.
///
/// Shapes are counts of requests and tokens per request, for the whole replica (the engine
/// already accounts for its tensor / pipeline / data parallelism). Every method is a pure
/// function of `self` and its arguments, safe to call from any number of threads at once
/// (`Send + Sync`), and returns the same bits for the same arguments.
///
/// **KV position of decode attention.** Steps that decode (`decode_step_ms`, `mixed_step_ms`)
/// describe their requests by `isl` / `osl` and price the decode attention at the
/// *mid-trajectory* sequence length `max(isl, 1) + max(osl, 1) / 2 + 1` (integer division;
/// aiconfigurator's convention). A caller that tracks the real sequence length `L` of its
/// decoding requests (prompt plus tokens generated so far, `L ≥ 2`) prices a step at exactly `L`
/// with `isl = L − 1, osl = 0`.
///
/// **Errors** are [`crate::AicError`]s: missing perf data for a shape
/// ([`crate::ErrorClass::PerfDataNotAvailable`]), or invalid arguments such as `prefix ≥ isl`
/// ([`crate::ErrorClass::Value`]).
///
/// Implemented by [`Engine`], and by `Arc`, `Box` and `&` of any implementor, so both
/// `Arc<Engine>` and `Arc<dyn LatencyModel>` can be passed where a `LatencyModel` is expected.
pub trait LatencyModel: Send + Sync {
    /// Context phase (prefill) of `batch` requests of `isl` prompt tokens each, of which the
    /// first `prefix` are already in the KV cache (prefix-cache hit; `prefix < isl`), ms.
    /// The time until every request of the batch has its first output token.
    fn prefill_ms(&self, batch: u32, isl: u32, prefix: u32) -> Result<f64>;

    /// Generation phase of `batch` requests with `isl` prompt tokens each: the time to produce
    /// the remaining `osl − 1` output tokens after the prefill (the prefill yields the first),
    /// ms. Sums `osl − 1` decode steps at growing KV length, sampled every 32 steps. `osl ≤ 1`
    /// gives 0.
    fn decode_ms(&self, batch: u32, isl: u32, osl: u32) -> Result<f64>;

    /// One decode-only iteration: `requests` requests each produce one token (`requests × (1 +
    /// nextn)` query tokens with MTP), ms. `isl` / `osl` are the requests' prompt and output
    /// lengths; the attention is priced at the mid-trajectory KV position (see the trait docs).
    /// `requests = 0` gives 0.
    fn decode_step_ms(&self, requests: u32, isl: u32, osl: u32) -> Result<f64>;

    /// One mixed iteration of a chunked-prefill scheduler: `ctx_tokens` prompt tokens being
    /// prefilled (one chunk or several whole prompts, `isl` tokens per prompt with `prefix`
    /// of them cached) together with one decode token for each of `gen_requests` requests, ms.
    /// GEMMs and other token-wise ops see `ctx_tokens + gen_requests` tokens at once; context
    /// attention is the cost of prompts of length `isl` pro-rated to `ctx_tokens`; decode
    /// attention is priced at the mid-trajectory KV position of `isl` / `osl` (see the trait
    /// docs). With `gen_requests = 0` this is a prefill-only iteration of a chunked prefill.
    fn mixed_step_ms(&self, ctx_tokens: u32, gen_requests: u32, isl: u32, osl: u32, prefix: u32) -> Result<f64>;
}

impl LatencyModel for Engine {
    fn prefill_ms(&self, batch: u32, isl: u32, prefix: u32) -> Result<f64> {
        self.prefill_latency_ms(batch, isl, prefix)
    }

    fn decode_ms(&self, batch: u32, isl: u32, osl: u32) -> Result<f64> {
        self.decode_latency_ms(batch, isl, osl)
    }

    fn decode_step_ms(&self, requests: u32, isl: u32, osl: u32) -> Result<f64> {
        self.decode_step_latency_ms(requests, isl, osl, 1.0)
    }

    fn mixed_step_ms(&self, ctx_tokens: u32, gen_requests: u32, isl: u32, osl: u32, prefix: u32) -> Result<f64> {
        self.mixed_step_latency_ms(ctx_tokens, gen_requests, isl, osl, prefix, 1.0, 1.0)
    }
}

macro_rules! forward_latency_model {
    ($($ptr:ty),*) => {$(
        impl<T: LatencyModel + ?Sized> LatencyModel for $ptr {
            fn prefill_ms(&self, batch: u32, isl: u32, prefix: u32) -> Result<f64> {
                (**self).prefill_ms(batch, isl, prefix)
            }

            fn decode_ms(&self, batch: u32, isl: u32, osl: u32) -> Result<f64> {
                (**self).decode_ms(batch, isl, osl)
            }

            fn decode_step_ms(&self, requests: u32, isl: u32, osl: u32) -> Result<f64> {
                (**self).decode_step_ms(requests, isl, osl)
            }

            fn mixed_step_ms(
                &self,
                ctx_tokens: u32,
                gen_requests: u32,
                isl: u32,
                osl: u32,
                prefix: u32,
            ) -> Result<f64> {
                (**self).mixed_step_ms(ctx_tokens, gen_requests, isl, osl, prefix)
            }
        }
    )*};
}

forward_latency_model!(Arc<T>, Box<T>, &T);
