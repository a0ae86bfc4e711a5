//! Op wire types: one externally tagged JSON object per op (`{"Gemm": {...}}`), in execution
//! order. Field order follows the reference's serialisation order; fields with a documented
//! default may be omitted from JSON.

use serde::{Deserialize, Serialize};

use super::quant::{CommQuant, FmhaQuant, GemmQuant, KvQuant, MoeQuant};
use super::Backend;


/// Declares the size fields of an op struct that must be at least 1 (a head count, a width, a
/// parallel size, a divisor): `at_least_one!(GemmOp: n, k; optional: ...)`. The list sits next
/// to the struct so a new field is added to both at once; [`Op::validate`] checks them when a
/// spec is loaded. Fields absent from the list may legitimately be 0 (a `window_size` of 0 is
/// full attention, a MoE `attention_dp_size` of 0 is the absent default).
macro_rules! at_least_one {
    ($op:ty: $($field:ident),* $(; optional: $($opt:ident),*)?) => {
        impl super::validate::SizeFields for $op {
            fn at_least_one(&self) -> Vec<(&'static str, u64)> {
                #[allow(unused_mut)]
                let mut fields = vec![$((stringify!($field), u64::from(self.$field))),*];
                $($(
                    if let Some(v) = self.$opt {
                        fields.push((stringify!($opt), u64::from(v)));
                    }
                )*)?
                fields
            }
        }
    };
}

fn one() -> u32 {
    1
}

fn default_lanes() -> Vec<String> {
    vec!["default".to_string()]
}

/// Dense matrix multiply `[m = tokens] x [k] -> [n]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GemmOp {
    pub name: String,
    pub scale_factor: f64,
    pub n: u32,
    pub k: u32,
    pub quant_mode: GemmQuant,
    pub scale_num_tokens: u32,
    #[serde(default)]
    pub low_precision_input: bool,
    #[serde(default = "one")]
    pub seq_split: u32,
    #[serde(default)]
    pub below_grid_sol: bool,
}

at_least_one!(GemmOp: n, k, scale_num_tokens, seq_split);

/// Token-embedding row gather (analytic memory op).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingOp {
    pub name: String,
    pub scale_factor: f64,
    pub vocab_size: u32,
    pub hidden_size: u32,
    pub quant_mode: GemmQuant,
    #[serde(default = "one")]
    pub seq_split: u32,
}

at_least_one!(EmbeddingOp: vocab_size, hidden_size, seq_split);

/// Memory-bound element-wise work (analytic memory op).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElementwiseOp {
    pub name: String,
    pub scale_factor: f64,
    pub bytes_per_token: f64,
    #[serde(default = "one")]
    pub scale_num_tokens: u32,
    #[serde(default = "one")]
    pub seq_split: u32,
}

at_least_one!(ElementwiseOp: scale_num_tokens, seq_split);

/// Tensor-parallel all-reduce through the framework's custom kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomAllReduceOp {
    pub name: String,
    pub scale_factor: f64,
    pub hidden_size: u32,
    pub tp_size: u32,
    pub quant: CommQuant,
    #[serde(default = "one")]
    pub seq_split: u32,
}

at_least_one!(CustomAllReduceOp: hidden_size, tp_size, seq_split);

/// A generic NCCL collective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NcclOp {
    pub name: String,
    pub scale_factor: f64,
    pub hidden_size: f64,
    pub num_gpus: u32,
    pub dtype: CommQuant,
    pub operation: String,
    #[serde(default = "one")]
    pub seq_split: u32,
}

at_least_one!(NcclOp: num_gpus, seq_split);

/// Pipeline-parallel activation hand-off (analytic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct P2POp {
    pub name: String,
    pub scale_factor: f64,
    pub pp_size: u32,
    pub hidden_size: u32,
    #[serde(default = "one")]
    pub seq_split: u32,
}

at_least_one!(P2POp: pp_size, hidden_size, seq_split);

/// Prefill FMHA plus its fused side kernels (qk-norm, rope, KV write).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextAttentionOp {
    pub name: String,
    pub scale_factor: f64,
    pub n: u32,
    pub n_kv: u32,
    pub head_size: u32,
    pub window_size: u32,
    pub kv_cache_dtype: KvQuant,
    pub fmha_quant_mode: FmhaQuant,
    pub use_qk_norm: bool,
    #[serde(default = "one")]
    pub cp_size: u32,
    #[serde(default = "default_lanes")]
    pub lane_order: Vec<String>,
}

