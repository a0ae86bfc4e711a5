//! FPM v1 telemetry (spec 42 §2, §3): one record per attention-DP rank and iteration, its
//! validation, the workload kind and feature vector of a rank and of an iteration, and the
//! observed latency used as the tuning target.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::strict::{field, object};
use super::FpmError;
use super::error::Result;

/// The only FPM schema version understood.
pub const FPM_SCHEMA_VERSION: u32 = 1;

/// Scheduler telemetry of one attention-DP rank for one engine iteration (FPM v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ForwardPassMetrics {
    /// Schema version; must be 1.
    pub version: u32,
    /// Worker identity (ignored).
    pub worker_id: String,
    /// Attention-DP rank (ignored).
    pub dp_rank: u32,
    /// Iteration counter (ignored).
    pub counter_id: u64,
    /// Measured iteration time in SECONDS (tuning target only).
    pub wall_time: f64,
    /// What this rank computed in the iteration.
    pub scheduled_requests: ScheduledRequestMetrics,
    /// What was waiting (ignored).
    pub queued_requests: QueuedRequestMetrics,
}

impl Default for ForwardPassMetrics {
    fn default() -> Self {
        ForwardPassMetrics {
            version: FPM_SCHEMA_VERSION,
            worker_id: String::new(),
            dp_rank: 0,
            counter_id: 0,
            wall_time: 0.0,
            scheduled_requests: ScheduledRequestMetrics::default(),
            queued_requests: QueuedRequestMetrics::default(),
        }
    }
}

/// Aggregates of the requests a rank scheduled in one iteration.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ScheduledRequestMetrics {
    /// Prefill requests, chunk continuations included.
    pub num_prefill_requests: u32,
    /// New tokens computed for prefill this iteration.
    pub sum_prefill_tokens: u32,
    /// Variance of prefill lengths (ignored).
    pub var_prefill_length: f64,
    /// KV tokens already present for the prefill requests (prefix hits and earlier chunks).
    pub sum_prefill_kv_tokens: u32,
    /// Decoding requests.
    pub num_decode_requests: u32,
    /// Total KV length over the decoding requests.
    pub sum_decode_kv_tokens: u32,
    /// Variance of decode KV lengths (ignored).
    pub var_decode_kv_tokens: f64,
}

/// Aggregates of the queued requests (ignored by the estimator).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct QueuedRequestMetrics {
    /// Queued prefill requests.
    pub num_prefill_requests: u32,
    /// Their prompt tokens.
    pub sum_prefill_tokens: u32,
    /// Variance of their lengths.
    pub var_prefill_length: f64,
    /// Queued decode requests.
    pub num_decode_requests: u32,
    /// Their KV tokens.
    pub sum_decode_kv_tokens: u32,
    /// Variance of their KV lengths.
    pub var_decode_kv_tokens: f64,
}

/// What a rank (or an iteration) computed: prefill only, decode only, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadKind {
    /// Prefill tokens only; features `[sum_prefill_tokens]`.
    Prefill,
    /// Decode requests only; features `[num_decode_requests, sum_decode_kv_tokens]`.
    Decode,
    /// Both; features `[sum_prefill_tokens, sum_decode_kv_tokens]`.
    Mixed,
}

impl WorkloadKind {
    /// All kinds, in store order.
    pub const ALL: [WorkloadKind; 3] = [WorkloadKind::Prefill, WorkloadKind::Decode, WorkloadKind::Mixed];

    /// Length of the feature vector (1 for prefill, else 2).
    pub fn dim(self) -> usize {
        match self {
            WorkloadKind::Prefill => 1,
            WorkloadKind::Decode | WorkloadKind::Mixed => 2,
        }
    }

    /// Lower-case name (`prefill`, `decode`, `mixed`).
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Prefill => "prefill",
            WorkloadKind::Decode => "decode",
            WorkloadKind::Mixed => "mixed",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            WorkloadKind::Prefill => 0,
            WorkloadKind::Decode => 1,
            WorkloadKind::Mixed => 2,
        }
    }
}

/// The kind and feature vector of a rank or an iteration (§3).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadFeatures {
    /// Workload kind.
    pub kind: WorkloadKind,
    /// Feature vector (length `kind.dim()`).
    pub x: Vec<f64>,
}

impl WorkloadFeatures {
    /// Load score `Σ x` used to pick an iteration's representative rank.
    pub fn load(&self) -> f64 {
        self.x.iter().sum()
    }
}

impl ScheduledRequestMetrics {
    /// Whether prefill compute was scheduled (`sum_prefill_tokens > 0`).
    pub fn has_prefill(&self) -> bool {
        self.sum_prefill_tokens > 0
    }

    /// Whether decoding was scheduled.
    pub fn has_decode(&self) -> bool {
        self.num_decode_requests > 0 || self.sum_decode_kv_tokens > 0
    }

