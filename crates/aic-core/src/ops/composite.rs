//! Composite ops (spec 20 §16): `Overlap` runs two groups concurrently (latency max, energy
//! sum); `Fallback` answers with its primary unless the primary's data is missing, then with
//! its chain.

use std::sync::Arc;

use crate::data::tables::PerfDatabase;
use crate::error::Result;
use crate::spec::{FallbackOp, OverlapOp};

use super::sol_split::undecomposed;
use super::{sum_group, CompiledOp, OpValue, Shape, SolSplit};

/// Compiled `Overlap`.
#[derive(Debug)]
pub struct OverlapEval {
    pub(crate) name: String,
    group_a: Vec<CompiledOp>,
    group_b: Vec<CompiledOp>,
}

impl OverlapEval {
    pub(crate) fn compile(op: &OverlapOp, db: &Arc<PerfDatabase>) -> Self {
        OverlapEval {
            name: op.name.clone(),
            group_a: op.group_a.iter().map(|o| CompiledOp::compile(o, db)).collect(),
            group_b: op.group_b.iter().map(|o| CompiledOp::compile(o, db)).collect(),
        }
    }

    /// Turns on the DSA sibling GEMM-quant transfer in both groups.
    pub(crate) fn allow_quant_transfer(&mut self) {
        self.group_a.iter_mut().chain(self.group_b.iter_mut()).for_each(CompiledOp::allow_quant_transfer);
    }

    /// `max` of the two group latencies, sum of their energies.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let a = sum_group(&self.group_a, shape)?;
        let b = sum_group(&self.group_b, shape)?;
        let both = a.add(b);
        Ok(OpValue::new(a.latency.max(b.latency), a.energy + b.energy, both.source).clamp())
    }
}

/// Compiled `Fallback`.
#[derive(Debug)]
pub struct FallbackEval {
    pub(crate) name: String,
    primary: Box<CompiledOp>,
    chain: Vec<CompiledOp>,
}

impl FallbackEval {
    pub(crate) fn compile(op: &FallbackOp, db: &Arc<PerfDatabase>) -> Self {
        FallbackEval {
            name: op.name.clone(),
            primary: Box::new(CompiledOp::compile(&op.primary, db)),
            chain: op.fallback.iter().map(|o| CompiledOp::compile(o, db)).collect(),
        }
    }

    /// Turns on the DSA sibling GEMM-quant transfer in the primary and the chain.
    pub(crate) fn allow_quant_transfer(&mut self) {
        self.primary.allow_quant_transfer();
        self.chain.iter_mut().for_each(CompiledOp::allow_quant_transfer);
    }

    /// The primary's value, or the chain's sum when the primary's perf data is missing.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let primary_shape = match shape.mode {
            crate::spec::DatabaseMode::Hybrid => shape.with_mode(crate::spec::DatabaseMode::Silicon),
            _ => *shape,
        };
        match self.primary.eval(&primary_shape) {
            Ok(v) => Ok(v),
            Err(e) if e.is_perf_data_missing() => Ok(sum_group(&self.chain, shape)?.clamp()),
            Err(e) => Err(e),
        }
    }

    /// The primary's SOL split; a chain answer publishes none (spec 20 §16.2), so it is zero
    /// when the chain's SOL sum is zero and an error otherwise. `shape` is in SOL mode.
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        match self.primary.eval_sol(shape) {
            Ok(split) => Ok(split),
            Err(e) if e.is_perf_data_missing() => {
                undecomposed(&self.name, "Fallback answered by its chain", sum_group(&self.chain, shape)?.clamp())
            }
            Err(e) => Err(e),
        }
    }
}