at_least_one!(ContextAttentionOp: n, n_kv, head_size, cp_size);

/// One decode step of attention over a KV cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationAttentionOp {
    pub name: String,
    pub scale_factor: f64,
    pub n: u32,
    pub n_kv: u32,
    pub head_size: u32,
    pub window_size: u32,
    pub kv_cache_dtype: KvQuant,
    #[serde(default = "default_lanes")]
    pub lane_order: Vec<String>,
}

at_least_one!(GenerationAttentionOp: n, n_kv, head_size);

fn twelve() -> u32 {
    12
}

fn yes() -> bool {
    true
}

/// Fused routed-expert compute over a token-count curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoeOp {
    pub name: String,
    pub scale_factor: f64,
    pub hidden_size: u32,
    pub inter_size: u32,
    pub topk: u32,
    pub num_experts: u32,
    pub moe_tp_size: u32,
    pub moe_ep_size: u32,
    #[serde(default)]
    pub attention_dp_size: u32,
    pub quant_mode: MoeQuant,
    pub workload_distribution: String,
    #[serde(default = "yes")]
    pub is_gated: bool,
    #[serde(default)]
    pub moe_backend: Option<String>,
    #[serde(default)]
    pub enable_eplb: bool,
    #[serde(default)]
    pub is_context: bool,
}

at_least_one!(MoeOp: hidden_size, inter_size, topk, num_experts, moe_tp_size, moe_ep_size);

/// How a MoE dispatch moves tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DispatchFlavor {
    /// All-reduce / NCCL collectives around the experts.
    CustomAllReduce,
    /// TRT-LLM all-to-all (all-gather / reduce-scatter off NVL72 nodes).
    TrtllmAlltoall,
    /// The retired DeepEP path (a configuration error).
    RetiredDeepEp,
}

/// Token movement before (dispatch) or after (combine) the fused MoE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoeDispatchOp {
    pub name: String,
    pub scale_factor: f64,
    pub hidden_size: u32,
    pub topk: u32,
    pub num_experts: u32,
    pub moe_tp_size: u32,
    pub moe_ep_size: u32,
    pub attention_dp_size: u32,
    pub pre_dispatch: bool,
    #[serde(default)]
    pub attn_ar_modeled: bool,
    pub backend: Backend,
    pub flavor: DispatchFlavor,
    #[serde(default = "half")]
    pub comm_quant: CommQuant,
    pub moe_quant: MoeQuant,
    #[serde(default = "one")]
    pub attn_cp_size: u32,
    #[serde(default)]
    pub is_context: bool,
    #[serde(default = "twelve")]
    pub sms: u32,
    #[serde(default = "one")]
    pub scale_num_tokens: u32,
}

at_least_one!(MoeDispatchOp: hidden_size, topk, num_experts, moe_tp_size, moe_ep_size, attention_dp_size, attn_cp_size, sms, scale_num_tokens);

fn half() -> CommQuant {
    CommQuant::Half
}

/// Op-level prefill MLA kernel (sglang, trtllm).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextMlaOp {
    pub name: String,
    pub scale_factor: f64,
    pub num_heads: u32,
    pub kv_cache_dtype: KvQuant,
    pub fmha_quant_mode: FmhaQuant,
    #[serde(default = "one")]
    pub cp_size: u32,
}

at_least_one!(ContextMlaOp: num_heads, cp_size);

/// Op-level decode MLA kernel (sglang, trtllm).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationMlaOp {
    pub name: String,
    pub scale_factor: f64,
    pub num_heads: u32,
    pub kv_cache_dtype: KvQuant,
}

at_least_one!(GenerationMlaOp: num_heads);

/// Decode-time MLA batched matmul before (`is_pre`) or after attention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlaBmmOp {
    pub name: String,
    pub scale_factor: f64,
    pub num_heads: u32,
    pub quant_mode: GemmQuant,
    pub is_pre: bool,
}

at_least_one!(MlaBmmOp: num_heads);

/// Fused MLA module (projections + attention + BMMs), context or generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlaModuleOp {
    pub name: String,
    pub scale_factor: f64,
    pub num_heads: u32,
    pub kv_cache_dtype: KvQuant,
    pub fmha_quant_mode: FmhaQuant,
    pub gemm_quant_mode: GemmQuant,
    #[serde(default)]
    pub native_num_heads: Option<u32>,
}