    /// The rank's workload kind; `None` for an empty rank.
    pub fn kind(&self) -> Option<WorkloadKind> {
        match (self.has_prefill(), self.has_decode()) {
            (false, false) => None,
            (true, false) => Some(WorkloadKind::Prefill),
            (false, true) => Some(WorkloadKind::Decode),
            (true, true) => Some(WorkloadKind::Mixed),
        }
    }

    /// The rank's kind and feature vector; `None` for an empty rank.
    pub fn features(&self) -> Option<WorkloadFeatures> {
        let kind = self.kind()?;
        let x = match kind {
            WorkloadKind::Prefill => vec![f64::from(self.sum_prefill_tokens)],
            WorkloadKind::Decode => {
                vec![f64::from(self.num_decode_requests), f64::from(self.sum_decode_kv_tokens)]
            }
            WorkloadKind::Mixed => {
                vec![f64::from(self.sum_prefill_tokens), f64::from(self.sum_decode_kv_tokens)]
            }
        };
        Some(WorkloadFeatures { kind, x })
    }
}

impl ForwardPassMetrics {
    /// Checks the schema version, the counter consistency (§2.2) and the wall time (finite and
    /// `>= 0`; 0 means not measured) of this rank.
    pub fn validate(&self) -> Result<()> {
        if self.version != FPM_SCHEMA_VERSION {
            return Err(FpmError::SchemaVersion { got: self.version, expected: FPM_SCHEMA_VERSION });
        }
        let s = &self.scheduled_requests;
        if s.num_prefill_requests == 0 && (s.sum_prefill_tokens > 0 || s.sum_prefill_kv_tokens > 0) {
            return Err(FpmError::InvalidMetrics(
                "prefill token sums require num_prefill_requests > 0".to_string(),
            ));
        }
        if !(self.wall_time.is_finite() && self.wall_time >= 0.0) {
            return Err(FpmError::InvalidMetrics(format!(
                "wall_time must be a finite number of seconds >= 0 (0: not measured), got {}",
                self.wall_time
            )));
        }
        if s.num_decode_requests == 0 && s.sum_decode_kv_tokens > 0 {
            return Err(FpmError::InvalidMetrics(
                "decode KV token sum requires num_decode_requests > 0".to_string(),
            ));
        }
        Ok(())
    }
}

/// Validates every rank of one iteration; an empty list is an error (§2.2).
pub fn validate_iteration(ranks: &[ForwardPassMetrics]) -> Result<()> {
    if ranks.is_empty() {
        return Err(FpmError::InvalidMetrics(
            "at least one attention-DP rank metric is required".to_string(),
        ));
    }
    ranks.iter().try_for_each(ForwardPassMetrics::validate)
}

/// The iteration's features: those of the non-empty rank with the largest load (ties: the
/// later rank); `None` when every rank is empty (§3).
pub fn iteration_features(ranks: &[ForwardPassMetrics]) -> Option<WorkloadFeatures> {
    let mut best: Option<WorkloadFeatures> = None;
    for rank in ranks {
        if let Some(f) = rank.scheduled_requests.features() {
            if best.as_ref().is_none_or(|b| f.load() >= b.load()) {
                best = Some(f);
            }
        }
    }
    best
}

/// Observed iteration latency in ms: the largest finite positive `wall_time` × 1000; `None`
/// when no rank has one (§3).
pub fn observed_latency_ms(ranks: &[ForwardPassMetrics]) -> Option<f64> {
    ranks
        .iter()
        .map(|r| r.wall_time)
        .filter(|w| w.is_finite() && *w > 0.0)
        .reduce(f64::max)
        .map(|w| w * 1000.0)
}

/// The keys of an FPM record.
pub const RECORD_FIELDS: [&str; 7] =
    ["version", "worker_id", "dp_rank", "counter_id", "wall_time", "scheduled_requests", "queued_requests"];
/// The keys of `scheduled_requests`.
pub const SCHEDULED_FIELDS: [&str; 7] = [
    "num_prefill_requests",
    "sum_prefill_tokens",
    "var_prefill_length",
    "sum_prefill_kv_tokens",
    "num_decode_requests",
    "sum_decode_kv_tokens",
    "var_decode_kv_tokens",
];
/// The keys of `queued_requests` (the scheduled ones without `sum_prefill_kv_tokens`).
pub const QUEUED_FIELDS: [&str; 6] = [
    "num_prefill_requests",
    "sum_prefill_tokens",
    "var_prefill_length",
    "num_decode_requests",
    "sum_decode_kv_tokens",
    "var_decode_kv_tokens",
];

