//! `aic._aic.replay_json` and `aic._aic.replay_available`: the replay of `aic-replay` (cargo
//! feature `replay`: it adds aisimulate-core to the build; the wheel of `pip install .` has it).
//! Bindings only: the
//! request JSON goes to `aic_replay::run_json` unchanged and its answer comes back unchanged.

use pyo3::prelude::*;

/// Whether this build includes the replay (`replay_json`). False unless the extension was built
/// with the cargo feature `replay` (`pip install .` builds it).
#[pyfunction]
fn replay_available() -> bool {
    cfg!(feature = "replay")
}

#[cfg(feature = "replay")]
mod enabled {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::path::PathBuf;

    use aic_core::ErrorClass;
    use aic_replay::ReplayError;
    use pyo3::exceptions::{PyRuntimeError, PyValueError};
    use pyo3::prelude::*;

    use crate::errors::{EmpiricalNotImplementedError, MissingSystemFlopsError, PerfDataNotAvailableError};

    /// The Python exception of a replay error: the same classes as the core's errors.
    fn replay_error(e: &ReplayError) -> PyErr {
        let msg = e.to_string();
        match e.class() {
            ErrorClass::PerfDataNotAvailable => PerfDataNotAvailableError::new_err(msg),
            ErrorClass::EmpiricalNotImplemented => EmpiricalNotImplementedError::new_err(msg),
            ErrorClass::MissingSystemFlops => MissingSystemFlopsError::new_err(msg),
            ErrorClass::Value => PyValueError::new_err(msg),
        }
    }

    /// Runs a replay described by `request_json` (see `aic_replay::request`) and returns
    /// `{"report": ..., "stats": ..., "table": ...}` as JSON text. The GIL is released while it runs. Raises
    /// `ValueError` for an invalid request, workload or deployment, and the core's exception
    /// classes for missing perf data.
    #[pyfunction]
    #[pyo3(signature = (request_json, systems_path=None))]
    pub(super) fn replay_json(py: Python<'_>, request_json: &str, systems_path: Option<PathBuf>) -> PyResult<String> {
        let systems = match systems_path {
            Some(p) => Some(p),
            None => {
                super::super::register_packaged_data(py);
                aic_core::data::default_systems_path()
            }
        };
        let outcome = py.detach(|| catch_unwind(AssertUnwindSafe(|| aic_replay::run_json(request_json, systems.as_deref()))));
        match outcome {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(replay_error(&e)),
            Err(_) => Err(PyRuntimeError::new_err(
                "internal error in aic's replay (a bug; please report it with the request JSON)",
            )),
        }
    }
}

/// Registers the functions; returns the names that go into `__all__`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<Vec<&'static str>> {
    m.add_function(wrap_pyfunction!(replay_available, m)?)?;
    // `replay_json` stays out of `__all__`, so the module's `__all__` (and its stub's) is the
    // same in both builds; `replay_available()` tells whether it is there.
    #[cfg(feature = "replay")]
    m.add_function(wrap_pyfunction!(enabled::replay_json, m)?)?;
    Ok(vec!["replay_available"])
}
