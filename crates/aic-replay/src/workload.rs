//! What a replay serves: generated requests (closed or open loop, fixed or distributed lengths,
//! seeded) or a Mooncake JSONL trace, lowered to aisimulate-core's `ReplayRequest`s.
//!
//! It exists so that every workload is checked once, with errors naming the field or the trace
//! line, before the simulator sees it, and so that a seed fixes the requests bit for bit on every
//! platform: the generator is SplitMix64 (a fixed, documented algorithm; no dependency on a
//! random-number crate's version).
//!
//! Traces use the Mooncake format (`timestamp` in ms, `input_length`, `output_length`,
//! `hash_ids`: one id per `block_size` prompt tokens, shared ids meaning a shared prefix), read
//! row by row here for precise errors and then turned into prompt tokens by aisimulate-core's own
//! loader (`Trace::from_mooncake_rows`, `TurnTrace::synthesize_tokens`). Every line is one
//! request arriving at its timestamp (minus the first timestamp); `session_id` and `delay` (the
//! multi-turn extensions) are ignored.

use std::path::{Path, PathBuf};

use aisimulate_core::replay::loadgen::{MooncakeRow, Trace};
use aisimulate_core::replay::ReplayRequest;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ReplayError, Result};

/// Default tokens per `hash_ids` entry of a Mooncake trace.
pub const DEFAULT_TRACE_BLOCK_SIZE: usize = 512;

/// The requests of a replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workload {
    /// Requests generated from lengths and an arrival process.
    Generated {
        /// How many requests.
        requests: usize,
        /// When they arrive.
        arrival: Arrival,
        /// Prompt lengths.
        isl: Lengths,
        /// Output lengths (tokens generated, the first one by the prefill).
        osl: Lengths,
        /// Seed of the lengths and the arrival times.
        #[serde(default)]
        seed: u64,
    },
    /// A Mooncake JSONL trace.
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Tokens per `hash_ids` entry.
        #[serde(default = "default_trace_block_size")]
        block_size: usize,
        /// Replay with at most this many requests in flight (arrival times still gate them).
        #[serde(default)]
        concurrency: Option<usize>,
        /// Divide the trace's inter-arrival times by this factor (2 = twice the load).
        #[serde(default)]
        speedup: Option<f64>,
    },
}

fn default_trace_block_size() -> usize {
    DEFAULT_TRACE_BLOCK_SIZE
}

/// The arrival process of generated requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Arrival {
    /// `concurrency` requests in flight at all times: a new one arrives when one finishes.
    ClosedLoop {
        /// Requests in flight.
        concurrency: usize,
    },
    /// Poisson arrivals at `rate_rps` requests per second (exponential gaps, seeded).
    OpenLoop {
        /// Mean arrival rate, requests per second.
        rate_rps: f64,
    },
}

/// A length distribution. JSON: a plain integer for a fixed length, or
/// `{"uniform": {"min": a, "max": b}}`, or `{"normal": {"mean": m, "std": s}}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Lengths {
    /// Every request has this length.
    Fixed(usize),
    /// A distribution.
    Distributed(Distribution),
}

/// Seeded length distributions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Distribution {
    /// Uniform integers in `[min, max]`.
    Uniform {
        /// Smallest length.
        min: usize,
        /// Largest length.
        max: usize,
    },
    /// Normal, rounded to the nearest integer and clamped to at least 1.
    Normal {
        /// Mean length.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
}

/// A workload lowered for aisimulate-core.
#[derive(Debug, Clone)]
pub struct LoweredWorkload {
    /// The requests, in arrival order.
    pub requests: Vec<ReplayRequest>,
    /// The in-flight cap (closed loop), if any.
    pub max_in_flight: Option<usize>,
}

