//! Mapping of core errors (and caught panics) onto Python exceptions.
//!
//! | core [`ErrorClass`]       | Python class                                   |
//! |---------------------------|------------------------------------------------|
//! | `PerfDataNotAvailable`    | `aic._aic.PerfDataNotAvailableError(RuntimeError)` |
//! | `EmpiricalNotImplemented` | `aic._aic.EmpiricalNotImplementedError(RuntimeError)` |
//! | `MissingSystemFlops`      | `aic._aic.MissingSystemFlopsError(ValueError)` |
//! | `Value`                   | `ValueError`                                   |
//!
//! The message is always the core error's `Display` text. A panic inside the core never
//! crosses the boundary: it is caught and raised as `RuntimeError("internal error in aic: …")`.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use aic_core::{AicError, ErrorClass};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::PyErr;

create_exception!(
    aic._aic,
    PerfDataNotAvailableError,
    PyRuntimeError,
    "A perf table, slice, key or anchor needed for the estimate is missing, or a data file is unreadable."
);
create_exception!(
    aic._aic,
    EmpiricalNotImplementedError,
    PyRuntimeError,
    "The empirical (utilisation transfer) estimate has no reference data to work from."
);
create_exception!(
    aic._aic,
    MissingSystemFlopsError,
    PyValueError,
    "A quant mode needs a tensor-core FLOPS entry that the system description does not define."
);

/// Why a guarded core call did not produce a value. `Send`, so it can leave a GIL-free section.
#[derive(Debug)]
pub enum Failure {
    /// The core returned an error.
    Core(AicError),
    /// The core panicked; the payload's message, if it had one.
    Panic(String),
}

impl From<AicError> for Failure {
    fn from(e: AicError) -> Self {
        Failure::Core(e)
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Core(e) => core_error(&e),
            Failure::Panic(msg) => PyRuntimeError::new_err(format!(
                "internal error in aic (a bug; please report it): {msg}"
            )),
        }
    }
}

/// The Python exception for a core error.
pub fn core_error(e: &AicError) -> PyErr {
    let msg = e.to_string();
    match e.class() {
        ErrorClass::PerfDataNotAvailable => PerfDataNotAvailableError::new_err(msg),
        ErrorClass::EmpiricalNotImplemented => EmpiricalNotImplementedError::new_err(msg),
        ErrorClass::MissingSystemFlops => MissingSystemFlopsError::new_err(msg),
        ErrorClass::Value => PyValueError::new_err(msg),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Runs a core call, turning both its error and any panic into a [`Failure`].
pub fn guarded<T>(f: impl FnOnce() -> aic_core::Result<T>) -> Result<T, Failure> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Failure::Core(e)),
        Err(payload) => Err(Failure::Panic(panic_message(payload.as_ref()))),
    }
}
