//! Step composition (spec 40): which runtime shape each op is queried at for prefill,
//! decode (stride quadrature), mixed chunked-prefill steps, decode steps and static runs, and
//! how the op results combine into totals and name-folded per-op lists.

mod batch;
mod indexed;
mod latency_model;
mod per_op;
pub mod provenance;
mod sol;
mod twins;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::data::tables::PerfDatabase;
use crate::error::{AicError, Result};
use crate::ops::{CompiledOp, OpValue, Shape, TransferKinds};
use crate::spec::{DatabaseMode, EngineSpec, Op};

pub use crate::ops::Source;
pub use batch::{max_batch_threads, BatchKind};
pub use latency_model::*;
pub use per_op::OpResult;
pub use provenance::ProvenanceTier;
pub use sol::SolResult;
use per_op::Folder;
use twins::{Memo, Twins};

/// Which phases a static run prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// Context and generation.
    Static,
    /// Context only.
    StaticCtx,
    /// Generation only (no prefix check).
    StaticGen,
}

impl RunMode {
    /// Parses `"static"`, `"static_ctx"` or `"static_gen"`.
    pub fn parse(text: &str) -> Result<RunMode> {
        match text {
            "static" => Ok(RunMode::Static),
            "static_ctx" => Ok(RunMode::StaticCtx),
            "static_gen" => Ok(RunMode::StaticGen),
            other => Err(AicError::config(format!(
                "invalid mode \"{other}\"; expected one of \"static\", \"static_ctx\", \"static_gen\""
            ))),
        }
    }
}

/// Arguments of a static run (`run_static`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StaticRun {
    /// Requests.
    pub batch_size: u32,
    /// Beam width (≥ 1; 0 behaves as 1).
    pub beam_width: u32,
    /// Input length per request, including the cached prefix.
    pub isl: u32,
    /// Output length per request.
    pub osl: u32,
    /// Cached prefix tokens per request.
    pub prefix: u32,
    /// Context-attention multiplier.
    pub seq_scale: f64,
    /// Generation-attention multiplier.
    pub gen_scale: f64,
    /// Which phases to price.
    pub mode: RunMode,
    /// Decode steps each sampled step stands for (0 behaves as 1).
    pub stride: u32,
}

impl StaticRun {
    /// A full static run with unit scales and the default stride of 32.
    pub fn new(batch_size: u32, isl: u32, osl: u32) -> StaticRun {
        StaticRun {
            batch_size,
            beam_width: 1,
            isl,
            osl,
            prefix: 0,
            seq_scale: 1.0,
            gen_scale: 1.0,
            mode: RunMode::Static,
            stride: 32,
        }
    }
}

/// Context, generation and total latency of a static run (ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StaticResult {
    /// Prefill time.
    pub context_ms: f64,
    /// Decode time over `osl − 1` steps.
    pub generation_ms: f64,
    /// `context_ms + generation_ms`.
    pub total_ms: f64,
}

/// A compiled engine: one spec bound to its perf tables. `Send + Sync`; every method is a pure
/// function of the spec, the data and its arguments.
#[derive(Debug)]
pub struct Engine {
    spec: EngineSpec,
    db: Arc<PerfDatabase>,
    context: Vec<CompiledOp>,
    generation: Vec<CompiledOp>,
    /// Identical-op sharing plans of the two phases (used by the whole-phase walks).
    context_twins: Twins,
    generation_twins: Twins,
    nextn: u64,
    mode: DatabaseMode,
    /// The transfer kinds of the spec's `transfer_policy` (spec 20 §0.4; absent = all).
    transfers: TransferKinds,
    /// [`Engine::allow_quant_transfer`] was called.
    quant_transfer: bool,
}

/// Rejects an attention correction scale that is NaN or infinite: it multiplies an attention
/// time, so the estimate would come back infinite or NaN. (A negative scale is defined: the
/// scaled attention clamps to 0, spec 40 E4.)
fn check_scale(name: &str, value: f64) -> Result<()> {
    if value.is_finite() {
        return Ok(());
    }
    Err(AicError::config(format!(
        "{name} must be a finite number (1.0 leaves attention unscaled), got {value}"
    )))
}

