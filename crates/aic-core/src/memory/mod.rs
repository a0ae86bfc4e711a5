//! Memory model (spec 41): how many bytes the weights, activations, runtime reserves and the
//! KV cache take on one GPU, and how many KV tokens fit in what is left. It exists so that
//! serving front ends can size the KV cache (`estimate_kv_cache`) with the same numbers as the
//! reference, byte for byte, from a compiled [`EngineSpec`](crate::EngineSpec) plus a few model
//! facts that the op lists do not carry ([`ModelFacts`]).
//!
//! Layout: `weights` (§2, structural weight bytes per op and per model), `kv` (§3–§4, KV bytes
//! per sequence and the budget → tokens inverse), `usage` (§5, the non-KV memory model),
//! `estimate` (§6 and §8, the native capacity estimate and the tolerance margin) and `naive`
//! (§7, the config-only fallback).

mod estimate;
mod facts;
mod kv;
mod naive;
mod usage;
mod weights;

pub use estimate::{
    estimate_kv_cache, estimate_kv_cache_unbuilt, estimate_num_gpu_blocks, KvCacheEstimate,
    KvCacheRequest, MemoryBreakdown, MemoryFraction, ToleranceAdjusted,
    DEFAULT_NAIVE_KV_RESERVATION,
};
pub use facts::{Dsv4Facts, GdnFacts, KimiK3Facts, LayerKvSplit, ModelFacts, ModelFamily, SlidingWindowSplit};
pub use kv::{tokens_from_bytes_linear, tokens_from_bytes_search, KvCacheModel};
pub use naive::estimate_kv_cache_naive;
pub use usage::{memory_usage, MemoryUsage, MemoryUsageParams, MtpScaling, GIB};
pub use weights::{model_weight_bytes, op_weight_bytes};
