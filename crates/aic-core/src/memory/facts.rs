//! Model facts the memory model needs beyond the op lists: layer count, attention geometry,
//! MoE routing and (for the naive fallback) the raw checkpoint sizes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{AicError, Result};

/// The reference's model-family label (`LLAMA`, `MOE`, `DEEPSEEK`, ...); it selects the
/// activation coefficients, the MoE dispatch workspace and the KV-cache rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum ModelFamily {
    /// `GPT`
    Gpt,
    /// `LLAMA` (dense GQA models, Qwen3 dense included)
    Llama,
    /// `MOE` (GQA attention with routed experts, Qwen3 MoE and Mixtral included)
    Moe,
    /// `DEEPSEEK` (MLA attention, DeepSeek-V3/R1)
    Deepseek,
    /// `DEEPSEEKV32` (MLA plus the sparse-attention indexer)
    DeepseekV32,
    /// `DEEPSEEKV4`
    DeepseekV4,
    /// `KIMIK25` (MLA)
    KimiK25,
    /// `KIMIK3`
    KimiK3,
    /// `GEMMA4MIX`
    Gemma4Mix,
    /// `STEP3P7`
    Step3p7,
    /// `QWEN35` (Qwen3.5 / GDN hybrids)
    Qwen35,
    /// Any other label (default coefficients, base KV rule).
    Other(String),
}

impl ModelFamily {
    /// The reference's label, e.g. `DEEPSEEK`.
    pub fn as_str(&self) -> &str {
        match self {
            ModelFamily::Gpt => "GPT",
            ModelFamily::Llama => "LLAMA",
            ModelFamily::Moe => "MOE",
            ModelFamily::Deepseek => "DEEPSEEK",
            ModelFamily::DeepseekV32 => "DEEPSEEKV32",
            ModelFamily::DeepseekV4 => "DEEPSEEKV4",
            ModelFamily::KimiK25 => "KIMIK25",
            ModelFamily::KimiK3 => "KIMIK3",
            ModelFamily::Gemma4Mix => "GEMMA4MIX",
            ModelFamily::Step3p7 => "STEP3P7",
            ModelFamily::Qwen35 => "QWEN35",
            ModelFamily::Other(s) => s,
        }
    }

    /// Parses a label (case-sensitive, as the reference spells it); unknown labels are kept.
    pub fn parse(label: &str) -> Self {
        match label {
            "GPT" => ModelFamily::Gpt,
            "LLAMA" => ModelFamily::Llama,
            "MOE" => ModelFamily::Moe,
            "DEEPSEEK" => ModelFamily::Deepseek,
            "DEEPSEEKV32" => ModelFamily::DeepseekV32,
            "DEEPSEEKV4" => ModelFamily::DeepseekV4,
            "KIMIK25" => ModelFamily::KimiK25,
            "KIMIK3" => ModelFamily::KimiK3,
            "GEMMA4MIX" => ModelFamily::Gemma4Mix,
            "STEP3P7" => ModelFamily::Step3p7,
            "QWEN35" => ModelFamily::Qwen35,
            other => ModelFamily::Other(other.to_string()),
        }
    }
}

impl From<String> for ModelFamily {
    fn from(s: String) -> Self {
        ModelFamily::parse(&s)
    }
}

impl From<ModelFamily> for String {
    fn from(f: ModelFamily) -> Self {
        f.as_str().to_string()
    }
}

impl std::fmt::Display for ModelFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the layers of a sliding-window model split (naive fallback, §7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlidingWindowSplit {
    /// Window length in tokens.
    pub window: u64,
    /// Layers whose KV is capped at the window.
    pub window_layers: u64,
    /// Layers whose KV grows with the sequence.
    pub global_layers: u64,
}

/// The Gated-DeltaNet geometry of a Qwen3.5 hybrid (spec 31 §1.2), for its recurrent state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GdnFacts {
    /// Layers of type `linear_attention` (`NL`).
    pub linear_layers: u64,
    /// Layers of type `full_attention` (`NF`).
    pub full_layers: u64,
    /// `linear_num_key_heads` (unsharded).
    pub num_k_heads: u64,
    /// `linear_key_head_dim`.
    pub head_k_dim: u64,
    /// `linear_num_value_heads` (unsharded).
    pub num_v_heads: u64,
    /// `linear_value_head_dim`.
    pub head_v_dim: u64,
    /// `linear_conv_kernel_dim`.
    pub conv_kernel: u64,
    /// The resolved SSM state dtype (`float32`, `bfloat16` or `float16`).
    pub ssm_dtype: String,
}

