//! Load-time validation of an engine spec: the one place that decides whether the numbers a
//! spec carries can describe an engine at all.
//!
//! It exists because serde only checks types. A `u32` of 0 decodes fine, yet a
//! `CustomAllReduce` over `tp_size: 0` GPUs prices at 0 ms, a `ContextAttention` with `n: 0`
//! heads at a fraction of its cost, and a `seq_split` of 0 divides by zero. Every spec, binary or
//! JSON, passes through [`EngineSpec::validate`] when it is decoded, and every op list handed to
//! `evaluate_ops_json` / `evaluate_ops_sol` through [`validate_ops`]; an error names where the
//! op sits (`context_ops[3]`, members of composites included), its kind and name, the field and
//! the value.
//!
//! Which fields must be at least 1 is declared next to each op struct (the `at_least_one!`
//! lists in `ops.rs`); the engine-config sizes are listed in [`EngineConfig::validate`].

use super::{EngineConfig, EngineSpec, Op};
use crate::error::{AicError, Result};

/// The size fields of an op struct that must be at least 1, with their values.
pub(crate) trait SizeFields {
    /// `(field, value)` for every field that must be `>= 1` (optional fields when present).
    fn at_least_one(&self) -> Vec<(&'static str, u64)>;
}

impl Op {
    /// The op's wire tag (`Gemm`, `ContextAttention`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Gemm(_) => "Gemm",
            Op::Embedding(_) => "Embedding",
            Op::Elementwise(_) => "Elementwise",
            Op::CustomAllReduce(_) => "CustomAllReduce",
            Op::Nccl(_) => "Nccl",
            Op::P2P(_) => "P2P",
            Op::ContextAttention(_) => "ContextAttention",
            Op::GenerationAttention(_) => "GenerationAttention",
            Op::Moe(_) => "Moe",
            Op::MoeDispatch(_) => "MoeDispatch",
            Op::ContextMla(_) => "ContextMla",
            Op::GenerationMla(_) => "GenerationMla",
            Op::MlaBmm(_) => "MlaBmm",
            Op::MlaModuleContext(_) => "MlaModuleContext",
            Op::MlaModuleGeneration(_) => "MlaModuleGeneration",
            Op::Overlap(_) => "Overlap",
            Op::Fallback(_) => "Fallback",
            Op::DsaContext(_) => "DsaContext",
            Op::DsaGeneration(_) => "DsaGeneration",
            Op::Gdn(_) => "Gdn",
            Op::Mamba2(_) => "Mamba2",
            Op::Mhc(_) => "Mhc",
            Op::Dsv4Context(_) => "Dsv4Context",
            Op::Dsv4Generation(_) => "Dsv4Generation",
            Op::MsaContext(_) => "MsaContext",
            Op::MsaGeneration(_) => "MsaGeneration",
            Op::Kda(_) => "Kda",
        }
    }

    /// The op's own size fields that must be at least 1; composites have none.
    fn size_fields(&self) -> Vec<(&'static str, u64)> {
        match self {
            Op::Gemm(o) => o.at_least_one(),
            Op::Embedding(o) => o.at_least_one(),
            Op::Elementwise(o) => o.at_least_one(),
            Op::CustomAllReduce(o) => o.at_least_one(),
            Op::Nccl(o) => o.at_least_one(),
            Op::P2P(o) => o.at_least_one(),
            Op::ContextAttention(o) => o.at_least_one(),
            Op::GenerationAttention(o) => o.at_least_one(),
            Op::Moe(o) => o.at_least_one(),
            Op::MoeDispatch(o) => o.at_least_one(),
            Op::ContextMla(o) => o.at_least_one(),
            Op::GenerationMla(o) => o.at_least_one(),
            Op::MlaBmm(o) => o.at_least_one(),
            Op::MlaModuleContext(o) | Op::MlaModuleGeneration(o) => o.at_least_one(),
            Op::DsaContext(o) | Op::DsaGeneration(o) => o.at_least_one(),
            Op::Gdn(o) => o.at_least_one(),
            Op::Mamba2(o) => o.at_least_one(),
            Op::Mhc(o) => o.at_least_one(),
            Op::Dsv4Context(o) | Op::Dsv4Generation(o) => o.at_least_one(),
            Op::MsaContext(o) | Op::MsaGeneration(o) => o.at_least_one(),
            Op::Kda(o) => o.at_least_one(),
            Op::Overlap(_) | Op::Fallback(_) => Vec::new(),
        }
    }

    /// Checks the op and every member of a composite at location `at` (`context_ops[3]`):
    /// real-valued fields finite and `>= 0`, size fields `>= 1`.
    pub fn validate_at(&self, at: &str) -> Result<()> {
        self.validate_in(at, false)
    }

    /// [`Op::validate_at`]; with `cp_zero` (a spec whose engine has `cp_size` 0) the fields
    /// that encode context parallelism ([`CP_ZERO_FIELDS`]) may be 0 too.
    fn validate_in(&self, at: &str, cp_zero: bool) -> Result<()> {
        let fail = |what: String| {
            AicError::config(format!(
                "{at} ({} \"{}\"): {what}; recompile the spec with `aic-compile compile`",
                self.kind(),
                self.name()
            ))
        };
        for (field, value) in self.real_fields() {
            if !(value.is_finite() && value >= 0.0) {
                return Err(fail(format!("{field} must be a finite number >= 0, got {value}")));
            }
        }
        for (field, value) in self.size_fields() {
            if value < 1 && !(cp_zero && CP_ZERO_FIELDS.contains(&field)) {
                return Err(fail(format!("{field} must be at least 1, got {value}")));
            }
        }
        match self {
            Op::Overlap(o) => {
                validate_list(&format!("{at}.group_a"), &o.group_a, cp_zero)?;
                validate_list(&format!("{at}.group_b"), &o.group_b, cp_zero)
            }
            Op::Fallback(o) => {
                o.primary.validate_in(&format!("{at}.primary"), cp_zero)?;
                validate_list(&format!("{at}.fallback"), &o.fallback, cp_zero)
            }
            _ => Ok(()),
        }
    }
}

