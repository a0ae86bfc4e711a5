//! Op lists and single ops as JSON text outside a whole spec (the reference's
//! `ops_json_from_ops`, `op_from_spec_json` and `weights_ops_json`): tools that build, inspect
//! or weigh ops one at a time exchange them in the spec's externally tagged encoding
//! (`{"Gemm": {...}}`), checked like the ops of a spec.

use crate::error::{AicError, Result};

use super::Op;

/// Decodes a JSON array of ops; a decode failure or a non-finite number is a value error
/// (`ops JSON decode: ...`).
pub fn ops_from_json(text: &str) -> Result<Vec<Op>> {
    let ops: Vec<Op> =
        serde_json::from_str(text).map_err(|e| AicError::value(format!("ops JSON decode: {e}")))?;
    ops.iter().try_for_each(Op::check_numbers)?;
    Ok(ops)
}

/// Decodes one op (`{"<Variant>": {...}}`); errors like [`ops_from_json`] (`op JSON decode`).
pub fn op_from_json(text: &str) -> Result<Op> {
    let op: Op = serde_json::from_str(text).map_err(|e| AicError::value(format!("op JSON decode: {e}")))?;
    op.check_numbers()?;
    Ok(op)
}

/// Encodes ops as a compact JSON array in the spec encoding.
pub fn ops_to_json(ops: &[Op]) -> String {
    serde_json::to_string(ops).unwrap_or_else(|_| "[]".to_string())
}

/// Encodes one op as compact JSON in the spec encoding.
pub fn op_to_json(op: &Op) -> String {
    serde_json::to_string(op).unwrap_or_else(|_| "null".to_string())
}

/// The op's variant name, i.e. its tag in the spec encoding (`"Gemm"`, `"Fallback"`, ...).
pub fn op_variant(op: &Op) -> String {
    match serde_json::to_value(op) {
        Ok(serde_json::Value::Object(map)) => map.keys().next().cloned().unwrap_or_default(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMBEDDING: &str = r#"{"Embedding": {"name": "context_embedding", "scale_factor": 1.0, "vocab_size": 75968, "hidden_size": 5120, "quant_mode": "bfloat16", "seq_split": 1}}"#;

    #[test]
    fn one_op_round_trips_with_its_variant() {
        let op = op_from_json(EMBEDDING).unwrap();
        assert_eq!(op_variant(&op), "Embedding");
        let back: serde_json::Value = serde_json::from_str(&ops_to_json(std::slice::from_ref(&op))).unwrap();
        let want: serde_json::Value = serde_json::from_str(&format!("[{EMBEDDING}]")).unwrap();
        assert_eq!(back, want);
        // A single op is not a list.
        assert!(ops_from_json(&op_to_json(&op)).is_err());
    }

    #[test]
    fn unknown_variants_are_value_errors() {
        assert!(ops_from_json("[]").unwrap().is_empty());
        let e = ops_from_json(r#"[{"NoSuchOp": {}}]"#).unwrap_err();
        assert!(e.to_string().starts_with("ops JSON decode: unknown variant `NoSuchOp`"), "{e}");
        assert_eq!(e.class(), crate::error::ErrorClass::Value);
    }
}