impl ScheduledRequestMetrics {
    fn from_json_value(value: &Value) -> std::result::Result<Self, String> {
        let p = "scheduled_requests";
        let m = object(value, p, &SCHEDULED_FIELDS)?;
        Ok(ScheduledRequestMetrics {
            num_prefill_requests: field(m, "num_prefill_requests", p)?.unwrap_or(0),
            sum_prefill_tokens: field(m, "sum_prefill_tokens", p)?.unwrap_or(0),
            var_prefill_length: field(m, "var_prefill_length", p)?.unwrap_or(0.0),
            sum_prefill_kv_tokens: field(m, "sum_prefill_kv_tokens", p)?.unwrap_or(0),
            num_decode_requests: field(m, "num_decode_requests", p)?.unwrap_or(0),
            sum_decode_kv_tokens: field(m, "sum_decode_kv_tokens", p)?.unwrap_or(0),
            var_decode_kv_tokens: field(m, "var_decode_kv_tokens", p)?.unwrap_or(0.0),
        })
    }
}

impl QueuedRequestMetrics {
    fn from_json_value(value: &Value) -> std::result::Result<Self, String> {
        let p = "queued_requests";
        let m = object(value, p, &QUEUED_FIELDS)?;
        Ok(QueuedRequestMetrics {
            num_prefill_requests: field(m, "num_prefill_requests", p)?.unwrap_or(0),
            sum_prefill_tokens: field(m, "sum_prefill_tokens", p)?.unwrap_or(0),
            var_prefill_length: field(m, "var_prefill_length", p)?.unwrap_or(0.0),
            num_decode_requests: field(m, "num_decode_requests", p)?.unwrap_or(0),
            sum_decode_kv_tokens: field(m, "sum_decode_kv_tokens", p)?.unwrap_or(0),
            var_decode_kv_tokens: field(m, "var_decode_kv_tokens", p)?.unwrap_or(0.0),
        })
    }
}

impl ForwardPassMetrics {
    /// Reads one FPM record strictly: a JSON object with only the FPM v1 keys (at both levels),
    /// absent keys defaulting as in §2.1; the error names the offending field.
    pub fn from_json_value(value: &Value) -> std::result::Result<Self, String> {
        let m = object(value, "the FPM record", &RECORD_FIELDS)?;
        let d = ForwardPassMetrics::default();
        Ok(ForwardPassMetrics {
            version: field(m, "version", "")?.unwrap_or(d.version),
            worker_id: field(m, "worker_id", "")?.unwrap_or(d.worker_id),
            dp_rank: field(m, "dp_rank", "")?.unwrap_or(d.dp_rank),
            counter_id: field(m, "counter_id", "")?.unwrap_or(d.counter_id),
            wall_time: field(m, "wall_time", "")?.unwrap_or(d.wall_time),
            scheduled_requests: match m.get("scheduled_requests") {
                Some(v) => ScheduledRequestMetrics::from_json_value(v)?,
                None => d.scheduled_requests,
            },
            queued_requests: match m.get("queued_requests") {
                Some(v) => QueuedRequestMetrics::from_json_value(v)?,
                None => d.queued_requests,
            },
        })
    }
}

/// The records of one iteration given as a JSON value: an FPM object, or a list of them (an
/// error about rank `i` of a list starts with `rank i: `).
fn ranks_of(value: &Value) -> std::result::Result<Vec<ForwardPassMetrics>, String> {
    match value {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| ForwardPassMetrics::from_json_value(item).map_err(|e| format!("rank {i}: {e}")))
            .collect(),
        other => ForwardPassMetrics::from_json_value(other).map(|r| vec![r]),
    }
}

/// Parses one iteration: an FPM object or a JSON array of them (not yet validated).
pub fn parse_iteration_json(text: &str) -> Result<Vec<ForwardPassMetrics>> {
    let value: Value = serde_json::from_str(text).map_err(|e| FpmError::Json(e.to_string()))?;
    ranks_of(&value).map_err(FpmError::Payload)
}

/// Parses tuning input: a JSON array of iterations, each an array of FPM objects (an error
/// about one record starts with `iteration i, rank j: `).
pub fn parse_iterations_json(text: &str) -> Result<Vec<Vec<ForwardPassMetrics>>> {
    let value: Value = serde_json::from_str(text).map_err(|e| FpmError::TuningJson(e.to_string()))?;
    let Value::Array(iterations) = value else {
        return Err(FpmError::TuningJson(format!(
            "invalid type: {}, expected a sequence of iterations (a list of lists of FPM records)",
            match value {
                Value::Object(_) => "map",
                ref other => super::strict::type_name(other),
            }
        )));
    };
    let mut out = Vec::with_capacity(iterations.len());
    for (i, iteration) in iterations.iter().enumerate() {
        let Value::Array(ranks) = iteration else {
            return Err(FpmError::TuningJson(format!(
                "iteration {i} must be a list of FPM records (one per attention-DP rank), got {}",
                super::strict::type_name(iteration)
            )));
        };
        let ranks = ranks
            .iter()
            .enumerate()
            .map(|(j, r)| ForwardPassMetrics::from_json_value(r).map_err(|e| format!("iteration {i}, rank {j}: {e}")))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(FpmError::TuningJson)?;
        out.push(ranks);
    }
    Ok(out)
}