/// Every latency an estimate returns is a finite number of milliseconds: arguments far beyond
/// what any table describes (billions of tokens per request times a huge imbalance-correction
/// scale, say) can overflow `f64` to infinity, which is reported as an error instead of a
/// number a simulator would silently add up.
/// Latencies above this many milliseconds (about 32 million years) count as overflowed too:
/// a sum that came within a factor of 1e290 of `f64::MAX` is no estimate of anything.
pub const MAX_LATENCY_MS: f64 = 1e18;

#[inline]
fn finite_total(what: &str, total_ms: f64) -> Result<f64> {
    if total_ms.is_finite() && total_ms.abs() <= MAX_LATENCY_MS {
        return Ok(total_ms);
    }
    Err(AicError::value(format!(
        "{what} overflowed to {total_ms:e} ms (the limit is {MAX_LATENCY_MS:e} ms): the batch size, sequence lengths or \
         imbalance-correction scales are far beyond anything the perf tables describe; \
         estimate with realistic sizes"
    )))
}

/// The most decode steps one static run or summed decode prices one by one (`⌈(osl − 1) /
/// stride⌉`): about two minutes of pricing on one core for a large MoE model. An `osl` near
/// 2^32 at stride 1 would walk for hours before its overflow check could answer; no model
/// decodes that many tokens.
pub const MAX_DECODE_SAMPLES: u64 = 1 << 24;

/// Refuses a decode phase of more than [`MAX_DECODE_SAMPLES`] priced steps up front.
fn check_decode_samples(osl: u64, stride: u64) -> Result<()> {
    let samples = (osl - 1).div_ceil(stride);
    if samples <= MAX_DECODE_SAMPLES {
        return Ok(());
    }
    Err(AicError::value(format!(
        "the decode phase would price {samples} steps one by one (osl {osl}, stride {stride}), more \
         than the {MAX_DECODE_SAMPLES} an estimate prices; bound osl by the model's context length or \
         raise the stride"
    )))
}

/// A spec names a backend version whose data folder does not exist: unless the spec says it
/// tolerates that (the advertised `next` slot, which other versions fill), every table would
/// silently come from other versions or be missing.
fn check_version_has_data(db: &PerfDatabase, backend: crate::spec::Backend, version: &str, tolerate: bool) -> Result<()> {
    let known = crate::data::versions::versions_with_tables(&db.system.data_dir, backend.as_str());
    if known.is_empty() {
        // The system ships no tables for this backend at all (a100_pcie, a30, h100_pcie, l4;
        // b60 sglang/trtllm): spec 12 §3.3.
        let data_dir = crate::data::tables::display_path(&db.system.data_dir);
        return Err(AicError::perf(format!(
            "perf data directory not found in either the legacy layout ({data_dir}/{b}/{version}) \
             or a family-first layout (<family>/{b}/{version} under {data_dir}) (system={}, \
             backend={b}, version={version}): {}",
            db.system.name,
            no_perf_data_hint(&db.system.systems_root, &db.system.name, backend),
            b = backend.as_str(),
        )));
    }
    if tolerate || known.iter().any(|v| v == version) {
        return Ok(());
    }
    let folders = crate::data::versions::version_names(&db.system.data_dir, backend.as_str());
    if folders.iter().any(|v| v == version) {
        return Err(AicError::value(format!(
            "backend version '{version}' has no data for {} on {}: its folders hold no table \
             (no parquet file, no reuse.yaml), so every number would come from another version \
             (versions with data: {}); compile the spec for one of those, or let `aic-compile` \
             resolve an alias such as 'current'",
            backend.as_str(),
            db.system.name,
            known.join(", ")
        )));
    }
    Err(AicError::value(format!(
        "backend version '{version}' has no data for {} on {} (versions with data: {}); compile \
         the spec for one of those, or let `aic-compile` resolve an alias such as 'current'",
        backend.as_str(),
        db.system.name,
        known.join(", ")
    )))
}

