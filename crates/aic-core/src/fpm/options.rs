//! Options of the forward-pass model (spec 42 §6): sample-store sizes, readiness threshold,
//! correction bounds and the bucket grid.

use serde::Serialize;

use super::strict::{field, object};
use super::FpmError;
use super::error::Result;
use crate::error::AicError;

/// Tuning and bucketing options; every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FpmOptions {
    /// Samples retained per workload kind before the oldest of the fullest bucket is evicted.
    pub max_observations: usize,
    /// Samples a kind needs before its corrections apply.
    pub min_observations: usize,
    /// Lower bound of a correction factor (`None` = unbounded).
    pub min_faster_correction_factor: Option<f64>,
    /// Upper bound of a correction factor (`None` = unbounded).
    pub max_slower_correction_factor: Option<f64>,
    /// Buckets per store (a perfect square; 2-D stores use its root per axis).
    pub bucket_count: usize,
    /// Upper bound of the `sum_prefill_tokens` axis.
    pub max_num_tokens: u64,
    /// Upper bound of the `num_decode_requests` axis.
    pub max_batch_size: u64,
    /// Upper bound of the `sum_decode_kv_tokens` axis.
    pub max_kv_tokens: u64,
}

impl Default for FpmOptions {
    fn default() -> Self {
        FpmOptions {
            max_observations: 64,
            min_observations: 5,
            min_faster_correction_factor: Some(0.5),
            max_slower_correction_factor: Some(2.0),
            bucket_count: 16,
            max_num_tokens: 8192,
            max_batch_size: 512,
            max_kv_tokens: 2_000_000,
        }
    }
}

/// The option names, in the order of the spec's table (§6).
pub const OPTION_NAMES: [&str; 8] = [
    "max_observations",
    "min_observations",
    "min_faster_correction_factor",
    "max_slower_correction_factor",
    "bucket_count",
    "max_num_tokens",
    "max_batch_size",
    "max_kv_tokens",
];

/// A correction bound: absent keeps the default, `null` means unbounded.
fn bound(map: &serde_json::Map<String, serde_json::Value>, key: &str, default: Option<f64>) -> std::result::Result<Option<f64>, String> {
    match map.get(key) {
        None => Ok(default),
        Some(serde_json::Value::Null) => Ok(None),
        Some(_) => field::<f64>(map, key, ""),
    }
}

/// An out-of-range option: the engine's invalid-config error (`invalid engine config: ...`).
fn invalid(msg: &str) -> FpmError {
    AicError::InvalidConfig(format!("invalid forward pass perf options: {msg}")).into()
}

impl FpmOptions {
    /// Parses options JSON: `None`, blank text or `null` give the defaults; otherwise a JSON
    /// object whose keys are option names ([`OPTION_NAMES`]; an unknown key is an error listing
    /// them, as is a list or any other JSON type); an explicit `null` bound means unbounded.
    /// A value of the wrong type is an error naming its option.
    pub fn from_json(text: Option<&str>) -> Result<FpmOptions> {
        let text = match text {
            Some(t) if !t.trim().is_empty() => t,
            _ => return Ok(FpmOptions::default()),
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| FpmError::OptionsJson(e.to_string()))?;
        if value.is_null() {
            return Ok(FpmOptions::default());
        }
        let opts = Self::from_object(&value).map_err(FpmError::OptionsJson)?;
        opts.validate()?;
        Ok(opts)
    }

    /// The options of a JSON object, defaults for absent keys (not yet range-checked).
    fn from_object(value: &serde_json::Value) -> std::result::Result<FpmOptions, String> {
        let map = object(value, "options", &OPTION_NAMES)?;
        let d = FpmOptions::default();
        Ok(FpmOptions {
            max_observations: field(map, "max_observations", "")?.unwrap_or(d.max_observations),
            min_observations: field(map, "min_observations", "")?.unwrap_or(d.min_observations),
            min_faster_correction_factor: bound(map, "min_faster_correction_factor", d.min_faster_correction_factor)?,
            max_slower_correction_factor: bound(map, "max_slower_correction_factor", d.max_slower_correction_factor)?,
            bucket_count: field(map, "bucket_count", "")?.unwrap_or(d.bucket_count),
            max_num_tokens: field(map, "max_num_tokens", "")?.unwrap_or(d.max_num_tokens),
            max_batch_size: field(map, "max_batch_size", "")?.unwrap_or(d.max_batch_size),
            max_kv_tokens: field(map, "max_kv_tokens", "")?.unwrap_or(d.max_kv_tokens),
        })
    }

    /// Checks the ranges, in the reference's order (§6).
    pub fn validate(&self) -> Result<()> {
        if self.max_observations < 1 {
            return Err(invalid("max_observations must be >= 1"));
        }
        if self.min_observations < 1 {
            return Err(invalid("min_observations must be >= 1"));
        }
        if let Some(f) = self.min_faster_correction_factor {
            if !(f.is_finite() && f > 0.0 && f <= 1.0) {
                return Err(invalid("min_faster_correction_factor must be finite and in (0.0, 1.0]"));
            }
        }
        if let Some(f) = self.max_slower_correction_factor {
            if !(f.is_finite() && f >= 1.0) {
                return Err(invalid("max_slower_correction_factor must be finite and >= 1.0"));
            }
        }
        if self.bucket_count < 1 {
            return Err(invalid("bucket_count must be >= 1"));
        }
        if self.max_num_tokens < 1 {
            return Err(invalid("max_num_tokens must be >= 1"));
        }
        if self.max_batch_size < 1 {
            return Err(invalid("max_batch_size must be >= 1"));
        }
        if self.max_kv_tokens < 1 {
            return Err(invalid("max_kv_tokens must be >= 1"));
        }
        if self.min_observations > self.max_observations {
            return Err(invalid("min_observations must be <= max_observations"));
        }
        let root = isqrt(self.bucket_count);
        if root * root != self.bucket_count {
            return Err(invalid("bucket_count must be a perfect square"));
        }
        Ok(())
    }

    /// Buckets per axis of a store of dimension `dim`.
    pub fn buckets_per_axis(&self, dim: usize) -> usize {
        if dim <= 1 {
            self.bucket_count
        } else {
            isqrt(self.bucket_count)
        }
    }

    /// `[lo, hi]` bounds of the fixed correction axes of a kind (§8).
    pub fn correction_axes(&self, kind: super::WorkloadKind) -> Vec<(f64, f64)> {
        use super::WorkloadKind::*;
        let t = self.max_num_tokens as f64;
        let b = self.max_batch_size as f64;
        let kv = self.max_kv_tokens as f64;
        match kind {
            Prefill => vec![(0.0, t)],
            Decode => vec![(0.0, b), (0.0, kv)],
            Mixed => vec![(0.0, t), (0.0, kv)],
        }
    }

    /// Clamps a raw correction ratio into the configured bounds.
    pub fn clamp_factor(&self, c: f64) -> f64 {
        let mut c = c;
        if let Some(lo) = self.min_faster_correction_factor {
            c = c.max(lo);
        }
        if let Some(hi) = self.max_slower_correction_factor {
            c = c.min(hi);
        }
        c
    }
}

/// Integer square root (floor).
fn isqrt(n: usize) -> usize {
    let mut r = (n as f64).sqrt() as usize;
    while r * r > n {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= n {
        r += 1;
    }
    r
}