impl Op {
    /// True when the op, or a member of a composite, carries MoE widths (`moe_tp_size`,
    /// `moe_ep_size`): the spec is then a MoE model's, whose engine MoE sizes must be real.
    fn carries_moe_widths(&self) -> bool {
        let own = self
            .size_fields()
            .iter()
            .any(|(field, _)| matches!(*field, "moe_tp_size" | "moe_ep_size"));
        own || match self {
            Op::Overlap(o) => o.group_a.iter().chain(&o.group_b).any(Op::carries_moe_widths),
            Op::Fallback(o) => o.primary.carries_moe_widths() || o.fallback.iter().any(Op::carries_moe_widths),
            _ => false,
        }
    }
}

/// Size fields that the reference writes as 0 when a dense model is compiled with
/// `cp_size=0` (spec 43 §2: it prices them like 1). They may be 0 only in a spec whose engine
/// has `cp_size` 0; anywhere else a 0 is an error like any other size.
pub const CP_ZERO_FIELDS: [&str; 3] = ["seq_split", "cp_size", "attn_cp_size"];

/// Validates an op list whose location is `list` (`context_ops`, `ops`): op `i` is reported
/// as `list[i]`.
pub fn validate_ops(list: &str, ops: &[Op]) -> Result<()> {
    validate_list(list, ops, false)
}

fn validate_list(list: &str, ops: &[Op], cp_zero: bool) -> Result<()> {
    ops.iter().enumerate().try_for_each(|(i, op)| op.validate_in(&format!("{list}[{i}]"), cp_zero))
}

