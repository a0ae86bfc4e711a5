//! Operators (spec 20): what each op asks of the tables and the system description, its
//! analytic formulas, provenance tag and energy. Ops are compiled once against a database
//! (tables, slices and constants resolved up front, errors kept for query time) and then
//! evaluated at many runtime shapes.

mod attention;
mod comm;
mod composite;
mod dsa;
mod dsv4;
mod empirical;
mod gdn;
mod gemm;
mod mamba2;
mod memory;
mod mhc;
mod mla;
mod moe;
mod sol_split;
pub mod util_levels;
mod msa;
mod kda;
mod transfer;

use std::sync::Arc;

use crate::data::tables::PerfDatabase;
use crate::error::Result;
use crate::spec::{DatabaseMode, Op};

pub use attention::{ContextAttentionEval, GenerationAttentionEval};
pub use comm::{CustomAllReduceEval, NcclEval, P2PEval};
pub use composite::{FallbackEval, OverlapEval};
pub use dsa::{context_roofline, full_frac, generation_roofline, DsaDims, DsaEval, DsaRates};
pub use dsv4::{causal_pairs, compressed_pairs, dsv4_roofline, topk_delta, Dsv4Eval, Dsv4Rates};
pub use gdn::{gdn_sol_ms, GdnEval};
pub use gemm::GemmEval;
pub use mamba2::{mamba2_sol_ms, Mamba2Eval};
pub use memory::{ElementwiseEval, EmbeddingEval};
pub use mla::{ContextMlaEval, GenerationMlaEval, MlaBmmEval, MlaModuleEval};
pub use mhc::{mhc_roofline, MhcEval};
pub use moe::{moe_sol_ms, MoeDispatchEval, MoeEval};
pub use sol_split::SolSplit;
pub use kda::{kda_coordinates, kda_sol_ms, KdaEval};
pub use msa::{msa_roofline, MsaEval, MsaRates, MSA_ARCH};
pub use transfer::TransferKinds;

/// Provenance of a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// A measured table answered.
    Silicon,
    /// An analytic memory op or a utilisation estimate.
    Empirical,
    /// The speed-of-light roofline.
    Sol,
    /// A derived estimate (e.g. fp8_static GEMM).
    Estimated,
    /// A combination of different tags.
    Mixed,
}

