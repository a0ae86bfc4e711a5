//! The calibrated serving estimate: the reference's serving model (parity mode) corrected for
//! what it leaves out, with a handful of constants fitted on measured deployments.
//!
//! Parity mode reproduces the reference bit for bit, including its blind spots: requests that
//! arrive together at the measured concurrency queue for prefill (the reference's TTFT ignores
//! it), every engine adds per-iteration host work that no kernel table holds (scheduling,
//! sampling, launch gaps), the kernel tables were measured on other engine versions than the
//! deployments, and the memory model rejects deployments that run. This module keeps the parity
//! computation and applies, per `system/backend/mode` group, a small closed-form correction
//! ([`StepCorrection`]) whose constants live in a data file (`data/calibration/serving.json`,
//! fitted by `scripts/fit_calibration.py`, see `ACCURACY.md`):
//!
//! * `TPOT = tpot_scale · TPOT_parity + tpot_overhead_ms`
//! * `TTFT = ttft_scale · T₁ · (1 + ttft_queue · (n − 1) / 2) + ttft_overhead_ms`
//!
//! with `T₁` the prefill of one request alone on the prefill worker and `n` the requests that
//! arrive together at one prefill rank (the concurrency per attention-DP rank in agg, per
//! prefill rank in disagg): with FIFO prefill a request waits on average for half of the others
//! (`ttft_queue = 1`), less when arrivals drift apart or prefills are batched.
//!
//! Version 2 of the constants adds, per group, a scale per kernel class
//! ([`super::op_classes`]): the parity TPOT and `T₁` are split by the class shares of their
//! per-op breakdown and each class is scaled by its own measured / priced ratio before the
//! group scalars apply (`Σ_c k_c · time_c` in place of the parity figure). Table drift differs
//! by kernel class (GEMM, attention, MoE, collectives), so these scales are shared by model
//! families where one scalar per group is not.
//!
//! Version 2 also holds one factor pair for estimates priced in the HYBRID database mode (the
//! fallback of a row whose perf table is missing): measured / predicted kernel time of such
//! rows, applied to `T₁` and the TPOT base on top of their group's constants.
//!
//! A memory verdict does not stop a calibrated estimate (it is reported instead): the memory
//! model is the reference's and is known to reject deployments that were measured running.
//! Its workers are loaded with [`crate::Engine::allow_quant_transfer`], so that in the HYBRID
//! fallback a DSA module whose GEMM quant mode has no measured slice is read from a sibling
//! quant's slice instead of failing (the GLM-5 rows of the measured sample).
//! [`CalibratedLatencyModel`] offers the step-level part of the same correction to serving
//! simulators through [`LatencyModel`].

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::engine::LatencyModel;
use super::error::Result;
use crate::error::{AicError, Result as CoreResult};

use super::agg::{agg_eval, AggParams};
use super::disagg::{compose, decode_worker, prefill_worker, DisaggParams, TTFT_FACTOR};
use super::op_classes::{ClassScales, ClassTimes};
use super::worker::Worker;

/// The correction of one `system/backend/mode` group. Every constant is physical:
/// scales are ratios of measured to table-priced time, overheads are milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct StepCorrection {
    /// Measured / priced decode time (kernel-version and efficiency drift of the tables).
    pub tpot_scale: f64,
    /// Host time per decode iteration that no kernel table holds (scheduler, sampling), ms.
    pub tpot_overhead_ms: f64,
    /// Measured / priced prefill time of one request (tables, interference with decodes).
    pub ttft_scale: f64,
    /// Share of the co-arriving requests' prefill work a request waits behind: 1 = all
    /// requests arrive at once and are prefilled first-in first-out, 0 = no queueing.
    pub ttft_queue: f64,
    /// Per-request latency outside the GPU steps (tokenize, HTTP, KV transfer), ms.
    pub ttft_overhead_ms: f64,
}

impl StepCorrection {
    /// No correction: the parity TPOT, and TTFT = `T₁` with no queueing.
    pub const IDENTITY: StepCorrection = StepCorrection {
        tpot_scale: 1.0,
        tpot_overhead_ms: 0.0,
        ttft_scale: 1.0,
        ttft_queue: 0.0,
        ttft_overhead_ms: 0.0,
    };

