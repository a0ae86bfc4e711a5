//! Binary wire format: `SPEC_MAGIC`, a little-endian `u32` schema version, then a bincode
//! payload (engine config as compact JSON text, then the two op lists). The version is read
//! before anything else so a spec from another schema is rejected with a clear error.

use serde::{Deserialize, Serialize};

use super::{EngineConfig, EngineSpec, Op, SPEC_SCHEMA_VERSION};
use crate::error::{AicError, Result};

/// Leading bytes of every binary spec.
pub const SPEC_MAGIC: &[u8; 8] = b"AICSPEC\0";

#[derive(Serialize, Deserialize)]
struct Payload {
    engine_json: String,
    context_ops: Vec<Op>,
    generation_ops: Vec<Op>,
}

/// Encodes a spec into the binary wire format.
pub fn encode_spec(spec: &EngineSpec) -> Vec<u8> {
    let payload = Payload {
        engine_json: serde_json::to_string(&spec.engine).expect("engine config serialises"),
        context_ops: spec.context_ops.clone(),
        generation_ops: spec.generation_ops.clone(),
    };
    let mut out = Vec::with_capacity(4096);
    out.extend_from_slice(SPEC_MAGIC);
    out.extend_from_slice(&spec.schema_version.to_le_bytes());
    bincode::serialize_into(&mut out, &payload).expect("bincode encodes the spec");
    out
}

/// Decodes the binary wire format, rejecting other schema versions and trailing garbage, and
/// validates the spec ([`EngineSpec::validate`]).
pub fn decode_spec(bytes: &[u8]) -> Result<EngineSpec> {
    let rest = bytes.strip_prefix(SPEC_MAGIC.as_slice()).ok_or_else(|| {
        AicError::WireFormat("missing the AICSPEC header; not a binary aic engine spec".into())
    })?;
    if rest.len() < 4 {
        return Err(AicError::WireFormat(format!(
            "truncated spec: {} bytes after the header, need at least 4 for the schema version",
            rest.len()
        )));
    }
    let got = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
    if got != SPEC_SCHEMA_VERSION {
        return Err(AicError::SchemaVersion { got, expected: SPEC_SCHEMA_VERSION });
    }
    let body = &rest[4..];
    let mut unread = body;
    let payload: Payload = {
        use bincode::Options;
        bincode::DefaultOptions::new()
            .with_fixint_encoding()
            .with_limit(body.len() as u64 + 64)
            .deserialize_from(&mut unread)
            .map_err(|e| match *e {
                bincode::ErrorKind::Io(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                    AicError::WireFormat(format!(
                        "corrupt or truncated spec payload: the {} bytes after the header end before \
                         the spec does; pass the whole file `aic-compile compile` wrote",
                        body.len()
                    ))
                }
                _ => AicError::WireFormat(format!("corrupt or truncated spec payload: {e}")),
            })?
    };
    if !unread.is_empty() {
        return Err(AicError::WireFormat(format!(
            "{} unexpected bytes after the spec payload; the spec is corrupt or was concatenated \
             with other data: pass exactly the bytes `aic-compile compile` wrote",
            unread.len()
        )));
    }
    let engine: EngineConfig = serde_json::from_str(&payload.engine_json)
        .map_err(|e| AicError::WireFormat(format!("invalid engine config in spec: {e}")))?;
    let spec = EngineSpec {
        schema_version: got,
        engine,
        context_ops: payload.context_ops,
        generation_ops: payload.generation_ops,
    };
    spec.validate()?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> EngineSpec {
        let json = r#"{"schema_version":15,"engine":{"schema_version":1,"model_name":"m","system_name":"h200_sxm","backend":"vllm","backend_version":"0.24.0","extra":{}},
        "context_ops":[{"Gemm":{"name":"g","scale_factor":1.0,"n":8,"k":8,"quant_mode":"bfloat16","scale_num_tokens":1}}],
        "generation_ops":[{"P2P":{"name":"p","scale_factor":0.0,"pp_size":1,"hidden_size":8}}]}"#;
        EngineSpec::from_json(json).unwrap()
    }

    #[test]
    fn round_trip() {
        let spec = sample();
        let bytes = encode_spec(&spec);
        assert_eq!(decode_spec(&bytes).unwrap(), spec);
        assert_eq!(EngineSpec::from_bytes(&bytes).unwrap(), spec);
    }

    #[test]
    fn other_schema_version_is_rejected() {
        let mut bytes = encode_spec(&sample());
        bytes[8..12].copy_from_slice(&14u32.to_le_bytes());
        let err = decode_spec(&bytes).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unsupported schema version for EngineSpec: got 14, expected 15"
        );
    }

    #[test]
    fn truncated_and_garbage_bytes_are_errors() {
        let bytes = encode_spec(&sample());
        for cut in [0, 5, 9, 13, bytes.len() / 2, bytes.len() - 1] {
            assert!(EngineSpec::from_bytes(&bytes[..cut]).is_err(), "cut {cut}");
        }
        assert!(EngineSpec::from_bytes(b"\x00\x01garbage").is_err());
        let mut padded = bytes.clone();
        padded.extend_from_slice(b"junk");
        let msg = decode_spec(&padded).unwrap_err().to_string();
        assert!(msg.contains("4 unexpected bytes after the spec payload"), "{msg}");
    }
}
