//! MoE ops (spec 20 §10–§11, 11 §7): the fused routed-expert compute read from token curves
//! (all attention-DP ranks feed one expert pool), and the dispatch/combine communication
//! composed from all-reduce and NCCL collectives by backend and parallel layout.

use std::sync::Arc;

use crate::data::tables::{MoeCurves, MoeKey, MoeTable, PerfDatabase};
use crate::error::{AicError, Result};
use crate::lookup::sol::Roofline;
use crate::lookup::{anchor_message, Grid};
use crate::spec::{Backend, CommQuant, DatabaseMode, DispatchFlavor, MoeDispatchOp, MoeOp, MoeQuant};

use super::comm::{allreduce, nccl};
use super::empirical::{estimate, nearest_candidate, not_implemented, util_at, ProvenanceTier};
use super::{OpValue, Shape, SolSplit, Source, TransferKinds};

/// MoE SOL in ms at `tokens` (integer arithmetic, floor divisions left to right; spec 20 §10.2).
#[allow(clippy::too_many_arguments)]
pub fn moe_sol_ms(
    tokens: u64,
    topk: u64,
    hidden: u64,
    inter: u64,
    num_experts: u64,
    moe_tp: u64,
    moe_ep: u64,
    gated: bool,
    flops: f64,
    bytes_per_elem: f64,
    mem_bw: f64,
) -> f64 {
    moe_roofline(tokens, topk, hidden, inter, num_experts, moe_tp, moe_ep, gated, flops, bytes_per_elem, mem_bw).ms()
}

/// The MoE roofline terms behind [`moe_sol_ms`].
#[allow(clippy::too_many_arguments)]
fn moe_roofline(
    tokens: u64,
    topk: u64,
    hidden: u64,
    inter: u64,
    num_experts: u64,
    moe_tp: u64,
    moe_ep: u64,
    gated: bool,
    flops: f64,
    bytes_per_elem: f64,
    mem_bw: f64,
) -> Roofline {
    let g: u128 = if gated { 3 } else { 2 };
    let (tt, h, i) = (u128::from(tokens) * u128::from(topk), u128::from(hidden), u128::from(inter));
    let ep = u128::from(moe_ep.max(1));
    let tp = u128::from(moe_tp.max(1));
    let ops = tt * h * i * g * 2 / ep / tp;
    let per_ep = tt / ep;
    let bytes = per_ep * h * 2 + per_ep * i * g / tp + h * i * g / tp * (u128::from(num_experts) / ep).min(per_ep);
    Roofline::new(ops as f64, flops, bytes as f64 * bytes_per_elem, mem_bw)
}

/// A curve an op may read: its key (the distribution after the `uniform` fallback) and the
/// curve itself when the table has it.
#[derive(Debug)]
struct ChosenCurve {
    key: MoeKey,
    curve: Option<Arc<Grid>>,
}

/// Compiled `Moe`.
#[derive(Debug)]
pub struct MoeEval {
    pub(crate) name: String,
    scale_factor: f64,
    op: MoeOp,
    flops: Result<f64>,
    table: Result<Arc<MoeTable>>,
    /// The curves `choose` picks between, resolved once: (standard, low-latency if the op
    /// qualifies for TRT-LLM's small-batch split and the table has that curve).
    keys: Option<(ChosenCurve, Option<ChosenCurve>)>,
    db: Arc<PerfDatabase>,
}

impl MoeEval {
    pub(crate) fn compile(op: &MoeOp, db: &Arc<PerfDatabase>) -> Self {
        let flops = db.system.flops(op.quant_mode.as_str(), op.quant_mode.flops_key());
        let table = match &flops {
            Ok(_) => db.moe().cloned(),
            Err(e) => Err(e.clone()),
        };
        let mut eval =
            MoeEval { name: op.name.clone(), scale_factor: op.scale_factor, op: op.clone(), flops, table, keys: None, db: db.clone() };
        if let Ok(table) = &eval.table {
            eval.keys = Some(eval.resolve_keys(table));
        }
        eval
    }

