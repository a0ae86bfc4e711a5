//! Parsing the JSON text of a request with the failing field named.
//!
//! serde_json reports where a request stops parsing as a line and column only: a sweep request
//! holding `"ttft": NaN` (Python's `json.dumps` writes it) came back as `expected value at line
//! 1 column 58`, which does not say which of the request's numbers is wrong. Every request the
//! bindings send as JSON (the serving estimate, the sweep, the calibration constants) is parsed
//! here: on a failure the text is parsed a second time with the path tracked
//! (`serde_path_to_error`), and the message names the field (`ttft`, `agg[3].worker`) before
//! serde's own text. A request that parses pays nothing for it.

use serde::de::DeserializeOwned;

use crate::error::{AicError, Result};

/// Parses `text` as a `T`; a failure is a value error `invalid {what} JSON: field {path}:
/// {serde's message}`, with a hint when the value at fault is `NaN` or `Infinity`.
pub fn parse<T: DeserializeOwned>(what: &str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| AicError::value(format!("invalid {what} JSON: {}", describe::<T>(text, &e))))
}

/// Reads a `T` out of an already parsed JSON value (a part of a larger request); a failure is
/// a value error `invalid {what} JSON: field {path}: {serde's message}`.
pub fn from_value<T: DeserializeOwned>(what: &str, value: &serde_json::Value) -> Result<T> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            AicError::value(format!("invalid {what} JSON: {inner}"))
        } else {
            AicError::value(format!("invalid {what} JSON: field {path}: {inner}"))
        }
    })
}

/// The message of a failed parse of `text` as a `T`: `field {path}: {serde's message}` (just
/// serde's message when the failure is not inside a field), followed by a hint when the value
/// at fault is `NaN` or `Infinity`, which JSON has not.
pub fn describe<T: DeserializeOwned>(text: &str, error: &serde_json::Error) -> String {
    let path = field_path::<T>(text);
    let hint = if non_finite_at(text, error) {
        " (NaN and Infinity are not JSON numbers: pass a finite number)"
    } else {
        ""
    };
    match path {
        Some(p) => format!("field {p}: {error}{hint}"),
        None => format!("{error}{hint}"),
    }
}

/// The path of the field whose value stopped the parse (`ttft`, `agg[0].worker.spec`), or
/// `None` when the failure is outside any field (not JSON at all, trailing text).
fn field_path<T: DeserializeOwned>(text: &str) -> Option<String> {
    let mut de = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(_) => None,
        Err(e) => {
            let path = e.path().to_string();
            (path != "." && !path.is_empty()).then_some(path)
        }
    }
}

/// Whether the parse stopped at a `NaN`, `Infinity` or `-Infinity` token.
fn non_finite_at(text: &str, error: &serde_json::Error) -> bool {
    if error.line() == 0 {
        return false;
    }
    let Some(line) = text.split('\n').nth(error.line() - 1) else {
        return false;
    };
    // serde's column is 1-based and counts bytes; look a little to either side of it.
    let at = error.column().saturating_sub(1);
    let start = at.saturating_sub(2);
    let end = (at + 9).min(line.len());
    line.get(start..end).is_some_and(|window| window.contains("NaN") || window.contains("Infinity"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        scale: f64,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Request {
        isl: u32,
        ttft: f64,
        #[serde(default)]
        layouts: Vec<Inner>,
    }

    fn message(text: &str) -> String {
        parse::<Request>("test request", text).unwrap_err().to_string()
    }

    #[test]
    fn a_nan_names_its_field() {
        let m = message(r#"{"isl": 128, "ttft": NaN}"#);
        assert!(m.starts_with("invalid test request JSON: field ttft: expected value at line 1 column 22"), "{m}");
        assert!(m.ends_with("(NaN and Infinity are not JSON numbers: pass a finite number)"), "{m}");
        let m = message(r#"{"isl": 128, "ttft": -Infinity}"#);
        assert!(m.contains("field ttft:") && m.contains("NaN and Infinity"), "{m}");
    }

    #[test]
    fn a_nested_field_is_named_by_its_path() {
        let m = message(r#"{"isl": 128, "ttft": 1.0, "layouts": [{"scale": 1}, {"scale": Infinity}]}"#);
        assert!(m.contains("field layouts[1].scale:"), "{m}");
    }

    #[test]
    fn a_wrong_type_names_its_field_without_the_hint() {
        let m = message(r#"{"isl": -1, "ttft": 1.0}"#);
        assert!(m.contains("field isl: invalid value: integer `-1`, expected u32"), "{m}");
        assert!(!m.contains("NaN"), "{m}");
    }

    #[test]
    fn a_failure_outside_any_field_is_serdes_message() {
        let m = message(r#""text""#);
        assert!(m.starts_with("invalid test request JSON: invalid type: string \"text\", expected struct Request"), "{m}");
        let m = message(r#"{"isl": 1, "ttft": 1.0} trailing"#);
        assert!(m.starts_with("invalid test request JSON: trailing characters"), "{m}");
    }

    #[test]
    fn a_part_of_a_parsed_request_names_its_field() {
        let value: serde_json::Value = serde_json::from_str(r#"{"isl": 1, "ttft": "fast"}"#).unwrap();
        let m = from_value::<Request>("part", &value).unwrap_err().to_string();
        assert_eq!(m, "invalid part JSON: field ttft: invalid type: string \"fast\", expected f64");
    }

    #[test]
    fn a_missing_field_is_named_by_serde() {
        let m = message(r#"{"isl": 1}"#);
        assert!(m.contains("missing field `ttft`"), "{m}");
    }
}
