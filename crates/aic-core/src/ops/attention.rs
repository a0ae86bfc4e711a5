//! Attention ops (spec 20 §4–§5, 11 §4–§5). Context attention reads the lane's slice at the
//! full sequence `s + prefix`, corrects for the cached prefix and adds constant fused-kernel
//! extras; generation attention averages five lookups spread ±10 % around the KV position.

use std::sync::Arc;

use crate::data::tables::{AttentionTable, PerfDatabase, SliceKey};
use crate::error::{AicError, Result};
use crate::lookup::sol::{context_attention_sol_ms, generation_attention_sol_ms, AttentionSolParams};
use crate::lookup::{anchor_message, Grid};
use crate::spec::{ContextAttentionOp, GenerationAttentionOp};

use super::{OpValue, Shape, Source};

/// The slice a compiled attention op reads: the table and the chosen lane's grid.
#[derive(Debug)]
struct ResolvedSlice {
    table: Arc<AttentionTable>,
    lane: String,
    key: SliceKey,
}

impl ResolvedSlice {
    fn grid(&self) -> &Grid {
        self.table
            .select(std::slice::from_ref(&self.lane), &self.key)
            .map(|(_, g)| g)
            .expect("resolved slice exists in its lane")
    }
}

fn resolve_slice(
    table: Result<Arc<AttentionTable>>,
    lane_order: &[String],
    key: SliceKey,
    what: &str,
    label: &str,
) -> Result<ResolvedSlice> {
    let table = table?;
    let lane = match table.select(lane_order, &key) {
        Some((lane, _)) => lane.to_string(),
        None => {
            return Err(AicError::perf(format!(
                "{what} attention data missing for {key}: tried lane_order {lane_order:?}, then fell \
                 back through table lanes {:?} at {label}",
                table.lane_names()
            )))
        }
    };
    Ok(ResolvedSlice { table, lane, key })
}

/// Compiled `ContextAttention`.
#[derive(Debug)]
pub struct ContextAttentionEval {
    pub(crate) name: String,
    scale_factor: f64,
    n: f64,
    cp_size: u32,
    /// `1.1 ×` the constant fused-kernel extras (ms).
    extras: f64,
    sol: Result<AttentionSolParams>,
    slice: Result<ResolvedSlice>,
}

impl ContextAttentionEval {
    pub(crate) fn compile(op: &ContextAttentionOp, db: &Arc<PerfDatabase>) -> Self {
        let sys = &db.system;
        let q = f64::from(op.n) * f64::from(op.head_size);
        let kv = f64::from(op.n_kv) * f64::from(op.head_size);
        let mf = op.fmha_quant_mode.bytes_per_elem();
        let mut extras = 2.0 * sys.mem_op_ms(2.0 * q + 2.0 * kv)
            + sys.mem_op_ms(kv * mf)
            + sys.mem_op_ms(kv * mf);
        if op.use_qk_norm {
            extras += 2.0 * (2.0 * sys.mem_op_ms(2.0 * q) + 2.0 * sys.mem_op_ms(2.0 * kv));
        }
        let key = SliceKey {
            fmha: Some(op.fmha_quant_mode),
            kv: op.kv_cache_dtype,
            n_kv_lookup: if op.n_kv == op.n { 0 } else { op.n_kv },
            head: op.head_size,
            window: op.window_size,
        };
        let sol = sys
            .flops(op.fmha_quant_mode.as_str(), op.fmha_quant_mode.flops_key())
            .map(|flops| AttentionSolParams {
                head: f64::from(op.head_size),
                window: f64::from(op.window_size),
                n_kv_lookup: f64::from(key.n_kv_lookup),
                kv_bytes: op.kv_cache_dtype.bytes_per_elem(),
                flops,
                mem_bw: sys.gpu.mem_bw,
            });
        let slice = resolve_slice(db.context_attention(), &op.lane_order, key, "context", &db.label());
        ContextAttentionEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            n: f64::from(op.n),
            cp_size: op.cp_size,
            extras: 1.1 * extras,
            sol,
            slice,
        }
    }

    /// The table term for `s_chunk` new tokens after `p` cached ones.
    fn fmha(&self, grid: &Grid, params: &AttentionSolParams, batch: u64, s_chunk: u64, p: u64) -> Result<OpValue> {
        let full = s_chunk + p;
        let q = [self.n, full as f64, batch as f64];
        let sol = |c: &[f64]| context_attention_sol_ms(params, c[0], c[1], c[2]);
        let v = grid
            .lookup(&q, &sol)
            .map_err(|m| AicError::perf(anchor_message(&["num_heads", "seq_len", "batch"], &q, m)))?;
        let f = full as f64;
        let pf = p as f64;
        let corr = if full == 0 { 0.0 } else { (f * f - pf * pf) / (f * f) };
        Ok(OpValue::new(v.latency * corr, v.energy * corr, Source::Silicon))
    }

    /// Latency at a shape (scale factor included).
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let params = self.sol.as_ref().map_err(Clone::clone)?;
        let slice = self.slice.as_ref().map_err(Clone::clone)?;
        let grid = slice.grid();
        let (b, s, p) = (shape.batch, shape.s, shape.prefix);
        let term = if self.cp_size > 1 {
            let c = s.div_ceil(2 * u64::from(self.cp_size)).max(1);
            let first = self.fmha(grid, params, b, c, p)?;
            let last = self.fmha(grid, params, b, c, p + s - c.min(s))?;
            first.add(last)
        } else {
            self.fmha(grid, params, b, s, p)?
        };
        let mut out = term.add(OpValue::new(self.extras, 0.0, Source::Empirical));
        if shape.seq_scale != 1.0 {
            out = out.scale(shape.seq_scale);
        }
        Ok(out.finish(self.scale_factor))
    }
}

