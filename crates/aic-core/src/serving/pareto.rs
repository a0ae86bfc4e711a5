//! Pareto front and picks of the deployment sweep (spec 50 §9.5): cluster throughput for the
//! GPU budget, the front of tokens/s/user (or request latency) against tokens/s/gpu_cluster,
//! and the best configuration per parallel layout.

use super::row::{Row, Val};

/// The column the best configs group by in each experiment.
pub fn group_key(disagg: bool) -> &'static str {
    if disagg {
        "(d)parallel"
    } else {
        "parallel"
    }
}

/// Adds `tokens/s/gpu_cluster = tokens/s/gpu × (G // n) × n / G` to every row (§9.5 step 1).
pub fn with_cluster_throughput(rows: &[Row], total_gpus: u32) -> Vec<Row> {
    rows.iter()
        .map(|r| {
            let n = r.f("num_total_gpus") as i64;
            let g = i64::from(total_gpus);
            let copies = if n > 0 { g / n } else { 0 };
            let mut out = r.clone();
            let v = r.f("tokens/s/gpu") * copies as f64 * n as f64 / g as f64;
            out.set("tokens/s/gpu_cluster", v);
            out
        })
        .collect()
}

/// Stable ascending order of `keys` (`a < b` as floats; NaN last).
fn stable_order(keys: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by(|&a, &b| keys[a].partial_cmp(&keys[b]).unwrap_or(std::cmp::Ordering::Equal));
    idx
}

/// The Pareto front (§9.5 step 2). `minimise_x`: x is the request latency.
pub fn pareto_front(rows: &[Row], x_key: &str, minimise_x: bool) -> Vec<Row> {
    let pts: Vec<(usize, f64, f64)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (i, r.f(x_key), r.f("tokens/s/gpu_cluster")))
        .filter(|(_, x, y)| x.is_finite() && y.is_finite())
        .collect();
    let xs: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let order = stable_order(&xs);
    let sorted: Vec<(usize, f64, f64)> = order.iter().map(|&i| pts[i]).collect();
    // Both coordinates as "larger is better".
    let better = |a: &(usize, f64, f64), b: &(usize, f64, f64)| -> bool {
        let ax = if minimise_x { -a.1 } else { a.1 };
        let bx = if minimise_x { -b.1 } else { b.1 };
        ax > bx || a.2 > b.2
    };
    let mut kept = vec![true; sorted.len()];
    for i in 0..sorted.len() {
        if !kept[i] {
            continue;
        }
        for j in 0..sorted.len() {
            if kept[j] && !better(&sorted[j], &sorted[i]) {
                kept[j] = false;
            }
        }
        kept[i] = true;
    }
    sorted
        .iter()
        .zip(kept)
        .filter(|(_, k)| *k)
        .map(|(p, _)| rows[p.0].clone())
        .collect()
}

/// Targets of the picking step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PickTargets {
    /// TPOT target, ms.
    pub tpot: f64,
    /// Request-latency target (replaces the TPOT target when set), ms.
    pub request_latency: Option<f64>,
    /// How many configs to keep.
    pub top_n: usize,
}

/// Best configs (§9.5 step 3): per group the first row of maximal cluster throughput, sorted,
/// first `top_n`. Tie rule: among rows of one group with equal cluster throughput the first in
/// table order is picked.
pub fn best_configs(rows: &[Row], disagg: bool, t: &PickTargets) -> Vec<Row> {
    let meets = |r: &Row| match t.request_latency {
        Some(rl) => r.f("request_latency") <= rl,
        None => r.f("tpot") <= t.tpot,
    };
    let mut pool: Vec<&Row> = rows.iter().filter(|r| meets(r)).collect();
    let closest = pool.is_empty();
    if closest {
        pool = rows.iter().collect();
    }
    let key = group_key(disagg);
    let mut groups: Vec<(String, &Row)> = Vec::new();
    for r in pool {
        let g = r.s(key).to_string();
        match groups.iter_mut().find(|(k, _)| *k == g) {
            Some(entry) => {
                if r.f("tokens/s/gpu_cluster") > entry.1.f("tokens/s/gpu_cluster") {
                    entry.1 = r;
                }
            }
            None => groups.push((g, r)),
        }
    }
    let mut picked: Vec<&Row> = groups.into_iter().map(|(_, r)| r).collect();
    if closest {
        let col = if t.request_latency.is_some() { "request_latency" } else { "tpot" };
        picked.sort_by(|a, b| a.f(col).partial_cmp(&b.f(col)).unwrap_or(std::cmp::Ordering::Equal));
    } else {
        picked.sort_by(|a, b| {
            let c = b.f("tokens/s/gpu_cluster").partial_cmp(&a.f("tokens/s/gpu_cluster"));
            let c = c.unwrap_or(std::cmp::Ordering::Equal);
            if c != std::cmp::Ordering::Equal {
                return c;
            }
            if t.request_latency.is_some() {
                a.f("request_latency").partial_cmp(&b.f("request_latency")).unwrap_or(std::cmp::Ordering::Equal)
            } else {
                b.f("tokens/s/user").partial_cmp(&a.f("tokens/s/user")).unwrap_or(std::cmp::Ordering::Equal)
            }
        });
    }
    picked.into_iter().take(t.top_n).cloned().collect()
}

/// A row's value as JSON-visible text, for exact-duplicate detection.
pub fn row_identity(r: &Row) -> Vec<(String, String)> {
    r.cells()
        .iter()
        .map(|(k, v)| {
            let text = match v {
                Val::Float(f) => format!("f{}", f.to_bits()),
                Val::Int(i) => format!("i{i}"),
                Val::Str(s) => format!("s{s}"),
                Val::Null => "n".to_string(),
                Val::EmptyList => "l".to_string(),
            };
            (k.clone(), text)
        })
        .collect()
}
