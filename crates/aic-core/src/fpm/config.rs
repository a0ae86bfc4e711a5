//! Construction input of the native estimator (spec 42 §5): the EngineConfig JSON the
//! forward-pass model is built from, and the compile request derived from it (dtype →
//! compile-time quant mode). Compiling a model needs the Python front end, so the request is
//! handed to a caller-supplied compiler.

use serde::{Deserialize, Serialize};

use super::FpmError;
use super::error::Result;
use crate::spec::Backend;

/// The EngineConfig keys the forward-pass model reads (unknown keys are ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FpmEngineConfig {
    /// EngineConfig schema version (required; not checked).
    pub schema_version: u32,
    /// HF model id or local config path.
    pub model_name: String,
    /// System name (e.g. `h200_sxm`).
    pub system_name: String,
    /// Serving framework.
    pub backend: Backend,
    /// Tensor parallelism.
    pub tp_size: u32,
    /// Pipeline parallelism.
    pub pp_size: u32,
    /// Backend version; `None` = the system's current version.
    #[serde(default)]
    pub backend_version: Option<String>,
    /// Systems data root.
    #[serde(default)]
    pub systems_path: Option<String>,
    /// Attention data parallelism (default 1).
    #[serde(default = "one")]
    pub attention_dp_size: u32,
    /// MoE tensor parallelism.
    #[serde(default)]
    pub moe_tp_size: Option<u32>,
    /// MoE expert parallelism.
    #[serde(default)]
    pub moe_ep_size: Option<u32>,
    /// Context parallelism (default 1; spec 43: SGLang, tp 1).
    #[serde(default = "one")]
    pub cp_size: u32,
    /// Weight dtype (→ GEMM quant mode).
    #[serde(default)]
    pub weight_dtype: Option<String>,
    /// MoE weight dtype (→ MoE quant mode).
    #[serde(default)]
    pub moe_dtype: Option<String>,
    /// Activation dtype (→ FMHA quant mode).
    #[serde(default)]
    pub activation_dtype: Option<String>,
    /// KV-cache dtype (→ KV quant mode).
    #[serde(default)]
    pub kv_cache_dtype: Option<String>,
    /// KV block size.
    #[serde(default)]
    pub kv_block_size: Option<u32>,
    /// MTP draft depth.
    #[serde(default)]
    pub nextn: Option<u32>,
    /// Forward model variant (e.g. `"fpm"`).
    #[serde(default)]
    pub forward_model: Option<String>,
    /// Database mode (`SILICON`, ...); passed through to the compiler.
    #[serde(default)]
    pub database_mode: Option<String>,
}

fn one() -> u32 {
    1
}

impl FpmEngineConfig {
    /// Parses the config JSON (`invalid engine config JSON: ...` on failure).
    pub fn from_json(text: &str) -> Result<FpmEngineConfig> {
        serde_json::from_str(text).map_err(|e| FpmError::ConfigJson(e.to_string()))
    }

    /// The compile request of this config.
    pub fn compile_request(&self) -> CompileRequest {
        CompileRequest {
            model_path: self.model_name.clone(),
            system: self.system_name.clone(),
            backend: self.backend.as_str().to_string(),
            backend_version: self.backend_version.clone(),
            tp_size: self.tp_size,
            pp_size: self.pp_size,
            attention_dp_size: self.attention_dp_size,
            moe_tp_size: self.moe_tp_size,
            moe_ep_size: self.moe_ep_size,
            cp_size: self.cp_size,
            gemm_quant_mode: self.weight_dtype.as_deref().and_then(gemm_quant_mode).map(str::to_string),
            moe_quant_mode: self.moe_dtype.as_deref().and_then(moe_quant_mode).map(str::to_string),
            kvcache_quant_mode: self.kv_cache_dtype.as_deref().and_then(kv_quant_mode).map(str::to_string),
            fmha_quant_mode: self.activation_dtype.as_deref().and_then(fmha_quant_mode).map(str::to_string),
            comm_quant_mode: None,
            nextn: self.nextn.unwrap_or(0),
            kv_block_size: self.kv_block_size,
            systems_path: self.systems_path.clone(),
            database_mode: self.database_mode.clone(),
            forward_model: self.forward_model.clone(),
        }
    }
}

