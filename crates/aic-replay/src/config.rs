//! From a compiled aic engine to one role of aisimulate-core's engine configuration: which
//! scheduler model, how many GPUs, how large the KV cache, which batching limits.
//!
//! It exists so that a replay sizes its KV cache with aic's memory model
//! ([`aic_core::memory::estimate_kv_cache`], the same numbers aic's serving estimates use) rather
//! than a simulator default, and so that one place states the backend defaults.
//!
//! # Backend → scheduler model
//!
//! | spec backend | aisimulate scheduler | KV block (tokens) | chunked prefill |
//! |--------------|----------------------|-------------------|-----------------|
//! | `vllm`       | `Backend::Vllm`      | 16 (vLLM's CUDA default) | on |
//! | `sglang`     | `Backend::Sglang` (radix cache) | 1 (SGLang's page size) | on (8192-token chunks) |
//! | `trtllm`     | `Backend::Trtllm` (the shared vLLM-style core with TRT-LLM's guaranteed-no-evict capacity policy) | 32 (`tokens_per_block`) | off |
//!
//! All three start from 256 concurrent sequences and an 8192-token pass budget (the
//! `max_batch_size` / `max_num_tokens` aic's KV estimate assumes by default), prefix caching
//! on. A spec's own `kv_block_size` replaces the table's block size. Every value is
//! overridable through [`SchedulerOverrides`] and [`KvOverrides`].
//!
//! # KV capacity
//!
//! Unless `num_gpu_blocks` is given, the capacity of one scheduler rank is aic's per-GPU KV
//! estimate for the spec (weights, activations at the pass budget, runtime and NCCL reserves
//! subtracted) with the backend's default memory fraction (aic's serving defaults: vLLM 0.9 or
//! 0.92 by version, SGLang 0.88 aggregated or its derived `mem_fraction_static` for disaggregated
//! workers, TRT-LLM 0.9 of free memory), in blocks of the block size
//! ([`aic_core::memory::estimate_num_gpu_blocks`]). Each GPU of a tensor-parallel group holds its
//! shard of every token, so the per-GPU token count is the rank's capacity.
//!
//! # GPUs
//!
//! One aisimulate worker is one aic engine replica: `tp × pp × cp` GPUs per attention-DP rank
//! (aisimulate's `tensor_parallel_size`, used only for GPU accounting: the timing comes from
//! aic, which already prices the parallelism) times `attention_dp_size` ranks (aisimulate's
//! `dp_size`; each rank schedules its own requests, as aic's batch is per attention-DP rank).

use std::sync::Arc;

use aic_core::memory::{
    estimate_kv_cache, estimate_num_gpu_blocks, KvCacheEstimate, KvCacheRequest, MemoryFraction,
    ModelFacts,
};
use aic_core::serving::worker::BudgetRole;
use aic_core::serving::{Worker, WorkerLabels};
use aic_core::{Backend, Engine};
use aisimulate_core::engine::{Backend as SchedulerBackend, EngineConfig as RankConfig};
use serde::{Deserialize, Serialize};

use crate::error::{ReplayError, Result};
use crate::timing::StepCalibration;

/// Default concurrent sequences per scheduler rank.
pub const DEFAULT_MAX_NUM_SEQS: usize = 256;
/// Default token budget of one forward pass.
pub const DEFAULT_MAX_NUM_BATCHED_TOKENS: usize = 8192;

/// Scheduler limits that replace the backend defaults (module docs). `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerOverrides {
    /// Maximum concurrently running sequences per rank (vLLM `max_num_seqs`, SGLang
    /// `max_running_requests`, TRT-LLM `max_batch_size`).
    #[serde(default)]
    pub max_num_seqs: Option<usize>,
    /// Token budget of one pass (vLLM `max_num_batched_tokens`, TRT-LLM `max_num_tokens`).
    #[serde(default)]
    pub max_num_batched_tokens: Option<usize>,
    /// Split long prompts across passes (vLLM, TRT-LLM; SGLang always chunks).
    #[serde(default)]
    pub enable_chunked_prefill: Option<bool>,
    /// Reuse cached prompt blocks across requests.
    #[serde(default)]
    pub enable_prefix_caching: Option<bool>,
}

/// KV-cache settings that replace the memory-model defaults (module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvOverrides {
    /// Tokens per KV block.
    #[serde(default)]
    pub block_size: Option<usize>,
    /// Fraction of GPU memory for the KV cache (of total memory for vLLM and SGLang, of the
    /// memory left after weights and reserves for TRT-LLM).
    #[serde(default)]
    pub gpu_memory_fraction: Option<f64>,
    /// KV blocks per rank, bypassing aic's memory model (no model facts needed then).
    #[serde(default)]
    pub num_gpu_blocks: Option<usize>,
}

/// Which role a configuration is for (its default memory fraction differs for SGLang).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Prefill and decode on the same workers.
    Aggregated,
    /// Prefill-only workers of a disaggregated deployment.
    Prefill,
    /// Decode-only workers of a disaggregated deployment.
    Decode,
}