/// What to do when `system` has no perf tables for `backend`: names the systems that have.
fn no_perf_data_hint(root: &Path, system: &str, backend: crate::spec::Backend) -> String {
    let b = backend.as_str();
    let has_data = |name: &str| {
        crate::data::system::SystemSpec::load(root, name)
            .is_ok_and(|s| !crate::data::versions::versions_with_tables(&s.data_dir, b).is_empty())
    };
    if has_data(system) {
        return format!(
            "recompile the spec with `aic-compile compile`, which resolves the version ('current' \
             by default) for {b} on {system}"
        );
    }
    let with_data: Vec<String> = crate::data::system::list_systems(root)
        .into_iter()
        .filter(|name| has_data(name))
        .collect();
    format!(
        "system '{system}' ships no {b} perf data (its data folder holds no {b} tables); systems \
         with {b} data: {}",
        if with_data.is_empty() { "none".to_string() } else { with_data.join(", ") }
    )
}

fn prefix_error(got: i64) -> AicError {
    AicError::config(format!("isl must be greater than 0 after removing prefix, but got {got}"))
}

impl Engine {
    /// Builds an engine from a spec in either wire form (binary or JSON).
    pub fn from_spec_bytes(bytes: &[u8], systems_path: Option<&Path>) -> Result<Engine> {
        Engine::from_spec(EngineSpec::from_bytes(bytes)?, systems_path)
    }

    /// Builds an engine from a spec file written by `aic-compile compile`.
    pub fn from_spec_file(path: &Path, systems_path: Option<&Path>) -> Result<Engine> {
        let bytes = crate::spec::read_spec_file(path)?;
        Engine::from_spec_bytes(&bytes, systems_path)
    }

    /// Builds an engine from a decoded spec. The systems folder is, in order: the spec's own
    /// `systems_path`, the `systems_path` argument, then [`crate::data::default_systems_path`].
    pub fn from_spec(spec: EngineSpec, systems_path: Option<&Path>) -> Result<Engine> {
        spec.validate()?;
        let cfg = &spec.engine;
        let root: Option<PathBuf> = cfg
            .systems_path
            .as_ref()
            .map(PathBuf::from)
            .or_else(|| systems_path.map(Path::to_path_buf))
            .or_else(crate::data::default_systems_path);
        let version = cfg.backend_version.clone().ok_or_else(|| {
            let hint = root.as_deref().map_or_else(
                || "compile the spec with a backend version".to_string(),
                |r| no_perf_data_hint(r, &cfg.system_name, cfg.backend),
            );
            AicError::config(format!("backend_version is required to load the perf database: {hint}"))
        })?;
        let root = root.ok_or_else(|| {
            AicError::config(
                "no systems folder: pass systems_path, set AIC_SYSTEMS_PATH, or install the \
                 package with its shipped data",
            )
        })?;
        let strict = cfg.strict_provenance || crate::data::sources::strict_provenance_from_env();
        let db = PerfDatabase::open_with_provenance(&root, &cfg.system_name, cfg.backend, &version, cfg.shared_layer(), strict)?;
        check_version_has_data(&db, cfg.backend, &version, cfg.tolerate_dirless_version)?;
        let context = spec.context_ops.iter().map(|o| CompiledOp::compile(o, &db)).collect();
        let generation = spec.generation_ops.iter().map(|o| CompiledOp::compile(o, &db)).collect();
        let context_twins = Twins::plan(&spec.context_ops, &db);
        let generation_twins = Twins::plan(&spec.generation_ops, &db);
        let nextn = u64::from(cfg.nextn());
        let mode = cfg.database_mode;
        let transfers = TransferKinds::from_policy(cfg.transfer_policy.as_deref())?;
        Ok(Engine { spec, db, context, generation, context_twins, generation_twins, nextn, mode, transfers, quant_transfer: false })
    }

