//! Kernel classes of the per-op breakdown, for the calibrated estimate's per-class scales.
//!
//! The kernel tables drift from the deployments by kernel class, not by model: a table's GEMMs
//! were measured on another engine version than its attention kernels, its collectives depend
//! on the interconnect and the communication library, its MoE kernels on the grouped-GEMM
//! implementation of the engine. A correction per kernel class (GEMM, attention / sequence
//! mixer, MoE, communication, other element-wise work) is therefore shared by every model
//! family, where one scalar per deployment group mixes the classes in that group's models'
//! proportions. This module names the classes ([`OpClass`]), sorts an op name into one
//! ([`OpClass::of`]), sums a per-op list by class ([`ClassTimes`]) and holds the fitted scales
//! ([`ClassScales`]).

use serde::Deserialize;
use serde_json::{json, Value};

/// A kernel class of the per-op breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpClass {
    /// Dense GEMMs: QKV / output projections, FFN, router, logits, MLA projections.
    Gemm,
    /// Attention and other sequence mixers: context / generation attention, MLA / DSA
    /// blocks, BMMs of the absorbed MLA, Mamba / GDN / KDA scans and convolutions.
    Attention,
    /// MoE expert computation (grouped GEMMs of the experts, the overlap op).
    Moe,
    /// Communication: all-reduce, all-gather, pipeline p2p, MoE dispatch / combine.
    Comm,
    /// Everything else: embeddings, norms, activations, element-wise work.
    Other,
}

/// Tokens of an op name (after the `context_` / `generation_` prefix) that mark a collective.
const COMM_TOKENS: &[&str] = &["ar", "p2p", "allreduce", "gather", "dispatch", "combine", "alltoall", "a2a", "reduce"];
/// Tokens that mark a sequence mixer.
const ATTENTION_TOKENS: &[&str] = &[
    "attention", "attn", "mla", "dsa", "indexer", "bmm", "mamba", "ssm", "gdn", "kda", "scan", "recurrence", "conv1d",
];

impl OpClass {
    /// All classes, in the order of [`ClassTimes`] and [`ClassScales`].
    pub const ALL: [OpClass; 5] = [OpClass::Gemm, OpClass::Attention, OpClass::Moe, OpClass::Comm, OpClass::Other];

    /// The class of a top-level op name. Rules, first match wins on the `_`-separated tokens
    /// of the name: a collective token → [`OpClass::Comm`]; `moe` / `expert(s)` →
    /// [`OpClass::Moe`]; `gemm` → [`OpClass::Gemm`]; an attention / mixer token →
    /// [`OpClass::Attention`]; else [`OpClass::Other`] (`attn_norm` is a norm: `norm` wins
    /// over `attn`).
    pub fn of(name: &str) -> OpClass {
        let stem = name.strip_prefix("context_").or_else(|| name.strip_prefix("generation_")).unwrap_or(name);
        let tokens: Vec<&str> = stem.split('_').collect();
        let has = |set: &[&str]| tokens.iter().any(|t| set.contains(t));
        if has(COMM_TOKENS) {
            OpClass::Comm
        } else if has(&["moe", "expert", "experts"]) {
            OpClass::Moe
        } else if has(&["gemm"]) {
            OpClass::Gemm
        } else if has(&["norm"]) {
            OpClass::Other
        } else if has(ATTENTION_TOKENS) {
            OpClass::Attention
        } else {
            OpClass::Other
        }
    }

    /// The class's key in the constants file and the JSON figures.
    pub fn key(self) -> &'static str {
        match self {
            OpClass::Gemm => "gemm",
            OpClass::Attention => "attention",
            OpClass::Moe => "moe",
            OpClass::Comm => "comm",
            OpClass::Other => "other",
        }
    }

    fn index(self) -> usize {
        match self {
            OpClass::Gemm => 0,
            OpClass::Attention => 1,
            OpClass::Moe => 2,
            OpClass::Comm => 3,
            OpClass::Other => 4,
        }
    }
}

/// Time by kernel class, ms (indexed as [`OpClass::ALL`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ClassTimes(pub [f64; 5]);

