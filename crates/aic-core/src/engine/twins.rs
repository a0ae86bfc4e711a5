//! Identical-op sharing within one phase walk (performance only; answers are bit-identical).
//!
//! Hybrid-attention specs (spec 35) repeat whole op blocks per layer type: Llama-4's global and
//! sliding blocks differ only in the attention window, so their norms, GEMMs, MoE and dispatch
//! ops are the same op under another name and scale factor. Every leaf op ends with
//! `clamp().scale(scale_factor)` (`OpValue::finish`) and reads its scale factor nowhere else,
//! so a twin's value is the unscaled value of one representative (compiled with scale factor
//! 1, whose `finish` is an exact no-op scaling) times the twin's own scale factor — the same
//! bits the twin's own evaluation would give, for a fraction of the work.

use std::sync::Arc;

use serde_json::Value;

use crate::data::tables::PerfDatabase;
use crate::error::Result;
use crate::ops::{CompiledOp, OpValue, Shape};
use crate::spec::Op;

/// Representatives one phase may share (more distinct twin groups are evaluated on their own).
const MAX_GROUPS: usize = 16;

/// How one op of a phase is evaluated.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// By itself.
    Own,
    /// As representative `group` (unscaled) times this op's scale factor.
    Shared { group: usize, scale: f64 },
}

/// The sharing plan of one phase's op list.
#[derive(Debug)]
pub(crate) struct Twins {
    slots: Vec<Slot>,
    reps: Vec<CompiledOp>,
}

/// The op without its name and scale factor, and its scale factor, when it is a leaf op worth
/// sharing (composites sum members with scale factors of their own and are never shared; the
/// closed-form memory ops cost less than the sharing).
fn identity(op: &Op) -> Option<(Value, f64)> {
    if matches!(op, Op::Fallback(_) | Op::Overlap(_) | Op::Elementwise(_) | Op::Embedding(_) | Op::P2P(_)) {
        return None;
    }
    let mut v = serde_json::to_value(op).ok()?;
    let inner = v.as_object_mut()?.values_mut().next()?.as_object_mut()?;
    inner.remove("name")?;
    let scale = inner.remove("scale_factor")?.as_f64()?;
    Some((v, scale))
}

/// `op` with scale factor 1.
fn unscaled(op: &Op) -> Option<Op> {
    let mut v = serde_json::to_value(op).ok()?;
    let inner = v.as_object_mut()?.values_mut().next()?.as_object_mut()?;
    inner.insert("scale_factor".into(), Value::from(1.0));
    serde_json::from_value(v).ok()
}

impl Twins {
    /// No sharing: every op evaluates by itself.
    pub(crate) fn none(len: usize) -> Twins {
        Twins { slots: vec![Slot::Own; len], reps: Vec::new() }
    }

    /// Groups the ops of one phase that differ only in name and scale factor.
    pub(crate) fn plan(ops: &[Op], db: &Arc<PerfDatabase>) -> Twins {
        let ids: Vec<Option<(Value, f64)>> = ops.iter().map(identity).collect();
        let mut twins = Twins::none(ops.len());
        let mut group_of: Vec<Option<usize>> = vec![None; ops.len()];
        for i in 0..ops.len() {
            let Some((id, _)) = &ids[i] else { continue };
            if group_of[i].is_some() {
                continue;
            }
            let members: Vec<usize> =
                (i + 1..ops.len()).filter(|&j| ids[j].as_ref().is_some_and(|(other, _)| other == id)).collect();
            if members.is_empty() || twins.reps.len() == MAX_GROUPS {
                continue;
            }
            let Some(rep) = unscaled(&ops[i]) else { continue };
            let group = twins.reps.len();
            twins.reps.push(CompiledOp::compile(&rep, db));
            for j in std::iter::once(i).chain(members) {
                group_of[j] = Some(group);
                let scale = ids[j].as_ref().map_or(1.0, |(_, s)| *s);
                twins.slots[j] = Slot::Shared { group, scale };
            }
        }
        twins
    }

    /// Turns on the DSA sibling GEMM-quant transfer in the representatives.
    pub(crate) fn allow_quant_transfer(&mut self) {
        self.reps.iter_mut().for_each(CompiledOp::allow_quant_transfer);
    }

    /// Whether no op is shared (the walk can skip the plan).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.reps.is_empty()
    }

    /// Evaluates op `i` of the phase (`op` is that op), sharing representatives within one walk
    /// through `memo`.
    #[inline]
    pub(crate) fn eval(&self, i: usize, op: &CompiledOp, shape: &Shape, memo: &mut Memo) -> Result<OpValue> {
        match self.slots[i] {
            Slot::Own => op.eval(shape),
            Slot::Shared { group, scale } => {
                let base = match memo.0[group] {
                    Some(v) => v,
                    None => {
                        let v = self.reps[group].eval(shape)?;
                        memo.0[group] = Some(v);
                        v
                    }
                };
                Ok(base.scale(scale))
            }
        }
    }
}

/// The representatives' values of one walk (one shape).
pub(crate) struct Memo([Option<OpValue>; MAX_GROUPS]);

impl Memo {
    /// Nothing evaluated yet.
    pub(crate) fn new() -> Memo {
        Memo([None; MAX_GROUPS])
    }
}