    fn key(&self, distribution: &str) -> MoeKey {
        let o = &self.op;
        MoeKey {
            quant: o.quant_mode.as_str().to_string(),
            distribution: distribution.to_string(),
            topk: u64::from(o.topk),
            num_experts: u64::from(o.num_experts),
            hidden_size: u64::from(o.hidden_size),
            inter_size: u64::from(o.inter_size),
            moe_tp_size: u64::from(o.moe_tp_size),
            moe_ep_size: u64::from(o.moe_ep_size),
        }
    }

    /// SOL at `tokens` for a curve of shape `key` priced with quant `(flops, bytes)`.
    fn sol_for(&self, key: &MoeKey, tokens: f64, flops: f64, bytes_per_elem: f64) -> f64 {
        moe_sol_ms(
            tokens.round().max(0.0) as u64,
            key.topk,
            key.hidden_size,
            key.inter_size,
            key.num_experts,
            key.moe_tp_size,
            key.moe_ep_size,
            self.op.is_gated,
            flops,
            bytes_per_elem,
            self.db.system.gpu.mem_bw,
        )
    }

    fn sol(&self, tokens: f64, flops: f64) -> f64 {
        self.roofline(tokens, flops).ms()
    }

    /// The op's own roofline at `tokens` (spec 20 §10.2).
    fn roofline(&self, tokens: f64, flops: f64) -> Roofline {
        let o = &self.op;
        moe_roofline(
            tokens.round().max(0.0) as u64,
            u64::from(o.topk),
            u64::from(o.hidden_size),
            u64::from(o.inter_size),
            u64::from(o.num_experts),
            u64::from(o.moe_tp_size),
            u64::from(o.moe_ep_size),
            o.is_gated,
            flops,
            o.quant_mode.bytes_per_elem(),
            self.db.system.gpu.mem_bw,
        )
    }

    fn read_curve(&self, curve: &Grid, tokens: u64, flops: f64) -> Result<OpValue> {
        let first = curve.points().next().map(|(c, _)| c[0]).unwrap_or(0);
        if curve.len() == 1 && tokens < first {
            return Err(AicError::perf(format!(
                "MoE silicon token underflow has only one measured point; cannot infer low-token \
                 latency from a singleton. Query num_tokens={tokens}, only point num_tokens={first} \
                 for {}",
                self.key(&self.op.workload_distribution)
            )));
        }
        let t = tokens as f64;
        let v = curve
            .lookup(&[t], &|q| self.sol(q[0], flops))
            .map_err(|m| AicError::perf(anchor_message(&["num_tokens"], &[t], m)))?;
        Ok(OpValue::new(v.latency, v.energy, Source::Silicon))
    }

    /// Which curves answer (TRT-LLM's low-latency split for small nvfp4 batches when it has the
    /// slice) and the curve key, the distribution after the `uniform` fallback.
    fn choose<'t, 's>(&'s self, table: &'t MoeTable, tokens: u64) -> (&'t MoeCurves, &'s ChosenCurve) {
        let (standard, low_latency) = self.keys.as_ref().expect("keys are resolved whenever the table loaded");
        match low_latency {
            Some(key) if tokens <= 128 => (&table.low_latency, key),
            _ => (&table.standard, standard),
        }
    }

    /// The keys [`MoeEval::choose`] picks between (spec 20 §10.2).
    fn resolve_keys(&self, table: &MoeTable) -> (ChosenCurve, Option<ChosenCurve>) {
        let o = &self.op;
        let quant = o.quant_mode.as_str();
        let dist_in = |c: &MoeCurves| {
            if c.has_distribution(quant, &o.workload_distribution) {
                o.workload_distribution.clone()
            } else {
                "uniform".to_string()
            }
        };
        let mut low_latency = None;
        if self.db.resolver.backend() == Backend::Trtllm
            && o.quant_mode == MoeQuant::Nvfp4
            && o.is_gated
            && !table.low_latency.is_empty()
        {
            let key = self.key(&dist_in(&table.low_latency));
            if let Some(curve) = table.low_latency.curve_shared(&key) {
                low_latency = Some(ChosenCurve { curve: Some(curve), key });
            }
        }
        let key = self.key(&dist_in(&table.standard));
        (ChosenCurve { curve: table.standard.curve_shared(&key), key }, low_latency)
    }

