//! Which files would feed one perf table, as a JSON report (the reference's
//! `resolve_op_sources_report_json`): for debugging a data tree without loading anything —
//! the ordered sources of a table basename after the shared layer's reuse rules, each with
//! its `kernel_source` filter and whether the file exists, plus the warnings the resolution
//! raised (provenance, malformed sidecars).

use std::path::Path;

use serde_json::{json, Value};

use crate::data::sources::{Source, SourceResolver};
use crate::data::system::{list_systems, SystemSpec};
use crate::data::tables::display_path;
use crate::error::{AicError, Result};
use crate::spec::Backend;

/// The system of `systems_root` whose data folder is `system_data_root`.
fn system_with_data_root(systems_root: &Path, system_data_root: &Path) -> Result<SystemSpec> {
    let wanted = system_data_root.canonicalize().unwrap_or_else(|_| system_data_root.to_path_buf());
    let mut data_roots = Vec::new();
    for name in list_systems(systems_root) {
        let Ok(spec) = SystemSpec::load(systems_root, &name) else { continue };
        let root = spec.data_dir.canonicalize().unwrap_or_else(|_| spec.data_dir.clone());
        if root == wanted {
            return Ok(spec);
        }
        data_roots.push(display_path(&spec.data_dir));
    }
    Err(AicError::value(format!(
        "no system of {} keeps its perf data in {}; data folders of its systems: [{}]",
        display_path(systems_root),
        display_path(system_data_root),
        data_roots.join(", ")
    )))
}

fn record(source: &Source, channel: &str) -> Value {
    json!({
        "path": display_path(&source.path),
        "exists": source.path.is_file(),
        "channel": channel,
        "kernel_sources": source.kernel_filter.as_ref().map(|f| f.iter().cloned().collect::<Vec<_>>()),
    })
}

/// The ordered sources of `op_file_basename` for (system data root, backend, version) as JSON
/// text `{"records": [{"path", "exists", "channel", "kernel_sources"}], "warnings":
/// [{"kind", "path", "table", "message"}]}`. `primary_path` replaces the requested version's
/// own file (channel `primary`); the other records are channel `shared`. With `strict`,
/// provenance violations are errors instead of warnings.
#[allow(clippy::too_many_arguments)]
pub fn op_sources_report_json(
    systems_root: &Path,
    system_data_root: &Path,
    backend: &str,
    version: &str,
    op_file_basename: &str,
    primary_path: Option<&Path>,
    enable_shared_layer: bool,
    strict: bool,
) -> Result<String> {
    let backend = Backend::parse(backend)?;
    let system = system_with_data_root(systems_root, system_data_root)?;
    let resolver = SourceResolver::with_strict_provenance(&system, backend, version, enable_shared_layer, strict)?;
    let mut sources = resolver.sources(op_file_basename);
    let primary = resolver.primary_source(op_file_basename);
    let has_primary = primary.as_ref().is_some_and(|p| sources.first() == Some(p));
    if let Some(path) = primary_path {
        let own = Source { path: path.to_path_buf(), kernel_filter: None };
        if has_primary {
            sources[0] = own;
        } else {
            sources.insert(0, own);
        }
    }
    let primary_count = usize::from(has_primary || primary_path.is_some());
    let records: Vec<Value> = sources
        .iter()
        .enumerate()
        .map(|(i, s)| record(s, if i < primary_count { "primary" } else { "shared" }))
        .collect();
    let warnings: Vec<Value> = resolver
        .load_warnings()
        .into_iter()
        .map(|w| {
            json!({
                "kind": w.kind.as_str(),
                "path": w.path.as_deref().map(display_path),
                "table": w.table,
                "message": w.message,
            })
        })
        .collect();
    Ok(json!({ "records": records, "warnings": warnings }).to_string())
}