impl GdnFacts {
    /// Bytes of one request's state on one GPU at attention TP `tp` (spec 31 §9.2):
    /// `NL · ((nv // tp)·hk·hv·σ' + ((2·nk·hk + nv·hv) // tp)·(dc − 1)·2)`.
    pub fn state_bytes(&self, tp: u64) -> u64 {
        let tp = tp.max(1);
        let sigma = if matches!(self.ssm_dtype.as_str(), "bfloat16" | "float16") { 2 } else { 4 };
        let ssm = self.num_v_heads / tp * self.head_k_dim * self.head_v_dim * sigma;
        let conv = (2 * self.num_k_heads * self.head_k_dim + self.num_v_heads * self.head_v_dim) / tp
            * self.conv_kernel.saturating_sub(1)
            * 2;
        self.linear_layers * (ssm + conv)
    }
}

/// The KV geometry of a model whose layers split into sliding-window and global attention
/// layers with their own KV heads and head sizes (spec 35 §11.3: `STEP3P7`, `GEMMA4MIX`).
/// The sliding layers' KV is capped at `window` tokens when `window > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerKvSplit {
    /// Window length in tokens; 0 = no cap (every layer grows with the sequence).
    pub window: u64,
    /// Sliding-window attention layers.
    pub sliding_layers: u64,
    /// KV heads of a sliding layer (before the tensor-parallel split).
    pub sliding_kv_heads: u64,
    /// Head size of a sliding layer.
    pub sliding_head_dim: u64,
    /// Global (full) attention layers.
    pub global_layers: u64,
    /// KV heads of a global layer (before the tensor-parallel split).
    pub global_kv_heads: u64,
    /// Head size of a global layer.
    pub global_head_dim: u64,
}

/// The hybrid layer plan of a Kimi-K3 model (spec 36 §7.2): MLA layers hold a latent KV per
/// token, KDA layers a constant recurrent state per request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KimiK3Facts {
    /// KDA (linear-attention) layers.
    pub kda_layers: u64,
    /// MLA (full-attention) layers.
    pub mla_layers: u64,
    /// `linear_attn_config.num_heads` (unsharded).
    pub kda_heads: u64,
    /// `linear_attn_config.head_dim`.
    pub kda_head_dim: u64,
    /// `linear_attn_config.short_conv_kernel_size`.
    pub conv_kernel: u64,
    /// `kv_lora_rank`.
    pub kv_lora_rank: u64,
    /// `qk_rope_head_dim`.
    pub qk_rope_head_dim: u64,
}

impl KimiK3Facts {
    /// KV elements per token of the MLA layers (not sharded by tp).
    pub fn token_elements(&self) -> u64 {
        self.mla_layers * (self.kv_lora_rank + self.qk_rope_head_dim)
    }

    /// Bytes of one request's KDA state at attention TP `tp`, whatever the KV dtype:
    /// `n_kda · (hl·hd²·4 + (conv − 1)·3·hl·hd·2) · 5` with `hl = max(1, heads // tp)`.
    pub fn state_bytes(&self, tp: u64) -> u64 {
        let hl = (self.kda_heads / tp.max(1)).max(1);
        let hd = self.kda_head_dim;
        self.kda_layers * (hl * hd * hd * 4 + self.conv_kernel.saturating_sub(1) * 3 * hl * hd * 2) * 5
    }

    /// KV elements per token the DSPARK draft adds when speculating (`nextn > 0`): vLLM's MLA
    /// draft `5·(512 + 64)`, other backends' GQA draft `5·2·max(1, 16 // tp)·64`.
    pub fn draft_elements(vllm: bool, tp: u64) -> u64 {
        if vllm {
            5 * (512 + 64)
        } else {
            5 * 2 * (16 / tp.max(1)).max(1) * 64
        }
    }
}

