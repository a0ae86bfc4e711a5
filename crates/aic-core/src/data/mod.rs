//! Everything read from disk: the system description, version slots, which files feed a
//! table (source resolution, with its provenance checks and load warnings), parquet decoding,
//! the loaded tables themselves and the attention lane orders derived from them.

pub mod catalogue;
mod handover;
mod dir_listing;
pub mod lanes;
pub mod parquet;
mod parquet_guard;
mod sidecars;
pub mod sources;
pub mod system;
pub mod tables;
pub mod versions;
pub mod warnings;
pub mod source_report;
mod file_memo;
pub mod prefetch;

use std::path::PathBuf;
use std::sync::OnceLock;

static REGISTERED_DEFAULT: OnceLock<PathBuf> = OnceLock::new();

/// Registers the process-wide default systems folder (the Python package registers the copy
/// it ships). The first registration wins; returns false if one was already set.
pub fn set_default_systems_path(path: PathBuf) -> bool {
    REGISTERED_DEFAULT.set(path).is_ok()
}

/// The systems folder used when none is given: `AIC_SYSTEMS_PATH`, else a registered default,
/// else the `data/systems` folder of the source tree this crate was built from, if present.
pub fn default_systems_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AIC_SYSTEMS_PATH").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(p) = REGISTERED_DEFAULT.get() {
        return Some(p.clone());
    }
    let built = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/systems"));
    built.is_dir().then_some(built)
}