    /// The calibrated TPOT from the parity TPOT, ms.
    pub fn tpot(&self, parity_tpot_ms: f64) -> f64 {
        self.tpot_scale * parity_tpot_ms + self.tpot_overhead_ms
    }

    /// The calibrated TTFT from the one-request prefill `prefill_one_ms` and the number of
    /// requests `requests_per_rank` arriving together at one prefill rank (at least 1), ms.
    pub fn ttft(&self, prefill_one_ms: f64, requests_per_rank: f64) -> f64 {
        let waiting = (requests_per_rank.max(1.0) - 1.0) / 2.0;
        self.ttft_scale * prefill_one_ms * (1.0 + self.ttft_queue * waiting) + self.ttft_overhead_ms
    }

    fn check(&self, key: &str) -> Result<()> {
        let fields = [
            ("tpot_scale", self.tpot_scale, SCALE_RANGE),
            ("tpot_overhead_ms", self.tpot_overhead_ms, TPOT_OVERHEAD_RANGE_MS),
            ("ttft_scale", self.ttft_scale, SCALE_RANGE),
            ("ttft_queue", self.ttft_queue, QUEUE_RANGE),
            ("ttft_overhead_ms", self.ttft_overhead_ms, TTFT_OVERHEAD_RANGE_MS),
        ];
        for (name, value, range) in fields {
            check_constant(&format!("calibration group '{key}'"), name, value, range)?;
        }
        Ok(())
    }
}

/// A constant's physical range: `(low, high, low_inclusive)`.
type ConstantRange = (f64, f64, bool);

/// Scales are ratios of measured to table-priced time: positive, and a factor of 100 either
/// way is already far beyond any measured drift (the shipped fits lie in 0.4 … 3).
pub const SCALE_RANGE: ConstantRange = (0.0, 100.0, false);
/// The share of co-arriving prefills a request waits behind: 0 (no queueing) … 1 (all arrive
/// at once, first-in first-out).
pub const QUEUE_RANGE: ConstantRange = (0.0, 1.0, true);
/// Host time per decode iteration: 0 … 1 s.
pub const TPOT_OVERHEAD_RANGE_MS: ConstantRange = (0.0, 1_000.0, true);
/// Per-request time outside the GPU steps: 0 … 1 min.
pub const TTFT_OVERHEAD_RANGE_MS: ConstantRange = (0.0, 60_000.0, true);
/// Per-kernel-class scales: like [`SCALE_RANGE`], but 0 (a class that costs nothing) allowed.
pub const CLASS_SCALE_RANGE: ConstantRange = (0.0, 100.0, true);

/// Refuses a constant that is not finite or lies outside its physical range (a value such as
/// 1e308 would make every calibrated figure infinite).
fn check_constant(owner: &str, name: &str, value: f64, (low, high, low_inclusive): ConstantRange) -> crate::error::Result<()> {
    let above_low = if low_inclusive { value >= low } else { value > low };
    if value.is_finite() && above_low && value <= high {
        return Ok(());
    }
    let open = if low_inclusive { '[' } else { '(' };
    Err(AicError::value(format!(
        "{owner}: {name} must be a finite number in {open}{low}, {high}], got {}; correct it in the constants \
         file or refit it with `aic-compile calibrate`",
        super::checks::show(value)
    )))
}

/// The per-kernel-class scales of one group (version 2 of the constants): the parity TPOT and
/// the one-request prefill `T₁` become `Σ_c k_c · time_c` over their class split.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct ClassCorrection {
    /// Scales of the decode iteration's classes.
    #[serde(default = "ClassCorrection::one")]
    pub tpot: ClassScales,
    /// Scales of the one-request prefill's classes.
    #[serde(default = "ClassCorrection::one")]
    pub ttft: ClassScales,
}

impl ClassCorrection {
    fn one() -> ClassScales {
        ClassScales::ONE
    }
}

/// The correction of estimates priced in the HYBRID database mode (a missing table answered by
/// the utilisation-transfer estimate): measured / predicted kernel time of such rows.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct HybridCorrection {
    /// Multiplies the one-request prefill `T₁` of a HYBRID-priced prefill worker.
    pub ttft_scale: f64,
    /// Multiplies the TPOT base of a HYBRID-priced decode worker.
    pub tpot_scale: f64,
}