    /// The table answer.
    fn silicon(&self, tokens: u64, flops: f64) -> Result<OpValue> {
        let o = &self.op;
        let backend = self.db.resolver.backend();
        let mut tokens = tokens;
        if backend == Backend::Sglang {
            if o.enable_eplb && o.is_context {
                tokens = (tokens as f64 * 0.8).floor() as u64;
            }
            if o.moe_backend.as_deref() == Some("deepep_moe") {
                return Err(AicError::config(
                    "moe_backend \"deepep_moe\" on sglang is a retired path; use the default MoE backend",
                ));
            }
        }
        let table = self.table.as_ref().map_err(Clone::clone)?;
        let (_, chosen) = self.choose(table, tokens);
        let curve = chosen.curve.as_deref().ok_or_else(|| {
            AicError::perf(format!("MoE data missing for {} at {}", chosen.key, self.db.label()))
        })?;
        self.read_curve(curve, tokens, flops)
    }

    /// The empirical estimate (spec 20 §10.3): own curve, else the nearest shape of the same
    /// quant (xshape), of a same-profile quant (xquant), or of another profile (xprofile). A
    /// rung whose kind `transfers` disables finds no candidate, so the ladder moves on.
    fn empirical(&self, tokens: u64, flops: f64, transfers: TransferKinds) -> Result<OpValue> {
        let t = tokens as f64;
        let table = self.table.as_ref().map_err(Clone::clone)?;
        let (curves, chosen) = self.choose(table, tokens);
        let own = chosen.key.clone();
        let quant = self.op.quant_mode;
        let sol_q = self.sol(t, flops);
        let util_on = |key: &MoeKey, flops: f64, bpe: f64| -> Option<f64> {
            let curve = curves.curve(key)?;
            util_at(curve.points().map(|(c, l)| (c, l.latency)), &|c| self.sol_for(key, c[0], flops, bpe), &[t])
        };
        if curves.curve(&own).is_some() {
            let util = util_on(&own, flops, quant.bytes_per_elem()).ok_or_else(|| not_implemented(&[t]))?;
            return Ok(estimate(sol_q / util, ProvenanceTier::Empirical));
        }
        let requested = self.op.workload_distribution.as_str();
        let candidates = |q: &str| -> Vec<&MoeKey> {
            // The distribution after the per-quant `uniform` fallback.
            let d = if curves.has_distribution(q, requested) { requested } else { "uniform" };
            curves
                .keys()
                .iter()
                .filter(|k| {
                    k.quant == q && k.distribution == d && k.moe_tp_size == own.moe_tp_size && k.moe_ep_size == own.moe_ep_size
                })
                .collect()
        };
        let nearest = |keys: &[&MoeKey]| -> Option<MoeKey> {
            let feats: Vec<Vec<f64>> = keys
                .iter()
                .map(|k| vec![k.topk as f64, k.num_experts as f64, k.hidden_size as f64, k.inter_size as f64])
                .collect();
            let q = [own.topk as f64, own.num_experts as f64, own.hidden_size as f64, own.inter_size as f64];
            nearest_candidate(&feats, &q).map(|i| keys[i].clone())
        };
        let profile = |q: MoeQuant| (q.bytes_per_elem(), q.compute_multiplier());
        // xshape, then xquant.
        let same = if transfers.allows(ProvenanceTier::Xshape) { candidates(quant.as_str()) } else { Vec::new() };
        let tier = if same.is_empty() { ProvenanceTier::Xquant } else { ProvenanceTier::Xshape };
        let pool: Vec<&MoeKey> = if same.is_empty() && !transfers.allows(ProvenanceTier::Xquant) {
            Vec::new()
        } else if same.is_empty() {
            curves
                .quants()
                .into_iter()
                .filter(|name| *name != quant.as_str())
                .filter(|name| MoeQuant::parse(name).map(profile) == Some(profile(quant)))
                .flat_map(&candidates)
                .collect()
        } else {
            same
        };
        if let Some(key) = nearest(&pool) {
            let util = util_on(&key, flops, quant.bytes_per_elem()).ok_or_else(|| not_implemented(&[t]))?;
            return Ok(estimate(sol_q / util, tier));
        }
        // xprofile.
        let (qb, qc) = profile(quant);
        let mut others: Vec<(f64, MoeQuant)> = curves
            .quants()
            .into_iter()
            .filter_map(MoeQuant::parse)
            .filter(|q| profile(*q) != profile(quant))
            .map(|q| ((q.bytes_per_elem() - qb).abs() + (q.compute_multiplier() - qc).abs(), q))
            .collect();
        others.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !transfers.allows(ProvenanceTier::Xprofile) {
            others.clear();
        }
        for (_, reference) in others {
            let Ok(ref_flops) = self.db.system.flops(reference.as_str(), reference.flops_key()) else { continue };
            let Some(key) = nearest(&candidates(reference.as_str())) else { continue };
            if let Some(util) = util_on(&key, ref_flops, reference.bytes_per_elem()) {
                let scale = moe_util_level(quant) / moe_util_level(reference);
                return Ok(estimate(sol_q / (util * scale), ProvenanceTier::Xprofile));
            }
        }
        Err(not_implemented(&[t]))
    }

