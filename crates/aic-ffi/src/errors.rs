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
//!
//! The forward-pass model and the serving level report their own errors (`FpmError`,
//! `ServingError`), each wrapping `AicError` for what fails underneath: a wrapped core error
//! maps as above, their own variants by their `class()` (the serving calls refine those with
//! [`serving_error`]).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use aic_core::fpm::FpmError;
use aic_core::serving::ServingError;
use aic_core::{AicError, ErrorClass};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError, PyZeroDivisionError};
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
    /// The core (spec, data, engine) returned an error.
    Core(AicError),
    /// The forward-pass model returned an error.
    Fpm(FpmError),
    /// The serving level returned an error.
    Serving(ServingError),
    /// The core panicked; the payload's message, if it had one.
    Panic(String),
}

impl From<AicError> for Failure {
    fn from(e: AicError) -> Self {
        Failure::Core(e)
    }
}

impl From<FpmError> for Failure {
    fn from(e: FpmError) -> Self {
        Failure::Fpm(e)
    }
}

impl From<ServingError> for Failure {
    fn from(e: ServingError) -> Self {
        Failure::Serving(e)
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Core(e) => core_error(&e),
            Failure::Fpm(e) => class_error(e.class(), e.to_string()),
            Failure::Serving(e) => class_error(e.class(), e.to_string()),
            Failure::Panic(msg) => PyRuntimeError::new_err(format!(
                "internal error in aic (a bug; please report it): {msg}"
            )),
        }
    }
}

/// The Python exception for a core error.
pub fn core_error(e: &AicError) -> PyErr {
    class_error(e.class(), e.to_string())
}

/// The Python exception of an error family, with its message.
fn class_error(class: ErrorClass, msg: String) -> PyErr {
    match class {
        ErrorClass::PerfDataNotAvailable => PerfDataNotAvailableError::new_err(msg),
        ErrorClass::EmpiricalNotImplemented => EmpiricalNotImplementedError::new_err(msg),
        ErrorClass::MissingSystemFlops => MissingSystemFlopsError::new_err(msg),
        ErrorClass::Value => PyValueError::new_err(msg),
    }
}

/// Maps a failed serving call onto the exception the reference raises: the serving layer's
/// own errors by [`ServingError::python_class`] (`RuntimeError` for out of memory and no
/// feasible configuration, `ZeroDivisionError`, `ValueError`), a wrapped core error as usual.
pub fn serving_error(f: Failure) -> PyErr {
    if let Failure::Serving(e) = &f {
        if !matches!(e, ServingError::Core(_)) {
            let msg = e.to_string();
            return match e.python_class() {
                "RuntimeError" | "NoFeasibleConfigError" => PyRuntimeError::new_err(msg),
                "ZeroDivisionError" => PyZeroDivisionError::new_err(msg),
                _ => PyValueError::new_err(msg),
            };
        }
    }
    PyErr::from(f)
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

/// Runs a call of any layer, turning both its error and any panic into a [`Failure`].
fn guard<T, E: Into<Failure>>(f: impl FnOnce() -> Result<T, E>) -> Result<T, Failure> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.into()),
        Err(payload) => Err(Failure::Panic(panic_message(payload.as_ref()))),
    }
}

/// Runs a core call, turning both its error and any panic into a [`Failure`].
pub fn guarded<T>(f: impl FnOnce() -> aic_core::Result<T>) -> Result<T, Failure> {
    guard(f)
}

/// [`guarded`] for a call of the forward-pass model.
pub fn guarded_fpm<T>(f: impl FnOnce() -> aic_core::fpm::Result<T>) -> Result<T, Failure> {
    guard(f)
}

/// [`guarded`] for a call of the serving level.
pub fn guarded_serving<T>(f: impl FnOnce() -> aic_core::serving::Result<T>) -> Result<T, Failure> {
    guard(f)
}
