//! The SOL decomposition entry point (spec 20 §0.7, 40 §9): an op list evaluated under the
//! analytic speed-of-light view, each op reported with its SOL time and the compute and
//! memory parts behind it. It answers "how far is each op from its roofline, and which
//! roof is it under", which the scalar per-op evaluation cannot show.

use crate::error::{AicError, Result};
use crate::ops::{CompiledOp, Shape, SolSplit};
use crate::spec::{DatabaseMode, Op};

use super::Engine;

/// One name-folded entry of [`Engine::evaluate_ops_sol`]: `(name, sol_time, sol_math, sol_mem)`.
#[derive(Debug, Clone, PartialEq)]
pub struct SolResult {
    /// Top-level op name.
    pub name: String,
    /// SOL time, ms (the SOL-mode latency of the op).
    pub sol_time_ms: f64,
    /// Compute part, ms.
    pub sol_math_ms: f64,
    /// Memory part, ms.
    pub sol_mem_ms: f64,
}

/// Adds an op's split to the entry of its name (first-appearance order).
fn fold(entries: &mut Vec<SolResult>, name: &str, split: SolSplit) {
    match entries.iter_mut().find(|e| e.name == name) {
        Some(e) => {
            e.sol_time_ms += split.time_ms;
            e.sol_math_ms += split.math_ms;
            e.sol_mem_ms += split.mem_ms;
        }
        None => entries.push(SolResult {
            name: name.to_string(),
            sol_time_ms: split.time_ms,
            sol_math_ms: split.math_ms,
            sol_mem_ms: split.mem_ms,
        }),
    }
}

impl Engine {
    /// Evaluates an op list in SOL mode (whatever the engine's database mode) at one shape and
    /// returns, per op name (folded like [`Engine::evaluate_ops_json`]), the SOL time with its
    /// compute and memory parts. Arguments as in [`Engine::evaluate_ops_json`].
    ///
    /// Ops whose SOL path publishes no split (MoeDispatch, Overlap, a Fallback answered by its
    /// chain) contribute zeros when their SOL result is zero and fail with
    /// [`AicError::NoSolDecomposition`] otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn evaluate_ops_sol(
        &self,
        ops: &[Op],
        is_context: bool,
        batch_size: u32,
        s: u32,
        prefix: u32,
        imbalance: f64,
        x: Option<u64>,
    ) -> Result<Vec<SolResult>> {
        // A compute call like any other: it resets `last_provenance` (SOL notes no tier).
        let _call = super::provenance::CallScope::start();
        // The same argument checks as `evaluate_ops_json`.
        crate::spec::validate_ops("ops", ops)?;
        super::check_scale("imbalance_correction_scale", imbalance)?;
        let (b, s, p) = (u64::from(batch_size), u64::from(s), u64::from(prefix));
        let shape = if is_context {
            Shape::context(b, s, p, imbalance, x)
        } else {
            Shape::generation(b, 1, s, imbalance, p, x)
        }
        .with_mode(DatabaseMode::Sol);
        let mut entries = Vec::new();
        for op in ops {
            let compiled = CompiledOp::compile(op, self.database());
            fold(&mut entries, compiled.name(), compiled.eval_sol(&shape)?);
        }
        // The same overflow rule as every other estimate (`evaluate_ops_json` raises for the
        // same op and arguments).
        for e in &entries {
            let what = format!("the SOL estimate of op \"{}\"", e.name);
            for v in [e.sol_time_ms, e.sol_math_ms, e.sol_mem_ms] {
                super::finite_total(&what, v)?;
            }
        }
        Ok(entries)
    }

    /// [`Engine::evaluate_ops_sol`] on an op list given as JSON (an array in the spec
    /// encoding, as [`Engine::evaluate_ops_json`] takes it).
    #[allow(clippy::too_many_arguments)]
    pub fn evaluate_ops_sol_json(
        &self,
        ops_json: &str,
        is_context: bool,
        batch_size: u32,
        s: u32,
        prefix: u32,
        imbalance: f64,
        x: Option<u64>,
    ) -> Result<Vec<SolResult>> {
        let ops: Vec<Op> = serde_json::from_str(ops_json)
            .map_err(|e| AicError::config(format!("evaluate_ops_sol_json: invalid op list JSON: {e}")))?;
        self.evaluate_ops_sol(&ops, is_context, batch_size, s, prefix, imbalance, x)
    }
}