/// The fitted constants: one [`StepCorrection`] per group key `system/backend/mode`, where any
/// part may be `*` (a pooled fit used when the exact group has too few measured rows).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Calibration {
    /// Format version (1: group scalars only; 2: also per-class scales).
    pub version: u32,
    /// Where the constants come from (sample, script, date).
    #[serde(default)]
    pub provenance: String,
    /// Corrections by group key.
    pub groups: BTreeMap<String, StepCorrection>,
    /// Per-kernel-class scales by group key (version 2; a group without an entry uses 1 for
    /// every class).
    #[serde(default)]
    pub classes: BTreeMap<String, ClassCorrection>,
    /// The HYBRID-priced rows' correction (version 2; none: factor 1).
    #[serde(default)]
    pub hybrid: Option<HybridCorrection>,
}

impl Calibration {
    /// Parses and checks a constants document (JSON text).
    pub fn from_json(text: &str) -> Result<Calibration> {
        let cal: Calibration = super::request_json::parse("calibration constants", text)?;
        cal.check()?;
        Ok(cal)
    }

    /// Reads and checks a constants file.
    pub fn load(path: &Path) -> Result<Calibration> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            AicError::value(format!("cannot read calibration constants {}: {e}", path.display()))
        })?;
        Calibration::from_json(&text)
    }

    /// Checks the format version and every group's constants.
    pub fn check(&self) -> Result<()> {
        if self.version != 1 && self.version != 2 {
            return Err(AicError::value(format!(
                "calibration constants version {} is not supported (expected 1 or 2)",
                self.version
            )).into());
        }
        for (key, c) in &self.groups {
            c.check(key)?;
        }
        if let Some(h) = &self.hybrid {
            check_constant("calibration 'hybrid'", "ttft_scale", h.ttft_scale, SCALE_RANGE)?;
            check_constant("calibration 'hybrid'", "tpot_scale", h.tpot_scale, SCALE_RANGE)?;
        }
        for (key, c) in &self.classes {
            for (phase, scales) in [("tpot", &c.tpot), ("ttft", &c.ttft)] {
                for class in super::op_classes::OpClass::ALL {
                    let name = format!("{phase}.{}", class.key());
                    check_constant(&format!("calibration classes '{key}'"), &name, scales.get(class), CLASS_SCALE_RANGE)?;
                }
            }
        }
        Ok(())
    }

    /// The correction of a group and the key it was found under: the exact
    /// `system/backend/mode`, else `*/backend/mode`, `*/backend/*`, `*/*/*`, else identity
    /// (key `""`).
    pub fn lookup(&self, system: &str, backend: &str, mode: &str) -> (StepCorrection, String) {
        for key in [
            format!("{system}/{backend}/{mode}"),
            format!("*/{backend}/{mode}"),
            format!("*/{backend}/*"),
            "*/*/*".to_string(),
        ] {
            if let Some(c) = self.groups.get(&key) {
                return (*c, key);
            }
        }
        (StepCorrection::IDENTITY, String::new())
    }

    /// The per-class scales stored under a group key (all 1 when there are none).
    pub fn classes_of(&self, key: &str) -> ClassCorrection {
        self.classes.get(key).copied().unwrap_or(ClassCorrection { tpot: ClassScales::ONE, ttft: ClassScales::ONE })
    }
}

/// What the engine says about one row, before any constant applies: the inputs of the closed
/// form.
#[derive(Debug, Clone, PartialEq)]
pub struct RowFeatures {
    /// The parity TTFT and TPOT, ms.
    pub parity: (f64, f64),
    /// One request's prefill alone on the prefill worker, ms.
    pub prefill_one_ms: f64,
    /// Requests arriving together at one prefill rank.
    pub requests_per_rank: f64,
    /// The parity TPOT split by kernel class (sums to the parity TPOT), ms.
    pub tpot_classes: ClassTimes,
    /// `prefill_one_ms` split by kernel class, ms.
    pub prefill_classes: ClassTimes,
    /// The prefill of all `requests_per_rank` requests (rounded up) as one batch, ms (`None`
    /// when the engine cannot price it).
    pub prefill_all_ms: Option<f64>,
    /// The prefill and the decode worker price in the HYBRID database mode.
    pub hybrid: (bool, bool),
}

