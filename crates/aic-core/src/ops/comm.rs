//! Communication ops (spec 20 §7–§9): the custom all-reduce and NCCL collectives read 1-D
//! message-size curves (scaled beyond one node by the bandwidth tiers); P2P is analytic.
//! The collectives are also the building blocks of the MoE dispatch (see `moe.rs`).

use std::sync::Arc;

use crate::data::tables::{NcclTable, PerfDatabase};
use crate::error::{AicError, Result};
use crate::lookup::{anchor_message, Grid};
use crate::spec::{CommQuant, CustomAllReduceOp, DatabaseMode, NcclOp, P2POp};

use super::empirical::{estimate, not_implemented, util_at, ProvenanceTier};
use super::{ceil_div, OpValue, Shape, SolSplit, Source, TransferKinds};

/// Empirical estimate on a message-size curve whose samples were measured at `cap` ranks:
/// `SOL(n) / util`, the util read at the query size with the SOL at `cap` ranks.
fn curve_estimate(curve: &Grid, elements: f64, sol_at: &dyn Fn(f64, u64) -> f64, n: u64, cap: u64) -> Option<f64> {
    let util = util_at(curve.points().map(|(c, l)| (c, l.latency)), &|c| sol_at(c[0], cap), &[elements])?;
    Some(sol_at(elements, n) / util)
}

/// The SOL of a custom all-reduce of `elements` over `tp` ranks (2 bytes per element), ms.
fn allreduce_sol(db: &PerfDatabase, elements: f64, tp: u64) -> f64 {
    let t = tp as f64;
    2.0 * elements * 2.0 / t * (t - 1.0) / db.system.p2p_bw(tp as u32) * 1000.0
}

/// The SOL of an NCCL collective, ms (all-reduce moves twice the data; unknown operations 0).
fn nccl_sol(db: &PerfDatabase, dtype: CommQuant, operation: &str, elements: f64, n: u64) -> f64 {
    let nf = n as f64;
    let one = dtype.bytes_per_elem() * elements * (nf - 1.0) / nf / db.system.p2p_bw(n as u32) * 1000.0;
    match operation {
        "all_gather" | "alltoall" | "reduce_scatter" => one,
        "all_reduce" => 2.0 * one,
        _ => 0.0,
    }
}

/// Factor for `n` ranks when only `cap` were measured:
/// `(n−1)/n · cap/max(cap−1, 1) · P2PBW(cap)/P2PBW(n)`.
fn beyond_node_factor(db: &PerfDatabase, n: u64, cap: u64) -> f64 {
    let (nf, cf) = (n as f64, cap as f64);
    (nf - 1.0) / nf * cf / (cf - 1.0).max(1.0) * db.system.p2p_bw(cap as u32)
        / db.system.p2p_bw(n as u32)
}

/// The SOL-mode custom all-reduce (unscaled) with its parts: a time without parts,
/// `(time, 0, 0)` (spec 20 §0.7); zero at tp ≤ 1.
fn allreduce_sol_split(db: &PerfDatabase, tp: u64, elements: f64) -> SolSplit {
    if tp <= 1 {
        return SolSplit::ZERO;
    }
    SolSplit::time_only(allreduce_sol(db, elements, tp))
}

/// Custom all-reduce of `elements` over `tp` ranks (unscaled); 0 with tag `empirical` at tp ≤ 1.
pub(crate) fn allreduce(
    db: &PerfDatabase,
    mode: DatabaseMode,
    transfers: TransferKinds,
    quant: CommQuant,
    tp: u64,
    elements: f64,
) -> Result<OpValue> {
    if tp <= 1 {
        return Ok(OpValue::zero(Source::Empirical));
    }
    if mode == DatabaseMode::Sol {
        return Ok(allreduce_sol_split(db, tp, elements).value(Source::Sol));
    }
    // The cap is the largest tp the merged table records, not the GPUs per node (spec 12
    // §6.1): gb300's 4-GPU nodes have measured rows at tp 8 and 16.
    let table = db.custom_allreduce()?;
    let cap = table.max_gpus();
    let tp_eff = tp.min(cap);
    let missing = || {
        AicError::perf(format!(
            "custom_allreduce data missing for ({:?}, {}) at {}",
            quant.as_str(),
            tp_eff,
            db.label()
        ))
    };
    let empirical = || -> Result<OpValue> {
        // A smaller measured width standing in for tp is an xshape transfer.
        if tp_eff != tp && !transfers.allows(ProvenanceTier::Xshape) {
            return Err(not_implemented(&[elements]));
        }
        let curve = table.curve(quant, tp_eff).ok_or_else(|| not_implemented(&[elements]))?;
        let ms = curve_estimate(curve, elements, &|e, n| allreduce_sol(db, e, n), tp, tp_eff)
            .ok_or_else(|| not_implemented(&[elements]))?;
        Ok(estimate(ms, if tp_eff != tp { ProvenanceTier::Xshape } else { ProvenanceTier::Empirical }))
    };
    if mode == DatabaseMode::Empirical {
        return empirical();
    }
    let silicon = || -> Result<OpValue> {
        let curve = table.curve(quant, tp_eff).ok_or_else(missing)?;
        table_curve(db, curve, elements, tp, cap)
    };
    match silicon() {
        Err(e) if mode == DatabaseMode::Hybrid && e.is_perf_data_missing() => empirical(),
        other => other,
    }
}

