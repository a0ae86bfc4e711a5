//! Bindings for aic-core. No estimation math lives here.
//!
//! * [`python`]: the PyO3 extension module `aic._aic` (`AicEngine`, data helpers, exceptions).
//! * [`python_fpm`]: the forward-pass perf model class `aic._aic.ForwardPassPerfModel`.
//! * [`python_fpm_json`]: the same model under the reference's JSON-text API,
//!   `aic._aic.RustForwardPassPerfModel`.
//! * [`errors`]: core errors and caught panics mapped onto Python exceptions.
//! * [`capi`]: the C ABI (`aic_*` functions, header `include/aic.h`).
//!
//! Built as a `cdylib` by maturin (feature `extension-module`); see the repo's `pyproject.toml`.
//! The Python parts sit behind the default feature `python`; without it
//! (`--no-default-features`) the library is the C ABI alone and does not link libpython.

pub mod capi;
#[cfg(feature = "python")]
pub mod errors;
#[cfg(feature = "python")]
pub mod python;
#[cfg(feature = "python")]
pub mod python_fpm;
#[cfg(feature = "python")]
pub mod python_fpm_json;

#[cfg(feature = "python")]
use pyo3::prelude::*;

/// The extension module `aic._aic`.
#[cfg(feature = "python")]
#[pymodule]
fn _aic(m: &Bound<'_, PyModule>) -> PyResult<()> {
    python::init(m)?;
    python_fpm::init(m)?;
    python_fpm_json::init(m)
}