/// What a calibrated estimate adds to the parity one.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibratedFigures {
    /// Calibrated TTFT, ms.
    pub ttft: f64,
    /// Calibrated TPOT, ms.
    pub tpot: f64,
    /// The parity TTFT (the reference's formula), ms.
    pub parity_ttft: f64,
    /// The parity TPOT, ms.
    pub parity_tpot: f64,
    /// One request's prefill alone on the prefill worker, ms.
    pub prefill_one_ms: f64,
    /// Requests arriving together at one prefill rank.
    pub requests_per_rank: f64,
    /// The group key the constants came from.
    pub group: String,
    /// The memory model predicted OOM (or KV over budget) and was overruled.
    pub memory_overruled: bool,
    /// The parity TPOT split by kernel class, ms.
    pub tpot_classes: ClassTimes,
    /// The one-request prefill split by kernel class, ms.
    pub prefill_classes: ClassTimes,
    /// The prefill of all co-arriving requests of a rank as one batch, ms.
    pub prefill_all_ms: Option<f64>,
    /// The prefill / decode worker priced in the HYBRID mode (the HYBRID factors applied).
    pub hybrid: (bool, bool),
}

impl CalibratedFigures {
    /// Applies the constants of `cal` found under `system/backend/mode` to one row's features.
    pub fn from_features(cal: &Calibration, system: &str, backend: &str, mode: &str, f: RowFeatures, overruled: bool) -> Self {
        let (c, group) = cal.lookup(system, backend, mode);
        // A group without class scales uses the parity figures as they are (bit for bit).
        let k = cal.classes.get(&group);
        let mut tpot_base = k.map_or(f.parity.1, |k| f.tpot_classes.weighted(&k.tpot));
        let mut t1 = k.map_or(f.prefill_one_ms, |k| f.prefill_classes.weighted(&k.ttft));
        if let Some(h) = &cal.hybrid {
            if f.hybrid.0 {
                t1 *= h.ttft_scale;
            }
            if f.hybrid.1 {
                tpot_base *= h.tpot_scale;
            }
        }
        CalibratedFigures {
            ttft: c.ttft(t1, f.requests_per_rank),
            tpot: c.tpot(tpot_base),
            parity_ttft: f.parity.0,
            parity_tpot: f.parity.1,
            prefill_one_ms: f.prefill_one_ms,
            requests_per_rank: f.requests_per_rank.max(1.0),
            group,
            memory_overruled: overruled,
            tpot_classes: f.tpot_classes,
            prefill_classes: f.prefill_classes,
            prefill_all_ms: f.prefill_all_ms,
            hybrid: f.hybrid,
        }
    }

    /// The figures as a JSON object (the `calibration` entry of a calibrated result).
    pub fn to_json(&self) -> Value {
        json!({
            "ttft": self.ttft, "tpot": self.tpot,
            "parity_ttft": self.parity_ttft, "parity_tpot": self.parity_tpot,
            "prefill_one_ms": self.prefill_one_ms, "requests_per_rank": self.requests_per_rank,
            "group": self.group, "memory_overruled": self.memory_overruled,
            "tpot_classes": self.tpot_classes.to_json(), "prefill_classes": self.prefill_classes.to_json(),
            "prefill_all_ms": self.prefill_all_ms,
            "hybrid_priced": [self.hybrid.0, self.hybrid.1],
        })
    }
}

