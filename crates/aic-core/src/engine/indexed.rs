//! Index-addressed op evaluation and the engine's data-plane views (spec 40 §9): the calls a
//! notebook or validation tool makes to price chosen ops of the compiled lists at a shape it
//! picks, and to see what the engine's perf database holds (table views, attention-lane
//! densities). They exist so op-level tooling needs no ad-hoc op JSON: the ops are the
//! engine's own, addressed by their position in `context_ops` / `generation_ops`.

use crate::data::lanes::{attention_lane_density, AttentionPhase, LaneDensity};
use crate::data::tables::table_view_json;
use crate::error::{AicError, Result};
use crate::ops::{CompiledOp, Shape};

use super::per_op::{Folder, OpResult};
use super::{check_scale, finite_total, provenance, Engine};

/// Checks every index against the list length before anything runs.
fn check_indices(what: &str, phase: &str, indices: &[usize], len: usize) -> Result<()> {
    match indices.iter().find(|&&i| i >= len) {
        Some(i) => Err(AicError::config(format!(
            "{what}: index {i} out of range ({len} {phase} ops)"
        ))),
        None => Ok(()),
    }
}

/// Evaluates the ops at `indices` (repeats allowed, in the given order) at one shape and
/// folds the results by name (spec 40 §8.3).
fn eval_indexed(ops: &[CompiledOp], indices: &[usize], shape: &Shape) -> Result<Vec<OpResult>> {
    let mut folder = Folder::default();
    let mut total = 0.0;
    for &i in indices {
        let op = &ops[i];
        let v = op.eval(shape)?;
        total += v.latency;
        folder.add(op.name(), v);
    }
    finite_total(if shape.is_context { "the context ops" } else { "the generation ops" }, total)?;
    Ok(folder.into_results())
}

/// Which attention table an attribute of the reference's perf database names.
fn attention_phase(attribute: &str) -> Result<AttentionPhase> {
    match attribute {
        "_context_attention_data" => Ok(AttentionPhase::Context),
        "_generation_attention_data" => Ok(AttentionPhase::Generation),
        other => Err(AicError::value(format!("attention_lane_density: unknown attribute \"{other}\""))),
    }
}

impl Engine {
    /// Evaluates the context ops at `indices` (positions in the spec's `context_ops`, in the
    /// given order, repeats allowed) at the context shape `(batch_size, s, prefix, scale, x)`;
    /// results are name-folded. `s` is used as given (no prefix check). An index out of range
    /// is a config error naming it.
    pub fn evaluate_context_ops(
        &self,
        indices: &[usize],
        batch_size: u32,
        s: u32,
        prefix: u32,
        seq_scale: f64,
        x: Option<u64>,
    ) -> Result<Vec<OpResult>> {
        let _call = provenance::CallScope::start();
        check_indices("evaluate_context_ops", "context", indices, self.context.len())?;
        check_scale("seq_imbalance_correction_scale", seq_scale)?;
        let shape =
            Shape::context(u64::from(batch_size), u64::from(s), u64::from(prefix), seq_scale, x).with_mode(self.mode).with_transfers(self.transfers);
        eval_indexed(&self.context, indices, &shape)
    }

    /// Evaluates the generation ops at `indices` at the generation shape (beam 1, KV position
    /// `s`, `prefix`, scale, `x`); results are name-folded.
    pub fn evaluate_generation_ops(
        &self,
        indices: &[usize],
        batch_size: u32,
        s: u32,
        gen_scale: f64,
        prefix: u32,
        x: Option<u64>,
    ) -> Result<Vec<OpResult>> {
        let _call = provenance::CallScope::start();
        check_indices("evaluate_generation_ops", "generation", indices, self.generation.len())?;
        check_scale("gen_seq_imbalance_correction_scale", gen_scale)?;
        let shape = Shape::generation(u64::from(batch_size), 1, u64::from(s), gen_scale, u64::from(prefix), x)
            .with_mode(self.mode).with_transfers(self.transfers);
        eval_indexed(&self.generation, indices, &shape)
    }

    /// Per-lane densities `(lane, slice_count, row_count)` of one attention table of this
    /// engine's database, over every resolved source (spec 11 §4.1), lanes sorted by name (the
    /// reference's order). `attribute` is `_context_attention_data` or
    /// `_generation_attention_data`; anything else is a value error.
    pub fn attention_lane_density(&self, attribute: &str) -> Result<Vec<LaneDensity>> {
        let phase = attention_phase(attribute)?;
        let mut lanes = attention_lane_density(&self.db.resolver, phase, false)?;
        lanes.sort_by(|a, b| a.lane.cmp(&b.lane));
        Ok(lanes)
    }

    /// One perf table of this engine's database as nested JSON text, addressed by the
    /// reference's attribute name (see [`crate::data::tables::TABLE_VIEW_ATTRIBUTES`]);
    /// `None` when no source file of it exists. An unknown attribute is a perf-data error.
    pub fn table_view_json(&self, attribute: &str) -> Result<Option<String>> {
        table_view_json(&self.db, attribute)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_index_names_it_and_the_list_length() {
        let e = check_indices("evaluate_context_ops", "context", &[0, 14], 14).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid engine config: evaluate_context_ops: index 14 out of range (14 context ops)"
        );
        assert!(check_indices("evaluate_generation_ops", "generation", &[0, 13, 2], 14).is_ok());
    }

    #[test]
    fn only_the_two_attention_attributes_have_lane_densities() {
        assert_eq!(attention_phase("_context_attention_data").unwrap(), AttentionPhase::Context);
        assert_eq!(attention_phase("_generation_attention_data").unwrap(), AttentionPhase::Generation);
        let e = attention_phase("_gemm_data").unwrap_err();
        assert_eq!(e.to_string(), "attention_lane_density: unknown attribute \"_gemm_data\"");
    }
}
