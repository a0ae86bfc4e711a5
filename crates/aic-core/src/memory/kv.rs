//! KV-cache bytes per sequence (spec 41 §3) and the inverse, budget → token capacity (§4).

use crate::error::{AicError, Result};
use crate::spec::KvQuant;

use super::facts::{LayerKvSplit, ModelFacts, ModelFamily};

/// The GPT-OSS sliding-window length (its window layers cap at 128 tokens).
const GPT_OSS_WINDOW: u64 = 128;

/// How the KV bytes of one sequence grow with its length, on one GPU (all layers; not divided
/// by pipeline stages; no context-parallel saving).
#[derive(Debug, Clone, PartialEq)]
pub enum KvCacheModel {
    /// `kv_bytes(L) = L · per_token` (GQA/MHA, MLA, DeepSeek-V3.2); inverse is linear.
    Linear {
        /// Bytes per token, unfloored.
        per_token: f64,
    },
    /// GPT-OSS: `p · (S·min(L, 128) + G·L)`; inverse is the binary search.
    GptOss {
        /// `ceil(n_kv/tp) · head · 2 · m(kv)`.
        per_layer_token: f64,
        /// `S = floor(layers / 2)` window layers.
        window_layers: u64,
        /// `G = layers − S` global layers.
        global_layers: u64,
        /// The model's context length, returned by a saturated search.
        context_length: Option<u64>,
    },
    /// Qwen3.5 hybrids (spec 31 §9.2): `L · per_token + state`, where only the full-attention
    /// layers hold token-linear KV and the Gated-DeltaNet layers a constant recurrent state.
    LinearPlusState {
        /// Bytes per token of the full-attention layers, unfloored.
        per_token: f64,
        /// Constant bytes of one request's GDN state (SSM state + conv window).
        state: f64,
    },
    /// Sliding / global layers with their own geometry (spec 35 §11.3, `STEP3P7` and
    /// `GEMMA4MIX`): `sliding · min(L, w) + global · L`, the `min` only when `w > 0`; inverse
    /// is the binary search.
    Windowed {
        /// Bytes per token of all sliding layers: `S · ceil(kv_s/tp) · head_s · 2 · m(kv)`.
        sliding_per_token: f64,
        /// Bytes per token of all global layers: `G · ceil(kv_g/tp) · head_g · 2 · m(kv)`.
        global_per_token: f64,
        /// Window length; 0 = the sliding layers grow with the sequence too.
        window: u64,
        /// The model's context length, returned by a saturated search.
        context_length: Option<u64>,
    },
    /// DeepSeek-V4 (spec 34 §7): per layer a window-capped uncompressed KV, the compressed
    /// entries of its ratio and a fixed compressor state (CSA layers add the indexer cache);
    /// inverse is the binary search.
    Dsv4 {
        /// Ratio of each decoder layer (0, 4 or 128).
        ratios: Vec<u64>,
        /// Uncompressed window.
        window: u64,
        /// `head_dim` (512).
        head_dim: u64,
        /// Indexer head dim (128).
        index_head_dim: u64,
        /// Bytes per KV element.
        mu: f64,
    },
}