/// Calibrated agg: the parity evaluation (no OOM stop) and the correction; `concurrency` is the
/// measured total (`None`: `batch_size` per attention-DP rank).
pub fn calibrated_agg(w: &Worker, p: &AggParams, cal: &Calibration, concurrency: Option<u32>) -> Result<(super::agg::AggEval, CalibratedFigures)> {
    let eval = agg_eval(w, p)?;
    let (_, _, dp) = w.tp_pp_dp();
    let n = concurrency.map_or(f64::from(p.batch_size), |c| f64::from(c) / f64::from(dp.max(1)));
    let parity = (eval.row.f("ttft"), eval.row.f("tpot"));
    let s = &eval.schedule;
    let mix_parts = w.engine.mixed_step_breakdown_per_op(p.ctx_tokens, s.g, p.isl, p.osl, p.prefix, 1.0, 1.0)?;
    let mix = ClassTimes::from_ops(mix_parts.iter().flatten().map(|o| (o.name.as_str(), o.latency_ms)));
    let gen = if s.genonly_reqs > 0 {
        let ops = w.engine.decode_step_per_op(s.genonly_reqs, p.isl, p.osl, 1.0)?;
        ClassTimes::from_ops(ops.iter().map(|o| (o.name.as_str(), o.latency_ms)))
    } else {
        ClassTimes::default()
    };
    // The parity TPOT is (l_mix · tpot_mix_steps + l_gen · genonly_steps) / steps / tokens per
    // iteration: the same weights split it by class.
    let tpot_classes = mix.combine(s.tpot_mix_steps, &gen, s.genonly_steps).rescaled(parity.1);
    let hybrid = is_hybrid(w);
    let features = RowFeatures { hybrid: (hybrid, hybrid), ..prefill_features(w, p.isl, p.prefix, n, parity, tpot_classes)? };
    let figures = CalibratedFigures::from_features(cal, w.system_name(), w.backend().as_str(), "agg", features, eval.verdict.oom);
    Ok((eval, figures))
}

/// Calibrated disagg: the parity composition (no OOM / KV stop) and the correction;
/// `concurrency` is the measured total (`None`: decode batch × workers).
pub fn calibrated_disagg(pw: &Worker, dw: &Worker, p: &DisaggParams, cal: &Calibration, concurrency: Option<u32>) -> Result<(super::row::Row, CalibratedFigures)> {
    let prefill = prefill_worker(pw, p.isl, p.prefix, &p.prefill)?;
    let decode = decode_worker(dw, p.isl, p.osl, p.accepted, &p.decode)?;
    let overruled = [prefill.verdict, decode.verdict].iter().any(|v| v.oom || v.kv_over);
    let ttft_p = prefill.row.f("ttft") * TTFT_FACTOR;
    let mut row = compose(
        (&prefill.row, pw),
        (&decode.row, dw),
        ttft_p,
        p.prefill_workers,
        p.decode_workers,
        p.isl,
        p.osl,
        p.prefix,
    );
    row.round3();
    let (_, _, pdp) = pw.tp_pp_dp();
    let (_, _, ddp) = dw.tp_pp_dp();
    let total = concurrency.map_or(f64::from(p.decode.batch_size) * f64::from(ddp) * f64::from(p.decode_workers), f64::from);
    let n = total / (f64::from(p.prefill_workers.max(1)) * f64::from(pdp.max(1)));
    let parity = (row.f("ttft"), row.f("tpot"));
    let gen = ClassTimes::from_ops(decode.eval.generation.iter().map(|(name, ms)| (name.as_str(), *ms)));
    let features = RowFeatures {
        hybrid: (is_hybrid(pw), is_hybrid(dw)),
        ..prefill_features(pw, p.isl, p.prefix, n, parity, gen.rescaled(parity.1))?
    };
    let figures = CalibratedFigures::from_features(cal, pw.system_name(), pw.backend().as_str(), "disagg", features, overruled);
    Ok((row, figures))
}

/// The prefill side of a row's features on the prefill worker `w`: `T₁`, its class split and
/// the batched prefill of the `n` co-arriving requests.
fn prefill_features(w: &Worker, isl: u32, prefix: u32, n: f64, parity: (f64, f64), tpot_classes: ClassTimes) -> Result<RowFeatures> {
    let t1 = w.engine.prefill_latency_ms(1, isl, prefix)?;
    let ops = w.engine.prefill_per_op(1, isl, prefix)?;
    let prefill_classes = ClassTimes::from_ops(ops.iter().map(|o| (o.name.as_str(), o.latency_ms))).rescaled(t1);
    let batch = n.max(1.0).ceil().min(f64::from(u32::MAX)) as u32;
    let prefill_all_ms = w.engine.prefill_latency_ms(batch, isl, prefix).ok().filter(|v| v.is_finite());
    Ok(RowFeatures {
        parity,
        prefill_one_ms: t1,
        requests_per_rank: n,
        tpot_classes,
        prefill_classes,
        prefill_all_ms,
        hybrid: (false, false),
    })
}

