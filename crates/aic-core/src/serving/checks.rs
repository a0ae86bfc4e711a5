//! Domain checks of the serving and sweep requests.
//!
//! The bindings send the serving requests as JSON, which serde only types: a `u32` field
//! accepts 0 and an `f64` field accepts 1e308 or a negative fraction. Without these checks such
//! values were priced (an output length of 0 as 1, a memory fraction of 1.5, zero workers, a
//! negative latency target) and came back as numbers that mean nothing. Each check names the
//! argument in the caller's words, the value as given and the accepted range; the Python front
//! end (`aic.validation`) applies the same rules with the same messages before it builds a
//! request, so these fire only for Rust and C callers.

use crate::error::{AicError, Result};

/// A number as messages show it: the shortest round-trip form, in exponent notation when very
/// large or small (`1e308`, not 309 digits), `NaN` / `inf` / `-inf` for the non-finite ones.
pub fn show(value: f64) -> String {
    let a = value.abs();
    if value.is_finite() && a != 0.0 && !(1e-6..1e16).contains(&a) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

/// `value ≥ 1`: `"{name} must be a positive integer ({meaning}), got 0"`.
pub fn positive_count(name: &str, value: u64, meaning: &str) -> Result<()> {
    if value >= 1 {
        return Ok(());
    }
    Err(AicError::value(format!("{name} must be a positive integer ({meaning}), got {value}")))
}

/// A finite number `> 0`: latency targets in ms.
pub fn positive_number(name: &str, value: f64, meaning: &str) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        return Ok(());
    }
    Err(AicError::value(format!("{name} must be a finite number > 0 ({meaning}), got {}", show(value))))
}

/// A finite number `≥ 0` (an MTP acceptance; its upper bound is the worker's `nextn`).
pub fn non_negative_number(name: &str, value: f64, meaning: &str) -> Result<()> {
    if value.is_finite() && value >= 0.0 {
        return Ok(());
    }
    Err(AicError::value(format!("{name} must be a finite number >= 0 ({meaning}), got {}", show(value))))
}

/// A KV-budget fraction override, when given: finite and in `(0, 1]`.
pub fn memory_fraction(name: &str, value: Option<f64>) -> Result<()> {
    match value {
        Some(f) if !(f.is_finite() && f > 0.0 && f <= 1.0) => Err(AicError::value(format!(
            "{name} must be a finite number in (0, 1] (the share of free GPU memory the KV cache \
             may use), got {}",
            show(f)
        ))),
        _ => Ok(()),
    }
}

/// A per-request KV slot length, when given: at least `isl + osl` (a request's whole KV cache
/// must fit its slot; a shorter slot would let more requests "fit" than can run).
pub fn max_seq_len(name: &str, value: Option<u64>, isl: u32, osl: u32) -> Result<()> {
    let need = u64::from(isl) + u64::from(osl);
    match value {
        Some(m) if m < need => Err(AicError::value(format!(
            "{name} must be at least isl + osl = {need} (each request's KV cache must fit its \
             slot), got {m}"
        ))),
        _ => Ok(()),
    }
}

/// A cached prefix shorter than the prompt (the sweep): the prefix is part of `isl`, so a
/// prefix of `isl` tokens or more leaves nothing to prefill and makes every candidate
/// infeasible, which the sweep reported as "no feasible configuration" instead of naming the
/// inputs.
pub fn prefix_below_isl(prefix: u32, isl: u32) -> Result<()> {
    if prefix < isl {
        return Ok(());
    }
    Err(AicError::value(format!(
        "prefix must be less than isl (the cached prefix is part of the prompt and at least one \
         token must be prefilled), got prefix {prefix} with isl {isl}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<()>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn counts_refuse_zero_and_name_the_argument() {
        assert!(positive_count("osl", 1, "output tokens").is_ok());
        assert_eq!(
            message(positive_count("prefill_num_workers", 0, "prefill workers")),
            "prefill_num_workers must be a positive integer (prefill workers), got 0"
        );
    }

    #[test]
    fn numbers_refuse_nan_infinity_and_out_of_range() {
        assert!(positive_number("ttft", 2000.0, "ms").is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(positive_number("ttft", bad, "ms").is_err(), "{bad}");
        }
        assert!(non_negative_number("nextn_accepted", 0.0, "drafts").is_ok());
        assert!(message(non_negative_number("nextn_accepted", f64::NAN, "drafts")).ends_with("got NaN"));
        assert!(memory_fraction("free_gpu_memory_fraction", None).is_ok());
        assert!(memory_fraction("free_gpu_memory_fraction", Some(1.0)).is_ok());
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(memory_fraction("free_gpu_memory_fraction", Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn huge_numbers_are_shown_with_an_exponent() {
        assert_eq!(show(1e308), "1e308");
        assert_eq!(show(-1.5), "-1.5");
        assert_eq!(show(f64::NAN), "NaN");
        assert_eq!(message(positive_number("request_latency", -1e300, "ms")), "request_latency must be a finite number > 0 (ms), got -1e300");
    }

    #[test]
    fn a_kv_slot_shorter_than_a_request_is_refused() {
        assert!(max_seq_len("max_seq_len", Some(1500), 1000, 500).is_ok());
        assert!(max_seq_len("max_seq_len", None, 1000, 500).is_ok());
        assert_eq!(
            message(max_seq_len("max_seq_len", Some(1024), 1024, 1024)),
            "max_seq_len must be at least isl + osl = 2048 (each request's KV cache must fit its slot), got 1024"
        );
    }

    #[test]
    fn a_prefix_covering_the_prompt_is_refused_naming_both() {
        assert!(prefix_below_isl(0, 1).is_ok());
        assert!(prefix_below_isl(999, 1000).is_ok());
        assert_eq!(
            message(prefix_below_isl(4000, 4000)),
            "prefix must be less than isl (the cached prefix is part of the prompt and at least one token must be prefilled), got prefix 4000 with isl 4000"
        );
    }
}