    /// Lets the empirical estimate (HYBRID, EMPIRICAL) price a DSA module whose GEMM quant mode
    /// has no measured slice from a sibling slice of another GEMM quant mode, by the GEMM
    /// transfer ladder of spec 20 §1.3 (`xquant`, then `xprofile`). The reference has no such
    /// rung and raises instead, so parity estimates never turn this on; the calibrated serving
    /// estimate does (`ACCURACY.md`).
    /// Applies to the engine's own ops and to every op list it evaluates afterwards
    /// ([`Engine::evaluate_ops_json`]).
    pub fn allow_quant_transfer(&mut self) {
        self.quant_transfer = true;
        self.context.iter_mut().chain(self.generation.iter_mut()).for_each(CompiledOp::allow_quant_transfer);
        self.context_twins.allow_quant_transfer();
        self.generation_twins.allow_quant_transfer();
    }

    /// Whether [`Engine::allow_quant_transfer`] was called.
    pub fn quant_transfer(&self) -> bool {
        self.quant_transfer
    }

    /// The spec this engine was built from.
    pub fn spec(&self) -> &EngineSpec {
        &self.spec
    }

    /// The perf database behind this engine.
    pub fn database(&self) -> &Arc<PerfDatabase> {
        &self.db
    }

    /// What the loader skipped, relaxed or worked around for this engine's database (shared by
    /// every engine with the same data identity), in first-seen order. Provenance is checked
    /// when the database opens; the other warnings come with each table's first load (most
    /// while the engine is built, some at the first estimate that needs the table).
    pub fn load_warnings(&self) -> Vec<crate::data::warnings::LoadWarning> {
        self.db.resolver.load_warnings()
    }

    fn walk(ops: &[CompiledOp], twins: &Twins, shape: &Shape, mut sink: Option<&mut Folder>) -> Result<f64> {
        let mut total = 0.0;
        if twins.is_empty() {
            for op in ops {
                let v = op.eval(shape)?;
                total += v.latency;
                if let Some(f) = sink.as_deref_mut() {
                    f.add(op.name(), v);
                }
            }
        } else {
            let mut memo = Memo::new();
            for (i, op) in ops.iter().enumerate() {
                let v = twins.eval(i, op, shape, &mut memo)?;
                total += v.latency;
                if let Some(f) = sink.as_deref_mut() {
                    f.add(op.name(), v);
                }
            }
        }
        finite_total(if shape.is_context { "the context pass" } else { "the generation step" }, total)
    }

    fn context_phase(&self, batch: u64, isl: u64, prefix: u64, seq_scale: f64, sink: Option<&mut Folder>) -> Result<f64> {
        if prefix >= isl {
            return Err(prefix_error(isl as i64 - prefix as i64));
        }
        let shape = Shape::context(batch, isl - prefix, prefix, seq_scale, None).with_mode(self.mode).with_transfers(self.transfers);
        Engine::walk(&self.context, &self.context_twins, &shape, sink)
    }

    fn generation_phase(&self, run: &StaticRun, mut sink: Option<&mut Folder>) -> Result<f64> {
        let batch = u64::from(run.batch_size) * (self.nextn + 1);
        let stride = u64::from(run.stride.max(1));
        let (isl, osl) = (u64::from(run.isl), u64::from(run.osl));
        if osl <= 1 {
            return Ok(0.0);
        }
        check_decode_samples(osl, stride)?;
        let mut total = 0.0;
        let mut i = 0;
        while i < osl - 1 {
            let k = stride.min(osl - 1 - i);
            let shape = Shape::generation(batch, u64::from(run.beam_width), isl + i + 1, run.gen_scale, 0, None).with_mode(self.mode).with_transfers(self.transfers);
            let step = match sink.as_deref_mut() {
                Some(outer) => {
                    let mut local = Folder::default();
                    let step = Engine::walk(&self.generation, &self.generation_twins, &shape, Some(&mut local))?;
                    outer.merge_scaled(local, k as f64);
                    step
                }
                None => Engine::walk(&self.generation, &self.generation_twins, &shape, None)?,
            };
            total += step * k as f64;
            i += stride;
        }
        finite_total("the decode phase", total)
    }

