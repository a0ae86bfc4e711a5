//! Analytic memory ops (spec 20 §2, §3): element-wise kernels and the embedding gather are
//! priced as bytes moved at the system's effective bandwidth plus a constant latency.

use std::sync::Arc;

use crate::data::tables::PerfDatabase;
use crate::spec::{ElementwiseOp, EmbeddingOp};

use super::{ceil_div, OpValue, Shape, SolSplit, Source};

/// `MemOp(bytes)`: bytes at the effective bandwidth plus the constant latency (tag
/// `empirical`), or bytes at the raw bandwidth in SOL mode (tag `sol`).
pub(crate) fn mem_op(db: &PerfDatabase, shape: &Shape, bytes: f64) -> OpValue {
    if shape.is_sol() {
        mem_op_sol(db, bytes).value(Source::Sol)
    } else {
        OpValue::new(db.system.mem_op_ms(bytes), 0.0, Source::Empirical)
    }
}

/// `MemOpSOL(bytes)` with its parts: pure memory, `(0, time)`.
pub(crate) fn mem_op_sol(db: &PerfDatabase, bytes: f64) -> SolSplit {
    SolSplit::memory(db.system.mem_op_sol_ms(bytes))
}

/// Compiled `Elementwise`.
#[derive(Debug)]
pub struct ElementwiseEval {
    pub(crate) name: String,
    scale_factor: f64,
    bytes_per_token: f64,
    scale_num_tokens: u32,
    seq_split: u32,
    db: Arc<PerfDatabase>,
}

impl ElementwiseEval {
    pub(crate) fn compile(op: &ElementwiseOp, db: &Arc<PerfDatabase>) -> Self {
        ElementwiseEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            bytes_per_token: op.bytes_per_token,
            scale_num_tokens: op.scale_num_tokens,
            seq_split: op.seq_split,
            db: db.clone(),
        }
    }

    /// `MemOp(bytes_per_token · ceil(floor(x / scale_num_tokens) / seq_split))`.
    pub fn eval(&self, shape: &Shape) -> OpValue {
        mem_op(&self.db, shape, self.bytes(shape)).finish(self.scale_factor)
    }

    /// The SOL-mode answer with its parts: `(0, MemOpSOL)`, scaled.
    pub(crate) fn sol_split(&self, shape: &Shape) -> SolSplit {
        mem_op_sol(&self.db, self.bytes(shape)).finish(self.scale_factor)
    }

    fn bytes(&self, shape: &Shape) -> f64 {
        let t = ceil_div(shape.x / u64::from(self.scale_num_tokens.max(1)), self.seq_split);
        self.bytes_per_token * t as f64
    }
}

/// Compiled `Embedding`.
#[derive(Debug)]
pub struct EmbeddingEval {
    pub(crate) name: String,
    scale_factor: f64,
    row_bytes: f64,
    seq_split: u32,
    db: Arc<PerfDatabase>,
}

impl EmbeddingEval {
    pub(crate) fn compile(op: &EmbeddingOp, db: &Arc<PerfDatabase>) -> Self {
        EmbeddingEval {
            name: op.name.clone(),
            scale_factor: op.scale_factor,
            row_bytes: f64::from(op.hidden_size) * op.quant_mode.bytes_per_elem(),
            seq_split: op.seq_split,
            db: db.clone(),
        }
    }

    /// `MemOp(ceil(x / seq_split) · hidden · bytes_per_elem)`.
    pub fn eval(&self, shape: &Shape) -> OpValue {
        mem_op(&self.db, shape, self.bytes(shape)).finish(self.scale_factor)
    }

    /// The SOL-mode answer with its parts: `(0, MemOpSOL)`, scaled.
    pub(crate) fn sol_split(&self, shape: &Shape) -> SolSplit {
        mem_op_sol(&self.db, self.bytes(shape)).finish(self.scale_factor)
    }

    fn bytes(&self, shape: &Shape) -> f64 {
        ceil_div(shape.x, self.seq_split) as f64 * self.row_bytes
    }
}