/// The compressed-attention layout of a DeepSeek-V4 model (spec 34 §7), for its KV bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dsv4Facts {
    /// `compress_ratios` truncated to the decoder layers (0, 4 or 128 each).
    pub compress_ratios: Vec<u64>,
    /// `sliding_window`: the uncompressed KV window of every layer.
    pub sliding_window: u64,
}

impl Dsv4Facts {
    /// The layout from an HF config: `compress_ratios` cut to `layers` entries and
    /// `sliding_window`; `None` when either is missing or the list is too short.
    pub fn from_config(config: &Value, layers: u64) -> Option<Dsv4Facts> {
        let ratios: Vec<u64> = config.get("compress_ratios")?.as_array()?.iter().map(Value::as_u64).collect::<Option<_>>()?;
        if (ratios.len() as u64) < layers {
            return None;
        }
        Some(Dsv4Facts {
            compress_ratios: ratios[..layers as usize].to_vec(),
            sliding_window: config.get("sliding_window")?.as_u64()?,
        })
    }
}

/// Model facts the memory model reads (JSON from the Python front end, or
/// [`ModelFacts::from_hf_config`]). Dimensions are the values the model object uses after
/// normalisation; the naive-only fields may be absent for the native path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFacts {
    /// First entry of the config's `architectures` (e.g. `GptOssForCausalLM`), or empty.
    #[serde(default)]
    pub architecture: String,
    /// The reference's family label.
    pub family: ModelFamily,
    /// Decoder layers (without MTP layers).
    pub num_layers: u64,
    /// Residual hidden size.
    pub hidden_size: u64,
    /// Attention (query) heads.
    pub num_attention_heads: u64,
    /// KV heads (equal to the attention heads for MHA).
    pub num_key_value_heads: u64,
    /// Head dimension as the model stores it: `head_dim`, else `attention_head_dim`, else
    /// `hidden_size // num_attention_heads` (DeepSeek-V3: 56).
    pub head_dim: u64,
    /// Routed experts (0 for dense models).
    #[serde(default)]
    pub num_experts: u64,
    /// Experts per token (0 for dense models).
    #[serde(default)]
    pub topk: u64,
    /// MLA latent KV rank (default 512 for MLA families when absent).
    #[serde(default)]
    pub kv_lora_rank: Option<u64>,
    /// MLA decoupled RoPE head dimension (default 64 for MLA families when absent).
    #[serde(default)]
    pub qk_rope_head_dim: Option<u64>,
    /// DeepSeek-V3.2 indexer head dimension (default 128).
    #[serde(default)]
    pub index_head_dim: Option<u64>,
    /// Model context length (caps a saturated binary search).
    #[serde(default)]
    pub max_position_embeddings: Option<u64>,
    /// Vocabulary size (naive fallback).
    #[serde(default)]
    pub vocab_size: Option<u64>,
    /// Dense FFN intermediate size (naive fallback; `4·hidden` for dense models when absent).
    #[serde(default)]
    pub intermediate_size: Option<u64>,
    /// Per-expert FFN intermediate size (naive fallback; falls back to `intermediate_size`).
    #[serde(default)]
    pub moe_intermediate_size: Option<u64>,
    /// Checkpoint dtype string (`torch_dtype`, else `dtype`) for the naive element width.
    #[serde(default)]
    pub torch_dtype: Option<String>,
    /// Sliding-window layer split (naive fallback only; `None` = no split).
    #[serde(default)]
    pub sliding_window: Option<SlidingWindowSplit>,
    /// Gated-DeltaNet geometry (family `QWEN35` only).
    #[serde(default)]
    pub gdn: Option<GdnFacts>,
    /// Per-layer-type KV geometry of the window-capped hybrid families (`STEP3P7`,
    /// `GEMMA4MIX`); the compile front end derives it from the model's layer types.
    #[serde(default)]
    pub layer_kv: Option<LayerKvSplit>,
    /// Compressed-attention layout (family `DEEPSEEKV4` only).
    #[serde(default)]
    pub dsv4: Option<Dsv4Facts>,
    /// KDA / MLA layer plan (family `KIMIK3` only).
    #[serde(default)]
    pub kimik3: Option<KimiK3Facts>,
}

