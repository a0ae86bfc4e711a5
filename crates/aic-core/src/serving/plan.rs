//! Planning over several experiments (spec 51): runs one or more sweep requests (one per
//! backend for `--backend auto`, one per entry of an experiment file, one per budget step of
//! `recommend`), picks each experiment, merges the picks per serving mode when asked (51 §1.3,
//! and §11.1 under a load target) and answers the result layout every planning entry point
//! shares (`chosen_exp`, `best_throughputs`, `best_latencies`, `outcomes`, `best_configs`,
//! `pareto_fronts`, `candidates`, the inclusive-TPOT copies).
//!
//! The experiments themselves are [`super::sweep`]'s; the picks are [`super::picks`]'s.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::error::Result;
use super::picks::{front_axis, inclusive_copy, pick, rank_by_gpus, Picked};
use super::pareto::pareto_front;
use super::row::Row;
use super::sweep::{run_experiments, Experiment, Failure, SweepRequest};
use crate::error::AicError;

/// One experiment after picking.
#[derive(Debug, Clone)]
pub struct ExperimentResult {
    /// The name results are keyed by (`agg`, `disagg_vllm`, an experiment file's key, …).
    pub name: String,
    /// Its backend (the merged rows' `backend` column).
    pub backend: String,
    /// `agg` or `disagg`.
    pub mode: &'static str,
    /// Its candidate table (empty: it recorded nothing).
    pub candidates: Vec<Row>,
    /// Its outcome: the error that stopped it, if any.
    pub failure: Option<Failure>,
    /// Its picks (`None` when it has no rows).
    pub picked: Option<Picked>,
    /// The inclusive-TPOT copies are wanted.
    pub inclusive: bool,
    /// The request-latency target (the merged front's x axis).
    pub request_latency: Option<f64>,
    /// The experiment's `top_n`.
    pub top_n: usize,
    /// Picked under a load target.
    pub load_match: bool,
}

impl ExperimentResult {
    /// Picks an experiment of `req` and names it.
    pub fn picked(name: String, backend: String, e: Experiment, req: &SweepRequest) -> ExperimentResult {
        let disagg = e.name == "disagg";
        let picked = (!e.candidates.is_empty()).then(|| pick(&e.candidates, disagg, &req.pick_rules()));
        ExperimentResult {
            name,
            backend,
            mode: e.name,
            candidates: e.candidates,
            failure: e.failure,
            picked,
            inclusive: req.inclusive_tpot,
            request_latency: req.request_latency,
            top_n: req.top_n,
            load_match: req.load_target.is_some(),
        }
    }
}

/// Rows as a JSON array text, columns in row order.
pub fn rows_json(rows: &[Row]) -> String {
    let items: Vec<String> = rows.iter().map(Row::to_json_text).collect();
    format!("[{}]", items.join(", "))
}

fn key(name: &str) -> String {
    Value::from(name).to_string()
}

fn object(entries: &[(String, String)]) -> String {
    let items: Vec<String> = entries.iter().map(|(k, v)| format!("{}: {v}", key(k))).collect();
    format!("{{{}}}", items.join(", "))
}

/// A mode bucket of a merged answer (51 §1.3).
struct Bucket {
    mode: &'static str,
    best: Vec<Row>,
    /// `None`: every experiment of the bucket failed or recorded nothing (a null front).
    front: Option<Vec<Row>>,
    throughput: f64,
    inclusive: bool,
}

fn tagged(rows: &[Row], backend: &str, task: &str) -> Vec<Row> {
    rows.iter()
        .map(|r| {
            let mut out = r.clone();
            out.set("backend", backend);
            out.set("_task_key", task);
            out
        })
        .collect()
}

