//! One serving worker: a compiled engine with what the serving layer needs besides the step
//! engine (model facts for the memory model, the system's memory, the labels the result rows
//! report) and the memory model per mode (spec 50 §5).

use std::sync::Arc;

use serde::Deserialize;

use crate::data::system::SystemSpec;
use crate::engine::Engine;
use super::error::Result;
use crate::memory::{memory_usage, MemoryUsageParams, ModelFacts, MtpScaling, GIB};
use crate::spec::Backend;

use super::numeric::py_round3;
use super::row::Row;

/// The names a result row reports for a worker (spec 50 §8): resolved quant modes and the MoE
/// widths as the reference shows them (`None` for dense models in `cli_estimate`, 1 in sweeps).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WorkerLabels {
    /// GEMM quant mode name.
    pub gemm: String,
    /// KV-cache quant mode name.
    pub kvcache: String,
    /// FMHA quant mode name.
    pub fmha: String,
    /// MoE quant mode name.
    pub moe: String,
    /// Communication quant mode name.
    pub comm: String,
    /// MoE tensor-parallel width as reported.
    pub moe_tp: Option<u32>,
    /// MoE expert-parallel width as reported.
    pub moe_ep: Option<u32>,
}

/// A worker: engine, facts, system and labels.
#[derive(Debug, Clone)]
pub struct Worker {
    /// The compiled engine (its spec carries backend, version and parallelism).
    pub engine: Arc<Engine>,
    /// Model facts for the memory model.
    pub facts: Arc<ModelFacts>,
    /// The system the worker runs on.
    pub system: Arc<SystemSpec>,
    /// Names reported in rows.
    pub labels: WorkerLabels,
}

/// Memory per GPU in GiB, as the reference reports it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryGib {
    /// Sum of the five components.
    pub total: f64,
    /// Weights.
    pub weights: f64,
    /// Activations.
    pub activations: f64,
    /// KV cache of the batch.
    pub kvcache: f64,
    /// NCCL buffers.
    pub nccl: f64,
    /// Runtime overhead.
    pub others: f64,
}

impl MemoryGib {
    /// The record as JSON text (`total, weights, activations, kvcache, nccl, others`).
    pub fn to_json_text(&self) -> String {
        let f = |x: f64| serde_json::Value::from(x).to_string();
        format!(
            "{{\"total\": {}, \"weights\": {}, \"activations\": {}, \"kvcache\": {}, \"nccl\": {}, \"others\": {}}}",
            f(self.total),
            f(self.weights),
            f(self.activations),
            f(self.kvcache),
            f(self.nccl),
            f(self.others)
        )
    }
}

/// How the memory of one evaluation is taken (spec 50 §5.2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryArgs {
    /// Requests resident.
    pub batch: u64,
    /// Tokens for the activations; 0 means `(isl − prefix) · batch`.
    pub tokens: u64,
    /// KV length per request.
    pub kv_seq: u64,
    /// MTP activation scaling.
    pub mtp: MtpScaling,
}

/// The two memory verdicts (spec 50 §5.3, §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// `total ≥ capacity`.
    pub oom: bool,
    /// The KV cache of the batch exceeds the KV budget (only evaluated when not OOM).
    pub kv_over: bool,
}

/// Which KV-budget fraction rule a role uses (spec 50 §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetRole {
    /// `cli_estimate` agg (SGLang: the fixed 0.88).
    Agg,
    /// Static modes and disagg workers (SGLang: the derived `mem_fraction_static`).
    Worker,
}

impl Worker {
    /// Tensor, pipeline and attention-DP sizes of the worker.
    pub fn tp_pp_dp(&self) -> (u32, u32, u32) {
        let e = &self.engine.spec().engine;
        (e.tp_size.max(1), e.pp_size.max(1), e.attention_dp_size.max(1))
    }

    /// Context-parallel width of the worker (`engine.cp_size`, at least 1; spec 43 §8): it
    /// multiplies the worker's GPU count and divides its per-GPU throughputs.
    pub fn cp(&self) -> u32 {
        self.engine.spec().engine.cp_size.max(1)
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.engine.spec().engine.backend
    }

    /// The backend version label.
    pub fn version(&self) -> &str {
        self.engine.spec().engine.backend_version.as_deref().unwrap_or("")
    }

    /// The model path.
    pub fn model(&self) -> &str {
        &self.engine.spec().engine.model_name
    }

    /// The system name.
    pub fn system_name(&self) -> &str {
        &self.engine.spec().engine.system_name
    }

    /// Draft depth (`nextn`).
    pub fn nextn(&self) -> u32 {
        self.engine.spec().engine.nextn()
    }

    /// `tp{tp}pp{pp}dp{dp}etp{moe_tp}ep{moe_ep}` (spec 50 §8), followed by `cp{cp}` when the
    /// worker is context-parallel (spec 43 §8).
    pub fn parallel(&self) -> String {
        let (tp, pp, dp) = self.tp_pp_dp();
        let opt = |v: Option<u32>| v.map_or("None".to_string(), |v| v.to_string());
        let mut label = format!("tp{tp}pp{pp}dp{dp}etp{}ep{}", opt(self.labels.moe_tp), opt(self.labels.moe_ep));
        let cp = self.cp();
        if cp > 1 {
            label.push_str(&format!("cp{cp}"));
        }
        label
    }

