//! Bindings for aic-core. No estimation math lives here.
//!
//! * [`python`]: the PyO3 extension module `aic._aic` (`AicEngine`, data helpers, exceptions;
//!   with the feature `replay`, `replay_json` over the `aic-replay` crate).
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

/// The library's own heap: mimalloc for every Rust allocation of the extension and the C ABI
/// (the host process keeps its own allocator; no allocation crosses the boundary, since Python
/// objects are made by Python and the C ABI lends only library-owned text). A fresh process
/// loading perf tables allocates and frees tens of megabytes in large blocks, which the system
/// allocator hands back to the kernel and faults in again page by page: with mimalloc a
/// fresh-process sweep takes about a fifth less time (BENCHMARKS.md, "Serving sweeps"), for a
/// larger resident set (about +50 MB on the SGLang golden sweep).
#[global_allocator]
static HEAP: mimalloc::MiMalloc = mimalloc::MiMalloc;
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
