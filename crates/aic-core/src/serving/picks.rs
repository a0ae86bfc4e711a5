//! Picking one experiment's best configurations from its candidate table: the throughput picks
//! of `cli default` (spec 50 §9.5, with the strict SLA of 51 §6.3) or the load-match picks of
//! `recommend` (51 §4.3: the fewest GPUs that carry a request rate or a concurrency), and the
//! inclusive-TPOT copies of the printed tables (51 §6.8).
//!
//! Only table arithmetic on the rounded rows the sweep produced: no engine call happens here.

use serde_json::Value;

use super::pareto::{best_configs, group_key, pareto_front, with_cluster_throughput, PickTargets};
use super::row::{Row, Val};
use super::sweep::LoadTarget;

/// How an experiment is picked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PickRules {
    /// The experiment's GPU budget (cluster throughput, §9.5 step 1).
    pub total_gpus: u32,
    /// TPOT target, ms.
    pub tpot: f64,
    /// Request-latency target, ms (replaces the TPOT target when set and `> 0`).
    pub request_latency: Option<f64>,
    /// Best configurations kept.
    pub top_n: usize,
    /// Filter the table by the TPOT / request-latency target first (throughput picks only).
    pub strict_sla: bool,
    /// A load to carry: load-match picks instead of throughput picks.
    pub load_target: Option<LoadTarget>,
}

/// What picking one experiment gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Picked {
    /// The best configurations, ranked.
    pub best: Vec<Row>,
    /// The Pareto front.
    pub front: Vec<Row>,
    /// The value experiments are compared by: rank 1's `tokens/s/gpu_cluster`, or
    /// `1 / total_gpus_needed` under a load target; 0.0 when nothing was picked.
    pub throughput: f64,
    /// Rank 1's `ttft`, `tpot`, `request_latency` (and, under a load target,
    /// `replicas_needed`, `total_gpus_needed`); zeros when nothing was picked.
    pub latencies: Vec<(String, Val)>,
}

impl Picked {
    /// The best latencies as a JSON object.
    pub fn latencies_json(&self) -> Value {
        let mut map = serde_json::Map::new();
        for (k, v) in &self.latencies {
            let value = match v {
                Val::Int(i) => Value::from(*i),
                Val::Float(f) => Value::from(*f),
                _ => Value::Null,
            };
            map.insert(k.clone(), value);
        }
        Value::Object(map)
    }
}

/// The request-latency target when it is set and positive.
fn latency_target(rules: &PickRules) -> Option<f64> {
    rules.request_latency.filter(|r| *r > 0.0)
}

/// The x axis of the Pareto front: `(column, minimise)`.
pub fn front_axis(request_latency: Option<f64>) -> (&'static str, bool) {
    if request_latency.filter(|r| *r > 0.0).is_some() {
        ("request_latency", true)
    } else {
        ("tokens/s/user", false)
    }
}

/// Picks one experiment's candidate table (rows as the sweep produced them, without
/// `tokens/s/gpu_cluster`).
pub fn pick(candidates: &[Row], disagg: bool, rules: &PickRules) -> Picked {
    match rules.load_target {
        Some(target) => pick_load_match(candidates, disagg, rules, &target),
        None => pick_throughput(candidates, disagg, rules),
    }
}

fn rank_one_latencies(best: &[Row], extra: &[&str]) -> Vec<(String, Val)> {
    let mut out = Vec::new();
    for key in ["ttft", "tpot", "request_latency"].iter().chain(extra) {
        let v = best.first().and_then(|r| r.get(key).cloned()).unwrap_or(Val::Float(0.0));
        out.push(((*key).to_string(), v));
    }
    out
}

/// §9.5 with §6.3: cluster throughput, the optional strict filter, the front, the picks.
fn pick_throughput(candidates: &[Row], disagg: bool, rules: &PickRules) -> Picked {
    let target = latency_target(rules);
    let mut rows = with_cluster_throughput(candidates, rules.total_gpus);
    if rules.strict_sla {
        rows.retain(|r| match target {
            Some(rl) => r.f("request_latency") <= rl,
            None => r.f("tpot") <= rules.tpot,
        });
    }
    let (x_key, minimise) = front_axis(target);
    let front = pareto_front(&rows, x_key, minimise);
    let targets = PickTargets { tpot: rules.tpot, request_latency: target, top_n: rules.top_n };
    let best = best_configs(&rows, disagg, &targets);
    let throughput = best.first().map_or(0.0, |r| r.f("tokens/s/gpu_cluster"));
    let latencies = rank_one_latencies(&best, &[]);
    Picked { best, front, throughput, latencies }
}