impl EngineConfig {
    /// Checks the deployment sizes: every parallel size and a given `kv_block_size` must be at
    /// least 1. `nextn` may be 0 (no draft model) and so may `cp_size`: the reference compiles a
    /// dense model with `cp_size=0` and prices it like 1 (spec 43 §2).
    pub fn validate(&self) -> Result<()> {
        self.validate_sizes(false)
    }

    /// [`EngineConfig::validate`], except that with `moe_widths_unused` (a spec without any op
    /// carrying MoE widths: a dense model) `moe_tp_size` / `moe_ep_size` may be 0 — the
    /// reference copies a dense model's MoE sizes into the engine config unchecked (spec 30 §4)
    /// and nothing reads them.
    pub fn validate_sizes(&self, moe_widths_unused: bool) -> Result<()> {
        let sizes = [
            ("tp_size", Some(self.tp_size)),
            ("pp_size", Some(self.pp_size)),
            ("attention_dp_size", Some(self.attention_dp_size)),
            ("moe_tp_size", Some(self.moe_tp_size)),
            ("moe_ep_size", Some(self.moe_ep_size)),
            ("kv_block_size", self.kv_block_size),
        ];
        for (field, value) in sizes {
            let may_be_zero = moe_widths_unused && matches!(field, "moe_tp_size" | "moe_ep_size");
            if let Some(v) = value.filter(|v| *v < 1 && !may_be_zero) {
                return Err(AicError::config(format!(
                    "engine.{field} must be at least 1, got {v}; recompile the spec with \
                     `aic-compile compile`"
                )));
            }
        }
        Ok(())
    }
}