fn table_curve(db: &PerfDatabase, curve: &Grid, elements: f64, n: u64, cap: u64) -> Result<OpValue> {
    let v = curve
        .lookup(&[elements], &|q| q[0])
        .map_err(|m| AicError::perf(anchor_message(&["message_size"], &[elements], m)))?;
    let out = OpValue::new(v.latency, v.energy, Source::Silicon);
    Ok(if n > cap { out.scale(beyond_node_factor(db, n, cap)) } else { out })
}

/// The SOL-mode NCCL collective (unscaled) with its parts: pure data movement,
/// `(0, time)`; zero for one GPU.
fn nccl_sol_split(db: &PerfDatabase, dtype: CommQuant, operation: &str, gpus: u64, elements: f64) -> SolSplit {
    if gpus <= 1 {
        return SolSplit::ZERO;
    }
    SolSplit::memory(nccl_sol(db, dtype, operation, elements, gpus))
}

/// NCCL collective of `elements` over `gpus` ranks (unscaled); 0 for one GPU.
pub(crate) fn nccl(
    db: &PerfDatabase,
    mode: DatabaseMode,
    transfers: TransferKinds,
    dtype: CommQuant,
    operation: &str,
    gpus: u64,
    elements: f64,
) -> Result<OpValue> {
    if gpus <= 1 {
        let source = if mode == DatabaseMode::Sol { Source::Sol } else { Source::Empirical };
        return Ok(OpValue::zero(source));
    }
    if mode == DatabaseMode::Sol {
        return Ok(nccl_sol_split(db, dtype, operation, gpus, elements).value(Source::Sol));
    }
    let empirical = || -> Result<OpValue> {
        if nccl_sol(db, dtype, operation, elements, gpus) == 0.0 {
            return Ok(OpValue::zero(Source::Empirical));
        }
        // Calibrates from NCCL, or from OneCCL when the system has no NCCL table (b60).
        let table = match db.nccl() {
            Ok(t) => t,
            Err(e) => db.oneccl().map_err(|_| e)?,
        };
        let cap = table.max_gpus(dtype, operation).ok_or_else(|| {
            AicError::EmpiricalNotImplemented(format!(
                "No NCCL data for operation '{operation}' ({}, num_gpus={gpus}).",
                dtype.as_str()
            ))
        })?;
        let n_eff = gpus.min(cap);
        // A smaller measured width standing in for num_gpus is an xshape transfer.
        if n_eff != gpus && !transfers.allows(ProvenanceTier::Xshape) {
            return Err(not_implemented(&[elements]));
        }
        let curve = table.curve(dtype, operation, n_eff).ok_or_else(|| not_implemented(&[elements]))?;
        let ms = curve_estimate(curve, elements, &|e, n| nccl_sol(db, dtype, operation, e, n), gpus, n_eff)
            .ok_or_else(|| not_implemented(&[elements]))?;
        Ok(estimate(ms, if n_eff != gpus { ProvenanceTier::Xshape } else { ProvenanceTier::Empirical }))
    };
    if mode == DatabaseMode::Empirical {
        return empirical();
    }
    match collective_curve(db, dtype, operation, gpus)
        .and_then(|(curve, cap)| table_curve(db, curve, elements, gpus, cap))
    {
        Err(e) if mode == DatabaseMode::Hybrid && e.is_perf_data_missing() => empirical(),
        other => other,
    }
}

