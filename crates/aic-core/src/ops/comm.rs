//! Communication ops (spec 20 §7–§9): the custom all-reduce and NCCL collectives read 1-D
//! message-size curves (scaled beyond one node by the bandwidth tiers); P2P is analytic.

use std::sync::Arc;

use crate::data::tables::{CustomAllReduceTable, NcclTable, PerfDatabase};
use crate::error::{AicError, Result};
use crate::lookup::anchor_message;
use crate::spec::{CommQuant, CustomAllReduceOp, NcclOp, P2POp};

use super::{ceil_div, OpValue, Shape, Source};

/// Factor for `n` ranks when only `cap` were measured:
/// `(n−1)/n · cap/max(cap−1, 1) · P2PBW(cap)/P2PBW(n)`.
fn beyond_node_factor(db: &PerfDatabase, n: u64, cap: u64) -> f64 {
    let (nf, cf) = (n as f64, cap as f64);
    (nf - 1.0) / nf * cf / (cf - 1.0).max(1.0) * db.system.p2p_bw(cap as u32)
        / db.system.p2p_bw(n as u32)
}

/// Compiled `CustomAllReduce`.
#[derive(Debug)]
pub struct CustomAllReduceEval {
    pub(crate) name: String,
    scale_factor: f64,
    hidden: f64,
    tp: u64,
    quant: CommQuant,
    seq_split: u32,
    /// Loaded only when the op communicates (tp > 1).
    table: Option<Result<Arc<CustomAllReduceTable>>>,
    db: Arc<PerfDatabase>,
}

impl CustomAllReduceEval {
    pub(crate) fn compile(op: &CustomAllReduceOp, db: &Arc<PerfDatabase>) -> Self {
        let table = (op.tp_size > 1).then(|| db.custom_allreduce());
        CustomAllReduceEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            hidden: f64::from(op.hidden_size),
            tp: u64::from(op.tp_size),
            quant: op.quant,
            seq_split: op.seq_split,
            table,
            db: db.clone(),
        }
    }

    /// Table curve at `ceil(x / seq_split) · hidden` elements; 0 at `tp ≤ 1`.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        if self.tp <= 1 {
            return Ok(OpValue::zero(Source::Empirical));
        }
        let Some(table) = &self.table else { return Ok(OpValue::zero(Source::Empirical)) };
        let table = table.as_ref().map_err(Clone::clone)?;
        let size = ceil_div(shape.x, self.seq_split) as f64 * self.hidden;
        let per_node = u64::from(self.db.system.node.num_gpus_per_node);
        let tp_eff = self.tp.min(per_node);
        let curve = table.curve(self.quant.as_str(), tp_eff).ok_or_else(|| {
            AicError::perf(format!(
                "custom_allreduce data missing for ({:?}, {}) at {}",
                self.quant.as_str(),
                tp_eff,
                self.db.label()
            ))
        })?;
        let v = curve
            .lookup(&[size], &|q| q[0])
            .map_err(|m| AicError::perf(anchor_message(&["message_size"], &[size], m)))?;
        let mut out = OpValue::new(v.latency, v.energy, Source::Silicon);
        if self.tp > per_node {
            out = out.scale(beyond_node_factor(&self.db, self.tp, per_node));
        }
        Ok(out.finish(self.scale_factor))
    }
}

/// Compiled `Nccl`.
#[derive(Debug)]
pub struct NcclEval {
    pub(crate) name: String,
    scale_factor: f64,
    hidden: f64,
    gpus: u64,
    dtype: CommQuant,
    operation: String,
    seq_split: u32,
    /// Loaded only when the op communicates (more than one GPU).
    table: Option<Result<Arc<NcclTable>>>,
    db: Arc<PerfDatabase>,
}

impl NcclEval {
    pub(crate) fn compile(op: &NcclOp, db: &Arc<PerfDatabase>) -> Self {
        let table = (op.num_gpus > 1).then(|| db.nccl());
        NcclEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            hidden: op.hidden_size,
            gpus: u64::from(op.num_gpus),
            dtype: op.dtype,
            operation: op.operation.clone(),
            seq_split: op.seq_split,
            table,
            db: db.clone(),
        }
    }

    /// NCCL curve at `min(num_gpus, max collected)`, scaled beyond it; 0 for one GPU.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        if self.gpus <= 1 {
            return Ok(OpValue::zero(Source::Empirical));
        }
        let Some(table) = &self.table else { return Ok(OpValue::zero(Source::Empirical)) };
        let table = table.as_ref().map_err(Clone::clone)?;
        let oneccl = || {
            AicError::perf("OneCCL data not configured for this system (no misc.oneccl_version in YAML)")
        };
        let dtype = self.dtype.as_str();
        let cap = table.max_gpus(dtype, &self.operation).ok_or_else(oneccl)?;
        let n_eff = self.gpus.min(cap);
        let curve = table.curve(dtype, &self.operation, n_eff).ok_or_else(oneccl)?;
        let size = ceil_div(shape.x, self.seq_split) as f64 * self.hidden;
        let v = curve
            .lookup(&[size], &|q| q[0])
            .map_err(|m| AicError::perf(anchor_message(&["message_size"], &[size], m)))?;
        let mut out = OpValue::new(v.latency, v.energy, Source::Silicon);
        if self.gpus > cap {
            out = out.scale(beyond_node_factor(&self.db, self.gpus, cap));
        }
        Ok(out.finish(self.scale_factor))
    }
}

/// Compiled `P2P`.
#[derive(Debug)]
pub struct P2PEval {
    pub(crate) name: String,
    scale_factor: f64,
    pp: u32,
    hidden: f64,
    seq_split: u32,
    db: Arc<PerfDatabase>,
}

impl P2PEval {
    pub(crate) fn compile(op: &P2POp, db: &Arc<PerfDatabase>) -> Self {
        P2PEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            pp: op.pp_size,
            hidden: f64::from(op.hidden_size),
            seq_split: op.seq_split,
            db: db.clone(),
        }
    }

    /// `(bytes / inter_node_bw + p2p_latency) · 1000`; an all-zero `silicon` record at pp ≤ 1.
    pub fn eval(&self, shape: &Shape) -> OpValue {
        if self.pp <= 1 {
            return OpValue::zero(Source::Silicon);
        }
        let bytes = ceil_div(shape.x, self.seq_split) as f64 * self.hidden * 2.0;
        let node = &self.db.system.node;
        let ms = (bytes / node.inter_node_bw + node.p2p_latency) * 1000.0;
        OpValue::new(ms, 0.0, Source::Empirical).finish(self.scale_factor)
    }
}