    fn static_run(&self, run: &StaticRun, ctx: Option<&mut Folder>, gen: Option<&mut Folder>) -> Result<StaticResult> {
        check_scale("seq_imbalance_correction_scale", run.seq_scale)?;
        check_scale("gen_seq_imbalance_correction_scale", run.gen_scale)?;
        let context_ms = match run.mode {
            RunMode::Static | RunMode::StaticCtx => self.context_phase(
                u64::from(run.batch_size),
                u64::from(run.isl),
                u64::from(run.prefix),
                run.seq_scale,
                ctx,
            )?,
            RunMode::StaticGen => 0.0,
        };
        let generation_ms = match run.mode {
            RunMode::Static | RunMode::StaticGen => self.generation_phase(run, gen)?,
            RunMode::StaticCtx => 0.0,
        };
        let total_ms = finite_total("the static run", context_ms + generation_ms)?;
        Ok(StaticResult { context_ms, generation_ms, total_ms })
    }

    /// `(context_ms, generation_ms, total_ms)` of a static run (spec 40 §8.1).
    pub fn run_static(&self, run: &StaticRun) -> Result<StaticResult> {
        let _call = provenance::CallScope::start();
        self.static_run(run, None, None)
    }

    /// Name-folded per-op lists of a static run: `(context, generation)` (spec 40 §8.3).
    pub fn run_static_per_op(&self, run: &StaticRun) -> Result<(Vec<OpResult>, Vec<OpResult>)> {
        let _call = provenance::CallScope::start();
        let mut ctx = Folder::default();
        let mut gen = Folder::default();
        self.static_run(run, Some(&mut ctx), Some(&mut gen))?;
        Ok((ctx.into_results(), gen.into_results()))
    }

    /// Prefill (context phase) latency of a batch, ms.
    pub fn prefill_latency_ms(&self, batch_size: u32, isl: u32, prefix: u32) -> Result<f64> {
        let _call = provenance::CallScope::start();
        self.context_phase(u64::from(batch_size), u64::from(isl), u64::from(prefix), 1.0, None)
    }

    /// Time to produce `osl` tokens after the prefill (`osl − 1` decode steps, stride 32), ms.
    pub fn decode_latency_ms(&self, batch_size: u32, isl: u32, osl: u32) -> Result<f64> {
        let _call = provenance::CallScope::start();
        let run = StaticRun { mode: RunMode::StaticGen, ..StaticRun::new(batch_size, isl, osl) };
        self.generation_phase(&run, None)
    }

    /// One generation-only iteration of `gen_tokens` decoding requests at the mid-trajectory
    /// KV position `max(isl,1) + floor(max(osl,1)/2) + 1`, ms.
    pub fn decode_step_latency_ms(&self, gen_tokens: u32, isl: u32, osl: u32, gen_scale: f64) -> Result<f64> {
        let _call = provenance::CallScope::start();
        check_scale("gen_seq_imbalance_correction_scale", gen_scale)?;
        if gen_tokens == 0 {
            return Ok(0.0);
        }
        let shape = self.decode_step_shape(gen_tokens, isl, osl, gen_scale);
        Engine::walk(&self.generation, &self.generation_twins, &shape, None)
    }

    /// Per-op list of [`Engine::decode_step_latency_ms`].
    pub fn decode_step_per_op(&self, gen_tokens: u32, isl: u32, osl: u32, gen_scale: f64) -> Result<Vec<OpResult>> {
        let _call = provenance::CallScope::start();
        check_scale("gen_seq_imbalance_correction_scale", gen_scale)?;
        let mut f = Folder::default();
        if gen_tokens > 0 {
            let shape = self.decode_step_shape(gen_tokens, isl, osl, gen_scale);
            Engine::walk(&self.generation, &self.generation_twins, &shape, Some(&mut f))?;
        }
        Ok(f.into_results())
    }

    fn decode_step_shape(&self, gen_tokens: u32, isl: u32, osl: u32, gen_scale: f64) -> Shape {
        let s = u64::from(isl.max(1)) + u64::from(osl.max(1)) / 2 + 1;
        Shape::generation(u64::from(gen_tokens) * (self.nextn + 1), 1, s, gen_scale, 0, None).with_mode(self.mode).with_transfers(self.transfers)
    }