    /// Writes the worker's layout columns of a result row, in the reference's column order:
    /// `num_total_gpus`, the parallel sizes, the `parallel` label and the quant labels.
    pub fn set_layout_columns(&self, row: &mut Row) {
        let (tp, pp, dp) = self.tp_pp_dp();
        let cp = self.cp();
        row.set("num_total_gpus", i64::from(tp * pp * dp * cp));
        row.set("tp", tp);
        row.set("pp", pp);
        row.set("dp", dp);
        row.set("moe_tp", self.labels.moe_tp);
        row.set("moe_ep", self.labels.moe_ep);
        row.set("cp", cp);
        row.set("parallel", self.parallel());
        row.set("gemm", self.labels.gemm.as_str());
        row.set("kvcache", self.labels.kvcache.as_str());
        row.set("fmha", self.labels.fmha.as_str());
        row.set("moe", self.labels.moe.as_str());
        row.set("comm", self.labels.comm.as_str());
    }

    /// GPU memory capacity in GiB.
    pub fn capacity_gib(&self) -> f64 {
        self.system.gpu.mem_capacity as f64 / GIB
    }

    /// The memory model of spec 41 §5 with the serving layer's arguments, in GiB.
    pub fn memory(&self, isl: u64, osl: u64, prefix: u64, args: MemoryArgs) -> Result<MemoryGib> {
        let params = MemoryUsageParams {
            batch_size: args.batch,
            num_tokens: args.tokens,
            isl,
            osl,
            prefix,
            beam_width: 1,
            max_seq_len: Some(args.kv_seq),
            mtp_scaling: args.mtp,
        };
        let u = memory_usage(self.engine.spec(), &self.facts, &self.system, &params)?;
        let weights = u.weights / GIB;
        let activations = u.activations / GIB;
        let kvcache = u.kv_cache / GIB;
        let nccl = u.nccl / GIB;
        let others = u.others / GIB;
        Ok(MemoryGib {
            total: weights + activations + kvcache + nccl + others,
            weights,
            activations,
            kvcache,
            nccl,
            others,
        })
    }

    /// The default KV fraction `f` of the backend for a role (spec 50 §5.3 table).
    pub fn default_fraction(&self, role: BudgetRole) -> f64 {
        match self.backend() {
            Backend::Trtllm => 0.9,
            Backend::Vllm => {
                let v = self.version();
                if v.starts_with("0.14") || v.starts_with("0.19") {
                    0.9
                } else {
                    0.92
                }
            }
            Backend::Sglang => match role {
                BudgetRole::Agg => 0.88,
                BudgetRole::Worker => self.sglang_mem_fraction_static(),
            },
        }
    }

    /// SGLang's derived `mem_fraction_static` (spec 50 §5.3).
    fn sglang_mem_fraction_static(&self) -> f64 {
        let m = self.system.gpu.mem_capacity as f64 / 1_048_576.0;
        let (tp, pp, dp) = self.tp_pp_dp();
        let (chunk, g): (f64, f64) = if m < 20480.0 {
            (2048.0, 8.0)
        } else if m < 35840.0 {
            (2048.0, if tp < 4 { 24.0 } else { 80.0 })
        } else if m < 61440.0 {
            (4096.0, if tp < 4 { 32.0 } else { 160.0 })
        } else if m < 163_840.0 {
            (8192.0, if tp < 4 { 256.0 } else { 512.0 })
        } else {
            (16384.0, 512.0)
        };
        let mut r = 512.0 + 1.5 * chunk + f64::from(tp) * f64::from(pp) / 8.0 * 1024.0 + 2.0 * g;
        if dp > 1 {
            r += 3.0 * g * f64::from(dp);
            if g > 300.0 {
                r += 1.5 * g * f64::from(dp);
            }
        }
        if m > 61440.0 {
            r = r.max(10240.0);
        }
        py_round3((m - r) / m)
    }

    /// OOM and KV-budget verdicts of a memory record (spec 50 §5.3, §5.4).
    pub fn verdict(&self, mem: &MemoryGib, fraction: Option<f64>, role: BudgetRole) -> Verdict {
        let cap = self.capacity_gib();
        if mem.total >= cap {
            return Verdict { oom: true, kv_over: false };
        }
        let f = fraction.unwrap_or_else(|| self.default_fraction(role));
        let kv = mem.kvcache;
        let non_kv = mem.total - kv;
        let budget = match self.backend() {
            Backend::Trtllm => (cap - non_kv) * f * ((1.0 - 0.015) * (1.0 - 0.02)),
            Backend::Vllm | Backend::Sglang => cap * f * ((1.0 - 0.0) * (1.0 - 0.02)) - non_kv,
        };
        Verdict { oom: false, kv_over: kv > budget }
    }
}
