//! Communication ops (spec 20 §7–§9): the custom all-reduce and NCCL collectives read 1-D
//! message-size curves (scaled beyond one node by the bandwidth tiers); P2P is analytic.
//! The collectives are also the building blocks of the MoE dispatch (see `moe.rs`).

use std::sync::Arc;

use crate::data::tables::PerfDatabase;
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

/// Custom all-reduce of `elements` over `tp` ranks (unscaled); 0 with tag `empirical` at tp ≤ 1.
pub(crate) fn allreduce(db: &PerfDatabase, quant: CommQuant, tp: u64, elements: f64) -> Result<OpValue> {
    if tp <= 1 {
        return Ok(OpValue::zero(Source::Empirical));
    }
    let table = db.custom_allreduce()?;
    let per_node = u64::from(db.system.node.num_gpus_per_node);
    let tp_eff = tp.min(per_node);
    let curve = table.curve(quant.as_str(), tp_eff).ok_or_else(|| {
        AicError::perf(format!(
            "custom_allreduce data missing for ({:?}, {}) at {}",
            quant.as_str(),
            tp_eff,
            db.label()
        ))
    })?;
    let v = curve
        .lookup(&[elements], &|q| q[0])
        .map_err(|m| AicError::perf(anchor_message(&["message_size"], &[elements], m)))?;
    let out = OpValue::new(v.latency, v.energy, Source::Silicon);
    Ok(if tp > per_node { out.scale(beyond_node_factor(db, tp, per_node)) } else { out })
}

/// NCCL collective of `elements` over `gpus` ranks (unscaled); 0 for one GPU.
pub(crate) fn nccl(db: &PerfDatabase, dtype: CommQuant, operation: &str, gpus: u64, elements: f64) -> Result<OpValue> {
    if gpus <= 1 {
        return Ok(OpValue::zero(Source::Empirical));
    }
    let table = db.nccl()?;
    let oneccl =
        || AicError::perf("OneCCL data not configured for this system (no misc.oneccl_version in YAML)");
    let cap = table.max_gpus(dtype.as_str(), operation).ok_or_else(oneccl)?;
    let n_eff = gpus.min(cap);
    let curve = table.curve(dtype.as_str(), operation, n_eff).ok_or_else(oneccl)?;
    let v = curve
        .lookup(&[elements], &|q| q[0])
        .map_err(|m| AicError::perf(anchor_message(&["message_size"], &[elements], m)))?;
    let out = OpValue::new(v.latency, v.energy, Source::Silicon);
    Ok(if gpus > cap { out.scale(beyond_node_factor(db, gpus, cap)) } else { out })
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
    db: Arc<PerfDatabase>,
}

impl CustomAllReduceEval {
    pub(crate) fn compile(op: &CustomAllReduceOp, db: &Arc<PerfDatabase>) -> Self {
        CustomAllReduceEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            hidden: f64::from(op.hidden_size),
            tp: u64::from(op.tp_size),
            quant: op.quant,
            seq_split: op.seq_split,
            db: db.clone(),
        }
    }

    /// Table curve at `ceil(x / seq_split) · hidden` elements; 0 at `tp ≤ 1`.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let size = ceil_div(shape.x, self.seq_split) as f64 * self.hidden;
        Ok(allreduce(&self.db, self.quant, self.tp, size)?.finish(self.scale_factor))
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
    db: Arc<PerfDatabase>,
}

impl NcclEval {
    pub(crate) fn compile(op: &NcclOp, db: &Arc<PerfDatabase>) -> Self {
        NcclEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            hidden: op.hidden_size,
            gpus: u64::from(op.num_gpus),
            dtype: op.dtype,
            operation: op.operation.clone(),
            seq_split: op.seq_split,
            db: db.clone(),
        }
    }

    /// NCCL curve at `min(num_gpus, max collected)`, scaled beyond it; 0 for one GPU.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let size = ceil_div(shape.x, self.seq_split) as f64 * self.hidden;
        Ok(nccl(&self.db, self.dtype, &self.operation, self.gpus, size)?.finish(self.scale_factor))
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