at_least_one!(MlaModuleOp: num_heads; optional: native_num_heads);

fn unit_frac() -> f64 {
    1.0
}

/// Per-projection GEMM modes of a DSA attention block (weight accounting only, spec 32 §2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DsaProjectionQuant {
    pub q: GemmQuant,
    pub kv: GemmQuant,
    pub o: GemmQuant,
    pub indexer: GemmQuant,
}

/// DeepSeek Sparse Attention module (projections, indexer, top-k sparse MLA, o_proj) as one
/// op, context (`DsaContext`) or generation (`DsaGeneration`) (spec 32 §3.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DsaOp {
    pub name: String,
    pub scale_factor: f64,
    pub num_heads: u32,
    pub kv_cache_dtype: KvQuant,
    pub fmha_quant_mode: FmhaQuant,
    pub gemm_quant_mode: GemmQuant,
    pub architecture: String,
    pub index_topk: u32,
    #[serde(default = "one")]
    pub cp_size: u32,
    #[serde(default = "unit_frac")]
    pub full_frac: f64,
    #[serde(default)]
    pub attn_projection_quant_modes: Option<DsaProjectionQuant>,
}

at_least_one!(DsaOp: num_heads, index_topk, cp_size);

fn float32() -> String {
    "float32".to_string()
}

/// One Gated-DeltaNet linear-attention kernel (spec 31 §4.6, §6): conv1d or chunked scan in
/// prefill, conv update or recurrence in decode, priced from the `gdn_perf` table or its
/// memory-bound SOL. `num_k_heads` / `num_v_heads` are the per-TP shard's head counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GdnOp {
    pub name: String,
    pub scale_factor: f64,
    /// Kernel name as the table spells it (e.g. `chunk_gated_delta_rule`).
    pub kernel_source: String,
    /// `context` or `generation`: decides the table's leaf axes, not the runtime shape.
    pub phase: String,
    pub d_model: u32,
    pub d_conv: u32,
    pub num_k_heads: u32,
    pub head_k_dim: u32,
    pub num_v_heads: u32,
    pub head_v_dim: u32,
    /// Recurrent-state dtype; anything but `float32` sends the state kernels to SOL.
    #[serde(default = "float32")]
    pub mamba_ssm_dtype: String,
}

at_least_one!(GdnOp: d_model, d_conv, num_k_heads, head_k_dim, num_v_heads, head_v_dim);

/// One Mamba2 state-space kernel of a Nemotron-H layer (spec 33 §7): conv1d or chunked scan in
/// prefill, conv update or selective state update in decode, priced from the `mamba2_perf`
/// table or its memory-bound SOL. Head and group counts are the whole layer's (unsharded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mamba2Op {
    pub name: String,
    pub scale_factor: f64,
    /// Kernel name as the table spells it (e.g. `causal_conv1d_fn`).
    pub kernel_source: String,
    /// `context` or `generation`: decides the kernel branch, not the runtime shape.
    pub phase: String,
    pub d_model: u32,
    pub d_state: u32,
    pub d_conv: u32,
    pub nheads: u32,
    pub head_dim: u32,
    pub n_groups: u32,
    pub chunk_size: u32,
}

at_least_one!(Mamba2Op: d_model, d_state, d_conv, nheads, head_dim, n_groups, chunk_size);

fn sinkhorn_default() -> u32 {
    20
}

fn bf16_gemm() -> GemmQuant {
    GemmQuant::Bfloat16
}

/// Manifold hyper-connection (mHC) pre/post mixing of a DeepSeek-V4 layer (spec 34 §6), priced
/// from the 1-D token curve of `mhc_module_perf`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MhcOp {
    pub name: String,
    pub scale_factor: f64,
    /// `pre` or `post`.
    pub op: String,
    pub hc_mult: u32,
    pub hidden_size: u32,
    pub architecture: String,
    #[serde(default = "sinkhorn_default")]
    pub sinkhorn_iters: u32,
    #[serde(default = "bf16_gemm")]
    pub quant_mode: GemmQuant,
    #[serde(default = "one")]
    pub seq_split: u32,
}

at_least_one!(MhcOp: hc_mult, hidden_size, seq_split);

/// Which compressed-attention module of DeepSeek-V4 (spec 34 §1): compress ratio 4 (CSA, with
/// an indexer) or 128 (HCA; sliding-window layers are priced as HCA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dsv4Kind {
    Csa,
    Hca,
}

