//! GEMM (spec 20 §1, 11 §2): scattered-sites lookup at `m = ceil(floor(x / scale_num_tokens)
//! / seq_split)`, the SOL fallback for `below_grid_sol` shapes, and `fp8_static` priced as the
//! fp8 GEMM minus the quantisation kernels.

use std::sync::{Arc, Mutex};

use crate::data::tables::{GemmTable, PerfDatabase, QuantizeKernel, QuantizeTable};
use crate::error::{AicError, Result};
use crate::fast_hash::FastHashMap;
use crate::lookup::sol::{gemm_roofline, gemm_sol_ms};
use crate::lookup::{anchor_message, Miss, NeighbourOrder};
use crate::spec::{DatabaseMode, GemmOp, GemmQuant};

use super::empirical::{estimate as estimated, not_implemented, util_near, ProvenanceTier, Samples};
use super::util_levels::gemm_util_level;
use super::{ceil_div, OpValue, Shape, SolSplit, Source, TransferKinds};

/// Compiled `Gemm`.
#[derive(Debug)]
pub struct GemmEval {
    pub(crate) name: String,
    scale_factor: f64,
    n: u64,
    k: u64,
    quant: GemmQuant,
    scale_num_tokens: u32,
    seq_split: u32,
    below_grid_sol: bool,
    /// Context passes price this op with one token per request.
    is_logits: bool,
    flops: Result<f64>,
    mem_bw: f64,
    table: Result<Arc<GemmTable>>,
    /// The position of this op's quant in the table, found once.
    quant_position: Option<usize>,
    /// The table's sites around this op's `(n, k)`, ordered once.
    neighbours: Option<NeighbourOrder>,
    /// `fp8_static` only: the compute-scale and (with low-precision input) scale-matrix tables.
    quantize: Vec<Result<Arc<QuantizeTable>>>,
    db: Arc<PerfDatabase>,
    /// The empirical estimate's prepared samples by (table quant, FLOPS, bytes per element):
    /// they depend on the slice and the roofline only, and a sweep asks many shapes, so each
    /// slice's SOLs and logarithms are computed once per op instead of at every query.
    samples: Mutex<FastHashMap<(String, u64, u64), Option<Arc<Samples>>>>,
}