impl Role {
    /// The role's name in messages and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Aggregated => "agg",
            Role::Prefill => "prefill",
            Role::Decode => "decode",
        }
    }
}

/// Where a role's KV capacity came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KvCapacity {
    /// Tokens per block.
    pub block_size: usize,
    /// Blocks per scheduler rank.
    pub num_gpu_blocks: usize,
    /// `block_size × num_gpu_blocks`.
    pub capacity_tokens: usize,
    /// `"aic_memory_model"` or `"explicit"`.
    pub source: &'static str,
    /// The memory fraction used (memory model only).
    pub gpu_memory_fraction: Option<f64>,
    /// KV bytes per token per GPU (memory model only).
    pub kv_bytes_per_token: Option<u64>,
}

/// One role's resolved aisimulate-core configuration and what it was derived from.
#[derive(Debug, Clone)]
pub struct RoleSetup {
    /// The role.
    pub role: Role,
    /// The compiled engine whose latencies the role's workers take.
    pub engine: Arc<Engine>,
    /// The scheduler configuration of one rank.
    pub rank: RankConfig,
    /// aisimulate `tensor_parallel_size`: GPUs per attention-DP rank (`tp × pp × cp`).
    pub gpus_per_rank: u32,
    /// aisimulate `dp_size`: the spec's attention-DP size.
    pub dp_size: u32,
    /// The KV capacity of one rank and its source.
    pub kv: KvCapacity,
    /// Step-time corrections the role's timing model applies (identity unless set).
    pub calibration: StepCalibration,
}

impl RoleSetup {
    /// GPUs of one worker (one engine replica).
    pub fn gpus_per_worker(&self) -> u32 {
        self.gpus_per_rank * self.dp_size
    }
}

/// Builds a [`RoleSetup`] from a compiled engine.
#[derive(Debug, Clone)]
pub struct RoleBuilder {
    role: Role,
    engine: Arc<Engine>,
    facts: Option<ModelFacts>,
    scheduler: SchedulerOverrides,
    kv: KvOverrides,
    calibration: StepCalibration,
}

impl RoleBuilder {
    /// A builder for `role` over `engine`, with the backend defaults.
    pub fn new(role: Role, engine: Arc<Engine>) -> Self {
        RoleBuilder {
            role,
            engine,
            facts: None,
            scheduler: SchedulerOverrides::default(),
            kv: KvOverrides::default(),
            calibration: StepCalibration::IDENTITY,
        }
    }

    /// Calibrated step times for the role (see [`StepCalibration`]).
    pub fn calibration(mut self, calibration: StepCalibration) -> Self {
        self.calibration = calibration;
        self
    }

    /// The model facts aic's memory model needs (from `ModelFacts::from_hf_config`, or the
    /// Python front end's `aic.memory.model_facts`). Required unless `num_gpu_blocks` is given.
    pub fn facts(mut self, facts: ModelFacts) -> Self {
        self.facts = Some(facts);
        self
    }

    /// Scheduler limits replacing the defaults.
    pub fn scheduler(mut self, overrides: SchedulerOverrides) -> Self {
        self.scheduler = overrides;
        self
    }

    /// KV settings replacing the defaults.
    pub fn kv(mut self, overrides: KvOverrides) -> Self {
        self.kv = overrides;
        self
    }