impl Dsv4Kind {
    /// The compress ratio of the kind.
    pub fn ratio(self) -> u64 {
        match self {
            Dsv4Kind::Csa => 4,
            Dsv4Kind::Hca => 128,
        }
    }
}

fn dsv4_hidden() -> u32 {
    7168
}
fn dsv4_q_lora() -> u32 {
    1536
}
fn dsv4_o_lora() -> u32 {
    1024
}
fn dsv4_head_dim() -> u32 {
    512
}
fn dsv4_rope() -> u32 {
    64
}
fn dsv4_index_heads() -> u32 {
    64
}
fn dsv4_index_head_dim() -> u32 {
    128
}
fn dsv4_index_topk() -> u32 {
    1024
}

/// A DeepSeek-V4 compressed-attention block (`Dsv4Context` / `Dsv4Generation`, spec 34 §4.1,
/// §5): projections, compressor, indexer (CSA) and windowed + compressed attention as one op.
/// Dimension defaults are the V4-Pro values (old specs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dsv4Op {
    pub name: String,
    pub scale_factor: f64,
    pub attn_kind: Dsv4Kind,
    /// Per-rank head count.
    pub num_heads: u32,
    /// The model's head count (selects Flash / Pro rows).
    pub native_heads: u32,
    pub tp_size: u32,
    pub kv_cache_dtype: KvQuant,
    pub fmha_quant_mode: FmhaQuant,
    pub gemm_quant_mode: GemmQuant,
    pub architecture: String,
    #[serde(default = "one")]
    pub cp_size: u32,
    #[serde(default)]
    pub window_size: Option<u32>,
    #[serde(default = "dsv4_hidden")]
    pub hidden_size: u32,
    #[serde(default = "dsv4_q_lora")]
    pub q_lora_rank: u32,
    #[serde(default = "dsv4_o_lora")]
    pub o_lora_rank: u32,
    #[serde(default = "dsv4_head_dim")]
    pub head_dim: u32,
    #[serde(default = "dsv4_rope")]
    pub rope_head_dim: u32,
    #[serde(default = "dsv4_index_heads")]
    pub index_n_heads: u32,
    #[serde(default = "dsv4_index_head_dim")]
    pub index_head_dim: u32,
    #[serde(default = "dsv4_index_topk")]
    pub index_topk: u32,
    #[serde(default)]
    pub o_groups: Option<u32>,
}

at_least_one!(Dsv4Op: num_heads, native_heads, tp_size, cp_size, hidden_size, q_lora_rank, o_lora_rank, head_dim, index_n_heads, index_head_dim, index_topk; optional: o_groups);

impl Dsv4Op {
    /// `o_groups` as the op uses it: the field, else `max(1, 16 // max(1, 128 // num_heads))`.
    pub fn groups(&self) -> u32 {
        self.o_groups.unwrap_or_else(|| (16 / (128 / self.num_heads.max(1)).max(1)).max(1))
    }
}

/// A MiniMax sparse-attention block (`MsaContext` / `MsaGeneration`, spec 36 §5.1): projections,
/// block indexer and top-k block-sparse attention as one op, priced from the MSA module tables or,
/// on a miss, by transferring the utilisation of a DSA architecture (`dsa_architecture`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MsaOp {
    pub name: String,
    pub scale_factor: f64,
    /// Per-rank query heads.
    pub num_heads: u32,
    /// Per-rank KV heads.
    pub num_kv_heads: u32,
    pub hidden_size: u32,
    pub head_dim: u32,
    pub v_head_dim: u32,
    pub index_n_heads: u32,
    pub index_head_dim: u32,
    /// Top-k blocks × block size (tokens attended per query).
    pub index_topk: u32,
    pub block_size: u32,
    pub kv_cache_dtype: KvQuant,
    pub fmha_quant_mode: FmhaQuant,
    pub gemm_quant_mode: GemmQuant,
    /// The DSA architecture whose utilisation the cross-op transfer borrows.
    pub dsa_architecture: String,
    /// Divisor of the transferred DSA utilisation.
    pub dsa_scale_k: f64,
}
at_least_one!(MsaOp: num_heads, num_kv_heads, hidden_size, head_dim, v_head_dim, index_n_heads, index_head_dim, index_topk, block_size);