/// SplitMix64 (Steele, Lea and Flood 2014): a 64-bit generator whose every output is a fixed
/// function of the seed and the call count.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl Lengths {
    fn check(&self, field: &str) -> Result<()> {
        match *self {
            Lengths::Fixed(0) => Err(ReplayError::workload(field, "must be at least 1 token, got 0")),
            Lengths::Distributed(Distribution::Uniform { min, max }) if min == 0 || max < min => {
                Err(ReplayError::workload(
                    field,
                    format!("uniform needs 1 ≤ min ≤ max, got min={min}, max={max}"),
                ))
            }
            Lengths::Distributed(Distribution::Normal { mean, std })
                if !(mean.is_finite() && mean >= 1.0 && std.is_finite() && std >= 0.0) =>
            {
                Err(ReplayError::workload(
                    field,
                    format!("normal needs a finite mean ≥ 1 and std ≥ 0, got mean={mean}, std={std}"),
                ))
            }
            _ => Ok(()),
        }
    }

    fn sample(&self, rng: &mut SplitMix64) -> usize {
        match *self {
            Lengths::Fixed(n) => n,
            Lengths::Distributed(Distribution::Uniform { min, max }) => {
                let span = (max - min) as u64 + 1;
                min + (rng.next_u64() % span) as usize
            }
            Lengths::Distributed(Distribution::Normal { mean, std }) => {
                // Box–Muller; 1 − u keeps the logarithm finite.
                let (u1, u2) = (1.0 - rng.next_f64(), rng.next_f64());
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let x = (mean + std * z).round();
                if x < 1.0 {
                    1
                } else if x >= usize::MAX as f64 {
                    usize::MAX
                } else {
                    x as usize
                }
            }
        }
    }
}

impl Workload {
    /// Checks the workload and produces its requests.
    pub fn lower(&self) -> Result<LoweredWorkload> {
        match self {
            Workload::Generated { requests, arrival, isl, osl, seed } => {
                lower_generated(*requests, *arrival, *isl, *osl, *seed)
            }
            Workload::Trace { path, block_size, concurrency, speedup } => {
                lower_trace(path, *block_size, *concurrency, *speedup)
            }
        }
    }
}

fn request(id: String, arrival_time_ms: f64, isl: usize, osl: usize, tokens: Option<Vec<u32>>) -> ReplayRequest {
    ReplayRequest {
        id,
        arrival_time_ms,
        input_tokens: isl,
        input_token_ids: tokens,
        output_tokens: osl,
        output_token_ids: None,
        dp_rank: None,
        prefill_dp_rank: None,
        session_id: None,
        turn_index: None,
        metadata: Value::Null,
    }
}

fn lower_generated(count: usize, arrival: Arrival, isl: Lengths, osl: Lengths, seed: u64) -> Result<LoweredWorkload> {
    if count == 0 {
        return Err(ReplayError::workload("workload.requests", "must be at least 1, got 0"));
    }
    isl.check("workload.isl")?;
    osl.check("workload.osl")?;
    let (max_in_flight, rate) = match arrival {
        Arrival::ClosedLoop { concurrency: 0 } => {
            return Err(ReplayError::workload("workload.arrival.closed_loop.concurrency", "must be at least 1, got 0"))
        }
        Arrival::ClosedLoop { concurrency } => (Some(concurrency), None),
        Arrival::OpenLoop { rate_rps } if !(rate_rps.is_finite() && rate_rps > 0.0) => {
            return Err(ReplayError::workload(
                "workload.arrival.open_loop.rate_rps",
                format!("must be a finite rate > 0 requests/s, got {rate_rps}"),
            ))
        }
        Arrival::OpenLoop { rate_rps } => (None, Some(rate_rps)),
    };
    // Separate streams, so changing the length distribution does not move the arrivals.
    let mut lengths = SplitMix64::new(seed);
    let mut arrivals = SplitMix64::new(seed ^ 0xa076_1d64_78bd_642f);
    let mut now_ms = 0.0;
    let mut out = Vec::with_capacity(count);
    for index in 0..count {
        let (i, o) = (isl.sample(&mut lengths), osl.sample(&mut lengths));
        if let Some(rate) = rate {
            if index > 0 {
                now_ms += -(1.0 - arrivals.next_f64()).ln() / rate * 1e3;
            }
        }
        out.push(request(index.to_string(), now_ms, i, o, None));
    }
    Ok(LoweredWorkload { requests: out, max_in_flight })
}

/// One trace line's error.
fn line_error(path: &Path, line: usize, field: &str, message: impl Into<String>) -> ReplayError {
    ReplayError::TraceLine { path: path.to_path_buf(), line, field: field.to_string(), message: message.into() }
}