/// What to compile: the keyword arguments of the front end's `compile_engine` /
/// `compile_engine_json` (plus `forward_model`, omitted when unset).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompileRequest {
    /// HF model id or local config path.
    pub model_path: String,
    /// System name.
    pub system: String,
    /// Backend name.
    pub backend: String,
    /// Backend version (`None` = current).
    pub backend_version: Option<String>,
    /// Tensor parallelism.
    pub tp_size: u32,
    /// Pipeline parallelism.
    pub pp_size: u32,
    /// Attention data parallelism.
    pub attention_dp_size: u32,
    /// MoE tensor parallelism (`None` = front-end default).
    pub moe_tp_size: Option<u32>,
    /// MoE expert parallelism (`None` = front-end default).
    pub moe_ep_size: Option<u32>,
    /// Context parallelism (1 = none).
    pub cp_size: u32,
    /// GEMM quant mode (`None` = model default).
    pub gemm_quant_mode: Option<String>,
    /// MoE quant mode (`None` = model default).
    pub moe_quant_mode: Option<String>,
    /// KV-cache quant mode (`None` = model default).
    pub kvcache_quant_mode: Option<String>,
    /// FMHA quant mode (`None` = model default).
    pub fmha_quant_mode: Option<String>,
    /// Communication quant mode (never set from the config).
    pub comm_quant_mode: Option<String>,
    /// MTP draft depth.
    pub nextn: u32,
    /// KV block size.
    pub kv_block_size: Option<u32>,
    /// Systems data root.
    pub systems_path: Option<String>,
    /// Database mode.
    pub database_mode: Option<String>,
    /// Forward model variant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward_model: Option<String>,
}

impl CompileRequest {
    /// The request as a JSON object (keyword arguments of `compile_engine_json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("CompileRequest serialises to JSON")
    }
}

/// `weight_dtype` → GEMM quant mode (`None` = unmapped, model default).
pub fn gemm_quant_mode(dtype: &str) -> Option<&'static str> {
    Some(match dtype {
        "bfloat16" => "bfloat16",
        "fp8" => "fp8",
        "fp8_static" => "fp8_static",
        "fp8_block" => "fp8_block",
        "nvfp4" => "nvfp4",
        "w4a16_nvfp4" => "w4a16_nvfp4",
        "int8" => "int8_wo",
        "int4" => "int4_wo",
        _ => return None,
    })
}

/// `moe_dtype` → MoE quant mode (`None` = unmapped, model default).
pub fn moe_quant_mode(dtype: &str) -> Option<&'static str> {
    Some(match dtype {
        "bfloat16" => "bfloat16",
        "fp8" => "fp8",
        "fp8_block" => "fp8_block",
        "nvfp4" => "nvfp4",
        "w4afp8" => "w4afp8",
        "w4a16_mxfp4" => "w4a16_mxfp4",
        "w4a8_mxfp4_mxfp8" => "w4a8_mxfp4_mxfp8",
        "w4a16_nvfp4" => "w4a16_nvfp4",
        "int4" => "int4_wo",
        _ => return None,
    })
}

/// `activation_dtype` → FMHA quant mode (`None` = unmapped, model default).
pub fn fmha_quant_mode(dtype: &str) -> Option<&'static str> {
    Some(match dtype {
        "bfloat16" => "bfloat16",
        "fp8" => "fp8",
        "fp8_block" => "fp8_block",
        _ => return None,
    })
}

/// `kv_cache_dtype` → KV-cache quant mode (`None` = unmapped, model default).
pub fn kv_quant_mode(dtype: &str) -> Option<&'static str> {
    Some(match dtype {
        "bfloat16" => "bfloat16",
        "int8" => "int8",
        "fp8" => "fp8",
        _ => return None,
    })
}