/// One Kimi delta attention (KDA) kernel (`Kda`, spec 36 §6.1): short conv, chunked scan,
/// recurrent decode or speculative verify, priced from the `kda_perf` table (exact or nearest
/// head shard) or its memory-bound SOL. Head counts are the per-TP shard's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KdaOp {
    pub name: String,
    pub scale_factor: f64,
    /// Kernel name as the table spells it (e.g. `flashkda_fwd`).
    pub kernel_source: String,
    /// `context`, `generation` or `verify`.
    pub phase: String,
    pub d_model: u32,
    pub d_conv: u32,
    pub num_k_heads: u32,
    pub head_k_dim: u32,
    pub num_v_heads: u32,
    pub head_v_dim: u32,
    /// Tokens verified per request (`nextn + 1`) on verify ops, else 0.
    #[serde(default)]
    pub draft_tokens: i64,
}
at_least_one!(KdaOp: d_model, d_conv, num_k_heads, head_k_dim, num_v_heads, head_v_dim);

/// Two op groups running concurrently: latency is the max, energy the sum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "OverlapOpWire")]
pub struct OverlapOp {
    pub name: String,
    pub group_a: Vec<Op>,
    pub group_b: Vec<Op>,
}

/// A primary op with a chain used when the primary's data is missing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "FallbackOpWire")]
pub struct FallbackOp {
    pub name: String,
    pub primary: Box<Op>,
    pub fallback: Vec<Op>,
}

/// How deeply composite ops (`Overlap`, `Fallback`) may nest in a spec. Compiled specs nest
/// one level; the bound keeps a corrupt or hostile spec from exhausting the stack while it is
/// decoded, compiled, evaluated or dropped (a stack overflow aborts the process).
pub const MAX_OP_NESTING: usize = 16;

thread_local! {
    static NESTING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts one level of composite nesting while the composite's members are decoded.
struct NestingGuard;

impl NestingGuard {
    fn enter() -> Result<NestingGuard, String> {
        NESTING.with(|depth| {
            if depth.get() >= MAX_OP_NESTING {
                return Err(format!(
                    "composite ops (Overlap, Fallback) nest deeper than {MAX_OP_NESTING} levels; \
                     the spec is corrupt: recompile it with `aic-compile compile`"
                ));
            }
            depth.set(depth.get() + 1);
            Ok(NestingGuard)
        })
    }
}

impl Drop for NestingGuard {
    fn drop(&mut self) {
        NESTING.with(|depth| depth.set(depth.get().saturating_sub(1)));
    }
}

/// Wire shape of [`OverlapOp`]; decoded behind a [`NestingGuard`].
struct OverlapOpWire(OverlapOp);

/// Wire shape of [`FallbackOp`]; decoded behind a [`NestingGuard`].
struct FallbackOpWire(FallbackOp);

impl<'de> Deserialize<'de> for OverlapOpWire {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "OverlapOp")]
        struct Fields {
            name: String,
            group_a: Vec<Op>,
            group_b: Vec<Op>,
        }
        let _guard = NestingGuard::enter().map_err(serde::de::Error::custom)?;
        let f = Fields::deserialize(d)?;
        Ok(OverlapOpWire(OverlapOp { name: f.name, group_a: f.group_a, group_b: f.group_b }))
    }
}

impl<'de> Deserialize<'de> for FallbackOpWire {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "FallbackOp")]
        struct Fields {
            name: String,
            primary: Box<Op>,
            fallback: Vec<Op>,
        }
        let _guard = NestingGuard::enter().map_err(serde::de::Error::custom)?;
        let f = Fields::deserialize(d)?;
        Ok(FallbackOpWire(FallbackOp { name: f.name, primary: f.primary, fallback: f.fallback }))
    }
}

impl From<OverlapOpWire> for OverlapOp {
    fn from(w: OverlapOpWire) -> Self {
        w.0
    }
}

impl From<FallbackOpWire> for FallbackOp {
    fn from(w: FallbackOpWire) -> Self {
        w.0
    }
}