    /// One mixed iteration: `ctx_tokens` prefill tokens plus `gen_tokens` decoding requests, ms.
    #[allow(clippy::too_many_arguments)]
    pub fn mixed_step_latency_ms(
        &self,
        ctx_tokens: u32,
        gen_tokens: u32,
        isl: u32,
        osl: u32,
        prefix: u32,
        seq_scale: f64,
        gen_scale: f64,
    ) -> Result<f64> {
        let _call = provenance::CallScope::start();
        Ok(self.mixed_step_breakdown(ctx_tokens, gen_tokens, isl, osl, prefix, seq_scale, gen_scale)?[0])
    }

    /// `[total, shared_non_attention, context_attention, decode_attention]` of a mixed step
    /// (spec 40 §6).
    #[allow(clippy::too_many_arguments)]
    pub fn mixed_step_breakdown(
        &self,
        ctx_tokens: u32,
        gen_tokens: u32,
        isl: u32,
        osl: u32,
        prefix: u32,
        seq_scale: f64,
        gen_scale: f64,
    ) -> Result<[f64; 4]> {
        let _call = provenance::CallScope::start();
        let parts = self.mixed_parts(ctx_tokens, gen_tokens, isl, osl, prefix, seq_scale, gen_scale, None)?;
        Ok([parts[0] + parts[1] + parts[2], parts[0], parts[1], parts[2]])
    }

    /// Per-op lists `(shared, context_attention, decode_attention)` of a mixed step.
    #[allow(clippy::too_many_arguments)]
    pub fn mixed_step_breakdown_per_op(
        &self,
        ctx_tokens: u32,
        gen_tokens: u32,
        isl: u32,
        osl: u32,
        prefix: u32,
        seq_scale: f64,
        gen_scale: f64,
    ) -> Result<[Vec<OpResult>; 3]> {
        let _call = provenance::CallScope::start();
        let mut sinks = [Folder::default(), Folder::default(), Folder::default()];
        self.mixed_parts(ctx_tokens, gen_tokens, isl, osl, prefix, seq_scale, gen_scale, Some(&mut sinks))?;
        let [a, b, c] = sinks;
        Ok([a.into_results(), b.into_results(), c.into_results()])
    }

    #[allow(clippy::too_many_arguments)]
    fn mixed_parts(
        &self,
        ctx_tokens: u32,
        gen_tokens: u32,
        isl: u32,
        osl: u32,
        prefix: u32,
        seq_scale: f64,
        gen_scale: f64,
        mut sinks: Option<&mut [Folder; 3]>,
    ) -> Result<[f64; 3]> {
        check_scale("seq_imbalance_correction_scale", seq_scale)?;
        check_scale("gen_seq_imbalance_correction_scale", gen_scale)?;
        if ctx_tokens == 0 && gen_tokens == 0 {
            return Ok([0.0; 3]);
        }
        let (ctx, gen) = (u64::from(ctx_tokens), u64::from(gen_tokens));
        let isl = u64::from(isl.max(1));
        let prefix = u64::from(prefix);
        let gen_q = gen * (self.nextn + 1);
        // Pass 1: everything but the context attention op, as one combined sequence.
        //
        // Surprising but reproduced on purpose (spec 40 §6): the attention filters below match
        // only TOP-LEVEL ops named exactly `context_attention` / `generation_attention`. In the
        // DeepSeek family the attention lives inside the composite `*_mla_block` ops, so passes
        // 2 and 3 find nothing: the whole MLA block is priced here at batch 1 over `T1 − P1`
        // tokens, and the decode requests' attention is absent from the mixed step.
        let t1 = ctx + gen_q;
        let p1 = prefix * (ctx / isl);
        if p1 >= t1 {
            return Err(prefix_error(t1 as i64 - p1 as i64));
        }
        let shape = Shape::context(1, t1 - p1, p1, seq_scale, None).with_mode(self.mode).with_transfers(self.transfers);
        let mut shared = 0.0;
        for op in self.context.iter().filter(|o| o.name() != "context_attention") {
            let v = op.eval(&shape)?;
            shared += v.latency;
            if let Some(s) = sinks.as_deref_mut() {
                s[0].add(op.name(), v);
            }
        }
        // Pass 2: context attention at the prefill request's shape.
        let mut ctx_attn = 0.0;
        if ctx > 0 {
            if prefix >= isl {
                return Err(prefix_error(isl as i64 - prefix as i64));
            }
            let b2 = ctx.div_ceil(isl);
            let k2 = isl.div_ceil(ctx) as f64;
            let shape = Shape::context(b2, isl - prefix, prefix, seq_scale, None).with_mode(self.mode).with_transfers(self.transfers);
            let mut local = Folder::default();
            let mut sum = OpValue::zero(Source::Empirical);
            for op in self.context.iter().filter(|o| o.name() == "context_attention") {
                let v = op.eval(&shape)?;
                sum = OpValue::new(sum.latency + v.latency, sum.energy + v.energy, v.source);
                local.add(op.name(), v);
            }
            ctx_attn = sum.latency / k2;
            if let Some(s) = sinks.as_deref_mut() {
                s[1].merge_divided(local, k2);
            }
        }
        // Pass 3: decode attention at the mid-trajectory KV position.
        let mut dec_attn = 0.0;
        if gen > 0 {
            let s = isl + u64::from(osl) / 2 + 1;
            let shape = Shape::generation(gen_q, 1, s, gen_scale, 0, None).with_mode(self.mode).with_transfers(self.transfers);
            for op in self.generation.iter().filter(|o| o.name() == "generation_attention") {
                let v = op.eval(&shape)?;
                dec_attn += v.latency;
                if let Some(sk) = sinks.as_deref_mut() {
                    sk[2].add(op.name(), v);
                }
            }
        }
        finite_total("the mixed step", shared + ctx_attn + dec_attn)?;
        Ok([shared, ctx_attn, dec_attn])
    }