/// The measured curve a collective of `gpus` ranks reads, with the largest recorded GPU count
/// it is scaled from (spec 12 §6.3, §7.2): NCCL first (a table that fails to load counts as
/// empty), then OneCCL when the system names a OneCCL version.
fn collective_curve<'a>(
    db: &'a PerfDatabase,
    dtype: CommQuant,
    operation: &str,
    gpus: u64,
) -> Result<(&'a Grid, u64)> {
    let find = |table: &'a NcclTable| {
        let cap = table.max_gpus(dtype, operation)?;
        table.curve(dtype, operation, gpus.min(cap)).map(|c| (c, cap))
    };
    let nccl = db.nccl().ok();
    if let Some(found) = nccl.and_then(|t| find(t)) {
        return Ok(found);
    }
    if db.resolver.oneccl_path().is_none() {
        // The reference's text leads (parity); what follows says which collective is missing,
        // since the usual cause is a parallel size (cp_size, tp_size) the NCCL table lacks.
        return Err(AicError::perf(format!(
            "OneCCL data not configured for this system (no misc.oneccl_version in YAML); {}",
            nccl_gap(nccl.map(|t| &**t), dtype, operation, gpus)
        )));
    }
    find(db.oneccl()?).ok_or_else(|| {
        AicError::perf(format!(
            "neither NCCL nor OneCCL has data for ({:?}, {:?}, {gpus}) at {}",
            dtype.as_str(),
            operation,
            db.label()
        ))
    })
}

/// What the NCCL table lacks for a collective of `gpus` ranks: its dtype / operation, or that
/// GPU count (with the counts it has), and the usual fix.
fn nccl_gap(table: Option<&NcclTable>, dtype: CommQuant, operation: &str, gpus: u64) -> String {
    let Some(table) = table else {
        return format!("the NCCL table could not be loaded either, so no {} {operation} over {gpus} GPUs can be priced", dtype.as_str());
    };
    let counts: Vec<String> = table
        .curves()
        .filter(|c| c.0 == dtype && c.1 == operation)
        .map(|c| c.2.to_string())
        .collect();
    if counts.is_empty() {
        return format!(
            "the NCCL table has no {} {operation} rows at all (choose another comm_quant_mode)",
            dtype.as_str()
        );
    }
    format!(
        "the NCCL table has no {} {operation} rows for {gpus} GPUs (it has {}): a parallel size \
         such as cp_size or tp_size of {gpus} cannot be priced on this system; choose one of those",
        dtype.as_str(),
        counts.join(", ")
    )
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
        Ok(allreduce(&self.db, shape.mode, shape.transfers, self.quant, self.tp, size)?.finish(self.scale_factor))
    }

    /// The SOL-mode answer with its parts: `(time, 0, 0)` (spec 20 §0.7).
    pub(crate) fn sol_split(&self, shape: &Shape) -> SolSplit {
        let size = ceil_div(shape.x, self.seq_split) as f64 * self.hidden;
        allreduce_sol_split(&self.db, self.tp, size).finish(self.scale_factor)
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
        Ok(nccl(&self.db, shape.mode, shape.transfers, self.dtype, &self.operation, self.gpus, size)?.finish(self.scale_factor))
    }

    /// The SOL-mode answer with its parts: `(0, time)` (spec 20 §0.7).
    pub(crate) fn sol_split(&self, shape: &Shape) -> SolSplit {
        let size = ceil_div(shape.x, self.seq_split) as f64 * self.hidden;
        nccl_sol_split(&self.db, self.dtype, &self.operation, self.gpus, size).finish(self.scale_factor)
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
        if shape.is_sol() {
            return self.sol_split(shape).value(Source::Sol);
        }
        let node = &self.db.system.node;
        let ms = (self.bytes(shape) / node.inter_node_bw + node.p2p_latency) * 1000.0;
        OpValue::new(ms, 0.0, Source::Empirical).finish(self.scale_factor)
    }

    /// The SOL-mode answer with its parts: `(0, bytes / inter_node_bw)`; zero at pp ≤ 1.
    pub(crate) fn sol_split(&self, shape: &Shape) -> SolSplit {
        if self.pp <= 1 {
            return SolSplit::ZERO;
        }
        let ms = self.bytes(shape) / self.db.system.node.inter_node_bw * 1000.0;
        SolSplit::memory(ms).finish(self.scale_factor)
    }

    fn bytes(&self, shape: &Shape) -> f64 {
        ceil_div(shape.x, self.seq_split) as f64 * self.hidden * 2.0
    }
}