fn is_hybrid(w: &Worker) -> bool {
    w.engine.database_mode() == crate::spec::DatabaseMode::Hybrid
}

/// A [`LatencyModel`] with the step-level part of a calibration group: prefill steps scaled by
/// `ttft_scale`, decode and mixed iterations by `tpot_scale` plus `tpot_overhead_ms` per
/// iteration. Queueing and per-request overheads are left to the simulator that drives it (it
/// schedules the requests itself).
#[derive(Debug, Clone)]
pub struct CalibratedLatencyModel<M> {
    inner: M,
    correction: StepCorrection,
}

impl<M: LatencyModel> CalibratedLatencyModel<M> {
    /// Wraps `inner` with the correction of `system/backend/mode` from `cal`.
    pub fn new(inner: M, cal: &Calibration, system: &str, backend: &str, mode: &str) -> Self {
        let (correction, _) = cal.lookup(system, backend, mode);
        CalibratedLatencyModel { inner, correction }
    }

    /// Wraps `inner` with an explicit correction.
    pub fn with_correction(inner: M, correction: StepCorrection) -> Self {
        CalibratedLatencyModel { inner, correction }
    }

    /// The correction applied.
    pub fn correction(&self) -> StepCorrection {
        self.correction
    }
}

impl<M: LatencyModel> LatencyModel for CalibratedLatencyModel<M> {
    fn prefill_ms(&self, batch: u32, isl: u32, prefix: u32) -> CoreResult<f64> {
        Ok(self.correction.ttft_scale * self.inner.prefill_ms(batch, isl, prefix)?)
    }

    fn decode_ms(&self, batch: u32, isl: u32, osl: u32) -> CoreResult<f64> {
        let steps = f64::from(osl.saturating_sub(1));
        let c = self.correction;
        Ok(c.tpot_scale * self.inner.decode_ms(batch, isl, osl)? + c.tpot_overhead_ms * steps)
    }

    fn decode_step_ms(&self, requests: u32, isl: u32, osl: u32) -> CoreResult<f64> {
        if requests == 0 {
            return Ok(0.0);
        }
        Ok(self.correction.tpot(self.inner.decode_step_ms(requests, isl, osl)?))
    }

    fn mixed_step_ms(&self, ctx_tokens: u32, gen_requests: u32, isl: u32, osl: u32, prefix: u32) -> CoreResult<f64> {
        Ok(self.correction.tpot(self.inner.mixed_step_ms(ctx_tokens, gen_requests, isl, osl, prefix)?))
    }
}

