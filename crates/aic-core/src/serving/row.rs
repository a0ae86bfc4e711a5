//! Result rows of the serving layer (spec 50 §8): ordered name → value records, as the
//! reference's result tables hold them.
//!
//! The reference keeps integers and floats apart in its rows (an empty phase sums to the
//! integer 0, the agg counters are floats for b > 1, ...), so a value remembers which it is;
//! [`Row::round3`] rounds floats only, as pandas does.

use serde_json::{Number, Value};

use super::numeric::round3;

/// One cell of a result row.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// `None` in the reference (dense models' `moe_tp`, hidden `power_w`).
    Null,
    /// An integer-valued cell (Python `int`).
    Int(i64),
    /// A float cell (Python `float`).
    Float(f64),
    /// A label.
    Str(String),
    /// An empty list (the private `_moe_comm_fallbacks` column of sweep rows).
    EmptyList,
}

impl Val {
    /// The numeric value (`Int` widened), `None` for labels and nulls.
    pub fn num(&self) -> Option<f64> {
        match self {
            Val::Int(i) => Some(*i as f64),
            Val::Float(f) => Some(*f),
            _ => None,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Val::Null => Value::Null,
            Val::Int(i) => Value::from(*i),
            Val::Float(f) => match Number::from_f64(*f) {
                Some(n) => Value::Number(n),
                None if f.is_nan() => Value::from("nan"),
                None if *f > 0.0 => Value::from("inf"),
                None => Value::from("-inf"),
            },
            Val::Str(s) => Value::from(s.clone()),
            Val::EmptyList => Value::Array(Vec::new()),
        }
    }
}

impl From<f64> for Val {
    fn from(v: f64) -> Val {
        Val::Float(v)
    }
}
impl From<i64> for Val {
    fn from(v: i64) -> Val {
        Val::Int(v)
    }
}
impl From<u32> for Val {
    fn from(v: u32) -> Val {
        Val::Int(i64::from(v))
    }
}
impl From<&str> for Val {
    fn from(v: &str) -> Val {
        Val::Str(v.to_string())
    }
}
impl From<String> for Val {
    fn from(v: String) -> Val {
        Val::Str(v)
    }
}
impl From<Option<u32>> for Val {
    fn from(v: Option<u32>) -> Val {
        v.map_or(Val::Null, Val::from)
    }
}

/// An ordered result row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    cells: Vec<(String, Val)>,
}

impl Row {
    /// An empty row.
    pub fn new() -> Row {
        Row { cells: Vec::with_capacity(64) }
    }

    /// Appends a column (or replaces its value when it already exists, keeping its place).
    pub fn set(&mut self, key: &str, value: impl Into<Val>) {
        let value = value.into();
        match self.cells.iter_mut().find(|(k, _)| k == key) {
            Some(cell) => cell.1 = value,
            None => self.cells.push((key.to_string(), value)),
        }
    }

    /// The value of a column.
    pub fn get(&self, key: &str) -> Option<&Val> {
        self.cells.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The numeric value of a column (0.0 when absent or not numeric).
    pub fn f(&self, key: &str) -> f64 {
        self.get(key).and_then(Val::num).unwrap_or(0.0)
    }

    /// The label of a column ("" when absent or not a label).
    pub fn s(&self, key: &str) -> &str {
        match self.get(key) {
            Some(Val::Str(s)) => s,
            _ => "",
        }
    }

    /// The columns in order.
    pub fn cells(&self) -> &[(String, Val)] {
        &self.cells
    }

    /// pandas `round(3)`: every float cell through [`round3`]; other cells unchanged.
    pub fn round3(&mut self) {
        for (_, v) in &mut self.cells {
            if let Val::Float(f) = v {
                *f = round3(*f);
            }
        }
    }

    /// The row as JSON object text, columns in order (serde_json's map would sort them).
    pub fn to_json_text(&self) -> String {
        let mut out = String::with_capacity(64 * self.cells.len());
        out.push('{');
        for (i, (k, v)) in self.cells.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&Value::from(k.as_str()).to_string());
            out.push_str(": ");
            out.push_str(&v.to_json().to_string());
        }
        out.push('}');
        out
    }
}