impl EngineSpec {
    /// Checks the engine config and both op lists (see the module docs); run by every decoder.
    pub fn validate(&self) -> Result<()> {
        let moe_widths_unused = !self
            .context_ops
            .iter()
            .chain(&self.generation_ops)
            .any(Op::carries_moe_widths);
        self.engine.validate_sizes(moe_widths_unused)?;
        let cp_zero = self.engine.cp_size == 0;
        validate_list("context_ops", &self.context_ops, cp_zero)?;
        validate_list("generation_ops", &self.generation_ops, cp_zero)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(engine: &str, ops: &str) -> Result<EngineSpec> {
        EngineSpec::from_json(&format!(
            r#"{{"schema_version":15,"engine":{{"model_name":"m","system_name":"h200_sxm","backend":"vllm"{engine}}},
            "context_ops":[{ops}],"generation_ops":[]}}"#
        ))
    }

    fn message(r: Result<EngineSpec>) -> String {
        r.expect_err("the spec must be rejected").to_string()
    }

    #[test]
    fn zero_sizes_name_op_field_and_value() {
        let ar = r#"{"CustomAllReduce":{"name":"ar","scale_factor":1.0,"hidden_size":8,"tp_size":0,"quant":"half"}}"#;
        assert_eq!(
            message(spec_with("", &format!(r#"{{"Gemm":{{"name":"g","scale_factor":1.0,"n":8,"k":8,"quant_mode":"bfloat16","scale_num_tokens":1}}}},{ar}"#))),
            "invalid engine config: context_ops[1] (CustomAllReduce \"ar\"): tp_size must be at least 1, \
             got 0; recompile the spec with `aic-compile compile`"
        );
        let attn = r#"{"ContextAttention":{"name":"context_attention","scale_factor":1.0,"n":0,"n_kv":8,"head_size":128,"window_size":0,"kv_cache_dtype":"bfloat16","fmha_quant_mode":"bfloat16","use_qk_norm":false}}"#;
        assert!(message(spec_with("", attn)).contains("context_ops[0] (ContextAttention \"context_attention\"): n must be at least 1, got 0"));
        let gemm = r#"{"Gemm":{"name":"g","scale_factor":1.0,"n":8,"k":8,"quant_mode":"bfloat16","scale_num_tokens":1,"seq_split":0}}"#;
        assert!(message(spec_with("", gemm)).contains("(Gemm \"g\"): seq_split must be at least 1, got 0"));
        // a window of 0 is full attention, not an error
        assert!(spec_with("", &attn.replace("\"n\":0", "\"n\":8")).is_ok());
    }

    #[test]
    fn members_of_composites_are_located() {
        let gemm0 = r#"{"Gemm":{"name":"g","scale_factor":1.0,"n":0,"k":8,"quant_mode":"bfloat16","scale_num_tokens":1}}"#;
        let overlap = format!(r#"{{"Overlap":{{"name":"ov","group_a":[],"group_b":[{gemm0}]}}}}"#);
        assert!(message(spec_with("", &overlap)).contains("context_ops[0].group_b[0] (Gemm \"g\"): n must be at least 1"));
        let fallback = format!(r#"{{"Fallback":{{"name":"fb","primary":{gemm0},"fallback":[]}}}}"#);
        assert!(message(spec_with("", &fallback)).contains("context_ops[0].primary (Gemm \"g\")"));
    }

    #[test]
    fn engine_sizes_must_be_at_least_one() {
        assert_eq!(
            message(spec_with(r#","tp_size":0"#, "")),
            "invalid engine config: engine.tp_size must be at least 1, got 0; recompile the spec \
             with `aic-compile compile`"
        );
        assert!(message(spec_with(r#","kv_block_size":0"#, "")).contains("engine.kv_block_size"));
        assert!(spec_with(r#","nextn":0,"kv_block_size":null"#, "").is_ok());
    }

    #[test]
    fn dense_specs_may_carry_zero_moe_widths() {
        let gemm = r#"{"Gemm":{"name":"g","scale_factor":1.0,"n":8,"k":8,"quant_mode":"bfloat16","scale_num_tokens":1}}"#;
        let zero = r#","moe_tp_size":0,"moe_ep_size":0"#;
        assert!(spec_with(zero, gemm).is_ok(), "a dense model's MoE sizes are unused");
        let moe = r#"{"Moe":{"name":"moe","scale_factor":1.0,"hidden_size":8,"inter_size":8,"topk":2,"num_experts":8,"moe_tp_size":1,"moe_ep_size":1,"quant_mode":"bfloat16","workload_distribution":"uniform"}}"#;
        assert!(spec_with("", moe).is_ok());
        assert_eq!(
            message(spec_with(zero, moe)),
            "invalid engine config: engine.moe_tp_size must be at least 1, got 0; recompile the \
             spec with `aic-compile compile`"
        );
        let inside = format!(r#"{{"Overlap":{{"name":"ov","group_a":[{gemm}],"group_b":[{moe}]}}}}"#);
        assert!(message(spec_with(r#","moe_ep_size":0"#, &inside)).contains("engine.moe_ep_size"));
    }

    #[test]
    fn cp_zero_specs_may_carry_zero_cp_fields_only() {
        let gemm = r#"{"Gemm":{"name":"g","scale_factor":1.0,"n":8,"k":8,"quant_mode":"bfloat16","scale_num_tokens":1,"seq_split":0}}"#;
        assert!(spec_with(r#","cp_size":0"#, gemm).is_ok());
        assert!(message(spec_with(r#","cp_size":1"#, gemm)).contains("seq_split must be at least 1, got 0"));
        let zero_n = gemm.replace("\"n\":8", "\"n\":0");
        assert!(message(spec_with(r#","cp_size":0"#, &zero_n)).contains("n must be at least 1, got 0"));
    }

    #[test]
    fn binary_specs_are_validated_too() {
        let good = spec_with("", "").unwrap();
        let mut bad = good.clone();
        bad.engine.pp_size = 0;
        let err = EngineSpec::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
        assert!(err.contains("engine.pp_size must be at least 1, got 0"), "{err}");
        assert_eq!(EngineSpec::from_bytes(&good.to_bytes()).unwrap(), good);
    }
}