impl KvCacheModel {
    /// Picks the family's rule (§3.1, §3.2, §3.3) for a KV dtype and an attention TP size.
    /// Qwen3.5 needs its GDN facts (spec 31 §9.2), Gemma-4 and Step-3.7 their sliding/global
    /// layer split (spec 35 §11.3). Families whose curves no spec gives numerically
    /// (DeepSeek-V4, Kimi-K3) are an error.
    pub fn for_model(facts: &ModelFacts, kv: KvQuant, tp_size: u32) -> Result<KvCacheModel> {
        let m = kv.bytes_per_elem();
        let layers = facts.num_layers as f64;
        let tp = u64::from(tp_size.max(1));
        let kv_heads_per_rank = facts.num_key_value_heads.div_ceil(tp) as f64;
        match facts.family {
            ModelFamily::Deepseek | ModelFamily::KimiK25 => {
                let lora = facts.kv_lora_rank.unwrap_or(512) as f64;
                let rope = facts.qk_rope_head_dim.unwrap_or(64) as f64;
                Ok(KvCacheModel::Linear {
                    per_token: m * layers * (lora + rope),
                })
            }
            ModelFamily::DeepseekV32 => {
                let lora = facts.kv_lora_rank.unwrap_or(512) as f64;
                let rope = facts.qk_rope_head_dim.unwrap_or(64) as f64;
                let index = facts.index_head_dim.unwrap_or(128);
                let idx = (index + index.div_ceil(128) * 4) as f64;
                Ok(KvCacheModel::Linear {
                    per_token: layers * (lora * m + rope * 2.0 + idx),
                })
            }
            ModelFamily::Qwen35 => {
                let g = facts.gdn.as_ref().ok_or_else(|| {
                    AicError::value(
                        "KV-cache model for family QWEN35 needs the Gated-DeltaNet facts (`gdn`: layer \
                         counts and linear_* head geometry of the config's text_config); build the \
                         facts with the Python front end (aic.memory.model_facts)",
                    )
                })?;
                Ok(KvCacheModel::LinearPlusState {
                    per_token: m * g.full_layers as f64 * 2.0 * kv_heads_per_rank * facts.head_dim as f64,
                    state: g.state_bytes(tp) as f64,
                })
            }
            ModelFamily::Gemma4Mix | ModelFamily::Step3p7 => {
                let split = facts.layer_kv.ok_or_else(|| {
                    AicError::value(format!(
                        "KV-cache model for family {} needs the sliding/global layer split \
                         (layer_kv) in the model facts; build the facts with the compile front \
                         end (aic.memory.model_facts)",
                        facts.family
                    ))
                })?;
                Ok(Self::windowed(&split, m, tp, facts.max_position_embeddings))
            }
            ModelFamily::DeepseekV4 => {
                let d = facts.dsv4.as_ref().ok_or_else(|| {
                    AicError::value(
                        "KV-cache model for family DEEPSEEKV4 needs the compressed-attention facts \
                         (`dsv4`: compress_ratios cut to the decoder layers and sliding_window); build \
                         the facts with the Python front end (aic.memory.model_facts)",
                    )
                })?;
                Ok(KvCacheModel::Dsv4 {
                    ratios: d.compress_ratios.clone(),
                    window: d.sliding_window,
                    head_dim: facts.head_dim,
                    index_head_dim: facts.index_head_dim.unwrap_or(128),
                    mu: m,
                })
            }
            ModelFamily::KimiK3 => {
                let k = facts.kimik3.as_ref().ok_or_else(|| {
                    AicError::value(
                        "KV-cache model for family KIMIK3 needs the KDA/MLA layer plan (`kimik3`: layer \
                         counts, KDA heads and MLA latent dims); build the facts with the Python front \
                         end (aic.memory.model_facts)",
                    )
                })?;
                Ok(KvCacheModel::LinearPlusState {
                    per_token: m * k.token_elements() as f64,
                    state: k.state_bytes(tp) as f64,
                })
            }
            _ if facts.architecture == "GptOssForCausalLM" => {
                let window_layers = facts.num_layers / 2;
                Ok(KvCacheModel::GptOss {
                    per_layer_token: kv_heads_per_rank * facts.head_dim as f64 * 2.0 * m,
                    window_layers,
                    global_layers: facts.num_layers - window_layers,
                    context_length: facts.max_position_embeddings,
                })
            }
            _ => Ok(KvCacheModel::Linear {
                per_token: m * layers * 2.0 * kv_heads_per_rank * facts.head_dim as f64,
            }),
        }
    }

    /// The family's rule for a compiled deployment: [`KvCacheModel::for_model`] plus what the
    /// deployment adds, Kimi-K3's DSPARK draft KV when it speculates (spec 36 §7.2).
    pub fn for_engine(facts: &ModelFacts, kv: KvQuant, engine: &crate::spec::EngineConfig) -> Result<KvCacheModel> {
        let model = Self::for_model(facts, kv, engine.tp_size)?;
        match (model, facts.kimik3.as_ref()) {
            (KvCacheModel::LinearPlusState { per_token, state }, Some(_)) if facts.family == ModelFamily::KimiK3 && engine.nextn() > 0 => {
                let vllm = engine.backend == crate::spec::Backend::Vllm;
                let draft = super::facts::KimiK3Facts::draft_elements(vllm, u64::from(engine.tp_size.max(1)));
                Ok(KvCacheModel::LinearPlusState { per_token: per_token + kv.bytes_per_elem() * draft as f64, state })
            }
            (model, _) => Ok(model),
        }
    }