    /// Evaluates an ad-hoc op list (JSON array in the spec encoding) at one shape; results
    /// are name-folded (spec 40 §9).
    #[allow(clippy::too_many_arguments)]
    pub fn evaluate_ops_json(
        &self,
        ops_json: &str,
        is_context: bool,
        batch_size: u32,
        s: u32,
        prefix: u32,
        imbalance: f64,
        x: Option<u64>,
    ) -> Result<Vec<OpResult>> {
        let _call = provenance::CallScope::start();
        let ops: Vec<Op> = serde_json::from_str(ops_json)
            .map_err(|e| AicError::config(format!("evaluate_ops_json: invalid op list JSON: {e}")))?;
        crate::spec::validate_ops("ops", &ops)?;
        check_scale("imbalance_correction_scale", imbalance)?;
        let mut compiled: Vec<CompiledOp> = ops.iter().map(|o| CompiledOp::compile(o, &self.db)).collect();
        if self.quant_transfer {
            compiled.iter_mut().for_each(CompiledOp::allow_quant_transfer);
        }
        let (b, s, p) = (u64::from(batch_size), u64::from(s), u64::from(prefix));
        let shape = if is_context {
            Shape::context(b, s, p, imbalance, x)
        } else {
            Shape::generation(b, 1, s, imbalance, p, x)
        }
        .with_mode(self.mode).with_transfers(self.transfers);
        let mut f = Folder::default();
        Engine::walk(&compiled, &Twins::none(compiled.len()), &shape, Some(&mut f))?;
        Ok(f.into_results())
    }

    /// The database mode the engine prices its ops in.
    pub fn database_mode(&self) -> DatabaseMode {
        self.mode
    }

    /// The transfer kinds the engine's empirical estimates may use (spec 20 §0.4).
    pub fn transfer_kinds(&self) -> TransferKinds {
        self.transfers
    }

    /// Per-op list of [`Engine::prefill_latency_ms`] (name-folded, spec 40 §8.3).
    pub fn prefill_per_op(&self, batch_size: u32, isl: u32, prefix: u32) -> Result<Vec<OpResult>> {
        let _call = provenance::CallScope::start();
        let mut f = Folder::default();
        self.context_phase(u64::from(batch_size), u64::from(isl), u64::from(prefix), 1.0, Some(&mut f))?;
        Ok(f.into_results())
    }
}
