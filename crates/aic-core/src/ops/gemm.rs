//! GEMM (spec 20 §1, 11 §2): scattered-sites lookup at `m = ceil(floor(x / scale_num_tokens)
//! / seq_split)`, the SOL fallback for `below_grid_sol` shapes, and `fp8_static` priced as the
//! fp8 GEMM minus the quantisation kernels.

use std::sync::Arc;

use crate::data::tables::{GemmTable, PerfDatabase, QuantizeKernel, QuantizeTable};
use crate::error::{AicError, Result};
use crate::lookup::sol::gemm_sol_ms;
use crate::lookup::{anchor_message, Miss};
use crate::spec::{GemmOp, GemmQuant};

use super::{ceil_div, OpValue, Shape, Source};

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
    /// `fp8_static` only: the compute-scale and (with low-precision input) scale-matrix tables.
    quantize: Vec<Result<Arc<QuantizeTable>>>,
    db: Arc<PerfDatabase>,
}

impl GemmEval {
    pub(crate) fn compile(op: &GemmOp, db: &Arc<PerfDatabase>) -> Self {
        let flops = db.system.flops(op.quant_mode.as_str(), op.quant_mode.flops_key());
        let table = match &flops {
            Ok(_) => db.gemm(),
            Err(e) => Err(e.clone()),
        };
        let mut quantize = Vec::new();
        if op.quant_mode == GemmQuant::Fp8Static {
            quantize.push(db.quantize(QuantizeKernel::ComputeScale));
            if op.low_precision_input {
                quantize.push(db.quantize(QuantizeKernel::ScaleMatrix));
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
            quantize,
            db: db.clone(),
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
        let table = self.table.as_ref().map_err(Clone::clone)?;
        let table_quant = self.quant.table_name();
        let sites = table
            .quant(table_quant)
            .ok_or_else(|| table.quant_missing(table_quant, &self.db.label()))?;
        let mut value = match sites.lookup(m, self.n, self.k, &sol) {
            Ok(v) => OpValue::new(v.latency, v.energy, Source::Silicon),
            Err(_) if self.below_grid_sol => {
                OpValue::new(sol(m, self.n as f64, self.k as f64), 0.0, Source::Sol)
            }
            Err(miss) => return Err(self.miss(m, miss)),
        };
        if self.quant == GemmQuant::Fp8Static {
            // fp8 GEMM minus the quantisation kernels, floored at the GEMM's own SOL.
            let (mut latency, mut energy) = (value.latency, value.energy);
            for table in &self.quantize {
                let table = table.as_ref().map_err(Clone::clone)?;
                let (l, e) = self.quantize_kernel(table, m)?;
                latency -= l;
                energy -= e;
            }
            let floor = sol(m, self.n as f64, self.k as f64);
            value = OpValue::new(latency.max(floor), energy, Source::Estimated);
        }
        Ok(value.finish(self.scale_factor))
    }

    /// A quantisation kernel at `(m, k)`, clamped into the collected rectangle; the
    /// scale-matrix kernel is rescaled by its SOL ratio when clamped.
    fn quantize_kernel(&self, table: &QuantizeTable, m: f64) -> Result<(f64, f64)> {
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