/// Checks one JSON field of a trace row against its expected type, naming it on failure.
fn check_field<T: serde::de::DeserializeOwned>(
    path: &Path,
    line: usize,
    object: &serde_json::Map<String, Value>,
    names: &[&str],
    expected: &str,
) -> Result<Option<T>> {
    for name in names {
        if let Some(value) = object.get(*name) {
            if value.is_null() {
                return Ok(None);
            }
            return serde_json::from_value(value.clone())
                .map(Some)
                .map_err(|_| line_error(path, line, name, format!("expected {expected}, got {value}")));
        }
    }
    Ok(None)
}

/// Reads and checks the rows of a Mooncake trace; returns them with their 1-based line numbers.
fn read_rows(path: &Path, block_size: usize) -> Result<Vec<(usize, MooncakeRow)>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ReplayError::Trace { path: path.to_path_buf(), message: format!("cannot read it: {e}") })?;
    let mut rows = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(raw)
            .map_err(|e| line_error(path, line, "-", format!("not valid JSON: {e}")))?;
        let Value::Object(object) = &value else {
            return Err(line_error(path, line, "-", "expected a JSON object per line"));
        };
        let timestamp: Option<f64> =
            check_field(path, line, object, &["timestamp", "created_time"], "a number of milliseconds")?;
        if let Some(t) = timestamp {
            if !(t.is_finite() && t >= 0.0) {
                return Err(line_error(path, line, "timestamp", format!("must be finite and ≥ 0, got {t}")));
            }
        }
        let input: Option<usize> =
            check_field(path, line, object, &["input_length", "input_tokens"], "a non-negative integer")?;
        let output: Option<usize> =
            check_field(path, line, object, &["output_length", "output_tokens"], "a non-negative integer")?;
        let hash_ids: Option<Vec<u64>> =
            check_field(path, line, object, &["hash_ids"], "an array of non-negative integers")?;
        let hash_ids = hash_ids.ok_or_else(|| line_error(path, line, "hash_ids", "missing"))?;
        let output = output.ok_or_else(|| line_error(path, line, "output_length", "missing"))?;
        if output == 0 {
            return Err(line_error(path, line, "output_length", "must be at least 1 token, got 0"));
        }
        let capacity = hash_ids.len().saturating_mul(block_size);
        let input = input.unwrap_or(capacity);
        if input == 0 {
            return Err(line_error(path, line, "input_length", "must be at least 1 token, got 0"));
        }
        if input > capacity {
            return Err(line_error(
                path,
                line,
                "input_length",
                format!(
                    "{input} tokens need at least {} hash_ids of {block_size} tokens, the line has {}",
                    input.div_ceil(block_size),
                    hash_ids.len()
                ),
            ));
        }
        let mut row: MooncakeRow = serde_json::from_value(value.clone())
            .map_err(|e| line_error(path, line, "-", format!("not a Mooncake row: {e}")))?;
        // One request per line at its timestamp (see the module docs).
        row.session_id = None;
        row.delay = None;
        row.input_length = Some(input);
        rows.push((line, row));
    }
    if rows.is_empty() {
        return Err(ReplayError::Trace { path: path.to_path_buf(), message: "holds no request".into() });
    }
    Ok(rows)
}