    /// Resolves the configuration: scheduler model, limits, KV capacity, GPU counts.
    pub fn build(self) -> Result<RoleSetup> {
        let role = self.role;
        let cfg = &self.engine.spec().engine;
        let field = |name: &str| format!("{}.{name}", role.as_str());
        let backend = cfg.backend;
        let (scheduler_backend, default_block, default_chunked) = match backend {
            Backend::Vllm => (SchedulerBackend::Vllm, 16, true),
            Backend::Sglang => (SchedulerBackend::Sglang, 1, true),
            Backend::Trtllm => (SchedulerBackend::Trtllm, 32, false),
        };
        let positive = |name: &str, value: Option<usize>, default: usize| -> Result<usize> {
            match value {
                Some(0) => Err(ReplayError::deployment(field(name), "must be a positive integer, got 0")),
                Some(v) => Ok(v),
                None => Ok(default),
            }
        };
        let spec_block = cfg.kv_block_size.map(|b| b as usize);
        let block_size = positive("block_size", self.kv.block_size, spec_block.unwrap_or(default_block))?;
        if scheduler_backend != SchedulerBackend::Sglang && block_size < 2 {
            return Err(ReplayError::deployment(
                field("block_size"),
                format!("{} schedules KV blocks of at least 2 tokens, got {block_size}", backend.as_str()),
            ));
        }
        let max_num_seqs = positive("max_num_seqs", self.scheduler.max_num_seqs, DEFAULT_MAX_NUM_SEQS)?;
        let max_num_batched_tokens = positive(
            "max_num_batched_tokens",
            self.scheduler.max_num_batched_tokens,
            DEFAULT_MAX_NUM_BATCHED_TOKENS,
        )?;
        let chunked = self.scheduler.enable_chunked_prefill.unwrap_or(default_chunked);
        if scheduler_backend == SchedulerBackend::Sglang && !chunked {
            return Err(ReplayError::deployment(
                field("enable_chunked_prefill"),
                "SGLang always chunks long prompts; leave enable_chunked_prefill unset or true",
            ));
        }
        let (tp, pp, dp, cp) =
            (cfg.tp_size.max(1), cfg.pp_size.max(1), cfg.attention_dp_size.max(1), cfg.cp_size.max(1));
        let gpus_per_rank = tp
            .checked_mul(pp)
            .and_then(|g| g.checked_mul(cp))
            .ok_or_else(|| ReplayError::deployment(field("parallelism"), "tp × pp × cp overflows"))?;
        let kv = self.kv_capacity(block_size, max_num_seqs, max_num_batched_tokens)?;

        let mut rank = RankConfig::for_backend(scheduler_backend);
        rank.block_size = block_size;
        rank.num_gpu_blocks = kv.num_gpu_blocks;
        rank.max_num_seqs = max_num_seqs;
        rank.max_num_batched_tokens = max_num_batched_tokens;
        rank.enable_chunked_prefill = chunked;
        rank.enable_prefix_caching = self.scheduler.enable_prefix_caching.unwrap_or(true);
        rank.validate().map_err(|e| ReplayError::deployment(role.as_str(), format!("{e:#}")))?;
        let calibration = self.calibration;
        calibration.check().map_err(|e| ReplayError::deployment(field("calibration"), e))?;
        Ok(RoleSetup { role, engine: self.engine, rank, gpus_per_rank, dp_size: dp, kv, calibration })
    }

    fn kv_capacity(&self, block_size: usize, max_num_seqs: usize, max_tokens: usize) -> Result<KvCapacity> {
        let role = self.role;
        if let Some(blocks) = self.kv.num_gpu_blocks {
            if blocks == 0 {
                return Err(ReplayError::deployment(
                    format!("{}.num_gpu_blocks", role.as_str()),
                    "must be a positive integer, got 0",
                ));
            }
            return Ok(KvCapacity {
                block_size,
                num_gpu_blocks: blocks,
                capacity_tokens: blocks.saturating_mul(block_size),
                source: "explicit",
                gpu_memory_fraction: None,
                kv_bytes_per_token: None,
            });
        }
        let facts = self.facts.clone().ok_or_else(|| {
            ReplayError::deployment(
                format!("{}.facts", role.as_str()),
                "aic's KV memory model needs the model facts (ModelFacts::from_hf_config, or \
                 aic.memory.model_facts in Python); pass them, or give num_gpu_blocks",
            )
        })?;
        let worker = Worker {
            engine: Arc::clone(&self.engine),
            facts: Arc::new(facts),
            system: Arc::clone(&self.engine.database().system),
            labels: WorkerLabels {
                gemm: String::new(),
                kvcache: String::new(),
                fmha: String::new(),
                moe: String::new(),
                comm: String::new(),
                moe_tp: None,
                moe_ep: None,
            },
        };
        let budget_role = if role == Role::Aggregated { BudgetRole::Agg } else { BudgetRole::Worker };
        let fraction = match self.kv.gpu_memory_fraction {
            Some(f) if !(f.is_finite() && f > 0.0 && f <= 1.0) => {
                return Err(ReplayError::deployment(
                    format!("{}.gpu_memory_fraction", role.as_str()),
                    format!("must be in (0, 1], got {f}"),
                ))
            }
            Some(f) => f,
            None => worker.default_fraction(budget_role),
        };
        let memory_fraction = match worker.backend() {
            Backend::Trtllm => MemoryFraction::OfFree(fraction),
            Backend::Vllm | Backend::Sglang => MemoryFraction::OfTotal(fraction),
        };
        let request = KvCacheRequest::new(max_tokens as u64, max_num_seqs as u64, memory_fraction);
        let estimate: KvCacheEstimate =
            estimate_kv_cache(self.engine.spec(), &worker.facts, &worker.system, &request)?;
        let blocks = estimate_num_gpu_blocks(&estimate, block_size as u64)?;
        let num_gpu_blocks = usize::try_from(blocks).unwrap_or(usize::MAX);
        if num_gpu_blocks == 0 {
            return Err(ReplayError::deployment(
                format!("{}.kv", role.as_str()),
                format!(
                    "aic's memory model leaves {} KV tokens per GPU, less than one block of \
                     {block_size}; use more GPUs per worker or a larger gpu_memory_fraction",
                    estimate.total_kv_size_tokens
                ),
            ));
        }
        Ok(KvCapacity {
            block_size,
            num_gpu_blocks,
            capacity_tokens: num_gpu_blocks.saturating_mul(block_size),
            source: "aic_memory_model",
            gpu_memory_fraction: Some(fraction),
            kv_bytes_per_token: Some(estimate.kv_size_per_token_bytes),
        })
    }
}
