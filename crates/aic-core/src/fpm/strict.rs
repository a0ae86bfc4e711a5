//! Strict reading of the FPM model's JSON inputs (telemetry records and options).
//!
//! It exists because serde's derived readers are lenient in ways that turn a caller's mistake
//! into a silent wrong answer: a struct accepts a JSON list and reads it by position, an unknown
//! key (a misspelt option, counters one level too high) is dropped and its field keeps the
//! default. These helpers accept only a JSON object, reject unknown keys with the list of valid
//! ones, and prefix every error with the path of the field it is about.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The JSON type of a value, as an error message names it.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// `value` as an object whose keys are all in `valid`; `what` names it in errors (`options`,
/// `scheduled_requests`).
pub(crate) fn object<'a>(value: &'a Value, what: &str, valid: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let Value::Object(map) = value else {
        return Err(format!("{what} must be a JSON object, got {}", type_name(value)));
    };
    if let Some(key) = map.keys().find(|k| !valid.contains(&k.as_str())) {
        return Err(format!("unknown field {key:?} in {what}; valid fields: {}", valid.join(", ")));
    }
    Ok(map)
}

/// Field `key` of `map` read as `T` (`None` when absent); errors are prefixed with `path.key`
/// (`path` empty at the top level).
pub(crate) fn field<T: DeserializeOwned>(map: &Map<String, Value>, key: &str, path: &str) -> Result<Option<T>, String> {
    let Some(value) = map.get(key) else {
        return Ok(None);
    };
    serde_json::from_value(value.clone()).map(Some).map_err(|e| format!("{}: {e}", join(path, key)))
}

/// `path.key`, or `key` at the top level.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_and_unknown_keys_are_rejected() {
        assert_eq!(object(&json!([1, 2]), "options", &["a"]).unwrap_err(), "options must be a JSON object, got a list");
        assert_eq!(
            object(&json!({"b": 1}), "options", &["a", "c"]).unwrap_err(),
            "unknown field \"b\" in options; valid fields: a, c"
        );
        let v = json!({"a": -3});
        let map = object(&v, "x", &["a"]).unwrap();
        assert_eq!(
            field::<u32>(map, "a", "scheduled_requests").unwrap_err(),
            "scheduled_requests.a: invalid value: integer `-3`, expected u32"
        );
        assert_eq!(field::<u32>(map, "z", "").unwrap(), None);
    }
}