fn lower_trace(path: &Path, block_size: usize, concurrency: Option<usize>, speedup: Option<f64>) -> Result<LoweredWorkload> {
    if block_size == 0 {
        return Err(ReplayError::workload("workload.block_size", "must be at least 1 token per hash id, got 0"));
    }
    if concurrency == Some(0) {
        return Err(ReplayError::workload("workload.concurrency", "must be at least 1, got 0"));
    }
    let speedup = speedup.unwrap_or(1.0);
    if !(speedup.is_finite() && speedup > 0.0) {
        return Err(ReplayError::workload("workload.speedup", format!("must be finite and > 0, got {speedup}")));
    }
    let rows = read_rows(path, block_size)?;
    let lines: Vec<usize> = rows.iter().map(|(line, _)| *line).collect();
    let timestamps: Vec<Option<f64>> = rows.iter().map(|(_, row)| row.timestamp).collect();
    let trace = Trace::from_mooncake_rows(rows.into_iter().map(|(_, row)| row).collect(), block_size)
        .map_err(|e| ReplayError::Trace { path: path.to_path_buf(), message: format!("{e:#}") })?;
    let first = timestamps.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    let mut out = Vec::with_capacity(trace.sessions.len());
    for ((session, line), timestamp) in trace.sessions.iter().zip(&lines).zip(&timestamps) {
        let turn = session.turns.first().ok_or_else(|| line_error(path, *line, "-", "no request"))?;
        let tokens = turn
            .synthesize_tokens(trace.block_size)
            .map_err(|e| line_error(path, *line, "hash_ids", format!("{e:#}")))?;
        let arrival = timestamp.map_or(0.0, |t| (t - first) / speedup);
        out.push(request(format!("line-{line}"), arrival, turn.input_length, turn.max_output_tokens, Some(tokens)));
    }
    out.sort_by(|a, b| a.arrival_time_ms.total_cmp(&b.arrival_time_ms));
    Ok(LoweredWorkload { requests: out, max_in_flight: concurrency })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_published_sequence() {
        // The reference implementation's first outputs for seed 0.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn lengths_parse_from_plain_numbers_and_distributions() {
        let parse = |text: &str| serde_json::from_str::<Lengths>(text).unwrap();
        assert_eq!(parse("2048"), Lengths::Fixed(2048));
        assert_eq!(
            parse(r#"{"uniform": {"min": 10, "max": 20}}"#),
            Lengths::Distributed(Distribution::Uniform { min: 10, max: 20 })
        );
        assert_eq!(
            parse(r#"{"normal": {"mean": 100.0, "std": 5.0}}"#),
            Lengths::Distributed(Distribution::Normal { mean: 100.0, std: 5.0 })
        );
        assert!(serde_json::from_str::<Lengths>(r#"{"zipf": {"s": 1}}"#).is_err());
    }

    #[test]
    fn generated_lengths_and_arrivals_follow_their_distributions() {
        let workload = Workload::Generated {
            requests: 4000,
            arrival: Arrival::OpenLoop { rate_rps: 10.0 },
            isl: Lengths::Distributed(Distribution::Uniform { min: 100, max: 199 }),
            osl: Lengths::Distributed(Distribution::Normal { mean: 50.0, std: 10.0 }),
            seed: 42,
        };
        let lowered = workload.lower().unwrap();
        assert_eq!(lowered.max_in_flight, None);
        let r = &lowered.requests;
        assert!(r.iter().all(|q| (100..=199).contains(&q.input_tokens) && q.output_tokens >= 1));
        assert!(r.windows(2).all(|w| w[0].arrival_time_ms <= w[1].arrival_time_ms));
        let n = r.len() as f64;
        let mean_isl = r.iter().map(|q| q.input_tokens as f64).sum::<f64>() / n;
        let mean_osl = r.iter().map(|q| q.output_tokens as f64).sum::<f64>() / n;
        // 4000 draws: the sample means sit within a few standard errors of the true ones.
        assert!((mean_isl - 149.5).abs() < 2.0, "{mean_isl}");
        assert!((mean_osl - 50.0).abs() < 1.0, "{mean_osl}");
        // 3999 exponential gaps of mean 100 ms.
        let span_s = r.last().unwrap().arrival_time_ms / 1e3;
        assert!((span_s - 399.9).abs() < 20.0, "{span_s}");
        // The seed fixes everything; another seed moves it.
        let again = workload.lower().unwrap().requests;
        assert_eq!(again, lowered.requests);
        let Workload::Generated { requests, arrival, isl, osl, .. } = workload else { unreachable!() };
        let other = Workload::Generated { requests, arrival, isl, osl, seed: 43 }.lower().unwrap().requests;
        assert_ne!(other, lowered.requests);
    }

    #[test]
    fn closed_loop_arrives_at_once_under_a_cap() {
        let lowered = Workload::Generated {
            requests: 5,
            arrival: Arrival::ClosedLoop { concurrency: 2 },
            isl: Lengths::Fixed(7),
            osl: Lengths::Fixed(3),
            seed: 0,
        }
        .lower()
        .unwrap();
        assert_eq!(lowered.max_in_flight, Some(2));
        assert!(lowered.requests.iter().all(|q| q.arrival_time_ms == 0.0 && q.input_tokens == 7 && q.output_tokens == 3));
    }
}