/// Compiled `GenerationAttention`.
#[derive(Debug)]
pub struct GenerationAttentionEval {
    pub(crate) name: String,
    scale_factor: f64,
    n: f64,
    sol: Result<AttentionSolParams>,
    slice: Result<ResolvedSlice>,
}

impl GenerationAttentionEval {
    pub(crate) fn compile(op: &GenerationAttentionOp, db: &Arc<PerfDatabase>) -> Self {
        let sys = &db.system;
        let key = SliceKey {
            fmha: None,
            kv: op.kv_cache_dtype,
            n_kv_lookup: if op.n_kv == op.n { 0 } else { op.n_kv },
            head: op.head_size,
            window: op.window_size,
        };
        let flops_key = op.kv_cache_dtype.decode_flops_key(sys.gpu.sm_version);
        let sol = sys.flops(op.kv_cache_dtype.as_str(), flops_key).map(|flops| AttentionSolParams {
            head: f64::from(op.head_size),
            window: f64::from(op.window_size),
            n_kv_lookup: f64::from(key.n_kv_lookup),
            kv_bytes: op.kv_cache_dtype.bytes_per_elem(),
            flops,
            mem_bw: sys.gpu.mem_bw,
        });
        let slice =
            resolve_slice(db.generation_attention(), &op.lane_order, key, "generation", &db.label());
        GenerationAttentionEval { name: op.name.clone(), scale_factor: op.scale_factor, n: f64::from(op.n), sol, slice }
    }

    /// Mean of five lookups at `s_min + floor((s_max − s_min)·i/4)`, scale factor included.
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        let params = self.sol.as_ref().map_err(Clone::clone)?;
        let slice = self.slice.as_ref().map_err(Clone::clone)?;
        let grid = slice.grid();
        let s = shape.s as f64;
        let s_min = ((0.9 * s).floor() as u64).max(1);
        let s_max = ((1.1 * s).floor() as u64).max(s_min);
        let b = shape.batch as f64;
        let sol = |c: &[f64]| generation_attention_sol_ms(params, c[0], c[1], c[2]);
        let mut lat = 0.0;
        let mut energy = 0.0;
        for i in 0..5u64 {
            let si = s_min + (s_max - s_min) * i / 4;
            let q = [self.n, b, si as f64];
            let v = grid
                .lookup(&q, &sol)
                .map_err(|m| AicError::perf(anchor_message(&["num_heads", "batch", "seq_len"], &q, m)))?;
            lat += v.latency;
            energy += v.energy;
        }
        let mut out = OpValue::new(lat / 5.0, energy / 5.0, Source::Silicon);
        if shape.gen_scale != 1.0 {
            out = out.scale(shape.gen_scale);
        }
        Ok(out.finish(self.scale_factor))
    }
}