/// First positive integer among `keys` of a JSON object.
fn first_pos(config: &Value, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| {
        let v = config.get(*k)?;
        let n = v.as_u64().or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 1.0)
                .map(|f| f as u64)
        })?;
        (n > 0).then_some(n)
    })
}

impl ModelFacts {
    /// Reads the raw keys of a Hugging Face `config.json` (the alias lists of spec 41 §7.3).
    /// Fails only when the hidden size or the layer count is missing.
    pub fn from_hf_config(config: &Value, family: ModelFamily) -> Result<ModelFacts> {
        let missing =
            |what: &str| AicError::value(format!("insufficient model metadata; missing: {what}"));
        let hidden = first_pos(config, &["hidden_size", "n_embd", "n_embed"])
            .ok_or_else(|| missing("hidden_size"))?;
        let layers = first_pos(config, &["num_hidden_layers", "n_layer", "num_layers"])
            .ok_or_else(|| missing("num_hidden_layers"))?;
        let heads = first_pos(config, &["num_attention_heads", "n_head", "num_heads"]).unwrap_or(0);
        let head_dim = first_pos(config, &["head_dim", "attention_head_dim"])
            .unwrap_or(hidden.checked_div(heads).unwrap_or(0));
        let experts = first_pos(
            config,
            &["n_routed_experts", "num_local_experts", "num_experts"],
        )
        .unwrap_or(0);
        let topk = first_pos(
            config,
            &[
                "num_experts_per_tok",
                "num_experts_per_token",
                "moe_topk",
                "top_k",
            ],
        )
        .unwrap_or(0);
        let intermediate = first_pos(
            config,
            &["intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size"],
        );
        let multi_query = config.get("multi_query").and_then(Value::as_bool) == Some(true)
            && config
                .get("new_decoder_architecture")
                .and_then(Value::as_bool)
                != Some(true);
        let kv_heads = first_pos(
            config,
            &[
                "num_key_value_heads",
                "num_kv_heads",
                "n_head_kv",
                "n_kv_heads",
            ],
        )
        .unwrap_or(if multi_query { 1 } else { heads });
        let window = first_pos(config, &["sliding_window", "sliding_window_size"]);
        let sliding_window = window.and_then(|window| {
            if let Some(types) = config.get("layer_types").and_then(Value::as_array) {
                let window_layers = types
                    .iter()
                    .filter(|t| t.as_str().is_some_and(|s| s.contains("sliding")))
                    .count() as u64;
                Some(SlidingWindowSplit {
                    window,
                    window_layers,
                    global_layers: types.len() as u64 - window_layers,
                })
            } else {
                first_pos(config, &["sliding_window_pattern"]).map(|p| {
                    let global_layers = layers / p;
                    SlidingWindowSplit {
                        window,
                        window_layers: layers - global_layers,
                        global_layers,
                    }
                })
            }
        });
        let dtype = ["torch_dtype", "dtype"]
            .iter()
            .find_map(|k| config.get(*k).and_then(Value::as_str))
            .map(str::to_string);
        let dsv4 = if family == ModelFamily::DeepseekV4 { Dsv4Facts::from_config(config, layers) } else { None };
        Ok(ModelFacts {
            dsv4,
            kimik3: None,
            architecture: config
                .get("architectures")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            family,
            num_layers: layers,
            hidden_size: hidden,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            head_dim,
            num_experts: experts,
            topk,
            kv_lora_rank: first_pos(config, &["kv_lora_rank"]),
            qk_rope_head_dim: first_pos(config, &["qk_rope_head_dim"]),
            index_head_dim: first_pos(config, &["index_head_dim"]),
            max_position_embeddings: first_pos(config, &["max_position_embeddings"]),
            vocab_size: first_pos(config, &["vocab_size"]),
            intermediate_size: intermediate,
            moe_intermediate_size: first_pos(config, &["moe_intermediate_size"]),
            torch_dtype: dtype,
                        sliding_window,
            gdn: None,
            layer_kv: None,
        })
    }

