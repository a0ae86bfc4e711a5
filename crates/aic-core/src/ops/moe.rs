//! MoE ops (spec 20 §10–§11, 11 §7): the fused routed-expert compute read from token curves
//! (all attention-DP ranks feed one expert pool), and the dispatch/combine communication
//! composed from all-reduce and NCCL collectives by backend and parallel layout.

use std::sync::Arc;

use crate::data::tables::{MoeKey, MoeTable, PerfDatabase};
use crate::error::{AicError, Result};
use crate::lookup::{anchor_message, Grid};
use crate::spec::{Backend, CommQuant, DispatchFlavor, MoeDispatchOp, MoeOp, MoeQuant};

use super::comm::{allreduce, nccl};
use super::{OpValue, Shape, Source};

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
    let g: u128 = if gated { 3 } else { 2 };
    let (tt, h, i) = (u128::from(tokens) * u128::from(topk), u128::from(hidden), u128::from(inter));
    let ep = u128::from(moe_ep.max(1));
    let tp = u128::from(moe_tp.max(1));
    let ops = tt * h * i * g * 2 / ep / tp;
    let per_ep = tt / ep;
    let bytes = per_ep * h * 2 + per_ep * i * g / tp + h * i * g / tp * (u128::from(num_experts) / ep).min(per_ep);
    let math = ops as f64 / flops;
    let mem = bytes as f64 * bytes_per_elem / mem_bw;
    math.max(mem) * 1000.0
}

/// Compiled `Moe`.
#[derive(Debug)]
pub struct MoeEval {
    pub(crate) name: String,
    scale_factor: f64,
    op: MoeOp,
    flops: Result<f64>,
    table: Result<Arc<MoeTable>>,
    db: Arc<PerfDatabase>,
}

impl MoeEval {
    pub(crate) fn compile(op: &MoeOp, db: &Arc<PerfDatabase>) -> Self {
        let flops = db.system.flops(op.quant_mode.as_str(), op.quant_mode.flops_key());
        let table = match &flops {
            Ok(_) => db.moe(),
            Err(e) => Err(e.clone()),
        };
        MoeEval { name: op.name.clone(), scale_factor: op.scale_factor, op: op.clone(), flops, table, db: db.clone() }
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

    fn sol(&self, tokens: f64, flops: f64) -> f64 {
        let o = &self.op;
        moe_sol_ms(
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

    /// Latency at a shape (scale factor included).
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let flops = *self.flops.as_ref().map_err(Clone::clone)?;
        let backend = self.db.resolver.backend();
        let o = &self.op;
        let mut tokens = shape.x * u64::from(o.attention_dp_size.max(1));
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
        let quant = o.quant_mode.as_str();
        if backend == Backend::Trtllm
            && tokens <= 128
            && o.quant_mode == MoeQuant::Nvfp4
            && o.is_gated
            && !table.low_latency.is_empty()
        {
            let ll = &table.low_latency;
            let dist = if ll.has_distribution(quant, &o.workload_distribution) {
                o.workload_distribution.as_str()
            } else {
                "uniform"
            };
            if let Some(curve) = ll.curve(&self.key(dist)) {
                return Ok(self.read_curve(curve, tokens, flops)?.finish(self.scale_factor));
            }
        }
        let std = &table.standard;
        let dist = if std.has_distribution(quant, &o.workload_distribution) {
            o.workload_distribution.as_str()
        } else {
            "uniform"
        };
        let key = self.key(dist);
        let curve = std
            .curve(&key)
            .ok_or_else(|| AicError::perf(format!("MoE data missing for {key} at {}", self.db.label())))?;
        Ok(self.read_curve(curve, tokens, flops)?.finish(self.scale_factor))
    }
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
        let ar = |n: u64, t: u64| allreduce(db, half, n, t as f64 * hidden).map(|v| v.latency);
        let nc = |op: &str, n: u64, t: u64, per_token: f64| nccl(db, half, op, n, t as f64 * per_token).map(|v| v.latency);
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
                if db.system.gpu.sm_version == 100 {
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