impl ClassTimes {
    /// Sums a per-op list `(name, ms)` by class.
    pub fn from_ops<'a>(ops: impl IntoIterator<Item = (&'a str, f64)>) -> ClassTimes {
        let mut t = [0.0; 5];
        for (name, ms) in ops {
            t[OpClass::of(name).index()] += ms;
        }
        ClassTimes(t)
    }

    /// The sum over the classes, ms.
    pub fn total(&self) -> f64 {
        self.0.iter().sum()
    }

    /// These times rescaled so that they sum to `total` (the class shares of `self` applied to
    /// another total); all of `total` goes to [`OpClass::Other`] when `self` sums to zero.
    pub fn rescaled(&self, total: f64) -> ClassTimes {
        let sum = self.total();
        if sum > 0.0 && sum.is_finite() {
            ClassTimes(self.0.map(|v| v / sum * total))
        } else {
            let mut t = [0.0; 5];
            t[OpClass::Other.index()] = total;
            ClassTimes(t)
        }
    }

    /// `a · self + b · other`, class by class.
    pub fn combine(&self, a: f64, other: &ClassTimes, b: f64) -> ClassTimes {
        let mut t = [0.0; 5];
        for (i, v) in t.iter_mut().enumerate() {
            *v = a * self.0[i] + b * other.0[i];
        }
        ClassTimes(t)
    }

    /// `Σ_c scale_c · time_c`, ms.
    pub fn weighted(&self, scales: &ClassScales) -> f64 {
        OpClass::ALL.iter().map(|c| scales.get(*c) * self.0[c.index()]).sum()
    }

    /// `{"gemm": ms, "attention": ms, ...}`.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for c in OpClass::ALL {
            m.insert(c.key().to_string(), json!(self.0[c.index()]));
        }
        Value::Object(m)
    }
}

/// Measured / table-priced time per kernel class (1 = the table is right for that class).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct ClassScales {
    /// GEMM kernels.
    #[serde(default = "one")]
    pub gemm: f64,
    /// Attention and sequence-mixer kernels.
    #[serde(default = "one")]
    pub attention: f64,
    /// MoE expert kernels.
    #[serde(default = "one")]
    pub moe: f64,
    /// Collectives.
    #[serde(default = "one")]
    pub comm: f64,
    /// Element-wise and other kernels.
    #[serde(default = "one")]
    pub other: f64,
}

fn one() -> f64 {
    1.0
}

impl ClassScales {
    /// Every class at 1.
    pub const ONE: ClassScales = ClassScales { gemm: 1.0, attention: 1.0, moe: 1.0, comm: 1.0, other: 1.0 };

    /// The scale of one class.
    pub fn get(&self, c: OpClass) -> f64 {
        match c {
            OpClass::Gemm => self.gemm,
            OpClass::Attention => self.attention,
            OpClass::Moe => self.moe,
            OpClass::Comm => self.comm,
            OpClass::Other => self.other,
        }
    }

    /// Every scale finite and non-negative.
    pub fn is_valid(&self) -> bool {
        OpClass::ALL.iter().all(|c| {
            let v = self.get(*c);
            v.is_finite() && v >= 0.0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_fall_into_their_kernel_class() {
        for (name, class) in [
            ("context_qkv_gemm", OpClass::Gemm),
            ("generation_router_gemm", OpClass::Gemm),
            ("context_mamba_in_proj_gemm", OpClass::Gemm),
            ("context_attention", OpClass::Attention),
            ("generation_mla_block", OpClass::Attention),
            ("generation_bmm_pre", OpClass::Attention),
            ("context_gdn_scan", OpClass::Attention),
            ("generation_mamba_conv1d", OpClass::Attention),
            ("context_moe", OpClass::Moe),
            ("generation_moe_overlap", OpClass::Moe),
            ("context_moe_pre_dispatch", OpClass::Comm),
            ("generation_ar_1", OpClass::Comm),
            ("context_embedding_ar", OpClass::Comm),
            ("generation_p2p", OpClass::Comm),
            ("context_cp_all_gather", OpClass::Comm),
            ("generation_attn_norm", OpClass::Other),
            ("context_add_norm_1", OpClass::Other),
            ("generation_act_gate", OpClass::Other),
            ("context_embedding", OpClass::Other),
        ] {
            assert_eq!(OpClass::of(name), class, "{name}");
        }
    }

    #[test]
    fn class_times_sum_rescale_and_weight() {
        let t = ClassTimes::from_ops([("context_qkv_gemm", 2.0), ("context_attention", 1.0), ("context_ar_1", 1.0), ("context_ffn2_gemm", 4.0)]);
        assert_eq!(t.0, [6.0, 1.0, 0.0, 1.0, 0.0]);
        assert_eq!(t.total(), 8.0);
        // shares 3/4, 1/8, 0, 1/8, 0 of 16 ms
        assert_eq!(t.rescaled(16.0).0, [12.0, 2.0, 0.0, 2.0, 0.0]);
        assert_eq!(ClassTimes::default().rescaled(3.0).0, [0.0, 0.0, 0.0, 0.0, 3.0]);
        let s = ClassScales { gemm: 0.5, comm: 2.0, ..ClassScales::ONE };
        // 0.5 · 6 + 1 + 2 · 1
        assert!((t.weighted(&s) - 6.0).abs() < 1e-12);
        assert_eq!(t.weighted(&ClassScales::ONE), t.total());
        assert_eq!(t.combine(1.0, &t, 1.0).0, [12.0, 2.0, 0.0, 2.0, 0.0]);
    }
}