impl Source {
    /// The tag as the reference spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Silicon => "silicon",
            Source::Empirical => "empirical",
            Source::Sol => "sol",
            Source::Estimated => "estimated",
            Source::Mixed => "mixed",
        }
    }

    /// The tag of two combined results.
    pub fn combine(self, other: Source) -> Source {
        if self == other {
            self
        } else {
            Source::Mixed
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an op returns: latency (ms), energy (W·ms) and provenance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpValue {
    /// Latency in ms.
    pub latency: f64,
    /// Energy in W·ms.
    pub energy: f64,
    /// Provenance tag.
    pub source: Source,
}

impl OpValue {
    /// An all-zero result with a tag.
    pub const fn zero(source: Source) -> Self {
        OpValue { latency: 0.0, energy: 0.0, source }
    }

    /// A result.
    pub const fn new(latency: f64, energy: f64, source: Source) -> Self {
        OpValue { latency, energy, source }
    }

    fn is_zero(&self) -> bool {
        self.latency == 0.0 && self.energy == 0.0
    }

    /// Sum with the zero-neutral tag rule (spec 20 §0.1).
    pub fn add(self, other: OpValue) -> OpValue {
        let source = if other.is_zero() {
            self.source
        } else if self.is_zero() {
            other.source
        } else {
            self.source.combine(other.source)
        };
        OpValue { latency: self.latency + other.latency, energy: self.energy + other.energy, source }
    }

    /// Multiplies latency and energy.
    pub fn scale(self, f: f64) -> OpValue {
        OpValue { latency: self.latency * f, energy: self.energy * f, source: self.source }
    }

    /// Floors latency and energy at 0.
    pub fn clamp(self) -> OpValue {
        OpValue { latency: self.latency.max(0.0), energy: self.energy.max(0.0), source: self.source }
    }

    /// Clamp, then multiply by the op's scale factor (how every leaf op ends).
    pub fn finish(self, scale_factor: f64) -> OpValue {
        self.clamp().scale(scale_factor)
    }
}

/// The runtime shape one op is evaluated at (spec 40 §1.3, §2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Context (prefill) pass or generation (decode) pass.
    pub is_context: bool,
    /// Requests (attention-like ops).
    pub batch: u64,
    /// New tokens per request (context) or KV position (generation).
    pub s: u64,
    /// Cached tokens per request (context attention only).
    pub prefix: u64,
    /// Token count of token-major ops.
    pub x: u64,
    /// Whether `x` was given explicitly (then the logits GEMM does not use the batch).
    pub x_override: bool,
    /// Multiplier for context attention.
    pub seq_scale: f64,
    /// Multiplier for generation attention.
    pub gen_scale: f64,
    /// Where numbers come from (tables, roofline, utilisation estimates).
    pub mode: DatabaseMode,
    /// The transfer kinds the empirical estimates may use (spec 20 §0.4; default all).
    pub transfers: TransferKinds,
}

impl Shape {
    /// Context shape: `x = batch × s` unless overridden.
    pub fn context(batch: u64, s: u64, prefix: u64, seq_scale: f64, x: Option<u64>) -> Shape {
        Shape {
            is_context: true,
            batch,
            s,
            prefix,
            x: x.unwrap_or(batch.saturating_mul(s)),
            x_override: x.is_some(),
            seq_scale,
            gen_scale: 1.0,
            mode: DatabaseMode::Silicon,
            transfers: TransferKinds::ALL,
        }
    }

    /// Generation shape: `x = batch × max(beam, 1)` unless overridden.
    pub fn generation(batch: u64, beam: u64, s: u64, gen_scale: f64, prefix: u64, x: Option<u64>) -> Shape {
        Shape {
            is_context: false,
            batch,
            s,
            prefix,
            x: x.unwrap_or(batch.saturating_mul(beam.max(1))),
            x_override: x.is_some(),
            seq_scale: 1.0,
            gen_scale,
            mode: DatabaseMode::Silicon,
            transfers: TransferKinds::ALL,
        }
    }

    /// The same shape under another database mode.
    pub fn with_mode(self, mode: DatabaseMode) -> Shape {
        Shape { mode, ..self }
    }

    /// The same shape under another transfer policy.
    pub fn with_transfers(self, transfers: TransferKinds) -> Shape {
        Shape { transfers, ..self }
    }

    /// True in the analytic roofline mode.
    pub fn is_sol(&self) -> bool {
        self.mode == DatabaseMode::Sol
    }
}

/// `ceil(a / b)` for token counts (b ≥ 1).
#[inline]
pub(crate) fn ceil_div(a: u64, b: u32) -> u64 {
    let b = u64::from(b.max(1));
    a.div_ceil(b)
}

/// An op compiled against a database.
#[derive(Debug)]
pub enum CompiledOp {
    Gemm(GemmEval),
    Embedding(EmbeddingEval),
    Elementwise(ElementwiseEval),
    CustomAllReduce(CustomAllReduceEval),
    Nccl(NcclEval),
    P2P(P2PEval),
    ContextAttention(ContextAttentionEval),
    GenerationAttention(GenerationAttentionEval),
    Moe(MoeEval),
    MoeDispatch(MoeDispatchEval),
    ContextMla(ContextMlaEval),
    GenerationMla(GenerationMlaEval),
    MlaBmm(MlaBmmEval),
    MlaModule(MlaModuleEval),
    Overlap(OverlapEval),
    Fallback(FallbackEval),
    Dsa(DsaEval),
    Gdn(GdnEval),
    Mamba2(Mamba2Eval),
    Mhc(MhcEval),
    Dsv4(Dsv4Eval),
    Msa(MsaEval),
    Kda(KdaEval),
}

impl CompiledOp {
    /// Compiles a wire op; data problems are kept and reported when the op is evaluated.
    pub fn compile(op: &Op, db: &Arc<PerfDatabase>) -> CompiledOp {
        match op {
            Op::Gemm(o) => CompiledOp::Gemm(GemmEval::compile(o, db)),
            Op::Embedding(o) => CompiledOp::Embedding(EmbeddingEval::compile(o, db)),
            Op::Elementwise(o) => CompiledOp::Elementwise(ElementwiseEval::compile(o, db)),
            Op::CustomAllReduce(o) => CompiledOp::CustomAllReduce(CustomAllReduceEval::compile(o, db)),
            Op::Nccl(o) => CompiledOp::Nccl(NcclEval::compile(o, db)),
            Op::P2P(o) => CompiledOp::P2P(P2PEval::compile(o, db)),
            Op::ContextAttention(o) => CompiledOp::ContextAttention(ContextAttentionEval::compile(o, db)),
            Op::GenerationAttention(o) => {
                CompiledOp::GenerationAttention(GenerationAttentionEval::compile(o, db))
            }
            Op::Moe(o) => CompiledOp::Moe(MoeEval::compile(o, db)),
            Op::MoeDispatch(o) => CompiledOp::MoeDispatch(MoeDispatchEval::compile(o, db)),
            Op::ContextMla(o) => CompiledOp::ContextMla(ContextMlaEval::compile(o, db)),
            Op::GenerationMla(o) => CompiledOp::GenerationMla(GenerationMlaEval::compile(o, db)),
            Op::MlaBmm(o) => CompiledOp::MlaBmm(MlaBmmEval::compile(o, db)),
            Op::MlaModuleContext(o) => CompiledOp::MlaModule(MlaModuleEval::compile(o, true, db)),
            Op::MlaModuleGeneration(o) => CompiledOp::MlaModule(MlaModuleEval::compile(o, false, db)),
            Op::Overlap(o) => CompiledOp::Overlap(OverlapEval::compile(o, db)),
            Op::Fallback(o) => CompiledOp::Fallback(FallbackEval::compile(o, db)),
            Op::DsaContext(o) => CompiledOp::Dsa(DsaEval::compile(o, true, db)),
            Op::DsaGeneration(o) => CompiledOp::Dsa(DsaEval::compile(o, false, db)),
            Op::Gdn(o) => CompiledOp::Gdn(GdnEval::compile(o, db)),
            Op::Mamba2(o) => CompiledOp::Mamba2(Mamba2Eval::compile(o, db)),
            Op::Mhc(o) => CompiledOp::Mhc(MhcEval::compile(o, db)),
            Op::Dsv4Context(o) => CompiledOp::Dsv4(Dsv4Eval::compile(o, true, db)),
            Op::Dsv4Generation(o) => CompiledOp::Dsv4(Dsv4Eval::compile(o, false, db)),
            Op::MsaContext(o) => CompiledOp::Msa(MsaEval::compile(o, true, db)),
            Op::MsaGeneration(o) => CompiledOp::Msa(MsaEval::compile(o, false, db)),
            Op::Kda(o) => CompiledOp::Kda(KdaEval::compile(o, db)),
        }
    }

    /// Turns on the sibling GEMM-quant transfer of a DSA module's empirical estimate
    /// ([`DsaEval::allow_quant_transfer`]); every other op is unchanged.
    pub(crate) fn allow_quant_transfer(&mut self) {
        match self {
            CompiledOp::Dsa(o) => o.allow_quant_transfer(),
            CompiledOp::Overlap(o) => o.allow_quant_transfer(),
            CompiledOp::Fallback(o) => o.allow_quant_transfer(),
            _ => {}
        }
    }

    /// The op's name.
    pub fn name(&self) -> &str {
        match self {
            CompiledOp::Gemm(o) => &o.name,
            CompiledOp::Embedding(o) => &o.name,
            CompiledOp::Elementwise(o) => &o.name,
            CompiledOp::CustomAllReduce(o) => &o.name,
            CompiledOp::Nccl(o) => &o.name,
            CompiledOp::P2P(o) => &o.name,
            CompiledOp::ContextAttention(o) => &o.name,
            CompiledOp::GenerationAttention(o) => &o.name,
            CompiledOp::Moe(o) => &o.name,
            CompiledOp::MoeDispatch(o) => &o.name,
            CompiledOp::ContextMla(o) => &o.name,
            CompiledOp::GenerationMla(o) => &o.name,
            CompiledOp::MlaBmm(o) => &o.name,
            CompiledOp::MlaModule(o) => &o.name,
            CompiledOp::Overlap(o) => &o.name,
            CompiledOp::Fallback(o) => &o.name,
            CompiledOp::Dsa(o) => &o.name,
            CompiledOp::Gdn(o) => &o.name,
            CompiledOp::Mamba2(o) => &o.name,
            CompiledOp::Mhc(o) => &o.name,
            CompiledOp::Dsv4(o) => &o.name,
            CompiledOp::Msa(o) => &o.name,
            CompiledOp::Kda(o) => &o.name,
        }
    }

    /// Evaluates the op at a runtime shape (its own scale factor included).
    pub fn eval(&self, shape: &Shape) -> Result<OpValue> {
        match self {
            CompiledOp::Gemm(o) => o.eval(shape),
            CompiledOp::Embedding(o) => Ok(o.eval(shape)),
            CompiledOp::Elementwise(o) => Ok(o.eval(shape)),
            CompiledOp::CustomAllReduce(o) => o.eval(shape),
            CompiledOp::Nccl(o) => o.eval(shape),
            CompiledOp::P2P(o) => Ok(o.eval(shape)),
            CompiledOp::ContextAttention(o) => o.eval(shape),
            CompiledOp::GenerationAttention(o) => o.eval(shape),
            CompiledOp::Moe(o) => o.eval(shape),
            CompiledOp::MoeDispatch(o) => o.eval(shape),
            CompiledOp::ContextMla(o) => o.eval(shape),
            CompiledOp::GenerationMla(o) => o.eval(shape),
            CompiledOp::MlaBmm(o) => o.eval(shape),
            CompiledOp::MlaModule(o) => o.eval(shape),
            CompiledOp::Overlap(o) => o.eval(shape),
            CompiledOp::Fallback(o) => o.eval(shape),
            CompiledOp::Dsa(o) => o.eval(shape),
            CompiledOp::Gdn(o) => o.eval(shape),
            CompiledOp::Mamba2(o) => o.eval(shape),
            CompiledOp::Mhc(o) => o.eval(shape),
            CompiledOp::Dsv4(o) => o.eval(shape),
            CompiledOp::Msa(o) => o.eval(shape),
            CompiledOp::Kda(o) => o.eval(shape),
        }
    }

    /// The op's SOL time with its compute and memory parts (spec 20 §0.7), evaluated in SOL
    /// mode whatever the shape's mode. `time_ms` equals the SOL-mode [`CompiledOp::eval`]
    /// latency. Ops without a published split give zeros when their SOL result is zero and a
    /// [`crate::AicError::NoSolDecomposition`] otherwise.
    pub fn eval_sol(&self, shape: &Shape) -> Result<SolSplit> {
        let shape = &shape.with_mode(DatabaseMode::Sol);
        match self {
            CompiledOp::Gemm(o) => o.sol_split(shape),
            CompiledOp::Embedding(o) => Ok(o.sol_split(shape)),
            CompiledOp::Elementwise(o) => Ok(o.sol_split(shape)),
            CompiledOp::CustomAllReduce(o) => Ok(o.sol_split(shape)),
            CompiledOp::Nccl(o) => Ok(o.sol_split(shape)),
            CompiledOp::P2P(o) => Ok(o.sol_split(shape)),
            CompiledOp::ContextAttention(o) => o.sol_split(shape),
            CompiledOp::GenerationAttention(o) => o.sol_split(shape),
            CompiledOp::Moe(o) => o.sol_split(shape),
            CompiledOp::MoeDispatch(o) => sol_split::undecomposed(&o.name, "MoeDispatch", o.eval(shape)?),
            CompiledOp::ContextMla(o) => o.sol_split(shape),
            CompiledOp::GenerationMla(o) => o.sol_split(shape),
            CompiledOp::MlaBmm(o) => o.sol_split(shape),
            CompiledOp::MlaModule(o) => o.sol_split(shape),
            CompiledOp::Overlap(o) => sol_split::undecomposed(&o.name, "Overlap", o.eval(shape)?),
            CompiledOp::Fallback(o) => o.sol_split(shape),
            CompiledOp::Dsa(o) => o.sol_split(shape),
            CompiledOp::Gdn(o) => o.sol_split(shape),
            CompiledOp::Mamba2(o) => o.sol_split(shape),
            CompiledOp::Mhc(o) => o.sol_split(shape),
            CompiledOp::Dsv4(o) => o.sol_split(shape),
            CompiledOp::Msa(o) => o.sol_split(shape),
            CompiledOp::Kda(o) => o.sol_split(shape),
        }
    }
}

/// The generic mode dispatch of a table-backed op (spec 20 §0.4): SOL → roofline; EMPIRICAL →
/// utilisation estimate; SILICON → table; HYBRID → table, estimate on a missing-data error.
pub(crate) fn by_mode(
    mode: DatabaseMode,
    sol: impl FnOnce() -> Result<OpValue>,
    silicon: impl FnOnce() -> Result<OpValue>,
    empirical: impl FnOnce() -> Result<OpValue>,
) -> Result<OpValue> {
    match mode {
        DatabaseMode::Sol => sol(),
        DatabaseMode::Empirical => empirical(),
        DatabaseMode::Silicon => silicon(),
        DatabaseMode::Hybrid => match silicon() {
            Err(e) if e.is_perf_data_missing() => empirical(),
            other => other,
        },
    }
}

/// Sums a list of ops from an empty `(0, 0, empirical)` accumulator (composite groups).
pub(crate) fn sum_group(ops: &[CompiledOp], shape: &Shape) -> Result<OpValue> {
    let mut acc = OpValue::zero(Source::Empirical);
    for op in ops {
        acc = acc.add(op.eval(shape)?);
    }
    Ok(acc)
}