/// Reads the constants of a request: `null` → error (the front ends pass the shipped file).
pub fn from_request(value: Option<&Value>) -> Result<Calibration> {
    let value = value.ok_or_else(|| {
        AicError::value("calibrated estimate: the request carries no calibration constants")
    })?;
    let cal: Calibration = super::request_json::from_value("calibration constants", value)?;
    cal.check()?;
    Ok(cal)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"version": 1, "provenance": "test", "groups": {
        "h200_sxm/trtllm/agg": {"tpot_scale": 0.9, "tpot_overhead_ms": 1.5, "ttft_scale": 1.2,
                                 "ttft_queue": 0.5, "ttft_overhead_ms": 20.0},
        "*/trtllm/*": {"tpot_scale": 1.0, "tpot_overhead_ms": 1.0, "ttft_scale": 1.0,
                       "ttft_queue": 0.0, "ttft_overhead_ms": 0.0}}}"#;

    #[test]
    fn worked_example_of_the_two_formulas() {
        let cal = Calibration::from_json(DOC).unwrap();
        let (c, key) = cal.lookup("h200_sxm", "trtllm", "agg");
        assert_eq!(key, "h200_sxm/trtllm/agg");
        // TPOT = 0.9 · 10 + 1.5
        assert!((c.tpot(10.0) - 10.5).abs() < 1e-12);
        // 9 requests together: 4 ahead on average; TTFT = 1.2 · 100 · (1 + 0.5 · 4) + 20 = 380
        assert!((c.ttft(100.0, 9.0) - 380.0).abs() < 1e-9);
        // one request: no queue
        assert!((c.ttft(100.0, 1.0) - 140.0).abs() < 1e-9);
        assert!((c.ttft(100.0, 0.25) - 140.0).abs() < 1e-9);
    }

    #[test]
    fn lookup_falls_back_to_pooled_groups_then_identity() {
        let cal = Calibration::from_json(DOC).unwrap();
        assert_eq!(cal.lookup("b200_sxm", "trtllm", "disagg").1, "*/trtllm/*");
        let (c, key) = cal.lookup("b200_sxm", "vllm", "agg");
        assert_eq!((c, key.as_str()), (StepCorrection::IDENTITY, ""));
    }

    #[test]
    fn bad_constants_are_refused() {
        let neg = DOC.replace("\"ttft_queue\": 0.5", "\"ttft_queue\": -0.5");
        assert!(Calibration::from_json(&neg).is_err());
        assert!(Calibration::from_json(&DOC.replace("\"version\": 1", "\"version\": 3")).is_err());
        let bad_class = DOC.replace("\"groups\"", "\"classes\": {\"*/trtllm/*\": {\"tpot\": {\"moe\": -1}}}, \"groups\"");
        assert!(Calibration::from_json(&bad_class).is_err());
        assert!(Calibration::from_json("{").is_err());
        assert!(from_request(None).is_err());
    }

    #[test]
    fn constants_outside_their_physical_range_are_refused_by_name() {
        let huge = DOC.replace("\"ttft_overhead_ms\": 20.0", "\"ttft_overhead_ms\": 1e308");
        assert_eq!(
            Calibration::from_json(&huge).unwrap_err().to_string(),
            "calibration group 'h200_sxm/trtllm/agg': ttft_overhead_ms must be a finite number in [0, 60000], \
             got 1e308; correct it in the constants file or refit it with `aic-compile calibrate`"
        );
        for (field, bad) in [("\"ttft_queue\": 0.5", "1.5"), ("\"tpot_scale\": 0.9", "0"), ("\"tpot_scale\": 0.9", "1e3")] {
            let name = field.split('"').nth(1).unwrap();
            let doc = DOC.replace(field, &format!("\"{name}\": {bad}"));
            let msg = Calibration::from_json(&doc).unwrap_err().to_string();
            assert!(msg.contains(&format!("{name} must be a finite number in")), "{msg}");
        }
        let hybrid = DOC.replace("\"groups\"", "\"hybrid\": {\"ttft_scale\": 1e308, \"tpot_scale\": 1.0}, \"groups\"");
        assert!(Calibration::from_json(&hybrid).unwrap_err().to_string().starts_with("calibration 'hybrid': ttft_scale"));
        let class = DOC.replace("\"groups\"", "\"classes\": {\"*/trtllm/*\": {\"tpot\": {\"attention\": 1e9}}}, \"groups\"");
        assert!(Calibration::from_json(&class).unwrap_err().to_string().contains("tpot.attention must be"));
    }

    #[test]
    fn class_scales_apply_to_the_class_split_before_the_group_scalars() {
        let doc = DOC.replace("\"version\": 1", "\"version\": 2").replace(
            "\"groups\"",
            "\"classes\": {\"h200_sxm/trtllm/agg\": {\"tpot\": {\"gemm\": 0.5, \"comm\": 2.0}, \"ttft\": {\"attention\": 3.0}}}, \"groups\"",
        );
        let cal = Calibration::from_json(&doc).unwrap();
        let f = RowFeatures {
            parity: (50.0, 10.0),
            prefill_one_ms: 100.0,
            requests_per_rank: 9.0,
            tpot_classes: ClassTimes([6.0, 2.0, 0.0, 1.0, 1.0]),
            prefill_classes: ClassTimes([60.0, 40.0, 0.0, 0.0, 0.0]),
            prefill_all_ms: None,
            hybrid: (false, false),
        };
        let out = CalibratedFigures::from_features(&cal, "h200_sxm", "trtllm", "agg", f.clone(), false);
        // TPOT base 0.5·6 + 2 + 2·1 + 1 = 8 ms; 0.9 · 8 + 1.5
        assert!((out.tpot - 8.7).abs() < 1e-12);
        // T1 base 60 + 3·40 = 180 ms; 1.2 · 180 · (1 + 0.5 · 4) + 20
        assert!((out.ttft - 668.0).abs() < 1e-9);
        // a group without class scales: the plain closed form
        let other = CalibratedFigures::from_features(&cal, "b200_sxm", "trtllm", "agg", f, true);
        assert_eq!(other.group, "*/trtllm/*");
        assert!((other.tpot - 11.0).abs() < 1e-12 && (other.ttft - 100.0).abs() < 1e-12);
        assert!(other.memory_overruled);
    }

    #[test]
    fn hybrid_factors_scale_the_kernel_part_of_hybrid_priced_workers() {
        let doc = DOC.replace("\"version\": 1", "\"version\": 2").replace(
            "\"groups\"",
            "\"hybrid\": {\"ttft_scale\": 0.5, \"tpot_scale\": 2.0}, \"groups\"",
        );
        let cal = Calibration::from_json(&doc).unwrap();
        let f = RowFeatures {
            parity: (50.0, 10.0),
            prefill_one_ms: 100.0,
            requests_per_rank: 1.0,
            tpot_classes: ClassTimes([10.0, 0.0, 0.0, 0.0, 0.0]),
            prefill_classes: ClassTimes([100.0, 0.0, 0.0, 0.0, 0.0]),
            prefill_all_ms: Some(100.0),
            hybrid: (true, false),
        };
        let out = CalibratedFigures::from_features(&cal, "h200_sxm", "trtllm", "agg", f.clone(), false);
        // TTFT 1.2 · (0.5 · 100) + 20; TPOT unchanged 0.9 · 10 + 1.5
        assert!((out.ttft - 80.0).abs() < 1e-12 && (out.tpot - 10.5).abs() < 1e-12);
        let both = CalibratedFigures::from_features(&cal, "h200_sxm", "trtllm", "agg", RowFeatures { hybrid: (false, true), ..f }, false);
        // TPOT 0.9 · (2 · 10) + 1.5
        assert!((both.ttft - 140.0).abs() < 1e-12 && (both.tpot - 19.5).abs() < 1e-12);
        let bad = doc.replace("\"ttft_scale\": 0.5", "\"ttft_scale\": 0.0");
        assert!(Calibration::from_json(&bad).is_err());
    }

    struct Fixed;
    impl LatencyModel for Fixed {
        fn prefill_ms(&self, _: u32, _: u32, _: u32) -> CoreResult<f64> {
            Ok(100.0)
        }
        fn decode_ms(&self, _: u32, _: u32, _: u32) -> CoreResult<f64> {
            Ok(90.0)
        }
        fn decode_step_ms(&self, _: u32, _: u32, _: u32) -> CoreResult<f64> {
            Ok(10.0)
        }
        fn mixed_step_ms(&self, _: u32, _: u32, _: u32, _: u32, _: u32) -> CoreResult<f64> {
            Ok(20.0)
        }
    }

    #[test]
    fn latency_model_wrapper_applies_the_step_corrections() {
        let cal = Calibration::from_json(DOC).unwrap();
        let m = CalibratedLatencyModel::new(Fixed, &cal, "h200_sxm", "trtllm", "agg");
        assert!((m.prefill_ms(1, 10, 0).unwrap() - 120.0).abs() < 1e-12);
        assert!((m.decode_step_ms(4, 10, 10).unwrap() - 10.5).abs() < 1e-12);
        assert_eq!(m.decode_step_ms(0, 10, 10).unwrap(), 0.0);
        assert!((m.mixed_step_ms(8, 4, 10, 10, 0).unwrap() - 19.5).abs() < 1e-12);
        // 9 decode steps: 0.9 · 90 + 9 · 1.5
        assert!((m.decode_ms(4, 10, 10).unwrap() - 94.5).abs() < 1e-12);
    }
}
