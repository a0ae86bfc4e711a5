//! Bindings for aic-core. No estimation math lives here.
//!
//! * [`python`]: the PyO3 extension module `aic._aic` (`AicEngine`, data helpers, exceptions).
//! * [`errors`]: core errors and caught panics mapped onto Python exceptions.
//!
//! Built as a `cdylib` by maturin (feature `extension-module`); see the repo's `pyproject.toml`.

pub mod errors;
pub mod python;

use pyo3::prelude::*;

/// The extension module `aic._aic`.
#[pymodule]
fn _aic(m: &Bound<'_, PyModule>) -> PyResult<()> {
    python::init(m)
}
