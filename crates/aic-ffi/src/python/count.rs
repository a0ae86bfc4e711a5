//! `Count`: the integer arguments of `AicEngine` (batch sizes, token counts, widths).
//!
//! PyO3's `u32` extraction takes any object with `__index__`, and `bool` is an `int` subclass
//! in Python: `predict_prefill_latency(True, 128)` priced a batch of 1. A count is a number of
//! things, never a truth value, so `Count` refuses `bool` with a `TypeError` (PyO3 prefixes
//! the argument's name) and otherwise extracts exactly as `u32` does: `OverflowError` for a
//! negative value or one of 2^32 or more, `TypeError` for a non-integer.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBool;

/// A `u32` argument that is not a `bool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Count(pub(crate) u32);

impl<'a, 'py> FromPyObject<'a, 'py> for Count {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> Result<Self, Self::Error> {
        if obj.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err(
                "a bool is not a count: pass an int (True is not 1 here)",
            ));
        }
        Ok(Count(obj.extract::<u32>()?))
    }
}