    /// The window-capped rule of spec 35 §11.3 for a layer split, KV element width `m` and
    /// attention TP size `tp`.
    pub fn windowed(
        split: &LayerKvSplit,
        m: f64,
        tp: u64,
        context_length: Option<u64>,
    ) -> KvCacheModel {
        let per_token = |layers: u64, kv_heads: u64, head: u64| {
            layers as f64 * kv_heads.div_ceil(tp) as f64 * head as f64 * 2.0 * m
        };
        KvCacheModel::Windowed {
            sliding_per_token: per_token(
                split.sliding_layers,
                split.sliding_kv_heads,
                split.sliding_head_dim,
            ),
            global_per_token: per_token(
                split.global_layers,
                split.global_kv_heads,
                split.global_head_dim,
            ),
            window: split.window,
            context_length,
        }
    }

    /// Bytes one sequence of `seq_len` tokens occupies (§3).
    pub fn kv_bytes(&self, seq_len: u64) -> f64 {
        let l = seq_len as f64;
        match self {
            KvCacheModel::Linear { per_token } => l * per_token,
            KvCacheModel::LinearPlusState { per_token, state } => l * per_token + state,
            KvCacheModel::Dsv4 { ratios, window, head_dim, index_head_dim, mu } => {
                let e = *head_dim as f64 * mu;
                let (d, id) = (*head_dim as f64, *index_head_dim as f64);
                let mut total = 0.0;
                for &r in ratios {
                    total += seq_len.min(*window) as f64 * e;
                    if r > 0 {
                        let c = if r == 4 { 2.0 } else { 1.0 };
                        total += (seq_len / r) as f64 * e + 2.0 * r as f64 * c * d * 4.0;
                    }
                    if r == 4 {
                        total += (seq_len / 4) as f64 * id * 0.5 + 2.0 * 4.0 * 2.0 * id * 4.0;
                    }
                }
                total
            }
            KvCacheModel::GptOss {
                per_layer_token,
                window_layers,
                global_layers,
                ..
            } => {
                per_layer_token
                    * (*window_layers as f64 * seq_len.min(GPT_OSS_WINDOW) as f64
                        + *global_layers as f64 * l)
            }
            KvCacheModel::Windowed {
                sliding_per_token,
                global_per_token,
                window,
                ..
            } => {
                let capped = if *window > 0 {
                    seq_len.min(*window) as f64
                } else {
                    l
                };
                sliding_per_token * capped + global_per_token * l
            }
        }
    }

    /// `kv_bytes(1)`, unfloored.
    pub fn bytes_per_token(&self) -> f64 {
        self.kv_bytes(1)
    }

    /// Tokens that fit in `budget` bytes (§4): linear or binary search, per family.
    pub fn tokens_from_bytes(&self, budget: f64) -> u64 {
        match self {
            KvCacheModel::Linear { per_token } => tokens_from_bytes_linear(budget, *per_token),
            // One request's state is reserved first (spec 31 §9.2).
            KvCacheModel::LinearPlusState { per_token, state } => {
                if budget - state <= 0.0 {
                    0
                } else {
                    tokens_from_bytes_linear(budget - state, *per_token)
                }
            }
            KvCacheModel::Dsv4 { .. } => tokens_from_bytes_search(budget, |l| self.kv_bytes(l), None),
            KvCacheModel::GptOss { context_length, .. }
            | KvCacheModel::Windowed { context_length, .. } => {
                tokens_from_bytes_search(budget, |l| self.kv_bytes(l), *context_length)
            }
        }
    }
}

/// `floor(B / per_token)`, 0 when either is not positive (§4, linear families).
pub fn tokens_from_bytes_linear(budget: f64, per_token: f64) -> u64 {
    if budget <= 0.0 || per_token <= 0.0 || budget.is_nan() || per_token.is_nan() {
        return 0;
    }
    (budget / per_token).floor() as u64
}