/// Merges the experiments of one mode (51 §1.3; under a load target the ranking of §11.1).
fn merge_bucket(mode: &'static str, results: &[&ExperimentResult]) -> Bucket {
    let with_rows: Vec<&&ExperimentResult> = results.iter().filter(|r| r.picked.is_some()).collect();
    let inclusive = results.iter().any(|r| r.inclusive);
    if with_rows.is_empty() {
        return Bucket { mode, best: Vec::new(), front: None, throughput: 0.0, inclusive };
    }
    let top_n = results.first().map_or(5, |r| r.top_n);
    let load_match = results.iter().any(|r| r.load_match);
    let mut best: Vec<Row> = Vec::new();
    let mut fronts: Vec<Row> = Vec::new();
    for r in &with_rows {
        let p = r.picked.as_ref().expect("filtered on picks");
        best.extend(tagged(&p.best, &r.backend, &r.name));
        fronts.extend(tagged(&p.front, &r.backend, &r.name));
    }
    let mut order: Vec<&Row> = best.iter().collect();
    if load_match {
        rank_by_gpus(&mut order);
    } else {
        order.sort_by(|a, b| {
            b.f("tokens/s/gpu_cluster").partial_cmp(&a.f("tokens/s/gpu_cluster")).unwrap_or(std::cmp::Ordering::Equal)
        });
    }
    let best: Vec<Row> = order.into_iter().take(top_n).cloned().collect();
    let throughput = match best.first() {
        None => 0.0,
        Some(r) if load_match => 1.0 / r.f("total_gpus_needed"),
        Some(r) => r.f("tokens/s/gpu_cluster"),
    };
    let (x_key, minimise) = front_axis(results.first().and_then(|r| r.request_latency));
    let front = pareto_front(&fronts, x_key, minimise);
    Bucket { mode, best, front: Some(front), throughput, inclusive }
}

/// The answer of a set of picked experiments; `merge` replaces the per-experiment picks by
/// per-mode buckets (51 §1.3).
pub fn answer_json(results: &[ExperimentResult], merge: Option<bool>) -> String {
    let outcomes: Vec<(String, String)> = results
        .iter()
        .map(|r| (r.name.clone(), r.failure.as_ref().map_or("null".to_string(), |f| f.to_json().to_string())))
        .collect();
    let mut latencies = Vec::new();
    let mut candidates = Vec::new();
    for r in results {
        if let Some(p) = &r.picked {
            latencies.push((r.name.clone(), p.latencies_json().to_string()));
            candidates.push((r.name.clone(), rows_json(&r.candidates)));
        }
    }
    let (mut best, mut fronts, mut throughputs) = (Vec::new(), Vec::new(), Vec::new());
    let (mut incl_best, mut incl_fronts) = (Vec::new(), Vec::new());
    let inclusive = results.iter().any(|r| r.inclusive);
    let chosen: String;
    if merge == Some(true) {
        let mut chosen_bucket: Option<(&str, f64)> = None;
        for mode in ["agg", "disagg"] {
            let members: Vec<&ExperimentResult> = results.iter().filter(|r| r.mode == mode).collect();
            if members.is_empty() {
                continue;
            }
            let b = merge_bucket(mode, &members);
            best.push((b.mode.to_string(), rows_json(&b.best)));
            fronts.push((b.mode.to_string(), b.front.as_ref().map_or("null".to_string(), |f| rows_json(f))));
            throughputs.push((b.mode.to_string(), Value::from(b.throughput).to_string()));
            if b.inclusive {
                incl_best.push((b.mode.to_string(), rows_json(&inclusive_copy(&b.best))));
                incl_fronts
                    .push((b.mode.to_string(), b.front.as_ref().map_or("null".to_string(), |f| rows_json(&inclusive_copy(f)))));
            }
            let has_rows = members.iter().any(|r| r.picked.is_some());
            if has_rows && chosen_bucket.is_none_or(|(_, v)| b.throughput > v) {
                chosen_bucket = Some((b.mode, b.throughput));
            }
        }
        chosen = chosen_bucket.map_or("none".to_string(), |(m, _)| m.to_string());
    } else {
        let mut chosen_one: Option<(&str, f64)> = None;
        for r in results {
            let Some(p) = &r.picked else { continue };
            best.push((r.name.clone(), rows_json(&p.best)));
            fronts.push((r.name.clone(), rows_json(&p.front)));
            throughputs.push((r.name.clone(), Value::from(p.throughput).to_string()));
            if inclusive {
                incl_best.push((r.name.clone(), rows_json(&inclusive_copy(&p.best))));
                incl_fronts.push((r.name.clone(), rows_json(&inclusive_copy(&p.front))));
            }
            if chosen_one.is_none_or(|(_, v)| p.throughput > v) {
                chosen_one = Some((&r.name, p.throughput));
            }
        }
        chosen = chosen_one.map_or("none".to_string(), |(n, _)| n.to_string());
    }
    let mut parts = vec![
        ("chosen_exp".to_string(), key(&chosen)),
        ("best_throughputs".to_string(), object(&throughputs)),
        ("best_latencies".to_string(), object(&latencies)),
        ("outcomes".to_string(), object(&outcomes)),
        ("best_configs".to_string(), object(&best)),
        ("pareto_fronts".to_string(), object(&fronts)),
        ("candidates".to_string(), object(&candidates)),
    ];
    if inclusive {
        parts.push(("inclusive_best_configs".to_string(), object(&incl_best)));
        parts.push(("inclusive_pareto_fronts".to_string(), object(&incl_fronts)));
    }
    object(&parts)
}