/// One op of an engine spec (externally tagged on the wire).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    Gemm(GemmOp),
    Embedding(EmbeddingOp),
    Elementwise(ElementwiseOp),
    CustomAllReduce(CustomAllReduceOp),
    Nccl(NcclOp),
    P2P(P2POp),
    ContextAttention(ContextAttentionOp),
    GenerationAttention(GenerationAttentionOp),
    Moe(MoeOp),
    MoeDispatch(MoeDispatchOp),
    ContextMla(ContextMlaOp),
    GenerationMla(GenerationMlaOp),
    MlaBmm(MlaBmmOp),
    MlaModuleContext(MlaModuleOp),
    MlaModuleGeneration(MlaModuleOp),
    Overlap(OverlapOp),
    Fallback(FallbackOp),
    DsaContext(DsaOp),
    DsaGeneration(DsaOp),
    Gdn(GdnOp),
    Mamba2(Mamba2Op),
    Mhc(MhcOp),
    Dsv4Context(Dsv4Op),
    Dsv4Generation(Dsv4Op),
    MsaContext(MsaOp),
    MsaGeneration(MsaOp),
    Kda(KdaOp),
}

impl Op {
    /// Checks the op and its members, located as `op`: see [`Op::validate_at`] (real-valued
    /// fields finite and `>= 0`, size fields `>= 1`).
    pub fn check_numbers(&self) -> crate::error::Result<()> {
        self.validate_at("op")
    }

    /// The op's own real-valued fields as `(field, value)`; composites have none.
    pub(crate) fn real_fields(&self) -> Vec<(&'static str, f64)> {
        let scale = |v: f64| vec![("scale_factor", v)];
        match self {
            Op::Gemm(o) => scale(o.scale_factor),
            Op::Embedding(o) => scale(o.scale_factor),
            Op::Elementwise(o) => vec![("scale_factor", o.scale_factor), ("bytes_per_token", o.bytes_per_token)],
            Op::CustomAllReduce(o) => scale(o.scale_factor),
            Op::Nccl(o) => vec![("scale_factor", o.scale_factor), ("hidden_size", o.hidden_size)],
            Op::P2P(o) => scale(o.scale_factor),
            Op::ContextAttention(o) => scale(o.scale_factor),
            Op::GenerationAttention(o) => scale(o.scale_factor),
            Op::Moe(o) => scale(o.scale_factor),
            Op::MoeDispatch(o) => scale(o.scale_factor),
            Op::ContextMla(o) => scale(o.scale_factor),
            Op::GenerationMla(o) => scale(o.scale_factor),
            Op::MlaBmm(o) => scale(o.scale_factor),
            Op::MlaModuleContext(o) | Op::MlaModuleGeneration(o) => scale(o.scale_factor),
            Op::DsaContext(o) | Op::DsaGeneration(o) => {
                vec![("scale_factor", o.scale_factor), ("full_frac", o.full_frac)]
            }
            Op::Gdn(o) => scale(o.scale_factor),
            Op::Mamba2(o) => scale(o.scale_factor),
            Op::Mhc(o) => scale(o.scale_factor),
            Op::Dsv4Context(o) | Op::Dsv4Generation(o) => scale(o.scale_factor),
            Op::MsaContext(o) | Op::MsaGeneration(o) => {
                vec![("scale_factor", o.scale_factor), ("dsa_scale_k", o.dsa_scale_k)]
            }
            Op::Kda(o) => scale(o.scale_factor),
            Op::Overlap(_) | Op::Fallback(_) => Vec::new(),
        }
    }

    /// The op's name (top-level names are what per-op lists report).
    pub fn name(&self) -> &str {
        match self {
            Op::Gemm(o) => &o.name,
            Op::Embedding(o) => &o.name,
            Op::Elementwise(o) => &o.name,
            Op::CustomAllReduce(o) => &o.name,
            Op::Nccl(o) => &o.name,
            Op::P2P(o) => &o.name,
            Op::ContextAttention(o) => &o.name,
            Op::GenerationAttention(o) => &o.name,
            Op::Moe(o) => &o.name,
            Op::MoeDispatch(o) => &o.name,
            Op::ContextMla(o) => &o.name,
            Op::GenerationMla(o) => &o.name,
            Op::MlaBmm(o) => &o.name,
            Op::MlaModuleContext(o) => &o.name,
            Op::MlaModuleGeneration(o) => &o.name,
            Op::Overlap(o) => &o.name,
            Op::Fallback(o) => &o.name,
            Op::DsaContext(o) | Op::DsaGeneration(o) => &o.name,
            Op::Gdn(o) => &o.name,
            Op::Mamba2(o) => &o.name,
            Op::Mhc(o) => &o.name,
            Op::Dsv4Context(o) | Op::Dsv4Generation(o) => &o.name,
            Op::MsaContext(o) | Op::MsaGeneration(o) => &o.name,
            Op::Kda(o) => &o.name,
        }
    }
}
