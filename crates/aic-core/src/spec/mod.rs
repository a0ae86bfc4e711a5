//! The EngineSpec: what the compile front end hands to the engine. JSON (as emitted by the
//! Python front end) and a versioned binary wire format (bincode) for crossing boundaries.

mod file;
mod ops;
mod op_json;
mod quant;
mod validate;
mod wire;

pub use file::{read_spec_file, MAX_SPEC_FILE_BYTES};
pub use ops::*;
pub use op_json::{op_from_json, op_to_json, op_variant, ops_from_json, ops_to_json};
pub use quant::*;
pub use validate::validate_ops;
pub use wire::{decode_spec, encode_spec, SPEC_MAGIC};

use serde::{Deserialize, Serialize};

use crate::error::{AicError, Result};

/// The op-list schema version this engine reads (the reference's 0.12.0 number).
pub const SPEC_SCHEMA_VERSION: u32 = 15;

/// Serving framework whose kernels the perf tables measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// TensorRT-LLM
    Trtllm,
    /// SGLang
    Sglang,
    /// vLLM
    Vllm,
}

impl Backend {
    /// The directory / wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Trtllm => "trtllm",
            Backend::Sglang => "sglang",
            Backend::Vllm => "vllm",
        }
    }

    /// Parses a backend name, with an error listing the valid ones.
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "trtllm" => Ok(Backend::Trtllm),
            "sglang" => Ok(Backend::Sglang),
            "vllm" => Ok(Backend::Vllm),
            other => Err(AicError::config(format!(
                "unknown backend {other:?}; expected one of \"trtllm\", \"sglang\", \"vllm\""
            ))),
        }
    }
}

/// Where the numbers come from: measured tables, analytic roofline, utilisation estimates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum DatabaseMode {
    /// Measured tables; a miss is an error.
    #[default]
    #[serde(rename = "SILICON")]
    Silicon,
    /// Measured tables, empirical estimate on a miss.
    #[serde(rename = "HYBRID")]
    Hybrid,
    /// Always the empirical (utilisation transfer) estimate.
    #[serde(rename = "EMPIRICAL")]
    Empirical,
    /// Analytic speed-of-light roofline.
    #[serde(rename = "SOL")]
    Sol,
}

/// Engine identity and deployment, flat as on the wire (unknown keys are ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineConfig {
    #[serde(default = "one")]
    pub schema_version: u32,
    pub model_name: String,
    pub system_name: String,
    #[serde(default)]
    pub systems_path: Option<String>,
    pub backend: Backend,
    #[serde(default)]
    pub backend_version: Option<String>,
    #[serde(default)]
    pub kv_block_size: Option<u32>,
    #[serde(default = "one")]
    pub tp_size: u32,
    #[serde(default = "one")]
    pub pp_size: u32,
    #[serde(default = "one")]
    pub attention_dp_size: u32,
    #[serde(default = "one")]
    pub moe_tp_size: u32,
    #[serde(default = "one")]
    pub moe_ep_size: u32,
    #[serde(default = "one")]
    pub cp_size: u32,
    #[serde(default)]
    pub weight_dtype: Option<String>,
    #[serde(default)]
    pub moe_dtype: Option<String>,
    #[serde(default)]
    pub activation_dtype: Option<String>,
    #[serde(default)]
    pub kv_cache_dtype: Option<String>,
    #[serde(default)]
    pub enable_shared_layer: Option<bool>,
    #[serde(default)]
    pub strict_provenance: bool,
    #[serde(default)]
    pub database_mode: DatabaseMode,
    #[serde(default)]
    pub transfer_policy: Option<Vec<String>>,
    #[serde(default)]
    pub tolerate_dirless_version: bool,
    #[serde(default)]
    pub extra: serde_json::Map<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nextn: Option<u32>,
}

fn one() -> u32 {
    1
}

impl EngineConfig {
    /// MTP draft depth (0 when absent).
    pub fn nextn(&self) -> u32 {
        self.nextn.unwrap_or(0)
    }

    /// Whether the shared layer (older versions, cross-backend fill) feeds the tables.
    pub fn shared_layer(&self) -> bool {
        self.enable_shared_layer.unwrap_or(matches!(
            self.database_mode,
            DatabaseMode::Silicon | DatabaseMode::Hybrid
        ))
    }
}

/// A compiled engine: configuration plus the context and generation op lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSpec {
    pub schema_version: u32,
    pub engine: EngineConfig,
    pub context_ops: Vec<Op>,
    pub generation_ops: Vec<Op>,
}

impl EngineSpec {
    /// Parses the JSON form, checking the schema version and validating the spec
    /// ([`EngineSpec::validate`]).
    pub fn from_json(text: &str) -> Result<Self> {
        let spec: EngineSpec = serde_json::from_str(text)
            .map_err(|e| AicError::WireFormat(format!("invalid spec JSON: {e}")))?;
        if spec.schema_version != SPEC_SCHEMA_VERSION {
            return Err(AicError::SchemaVersion {
                got: spec.schema_version,
                expected: SPEC_SCHEMA_VERSION,
            });
        }
        spec.validate()?;
        Ok(spec)
    }

    /// The JSON form.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("EngineSpec serialises to JSON")
    }

    /// Decodes either wire form: the binary format (starts with [`SPEC_MAGIC`]) or JSON.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.starts_with(SPEC_MAGIC) {
            return decode_spec(bytes);
        }
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'{') {
            let text = std::str::from_utf8(bytes)
                .map_err(|e| AicError::WireFormat(format!("spec JSON is not UTF-8: {e}")))?;
            return Self::from_json(text);
        }
        Err(AicError::WireFormat(
            "not an aic engine spec: expected the binary form (produced by compile_engine / \
             `aic-compile compile`) or spec JSON"
                .to_string(),
        ))
    }

    /// Encodes to the binary wire format.
    pub fn to_bytes(&self) -> Vec<u8> {
        encode_spec(self)
    }
}
