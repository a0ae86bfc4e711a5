//! The native estimate (spec 42 §4): each rank's scheduler aggregates are mapped onto runtime
//! shapes of the compiled engine's op lists. Telemetry counts are used as they are (no MTP
//! multiplier, unit imbalance scales) and the attention-DP ranks run in lockstep, so an
//! iteration costs its slowest rank.

use std::sync::Arc;

use super::metrics::{ForwardPassMetrics, ScheduledRequestMetrics};
use crate::engine::Engine;
use super::error::Result;
use crate::ops::{CompiledOp, Shape};
use crate::spec::DatabaseMode;

const CONTEXT_ATTENTION: &str = "context_attention";
const GENERATION_ATTENTION: &str = "generation_attention";

/// A compiled engine seen through FPM telemetry. `Send + Sync`.
#[derive(Debug)]
pub struct NativeEstimator {
    engine: Arc<Engine>,
    context: Vec<CompiledOp>,
    generation: Vec<CompiledOp>,
    mode: DatabaseMode,
}

/// The three passes of a mixed rank (ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedRankBreakdown {
    /// Every context op except `context_attention`, over one combined sequence.
    pub shared_ms: f64,
    /// `context_attention` at the prefill requests' shape, divided by `K2`.
    pub context_attention_ms: f64,
    /// `generation_attention` at the observed average KV length.
    pub decode_attention_ms: f64,
}

impl MixedRankBreakdown {
    /// Sum of the three passes.
    pub fn total_ms(&self) -> f64 {
        self.shared_ms + self.context_attention_ms + self.decode_attention_ms
    }
}

fn sum_ops<'a>(ops: impl Iterator<Item = &'a CompiledOp>, shape: &Shape) -> Result<f64> {
    let mut total = 0.0;
    for op in ops {
        total += op.eval(shape)?.latency;
    }
    Ok(total)
}

impl NativeEstimator {
    /// Binds the estimator to an engine (its op lists are compiled against its database).
    pub fn new(engine: Arc<Engine>) -> NativeEstimator {
        let spec = engine.spec();
        let db = engine.database();
        let context = spec.context_ops.iter().map(|o| CompiledOp::compile(o, db)).collect();
        let generation = spec.generation_ops.iter().map(|o| CompiledOp::compile(o, db)).collect();
        let mode = spec.engine.database_mode;
        NativeEstimator { engine, context, generation, mode }
    }

    fn context_shape(&self, batch: u64, s: u64, prefix: u64, x: Option<u64>) -> Shape {
        Shape::context(batch, s, prefix, 1.0, x).with_mode(self.mode).with_transfers(self.engine.transfer_kinds())
    }

    fn generation_shape(&self, batch: u64, s: u64, x: Option<u64>) -> Shape {
        Shape::generation(batch, 1, s, 1.0, 0, x).with_mode(self.mode).with_transfers(self.engine.transfer_kinds())
    }

    /// The engine behind the estimate.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Prefill-only rank: all context ops at batch `n`, `s = tokens // n`, `prefix = kv // n`.
    pub fn prefill_rank_ms(&self, s: &ScheduledRequestMetrics) -> Result<f64> {
        let n = u64::from(s.num_prefill_requests.max(1));
        let seq = u64::from(s.sum_prefill_tokens) / n;
        let prefix = u64::from(s.sum_prefill_kv_tokens) / n;
        sum_ops(self.context.iter(), &self.context_shape(n, seq, prefix, None))
    }

    /// Decode-only rank: all generation ops at batch `n`, KV position `kv // n`.
    pub fn decode_rank_ms(&self, s: &ScheduledRequestMetrics) -> Result<f64> {
        let n = u64::from(s.num_decode_requests.max(1));
        let seq = u64::from(s.sum_decode_kv_tokens) / n;
        sum_ops(self.generation.iter(), &self.generation_shape(n, seq, None))
    }

    /// Mixed rank: the three passes of §4.3.
    pub fn mixed_rank_breakdown(&self, s: &ScheduledRequestMetrics) -> Result<MixedRankBreakdown> {
        let ctx = u64::from(s.sum_prefill_tokens);
        let gen = u64::from(s.num_decode_requests);
        let np = u64::from(s.num_prefill_requests.max(1));
        let r = (ctx / np).max(1);
        let p = u64::from(s.sum_prefill_kv_tokens) / np;
        let nd = gen.max(1);
        let kv = u64::from(s.sum_decode_kv_tokens) / nd;

        let s1 = (ctx + gen).max(1);
        let shape1 = self.context_shape(1, s1, u64::from(s.sum_prefill_kv_tokens), None);
        let shared_ms = sum_ops(self.context.iter().filter(|o| o.name() != CONTEXT_ATTENTION), &shape1)?;

        let b2 = ctx.div_ceil(r).max(1);
        let k2 = r.div_ceil(ctx.max(1)).max(1);
        let shape2 = self.context_shape(b2, r, p, Some(ctx));
        let attn = sum_ops(self.context.iter().filter(|o| o.name() == CONTEXT_ATTENTION), &shape2)?;
        let context_attention_ms = attn / k2 as f64;

        let shape3 = self.generation_shape(nd, kv.max(1), Some(nd));
        let decode_attention_ms =
            sum_ops(self.generation.iter().filter(|o| o.name() == GENERATION_ATTENTION), &shape3)?;
        Ok(MixedRankBreakdown { shared_ms, context_attention_ms, decode_attention_ms })
    }

    /// Time of one rank (0 for an empty rank).
    pub fn rank_ms(&self, s: &ScheduledRequestMetrics) -> Result<f64> {
        match (s.has_prefill(), s.has_decode()) {
            (false, false) => Ok(0.0),
            (true, false) => self.prefill_rank_ms(s),
            (false, true) => self.decode_rank_ms(s),
            (true, true) => Ok(self.mixed_rank_breakdown(s)?.total_ms()),
        }
    }

    /// Time of one iteration: the slowest rank (ranks are assumed valid).
    pub fn iteration_ms(&self, ranks: &[ForwardPassMetrics]) -> Result<f64> {
        let mut worst = 0.0f64;
        for rank in ranks {
            worst = worst.max(self.rank_ms(&rank.scheduled_requests)?);
        }
        Ok(worst)
    }
}