    /// Latency at a shape (scale factor included).
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let flops = *self.flops.as_ref().map_err(Clone::clone)?;
        let tokens = shape.x * u64::from(self.op.attention_dp_size.max(1));
        let value = match shape.mode {
            DatabaseMode::Sol => return Ok(self.sol_split(shape)?.value(Source::Sol)),
            DatabaseMode::Empirical => self.empirical(tokens, flops, shape.transfers)?,
            DatabaseMode::Silicon | DatabaseMode::Hybrid => match self.silicon(tokens, flops) {
                Err(e) if shape.mode == DatabaseMode::Hybrid && e.is_perf_data_missing() => {
                    self.empirical(tokens, flops, shape.transfers)?
                }
                other => other?,
            },
        };
        Ok(value.finish(self.scale_factor))
    }

    /// The SOL-mode answer with its parts at `T = x · max(attention_dp, 1)` (spec 20 §10.2).
    pub(crate) fn sol_split(&self, shape: &Shape) -> Result<SolSplit> {
        let flops = *self.flops.as_ref().map_err(Clone::clone)?;
        let tokens = shape.x * u64::from(self.op.attention_dp_size.max(1));
        Ok(SolSplit::leaf(self.roofline(tokens as f64, flops)).finish(self.scale_factor))
    }
}

/// MoE utilisation level of a (bytes, compute) profile, for cross-profile transfers.
fn moe_util_level(q: MoeQuant) -> f64 {
    use super::util_levels::{util_level, MOE_UTIL_DEFAULT, MOE_UTIL_LEVELS};
    util_level(&MOE_UTIL_LEVELS, q.bytes_per_elem(), q.compute_multiplier(), MOE_UTIL_DEFAULT)
}

/// Compiled `MoeDispatch`.
#[derive(Debug)]
pub struct MoeDispatchEval {
    pub(crate) name: String,
    op: MoeDispatchOp,
    db: Arc<PerfDatabase>,
}

impl MoeDispatchEval {
    pub(crate) fn compile(op: &MoeDispatchOp, db: &Arc<PerfDatabase>) -> Self {
        MoeDispatchEval { name: op.name.clone(), op: op.clone(), db: db.clone() }
    }