/// Python's `max(1, int(math.ceil(load / per_replica)))` on the table's rounded values.
fn replicas_for(load: f64, per_replica: f64) -> i64 {
    let r = (load / per_replica).ceil();
    if r.is_nan() || r < 1.0 {
        1
    } else if r >= i64::MAX as f64 {
        i64::MAX
    } else {
        r as i64
    }
}

/// §4.3: load-match picks. `tokens/s/gpu_cluster` is `tokens/s/gpu`; rows meeting the TPOT (or
/// request-latency) target, else all ("closest"); per group the first row needing the fewest
/// GPUs (closest: the smallest constraint value); ranked by GPUs then throughput (closest: by
/// the constraint value).
fn pick_load_match(candidates: &[Row], disagg: bool, rules: &PickRules, target: &LoadTarget) -> Picked {
    let latency = latency_target(rules);
    let rows: Vec<Row> = candidates
        .iter()
        .map(|r| {
            let mut out = r.clone();
            out.set("tokens/s/gpu_cluster", r.f("tokens/s/gpu"));
            out
        })
        .collect();
    let (x_key, minimise) = front_axis(latency);
    let front = pareto_front(&rows, x_key, minimise);
    let (col, limit) = match latency {
        Some(l) => ("request_latency", l),
        None => ("tpot", rules.tpot),
    };
    let mut pool: Vec<&Row> = rows.iter().filter(|r| r.f(col) <= limit).collect();
    let closest = pool.is_empty();
    if closest {
        pool = rows.iter().collect();
    }
    let sized: Vec<Row> = pool
        .into_iter()
        .map(|r| {
            let replicas = match (target.request_rate, target.concurrency) {
                (Some(rate), _) => replicas_for(rate, r.f("seq/s")),
                (None, Some(k)) => replicas_for(k, r.f("concurrency")),
                (None, None) => 1,
            };
            let gpus = replicas.saturating_mul(r.f("num_total_gpus") as i64);
            let mut out = r.clone();
            out.set("replicas_needed", Val::Int(replicas));
            out.set("total_gpus_needed", Val::Int(gpus));
            out
        })
        .collect();
    let key = group_key(disagg);
    let mut groups: Vec<(String, usize)> = Vec::new();
    for (i, r) in sized.iter().enumerate() {
        let g = r.s(key).to_string();
        match groups.iter_mut().find(|(k, _)| *k == g) {
            Some(entry) => {
                let kept = &sized[entry.1];
                let better = if closest {
                    r.f(col) < kept.f(col)
                } else {
                    r.f("total_gpus_needed") < kept.f("total_gpus_needed")
                };
                if better {
                    entry.1 = i;
                }
            }
            None => groups.push((g, i)),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let mut picked: Vec<&Row> = groups.iter().map(|(_, i)| &sized[*i]).collect();
    if closest {
        picked.sort_by(|a, b| a.f(col).partial_cmp(&b.f(col)).unwrap_or(std::cmp::Ordering::Equal));
    } else {
        rank_by_gpus(&mut picked);
    }
    let best: Vec<Row> = picked.into_iter().take(rules.top_n).cloned().collect();
    let throughput = best.first().map_or(0.0, |r| 1.0 / r.f("total_gpus_needed"));
    let latencies = rank_one_latencies(&best, &["replicas_needed", "total_gpus_needed"]);
    Picked { best, front, throughput, latencies }
}

/// Stable order by `total_gpus_needed` ascending, then `tokens/s/gpu` descending (51 §4.3
/// step 6, and the merged load-match ranking of §11.1).
pub fn rank_by_gpus(rows: &mut [&Row]) {
    rows.sort_by(|a, b| {
        a.f("total_gpus_needed")
            .partial_cmp(&b.f("total_gpus_needed"))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(b.f("tokens/s/gpu").partial_cmp(&a.f("tokens/s/gpu")).unwrap_or(std::cmp::Ordering::Equal))
    });
}

/// The printed copy of a table with the inclusive TPOT (51 §6.8): each row's `tpot` replaced by
/// `(ttft + tpot·(osl − 1)) / osl` of its rounded values.
pub fn inclusive_copy(rows: &[Row]) -> Vec<Row> {
    rows.iter()
        .map(|r| {
            let mut out = r.clone();
            let osl = r.f("osl");
            let v = (r.f("ttft") + r.f("tpot") * (osl - 1.0)) / osl;
            out.set("tpot", v);
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(parallel: &str, tpot: f64, seq_s: f64, gpus: i64, tpg: f64) -> Row {
        let mut r = Row::new();
        r.set("ttft", 100.0);
        r.set("tpot", tpot);
        r.set("request_latency", 100.0 + tpot * 999.0);
        r.set("seq/s", seq_s);
        r.set("concurrency", 64_i64);
        r.set("tokens/s/gpu", tpg);
        r.set("tokens/s/user", 1000.0 / tpot);
        r.set("num_total_gpus", gpus);
        r.set("parallel", parallel);
        r.set("osl", 1000_i64);
        r
    }

    #[test]
    fn load_match_ranks_by_gpus_needed() {
        // Spec 51 §4.5 rec_rate_q32_h200_vllm_hybrid, agg: R = 20 req/s.
        let table = vec![
            row("tp4pp1dp1etp1ep1", 26.599, 3.567, 4, 890.761),
            row("tp2pp1dp1etp1ep1", 28.0, 1.681, 2, 839.462),
            row("tp8pp1dp1etp1ep1", 25.0, 6.493, 8, 810.803),
            row("tp1pp1dp1etp1ep1", 29.0, 0.509, 1, 508.585),
        ];
        let rules = PickRules {
            total_gpus: 8,
            tpot: 30.0,
            request_latency: None,
            top_n: 5,
            strict_sla: false,
            load_target: Some(LoadTarget { request_rate: Some(20.0), concurrency: None }),
        };
        let p = pick(&table, false, &rules);
        let got: Vec<(String, f64, f64)> =
            p.best.iter().map(|r| (r.s("parallel").to_string(), r.f("replicas_needed"), r.f("total_gpus_needed"))).collect();
        assert_eq!(
            got,
            vec![
                ("tp4pp1dp1etp1ep1".to_string(), 6.0, 24.0),
                ("tp2pp1dp1etp1ep1".to_string(), 12.0, 24.0),
                ("tp8pp1dp1etp1ep1".to_string(), 4.0, 32.0),
                ("tp1pp1dp1etp1ep1".to_string(), 40.0, 40.0),
            ]
        );
        assert_eq!(p.throughput, 1.0 / 24.0);
        assert_eq!(p.latencies[3], ("replicas_needed".to_string(), Val::Int(6)));
    }

    #[test]
    fn strict_pick_with_no_compliant_row_is_empty_with_zero_latencies() {
        let table = vec![row("tp1pp1dp1etp1ep1", 52.786, 1.0, 1, 5415.714)];
        let rules = PickRules { total_gpus: 1, tpot: 3.0, request_latency: None, top_n: 5, strict_sla: true, load_target: None };
        let p = pick(&table, false, &rules);
        assert!(p.best.is_empty() && p.front.is_empty());
        assert_eq!(p.throughput, 0.0);
        assert_eq!(p.latencies_json().to_string(), r#"{"request_latency":0.0,"tpot":0.0,"ttft":0.0}"#);
    }

    #[test]
    fn inclusive_tpot_of_the_spec_example() {
        // Spec 51 §6.11: (503.939 + 27.586·999) / 1000 = 28.062352999999995.
        let mut r = Row::new();
        r.set("ttft", 503.939);
        r.set("tpot", 27.586);
        r.set("osl", 1000_i64);
        assert_eq!(inclusive_copy(&[r])[0].f("tpot"), 28.062352999999995);
    }
}