/// One sweep of a plan and the names of its experiments.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSweep {
    /// The sweep.
    pub request: SweepRequest,
    /// Experiment names by mode (`{"agg": "agg_vllm", "disagg": "disagg_vllm"}`); a mode not
    /// named keeps its mode name.
    #[serde(default)]
    pub names: std::collections::HashMap<String, String>,
    /// The backend (the merged rows' `backend` column).
    #[serde(default)]
    pub backend: String,
}

/// Several sweeps answered together (`serving_plan`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The sweeps, in build order.
    pub sweeps: Vec<PlanSweep>,
    /// Merge the picks per serving mode (51 §1.3).
    #[serde(default)]
    pub merge: bool,
}

/// Runs a plan request (JSON text) and answers JSON text (see the module docs).
pub fn plan_json(request: &str, systems_path: Option<&Path>) -> Result<String> {
    let req: PlanRequest = serde_json::from_str(request).map_err(|e| {
        AicError::value(format!("invalid plan request JSON: {e}{}", super::request::json_number_hint(request)))
    })?;
    plan(&req, systems_path)
}

/// Runs a parsed plan request: every sweep checked first, then run in order.
pub fn plan(req: &PlanRequest, systems_path: Option<&Path>) -> Result<String> {
    for (i, s) in req.sweeps.iter().enumerate() {
        s.request.check().map_err(|e| AicError::value(format!("sweeps[{i}].request: {e}")))?;
    }
    let out = crate::parallel::install(|| -> Result<String> {
        let mut results = Vec::new();
        for s in &req.sweeps {
            for e in run_experiments(&s.request, systems_path)? {
                let name = s.names.get(e.name).cloned().unwrap_or_else(|| e.name.to_string());
                results.push(ExperimentResult::picked(name, s.backend.clone(), e, &s.request));
            }
        }
        Ok(answer_json(&results, Some(req.merge)))
    });
    crate::data::prefetch::wait_for_prefetches();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::row::Val;

    fn row(dpar: &str, tpg: f64, gpus: i64) -> Row {
        let mut r = Row::new();
        r.set("(d)parallel", dpar);
        r.set("tokens/s/gpu", tpg);
        r.set("tokens/s/user", 30.0);
        r.set("tokens/s/gpu_cluster", tpg);
        r.set("total_gpus_needed", gpus);
        r
    }

    fn result(name: &str, backend: &str, best: Vec<Row>, load_match: bool) -> ExperimentResult {
        let throughput = best.first().map_or(0.0, |r| if load_match { 1.0 / r.f("total_gpus_needed") } else { r.f("tokens/s/gpu_cluster") });
        ExperimentResult {
            name: name.to_string(),
            backend: backend.to_string(),
            mode: "disagg",
            candidates: best.clone(),
            failure: None,
            picked: Some(Picked { front: best.clone(), best, throughput, latencies: vec![("ttft".into(), Val::Float(1.0))] }),
            inclusive: false,
            request_latency: None,
            top_n: 5,
            load_match,
        }
    }

    #[test]
    fn merged_load_match_ranks_by_gpus_needed() {
        // Spec 51 §11.1, rec_auto_q32_h200_rate_hybrid, disagg bucket.
        let trt = result("disagg_trtllm", "trtllm", vec![row("tp2", 804.31, 28), row("tp4", 831.795, 32)], true);
        let sgl = result("disagg_sglang", "sglang", vec![row("tp2", 876.07, 24), row("tp4", 784.462, 32)], true);
        let vll = result("disagg_vllm", "vllm", vec![row("tp4", 901.945, 24), row("tp2", 836.97, 24)], true);
        let b = merge_bucket("disagg", &[&trt, &sgl, &vll]);
        let got: Vec<(String, f64)> = b.best.iter().map(|r| (r.s("_task_key").to_string(), r.f("tokens/s/gpu"))).collect();
        assert_eq!(
            got,
            vec![
                ("disagg_vllm".to_string(), 901.945),
                ("disagg_sglang".to_string(), 876.07),
                ("disagg_vllm".to_string(), 836.97),
                ("disagg_trtllm".to_string(), 804.31),
                ("disagg_trtllm".to_string(), 831.795),
            ]
        );
        assert_eq!(b.throughput, 1.0 / 24.0);
        assert_eq!(b.best[0].s("backend"), "vllm");
    }

    #[test]
    fn merged_throughput_picks_keep_concatenation_order_on_ties() {
        let a = result("disagg_trtllm", "trtllm", vec![row("tp1", 500.0, 8)], false);
        let b = result("disagg_vllm", "vllm", vec![row("tp1", 500.0, 8), row("tp2", 600.0, 8)], false);
        let m = merge_bucket("disagg", &[&a, &b]);
        let got: Vec<&str> = m.best.iter().map(|r| r.s("_task_key")).collect();
        assert_eq!(got, vec!["disagg_vllm", "disagg_trtllm", "disagg_vllm"]);
        assert_eq!(m.throughput, 600.0);
        let failed = ExperimentResult { picked: None, candidates: Vec::new(), ..result("disagg_sglang", "sglang", vec![], false) };
        let empty = merge_bucket("disagg", &[&failed]);
        assert!(empty.best.is_empty() && empty.front.is_none() && empty.throughput == 0.0);
    }

    #[test]
    fn answer_lists_failed_experiments_in_outcomes_only() {
        let ok = result("agg", "vllm", vec![row("tp1", 100.0, 1)], false);
        let failed = ExperimentResult {
            picked: None,
            candidates: Vec::new(),
            failure: Some(Failure { kind: "InsufficientMemoryError", message: "m".into() }),
            ..result("disagg", "vllm", vec![], false)
        };
        let v: Value = serde_json::from_str(&answer_json(&[ok, failed], None)).unwrap();
        assert_eq!(v["chosen_exp"], "agg");
        assert_eq!(v["outcomes"]["disagg"]["type"], "InsufficientMemoryError");
        assert!(v["outcomes"]["agg"].is_null());
        assert!(v["best_configs"].get("disagg").is_none() && v["candidates"].get("disagg").is_none());
        let none: Value = serde_json::from_str(&answer_json(&[], Some(true))).unwrap();
        assert_eq!(none["chosen_exp"], "none");
    }
}