/// Largest `L` with `kv_bytes(L) ≤ B` for a non-decreasing `kv_bytes` (§4, binary search):
/// doubling from 1, then bisection in `[L/2, L)`. A curve that stops growing is saturated and
/// returns `context_length` (or the doubled length when unknown).
pub fn tokens_from_bytes_search(
    budget: f64,
    kv_bytes: impl Fn(u64) -> f64,
    context_length: Option<u64>,
) -> u64 {
    if budget.is_nan() || budget <= 0.0 {
        return 0;
    }
    let mut hi: u64 = 1;
    while kv_bytes(hi) <= budget {
        let before = kv_bytes(hi);
        if hi >= 1 << 62 {
            return hi;
        }
        hi *= 2;
        if kv_bytes(hi) == before {
            return context_length.unwrap_or(hi);
        }
    }
    // kv_bytes(hi) > budget; kv_bytes(hi / 2) <= budget (or hi == 1).
    let mut lo = hi / 2;
    if lo == 0 {
        return 0;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if kv_bytes(mid) <= budget {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn gqa(
        arch: &str,
        family: ModelFamily,
        layers: u64,
        heads: u64,
        kv_heads: u64,
        head: u64,
    ) -> ModelFacts {
        ModelFacts {
            architecture: arch.into(),
            family,
            num_layers: layers,
            hidden_size: heads * head,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            head_dim: head,
            num_experts: 0,
            topk: 0,
            kv_lora_rank: None,
            qk_rope_head_dim: None,
            index_head_dim: None,
            max_position_embeddings: None,
            vocab_size: None,
            intermediate_size: None,
            moe_intermediate_size: None,
            torch_dtype: None,
            sliding_window: None,
            gdn: None,
            layer_kv: None,
            dsv4: None,
            kimik3: None,
        }
    }

    fn per_token(f: &ModelFacts, kv: KvQuant, tp: u32) -> f64 {
        KvCacheModel::for_model(f, kv, tp)
            .unwrap()
            .bytes_per_token()
    }

    #[test]
    fn gqa_examples() {
        let q32 = gqa("Qwen3ForCausalLM", ModelFamily::Llama, 64, 64, 8, 128);
        assert_eq!(per_token(&q32, KvQuant::Bfloat16, 2), 131072.0);
        assert_eq!(per_token(&q32, KvQuant::Fp8, 4), 32768.0);
        assert_eq!(per_token(&q32, KvQuant::Bfloat16, 16), 32768.0);
        let q30 = gqa("Qwen3MoeForCausalLM", ModelFamily::Moe, 48, 32, 4, 128);
        assert_eq!(per_token(&q30, KvQuant::Bfloat16, 4), 24576.0);
        let q06 = gqa("Qwen3ForCausalLM", ModelFamily::Llama, 28, 16, 8, 128);
        assert_eq!(per_token(&q06, KvQuant::Bfloat16, 1), 114688.0);
        let m = KvCacheModel::for_model(&q32, KvQuant::Bfloat16, 2).unwrap();
        assert_eq!(m.kv_bytes(0), 0.0);
        assert_eq!(m.kv_bytes(1000), 131072000.0);
    }

    #[test]
    fn mla_examples() {
        let mut ds = gqa(
            "DeepseekV3ForCausalLM",
            ModelFamily::Deepseek,
            61,
            128,
            128,
            56,
        );
        // Missing config values default to 512 and 64.
        assert_eq!(per_token(&ds, KvQuant::Fp8, 8), 35136.0);
        ds.kv_lora_rank = Some(512);
        ds.qk_rope_head_dim = Some(64);
        assert_eq!(per_token(&ds, KvQuant::Fp8, 1), 35136.0);
        assert_eq!(per_token(&ds, KvQuant::Bfloat16, 8), 70272.0);
        ds.family = ModelFamily::DeepseekV32;
        assert_eq!(per_token(&ds, KvQuant::Fp8, 8), 47092.0);
    }

    #[test]
    fn gpt_oss_example() {
        let mut g = gqa("GptOssForCausalLM", ModelFamily::Moe, 36, 64, 8, 64);
        g.max_position_embeddings = Some(131072);
        let m = KvCacheModel::for_model(&g, KvQuant::Bfloat16, 4).unwrap();
        assert_eq!(m.bytes_per_token(), 18432.0);
        assert_eq!(m.kv_bytes(1000), 9216.0 * (128.0 + 1000.0));
        // §8 example 6: B = (C − non_kv) · 0.9.
        let b: f64 = (151397597184.0 - 19966816256.0) * 0.9;
        assert_eq!(b.floor(), 118287702835.0);
        assert_eq!(m.tokens_from_bytes(b), 12834909);
        assert_eq!(m.tokens_from_bytes(0.0), 0);
        assert_eq!(m.tokens_from_bytes(18431.0), 0);
        assert_eq!(m.tokens_from_bytes(18432.0), 1);
    }

    /// A Qwen3.5 model: `(L, n, n_kv, d)` attention geometry plus the GDN facts of spec 31 §1.3.
    fn qwen35(layers: u64, heads: u64, kv: u64, nl: u64, nk: u64, nv: u64) -> ModelFacts {
        let mut f = gqa("Qwen3_5ForConditionalGeneration", ModelFamily::Qwen35, layers, heads, kv, 256);
        f.gdn = Some(crate::memory::GdnFacts {
            linear_layers: nl,
            full_layers: layers - nl,
            num_k_heads: nk,
            head_k_dim: 128,
            num_v_heads: nv,
            head_v_dim: 128,
            conv_kernel: 4,
            ssm_dtype: "float32".into(),
        });
        f

    }

    fn split(
        window: u64,
        (sl, skv, shd): (u64, u64, u64),
        (gl, gkv, ghd): (u64, u64, u64),
    ) -> LayerKvSplit {
        LayerKvSplit {
            window,
            sliding_layers: sl,
            sliding_kv_heads: skv,
            sliding_head_dim: shd,
            global_layers: gl,
            global_kv_heads: gkv,
            global_head_dim: ghd,
        }
    }

    /// Spec 35 §11.3: Step-3.7-Flash h200 trtllm tp 4 ep 4 (33 sliding / 12 global layers,
    /// window 512, kv 8 × head 128 on both).
    #[test]
    fn step3p7_window_capped_example() {
        let mut f = gqa("Step3p7FlashForCausalLM", ModelFamily::Step3p7, 45, 64, 8, 128);
        f.max_position_embeddings = Some(65536);
        f.layer_kv = Some(split(512, (33, 8, 128), (12, 8, 128)));
        let m = KvCacheModel::for_model(&f, KvQuant::Bfloat16, 4).unwrap();
        assert_eq!(m.bytes_per_token(), 46080.0);
        assert_eq!(m.kv_bytes(1000), 33.0 * 1024.0 * 512.0 + 12.0 * 1024.0 * 1000.0);
        let b: f64 = (151397597184.0 - 104897708032.0) * 0.9;
        assert_eq!(m.tokens_from_bytes(b), 3404345);
        // Without the split the family has no rule.
        f.layer_kv = None;
        let err = KvCacheModel::for_model(&f, KvQuant::Bfloat16, 4).unwrap_err();
        assert!(err.to_string().contains("STEP3P7"), "{err}");
    }

    /// Spec 35 §11.3: gemma-4-26B h200 vllm tp 1 with and without its 1024-token window, and
    /// Gemma-4-31B tp 2 with an fp8 KV cache.
    #[test]
    fn gemma4_window_capped_examples() {
        let mut f = gqa("Gemma4ForConditionalGeneration", ModelFamily::Gemma4Mix, 30, 16, 8, 256);
        f.max_position_embeddings = Some(262144);
        f.layer_kv = Some(split(1024, (25, 8, 256), (5, 2, 512)));
        let m = KvCacheModel::for_model(&f, KvQuant::Bfloat16, 1).unwrap();
        assert_eq!(m.bytes_per_token(), 225280.0);
        assert_eq!(m.tokens_from_bytes(78343870873.6), 3815144);
        f.layer_kv = Some(split(0, (25, 8, 256), (5, 2, 512)));
        let m = KvCacheModel::for_model(&f, KvQuant::Bfloat16, 1).unwrap();
        assert_eq!(m.tokens_from_bytes(78343870873.6), 347762);
        let mut g = gqa("Gemma4ForConditionalGeneration", ModelFamily::Gemma4Mix, 60, 32, 16, 256);
        g.layer_kv = Some(split(1024, (50, 16, 256), (10, 4, 512)));
        let m = KvCacheModel::for_model(&g, KvQuant::Fp8, 2).unwrap();
        assert_eq!(m.bytes_per_token(), 225280.0);
    }

    #[test]
    fn qwen35_state_and_rate() {
        // Spec 31 §9.2 table: (model, [(tp, per-token rate, STATE)]).
        let models = [
            (qwen35(64, 24, 4, 48, 16, 48), [(1, 65536, 153944064), (2, 32768, 76972032), (4, 16384, 38486016), (8, 16384, 19243008)]),
            (qwen35(40, 16, 2, 30, 16, 32), [(1, 20480, 64389120), (2, 10240, 32194560), (4, 10240, 16097280), (8, 10240, 8048640)]),
            (qwen35(48, 32, 2, 36, 16, 64), [(1, 24576, 153649152), (2, 12288, 76824576), (4, 12288, 38412288), (8, 12288, 19206144)]),
            (qwen35(60, 32, 2, 45, 16, 64), [(1, 30720, 192061440), (2, 15360, 96030720), (4, 15360, 48015360), (8, 15360, 24007680)]),
        ];
        for (facts, rows) in &models {
            for &(tp, rate, state) in rows {
                let m = KvCacheModel::for_model(facts, KvQuant::Bfloat16, tp).unwrap();
                assert_eq!(m, KvCacheModel::LinearPlusState { per_token: rate as f64, state: state as f64 }, "tp {tp}");
                // fp8 KV halves the rate, not the state.
                let m8 = KvCacheModel::for_model(facts, KvQuant::Fp8, tp).unwrap();
                assert_eq!(m8, KvCacheModel::LinearPlusState { per_token: (rate / 2) as f64, state: state as f64 });
            }
        }
        // The reported per-token size includes the state: 27B tp 2 → 77004800.
        let m = KvCacheModel::for_model(&models[0].0, KvQuant::Bfloat16, 2).unwrap();
        assert_eq!(m.bytes_per_token(), 77004800.0);
        // A bf16 state halves the SSM part only.
        let mut bf16 = models[0].0.clone();
        bf16.gdn.as_mut().unwrap().ssm_dtype = "bfloat16".into();
        assert_eq!(bf16.gdn.as_ref().unwrap().state_bytes(2), 48 * (24 * 128 * 128 * 2 + 5120 * 3 * 2));
    }

    #[test]
    fn qwen35_capacity_reserves_one_state() {
        // Spec 31 §9.4: 27B h200 vllm tp 2 and 397B h200 trtllm tp 8.
        let m = KvCacheModel::for_model(&qwen35(64, 24, 4, 48, 16, 48), KvQuant::Bfloat16, 2).unwrap();
        let b = 0.9 * 151397597184.0 - 31614042112.0;
        assert_eq!(m.tokens_from_bytes(b), 3191126);
        let m = KvCacheModel::for_model(&qwen35(60, 32, 2, 45, 16, 64), KvQuant::Bfloat16, 8).unwrap();
        assert_eq!(m.tokens_from_bytes((151397597184.0 - 104193949696.0) * 0.9), 2764275);
        // No room for one state, or exactly one state: no tokens.
        assert_eq!(m.tokens_from_bytes(24007680.0), 0);
        assert_eq!(m.tokens_from_bytes(1000.0), 0);
        assert_eq!(m.tokens_from_bytes(24007680.0 + 15360.0), 1);
    }

    #[test]
    fn qwen35_without_gdn_facts_fails() {
        let f = gqa("Qwen3_5ForConditionalGeneration", ModelFamily::Qwen35, 64, 24, 4, 256);
        let err = KvCacheModel::for_model(&f, KvQuant::Bfloat16, 2).unwrap_err();
        assert!(err.to_string().contains("QWEN35"), "{err}");
    }

    #[test]
    fn linear_inverse() {
        assert_eq!(tokens_from_bytes_linear(98507266457.6, 131072.0), 751550);
        assert_eq!(tokens_from_bytes_linear(0.0, 131072.0), 0);
        assert_eq!(tokens_from_bytes_linear(-5.0, 131072.0), 0);
        assert_eq!(tokens_from_bytes_linear(100.0, 0.0), 0);
    }

    #[test]
    fn search_inverse() {
        // Linear curve: agrees with the linear inverse.
        for b in [1.0, 7.0, 8.0, 9.0, 1000.0, 123456789.5] {
            assert_eq!(
                tokens_from_bytes_search(b, |l| l as f64 * 8.0, None),
                tokens_from_bytes_linear(b, 8.0),
                "{b}"
            );
        }
        // Saturated curve: the context length, else the doubled length.
        let capped = |l: u64| l.min(4) as f64;
        assert_eq!(tokens_from_bytes_search(100.0, capped, Some(4096)), 4096);
        assert_eq!(tokens_from_bytes_search(100.0, capped, None), 8);
        assert_eq!(tokens_from_bytes_search(-1.0, capped, None), 0);
    }

    fn dsv4(flash: bool) -> KvCacheModel {
        let mut ratios = Vec::new();
        if flash {
            ratios.extend([0, 0]);
            for l in 0..41 {
                ratios.push(if l % 2 == 0 { 4 } else { 128 });
            }
        } else {
            for l in 0..61 {
                ratios.push(if l % 2 == 0 { 128 } else { 4 });
            }
        }
        KvCacheModel::Dsv4 { ratios, window: 128, head_dim: 512, index_head_dim: 128, mu: 1.0 }
    }

    /// Spec 34 §7: KV bytes per sequence and the capacity inverse.
    #[test]
    fn dsv4_kv_examples() {
        let f = dsv4(true);
        assert_eq!(f.kv_bytes(0), 11345920.0);
        assert_eq!(f.kv_bytes(1), 11367936.0);
        assert_eq!(f.kv_bytes(128), 14561280.0);
        assert_eq!(f.kv_bytes(129), 14561280.0);
        assert_eq!(f.kv_bytes(4096), 26877952.0);
        assert_eq!(f.kv_bytes(100000), 324561408.0);
        let p = dsv4(false);
        assert_eq!(p.kv_bytes(1), 17512960.0);
        assert_eq!(p.kv_bytes(1000), 25910528.0);
        assert_eq!(p.kv_bytes(100000), 465875456.0);
        assert_eq!(f.tokens_from_bytes(1e9), 317603);
        assert_eq!(f.tokens_from_bytes(5e10), 16103687);
        assert_eq!(f.tokens_from_bytes(1.2345e11), 39766703);
        assert_eq!(f.tokens_from_bytes(1e6), 0);
        assert_eq!(p.tokens_from_bytes(1e9), 220191);
        assert_eq!(p.tokens_from_bytes(5e10), 11246295);
    }

    /// Spec 36 §7.2: Kimi-K3 at tp 8 — 69 KDA layers of 12-head state, 24 MLA layers of latent KV.
    #[test]
    fn kimi_k3_state_and_tokens() {
        use super::super::facts::KimiK3Facts;
        let k = KimiK3Facts {
            kda_layers: 69,
            mla_layers: 24,
            kda_heads: 96,
            kda_head_dim: 128,
            conv_kernel: 4,
            kv_lora_rank: 512,
            qk_rope_head_dim: 64,
        };
        assert_eq!(k.state_bytes(8), 280857600);
        assert_eq!(k.token_elements(), 13824);
        assert_eq!(KimiK3Facts::draft_elements(true, 8), 2880);
        assert_eq!(KimiK3Facts::draft_elements(false, 8), 1280);
        let mut f = gqa("KimiK3ForConditionalGeneration", ModelFamily::KimiK3, 93, 96, 96, 74);
        assert!(KvCacheModel::for_model(&f, KvQuant::Bfloat16, 8).is_err(), "needs the layer plan");
        f.kimik3 = Some(k);
        let m = KvCacheModel::for_model(&f, KvQuant::Bfloat16, 8).unwrap();
        assert_eq!(m.bytes_per_token(), 280885248.0);
        // h200 vllm tp 8, pp 2, nextn 0: floor((budget − state) / 27648).
        assert_eq!(m.tokens_from_bytes(34262096281.0), 1229066);
    }
}
