//! The `Mhc` op (spec 34 §6): the manifold hyper-connection pre/post mixing of a DeepSeek-V4
//! layer, priced from a 1-D token curve of `mhc_module_perf` (first row wins per
//! `(op_name, hc_mult, hidden_size)`), with its own integer SOL.

use std::sync::{Arc, OnceLock};

use crate::data::tables::{MhcKey, PerfDatabase};
use crate::error::{AicError, Result};
use crate::lookup::sol::Roofline;
use crate::lookup::{anchor_message, Grid};
use crate::spec::MhcOp;

use super::empirical::{estimate, not_implemented, util_at, ProvenanceTier};
use super::{by_mode, ceil_div, OpValue, Shape, SolSplit, Source};

/// The mHC roofline at `t` tokens (spec 34 §6): pre/post op counts over the FLOPS of the op's
/// quant mode, parameters and activations over the memory bandwidth.
pub fn mhc_roofline(op: &MhcOp, t: u64, flops: f64, mem_bw: f64) -> Roofline {
    let (t, hc, hidden, k) =
        (u128::from(t), u128::from(op.hc_mult), u128::from(op.hidden_size), u128::from(op.sinkhorn_iters));
    let dm = hc * hidden;
    let m = (2 + hc) * hc;
    let pre = op.op == "pre";
    let ops = if pre {
        2 * (2 * t * dm * m + 3 * t * dm + t * (hc * hc + 2 * hc) * k + 2 * t * hc * hidden)
    } else {
        2 * (2 * t * hc * hc * hidden + 2 * t * hc * hidden)
    };
    let mu = op.quant_mode.bytes_per_elem();
    let params = (2 * (m * dm + m + 3)) as f64 * mu;
    let mut act = (2 * t * dm) as f64 * mu * 2.0;
    if pre {
        act += (2 * t * (2 * hc + hc * hc)) as f64 * 4.0;
    }
    Roofline { math_s: ops as f64 / flops, mem_s: (params + act) / mem_bw }
}

#[inline]
fn count(v: f64) -> u64 {
    if v > 0.0 {
        v as u64
    } else {
        0
    }
}

/// Compiled `Mhc`.
#[derive(Debug)]
pub struct MhcEval {
    pub(crate) name: String,
    op: MhcOp,
    db: Arc<PerfDatabase>,
    /// `(FLOPS, memory bandwidth)`, resolved on first use.
    rates: OnceLock<Result<(f64, f64)>>,
    /// The op's curve, resolved on first use.
    curve: OnceLock<Result<Arc<Grid>>>,
}

impl MhcEval {
    pub(crate) fn compile(op: &MhcOp, db: &Arc<PerfDatabase>) -> Self {
        MhcEval { name: op.name.clone(), op: op.clone(), db: db.clone(), rates: OnceLock::new(), curve: OnceLock::new() }
    }

    fn rates(&self) -> Result<(f64, f64)> {
        self.rates.get_or_init(|| self.resolve_rates()).clone()
    }

    fn resolve_rates(&self) -> Result<(f64, f64)> {
        let q = self.op.quant_mode;
        Ok((self.db.system.flops(q.as_str(), q.flops_key())?, self.db.system.gpu.mem_bw))
    }

    fn key(&self) -> MhcKey {
        (self.op.op.clone(), u64::from(self.op.hc_mult), u64::from(self.op.hidden_size))
    }

    fn curve(&self) -> Result<&Arc<Grid>> {
        self.curve.get_or_init(|| self.resolve_curve().cloned()).as_ref().map_err(Clone::clone)
    }

    fn resolve_curve(&self) -> Result<&Arc<Grid>> {
        let table = self.db.dsv4().mhc(&self.db.resolver)?;
        table.curve(&self.key()).ok_or_else(|| {
            AicError::perf(format!(
                "MHC module data missing for MhcKey {{ op_name: {:?}, hc_mult: {}, hidden_size: {} }} at {}",
                self.op.op,
                self.op.hc_mult,
                self.op.hidden_size,
                self.db.label()
            ))
        })
    }

    fn silicon(&self, f: f64, bw: f64, x: u64) -> Result<OpValue> {
        let grid = self.curve()?;
        let q = [x as f64];
        let sol = |c: &[f64]| mhc_roofline(&self.op, count(c[0]), f, bw).ms();
        let v = grid.lookup(&q, &sol).map_err(|m| AicError::perf(anchor_message(&["num_tokens"], &q, m)))?;
        Ok(OpValue::new(v.latency, v.energy, Source::Silicon))
    }

    fn empirical(&self, f: f64, bw: f64, x: u64) -> Result<OpValue> {
        let q = [x as f64];
        let Ok(grid) = self.curve() else {
            return Err(not_implemented(&q));
        };
        let sol = |c: &[f64]| mhc_roofline(&self.op, count(c[0]), f, bw).ms();
        let util = util_at(grid.points().map(|(c, l)| (c, l.latency)), &sol, &q).ok_or_else(|| not_implemented(&q))?;
        Ok(estimate(mhc_roofline(&self.op, x, f, bw).ms() / util, ProvenanceTier::Empirical))
    }

    /// Latency at a shape (scale factor included): token count `ceil(x / seq_split)`.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let (f, bw) = self.rates()?;
        let x = ceil_div(shape.x, self.op.seq_split);
        let v = by_mode(
            shape.mode,
            || Ok(OpValue::new(mhc_roofline(&self.op, x, f, bw).ms(), 0.0, Source::Sol)),
            || self.silicon(f, bw, x),
            || self.empirical(f, bw, x),
        )?;
        Ok(v.finish(self.op.scale_factor))
    }

    /// The SOL with its compute and memory parts.
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        let (f, bw) = self.rates()?;
        let x = ceil_div(shape.x, self.op.seq_split);
        Ok(SolSplit::leaf(mhc_roofline(&self.op, x, f, bw)).finish(self.op.scale_factor))
    }
}