impl GemmEval {
    pub(crate) fn compile(op: &GemmOp, db: &Arc<PerfDatabase>) -> Self {
        let flops = db.system.flops(op.quant_mode.as_str(), op.quant_mode.flops_key());
        let table = match &flops {
            Ok(_) => db.gemm().cloned(),
            Err(e) => Err(e.clone()),
        };
        let quant_position = table.as_ref().ok().and_then(|t| t.quant_position(op.quant_mode.table_name()));
        let neighbours = table
            .as_ref()
            .ok()
            .zip(quant_position)
            .and_then(|(t, p)| t.quant_at(p))
            .map(|sites| sites.neighbour_order(u64::from(op.n), u64::from(op.k)));
        let mut quantize = Vec::new();
        if op.quant_mode == GemmQuant::Fp8Static {
            quantize.push(db.quantize(QuantizeKernel::ComputeScale).cloned());
            if op.low_precision_input {
                quantize.push(db.quantize(QuantizeKernel::ScaleMatrix).cloned());
            }
        }
        GemmEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            n: u64::from(op.n),
            k: u64::from(op.k),
            quant: op.quant_mode,
            scale_num_tokens: op.scale_num_tokens,
            seq_split: op.seq_split,
            below_grid_sol: op.below_grid_sol,
            is_logits: op.name.contains("logits_gemm"),
            flops,
            mem_bw: db.system.gpu.mem_bw,
            table,
            quant_position,
            neighbours,
            quantize,
            db: db.clone(),
            samples: Mutex::new(FastHashMap::default()),
        }
    }

    /// The token count `m` for a shape.
    pub fn tokens(&self, shape: &Shape) -> u64 {
        let x = if shape.is_context && self.is_logits && !shape.x_override { shape.batch } else { shape.x };
        ceil_div(x / u64::from(self.scale_num_tokens.max(1)), self.seq_split)
    }

    /// Latency at a shape (scale factor included).
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let flops = *self.flops.as_ref().map_err(Clone::clone)?;
        let m = self.tokens(shape) as f64;
        let bpe = self.quant.bytes_per_elem();
        let mem_bw = self.mem_bw;
        let sol = move |m: f64, n: f64, k: f64| gemm_sol_ms(m, n, k, flops, bpe, mem_bw);
        let (n, k) = (self.n as f64, self.k as f64);
        let mut value = match shape.mode {
            DatabaseMode::Sol => {
                let source = if self.quant == GemmQuant::Fp8Static { Source::Estimated } else { Source::Sol };
                return Ok(self.sol_split(shape)?.value(source));
            }
            DatabaseMode::Empirical => self.empirical(m, flops, shape.transfers)?,
            DatabaseMode::Silicon | DatabaseMode::Hybrid => match self.silicon(m, shape.mode, &sol) {
                Err(e) if shape.mode == DatabaseMode::Hybrid && e.is_perf_data_missing() => {
                    self.empirical(m, flops, shape.transfers)?
                }
                other => other?,
            },
        };
        if self.quant == GemmQuant::Fp8Static {
            // fp8 GEMM minus the quantisation kernels, floored at the GEMM's own SOL.
            let floor = sol(m, n, k);
            let (mut latency, mut energy) = (value.latency, value.energy);
            for table in &self.quantize {
                let table = table.as_ref().map_err(Clone::clone)?;
                let (l, e) = self.quantize_kernel(table, m, shape.mode)?;
                latency -= l;
                energy -= e;
            }
            value = OpValue::new(latency.max(floor), energy, Source::Estimated);
        }
        Ok(value.finish(self.scale_factor))
    }

    /// The SOL-mode answer with its parts (spec 20 §1.2). For `fp8_static` the SOL answer is
    /// the floor itself, i.e. this same roofline (tagged `estimated` by [`GemmEval::eval`]).
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        let flops = *self.flops.as_ref().map_err(Clone::clone)?;
        let m = self.tokens(shape) as f64;
        let roofline = gemm_roofline(m, self.n as f64, self.k as f64, flops, self.quant.bytes_per_elem(), self.mem_bw);
        Ok(SolSplit::leaf(roofline).finish(self.scale_factor))
    }

    /// The table answer (SILICON; HYBRID ignores `below_grid_sol`).
    fn silicon(&self, m: f64, mode: DatabaseMode, sol: &impl Fn(f64, f64, f64) -> f64) -> Result<OpValue> {
        let table = self.table.as_ref().map_err(Clone::clone)?;
        let sites = self.quant_position.and_then(|p| table.quant_at(p)).ok_or_else(|| {
            let table_quant = self.quant.table_name();
            table.quant_missing(table_quant, &self.db.label())
        })?;
        let found = match &self.neighbours {
            Some(order) => sites.lookup_ordered(m, order, sol),
            None => sites.lookup(m, self.n, self.k, sol),
        };
        match found {
            Ok(v) => Ok(OpValue::new(v.latency, v.energy, Source::Silicon)),
            Err(_) if self.below_grid_sol && mode == DatabaseMode::Silicon => {
                Ok(OpValue::new(sol(m, self.n as f64, self.k as f64), 0.0, Source::Sol))
            }
            Err(miss) => Err(self.miss(m, miss)),
        }
    }

    /// The prepared samples of table quant `name` under the roofline with `flops` and `bpe`
    /// (`None`: no such slice, or no usable sample), prepared on first use.
    fn samples_of(&self, table: &GemmTable, name: &str, flops: f64, bpe: f64) -> Option<Arc<Samples>> {
        let key = (name.to_string(), flops.to_bits(), bpe.to_bits());
        if let Some(hit) = self.samples.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return hit.clone();
        }
        let mem_bw = self.mem_bw;
        let sol = move |c: &[f64]| gemm_sol_ms(c[0], c[1], c[2], flops, bpe, mem_bw);
        let prepared = table.quant(name).and_then(|slice| Samples::prepare(slice.points_in_key_order(), &sol, 3)).map(Arc::new);
        self.samples.lock().unwrap_or_else(|p| p.into_inner()).insert(key, prepared.clone());
        prepared
    }

    /// The empirical estimate (spec 20 §1.3): the quant's own points, else the first table quant
    /// with the same (bytes, compute) profile, else the nearest other profile scaled by the
    /// utilisation levels. A rung whose kind `transfers` disables is skipped.
    fn empirical(&self, m: f64, flops: f64, transfers: TransferKinds) -> Result<OpValue> {
        let table = self.table.as_ref().map_err(Clone::clone)?;
        let q = [m, self.n as f64, self.k as f64];
        let query_profile = (self.quant.bytes_per_elem(), self.quant.compute_multiplier());
        let sol_with = |flops: f64, bpe: f64| {
            let mem_bw = self.mem_bw;
            move |c: &[f64]| gemm_sol_ms(c[0], c[1], c[2], flops, bpe, mem_bw)
        };
        let query_sol = sol_with(flops, self.quant.bytes_per_elem());
        let query_bpe = self.quant.bytes_per_elem();
        let estimate = |name: &str, flops: f64, bpe: f64| -> Option<f64> {
            Some(self.samples_of(table, name, flops, bpe)?.util_near(&q, 2))
        };
        // Own quant.
        if table.quant(self.quant.table_name()).is_some() {
            let util = estimate(self.quant.table_name(), flops, query_bpe).ok_or_else(|| not_implemented(&q))?;
            return Ok(estimated(query_sol(&q) / util, ProvenanceTier::Empirical));
        }
        let profile = |name: &str| GemmQuant::parse(name).map(|g| (g.bytes_per_elem(), g.compute_multiplier()));
        // xquant: same profile, query SOL.
        let xquant = if transfers.allows(ProvenanceTier::Xquant) { table.available() } else { Vec::new() };
        for name in xquant {
            if profile(name) == Some(query_profile) {
                if let Some(util) = estimate(name, flops, query_bpe) {
                    return Ok(estimated(query_sol(&q) / util, ProvenanceTier::Xquant));
                }
            }
        }
        // xprofile: other profiles by (|Δcompute|, |Δbytes|), the reference quant's SOL.
        let mut others: Vec<(f64, f64, &str, GemmQuant)> = table
            .available()
            .into_iter()
            .filter_map(|name| {
                let g = GemmQuant::parse(name)?;
                let p = (g.bytes_per_elem(), g.compute_multiplier());
                (p != query_profile).then(|| ((p.1 - query_profile.1).abs(), (p.0 - query_profile.0).abs(), name, g))
            })
            .collect();
        others.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        if !transfers.allows(ProvenanceTier::Xprofile) {
            others.clear();
        }
        for (_, _, name, g) in others {
            let Ok(ref_flops) = self.db.system.flops(g.as_str(), g.flops_key()) else { continue };
            if let Some(util) = estimate(name, ref_flops, g.bytes_per_elem()) {
                let scale = gemm_util_level(self.quant) / gemm_util_level(g);
                return Ok(estimated(query_sol(&q) / (util * scale), ProvenanceTier::Xprofile));
            }
        }
        Err(not_implemented(&q))
    }

    /// A quantisation kernel at `(m, k)`, clamped into the collected rectangle; the
    /// scale-matrix kernel is rescaled by its SOL ratio when clamped.
    fn quantize_kernel(&self, table: &QuantizeTable, m: f64, mode: DatabaseMode) -> Result<(f64, f64)> {
        let (grid, mr, kr) = table.grid("fp8").ok_or_else(|| {
            AicError::perf(format!(
                "quantize data missing for quant 'fp8' ({:?}) at {}",
                table.kernel,
                self.db.label()
            ))
        })?;
        let k = self.k as f64;
        let mc = m.clamp(mr[0] as f64, mr[1] as f64);
        let kc = k.clamp(kr[0] as f64, kr[1] as f64);
        let bpe = table.kernel.bytes_per_elem();
        let mem_bw = self.mem_bw;
        let sol = move |c: &[f64]| bpe * c[0] * c[1] / mem_bw * 1000.0;
        if mode == DatabaseMode::Empirical {
            // The quantisation kernels hold the nearest collected point's utilisation (observed
            // on the reference: no two-point blend for these tables).
            let util = util_near(grid.points().map(|(c, l)| (c, l.latency)), &sol, &[m, k], 1)
                .ok_or_else(|| not_implemented(&[m, k]))?;
            return Ok((sol(&[m, k]) / util, 0.0));
        }
        let v = grid
            .lookup(&[mc, kc], &sol)
            .map_err(|miss| AicError::perf(anchor_message(&["m", "k"], &[mc, kc], miss)))?;
        if table.kernel == QuantizeKernel::ScaleMatrix && (mc != m || kc != k) {
            if let Some(r) = crate::lookup::sol_ratio(sol(&[m, k]), sol(&[mc, kc])) {
                return Ok((v.latency * r, v.energy * r));
            }
        }
        Ok((v.latency, v.energy))
    }

    fn miss(&self, m: f64, miss: Miss) -> AicError {
        AicError::perf(anchor_message(&["m", "n", "k"], &[m, self.n as f64, self.k as f64], miss))
    }
}