    /// Sum of the sub-collectives' latencies (energy 0, tag `silicon`), scale factor included.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let o = &self.op;
        let db = &*self.db;
        let x = shape.x;
        let hidden = f64::from(o.hidden_size);
        let gpus = u64::from(o.moe_tp_size) * u64::from(o.moe_ep_size);
        let attn_dp = u64::from(o.attention_dp_size.max(1));
        let attn_tp = (gpus / attn_dp).max(1);
        let half = CommQuant::Half;
        let mode = shape.mode;
        let transfers = shape.transfers;
        let ar = |n: u64, t: u64| allreduce(db, mode, transfers, half, n, t as f64 * hidden).map(|v| v.latency);
        let nc = |op: &str, n: u64, t: u64, per_token: f64| {
            nccl(db, mode, transfers, half, op, n, t as f64 * per_token).map(|v| v.latency)
        };
        let gather_or_scatter = if o.pre_dispatch { "all_gather" } else { "reduce_scatter" };
        let latency = match o.flavor {
            DispatchFlavor::RetiredDeepEp => {
                return Err(AicError::config(
                    "MoeDispatch flavor RetiredDeepEp is retired; use CustomAllReduce or TrtllmAlltoall",
                ))
            }
            DispatchFlavor::CustomAllReduce => match o.backend {
                Backend::Vllm => {
                    let mut sum = 0.0;
                    if attn_tp > 1 && !(o.pre_dispatch && o.attn_ar_modeled) {
                        sum += ar(gpus, x)?;
                    }
                    if attn_dp > 1 {
                        sum += nc(gather_or_scatter, gpus, x * attn_dp, hidden)?;
                    }
                    sum
                }
                Backend::Sglang => {
                    if attn_tp > 1 && attn_dp > 1 {
                        if o.pre_dispatch {
                            nc("reduce_scatter", attn_tp, x, hidden)? + nc("all_gather", gpus, x * attn_dp, hidden)?
                        } else {
                            nc("reduce_scatter", gpus, x * attn_dp, hidden)? + nc("all_gather", attn_tp, x, hidden)?
                        }
                    } else if o.attn_cp_size > 1 {
                        if o.is_context {
                            nc(gather_or_scatter, gpus, x, hidden)?
                        } else if o.pre_dispatch {
                            0.0
                        } else {
                            ar(gpus, x)?
                        }
                    } else if attn_tp > 1 {
                        ar(gpus, x)?
                    } else if attn_dp > 1 {
                        nc(gather_or_scatter, gpus, x * attn_dp, hidden)?
                    } else {
                        0.0
                    }
                }
                Backend::Trtllm => ar(attn_tp, x)?,
            },
            DispatchFlavor::TrtllmAlltoall => {
                if db.system.gpu.sm_version == Some(100) {
                    if attn_dp > 1 && o.moe_tp_size == 1 && db.system.node.num_gpus_per_node >= 72 {
                        return Err(AicError::perf(format!(
                            "TRT-LLM alltoall data (trtllm_alltoall_perf.parquet) is not available at {}",
                            db.label()
                        )));
                    } else if attn_dp > 1 {
                        if o.pre_dispatch {
                            let factor = match o.moe_quant {
                                MoeQuant::Nvfp4 => 0.25 + 0.03125,
                                MoeQuant::Fp8 | MoeQuant::Fp8Block => 0.5,
                                _ => 1.0,
                            };
                            nc("all_gather", gpus, x * attn_dp, hidden * factor)?
                        } else {
                            nc("reduce_scatter", gpus, x * attn_dp, hidden)?
                        }
                    } else if attn_tp > 1 {
                        ar(gpus, x)?
                    } else {
                        0.0
                    }
                } else if attn_tp > 1 {
                    ar(gpus, x)?
                } else if attn_dp > 1 {
                    nc(gather_or_scatter, gpus, x * attn_dp, hidden)?
                } else {
                    0.0
                }
            }
        };
        Ok(OpValue::new(latency, 0.0, Source::Silicon).finish(o.scale_factor))
    }
}