    /// `num_attention_heads × head_dim`: the width the activation model uses (§5 step 2).
    pub fn attention_width(&self) -> u64 {
        self.num_attention_heads * self.head_dim
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn family_labels_round_trip() {
        for label in [
            "GPT",
            "LLAMA",
            "MOE",
            "DEEPSEEK",
            "DEEPSEEKV32",
            "KIMIK25",
            "QWEN35",
        ] {
            let f = ModelFamily::parse(label);
            assert_eq!(f.as_str(), label);
            assert_eq!(serde_json::to_value(&f).unwrap(), json!(label));
        }
        let f: ModelFamily = serde_json::from_value(json!("NEMOTRONH")).unwrap();
        assert_eq!(f, ModelFamily::Other("NEMOTRONH".into()));
        assert_eq!(f.to_string(), "NEMOTRONH");
    }

    #[test]
    fn hf_aliases_and_fallbacks() {
        let c = json!({"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168,
            "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
            "n_routed_experts": 256, "num_experts_per_tok": 8, "kv_lora_rank": 512,
            "qk_rope_head_dim": 64, "torch_dtype": "bfloat16", "vocab_size": 129280});
        let f = ModelFacts::from_hf_config(&c, ModelFamily::Deepseek).unwrap();
        assert_eq!(f.head_dim, 56);
        assert_eq!(f.attention_width(), 7168);
        assert_eq!((f.num_experts, f.topk), (256, 8));
        assert_eq!(f.architecture, "DeepseekV3ForCausalLM");

        let c = json!({"n_embd": 2048, "n_layer": 24, "n_head": 16, "multi_query": true});
        let f = ModelFacts::from_hf_config(&c, ModelFamily::Gpt).unwrap();
        assert_eq!((f.hidden_size, f.num_layers, f.head_dim), (2048, 24, 128));
        assert_eq!(f.num_key_value_heads, 1);
        let c = json!({"n_embd": 2048, "n_layer": 24, "n_head": 16, "multi_query": true,
            "new_decoder_architecture": true});
        let f = ModelFacts::from_hf_config(&c, ModelFamily::Gpt).unwrap();
        assert_eq!(f.num_key_value_heads, 16);

        let c = json!({"hidden_size": 2560, "num_hidden_layers": 34, "num_attention_heads": 8,
            "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 1024,
            "sliding_window_pattern": 6});
        let f = ModelFacts::from_hf_config(&c, ModelFamily::Other("X".into())).unwrap();
        assert_eq!(
            f.sliding_window,
            Some(SlidingWindowSplit {
                window: 1024,
                window_layers: 29,
                global_layers: 5
            })
        );
        let c = json!({"hidden_size": 64, "num_hidden_layers": 4, "sliding_window": 128,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]});
        let f = ModelFacts::from_hf_config(&c, ModelFamily::Other("X".into())).unwrap();
        assert_eq!(
            f.sliding_window,
            Some(SlidingWindowSplit {
                window: 128,
                window_layers: 2,
                global_layers: 2
            })
        );
        // Qwen3 style: a null window and no pattern means no split.
        let c = json!({"hidden_size": 64, "num_hidden_layers": 4, "sliding_window": null});
        assert_eq!(
            ModelFacts::from_hf_config(&c, ModelFamily::Llama)
                .unwrap()
                .sliding_window,
            None
        );

        let err = ModelFacts::from_hf_config(&json!({"num_hidden_layers": 2}), ModelFamily::Llama)
            .unwrap_err();
        assert!(err.to_string().contains("missing: hidden_size"), "{err}");
    }

    #[test]
    fn facts_json_shape() {
        let f: ModelFacts = serde_json::from_value(json!({
            "architecture": "Qwen3ForCausalLM", "family": "LLAMA", "num_layers": 64,
            "hidden_size": 5120, "num_attention_heads": 64, "num_key_value_heads": 8,
            "head_dim": 128}))
        .unwrap();
        assert_eq!(f.family, ModelFamily::Llama);
        assert_eq!(f.num_experts, 0);
        assert_eq!(f.kv_lora_rank, None);
    }
}
