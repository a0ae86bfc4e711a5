//! Load warnings: everything the loader skips, relaxes or works around while it resolves a
//! table's sources (spec 10 §5, §8) and that the reference only logs. The library never
//! prints; it collects typed [`LoadWarning`]s on the database so that a caller (the CLI's
//! `--verbose`, a service's log) can show them.

use std::path::PathBuf;
use std::sync::Mutex;

/// What a [`LoadWarning`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LoadWarningKind {
    /// A version directory name is not a PEP 440 version, so backward fill skips it (§8.3).
    UnparseableVersion,
    /// A legacy marker file (`SHARED_LAYER_REUSE.txt`, or an `INCOMPLETE.txt` overridden by a
    /// `collection_meta.yaml`) was found; it is deprecated and has no effect (§8.6).
    LegacyMarker,
    /// A version dir with a legacy `INCOMPLETE.txt` and no `collection_meta.yaml` was skipped (§8.6).
    UnusableDir,
    /// A `collection_meta.yaml` could not be parsed or breaks its schema (§5; an error in
    /// strict mode).
    MalformedSidecar,
    /// A `reuse.yaml` could not be parsed, has no `reuse` list or has an incomplete entry (§8.2;
    /// an error in strict mode).
    MalformedReuse,
    /// Strict mode: a `provenance: legacy` sidecar does not list a table of its dir, which the
    /// legacy relaxation lets through (§8.6).
    UncoveredLegacyTable,
    /// A declared reuse donor has no usable file for the table (§8.2).
    MissingDonor,
    /// The requested version has no file for a table: its rows come from other versions or
    /// backends only (§8.1–8.4).
    VersionFallback,
    /// Cross-backend fill from a `shared_fallback` manifest entry: low-fidelity
    /// framework-implicit rows may fill missing keys (§8.4).
    LowFidelityRows,
}

impl LoadWarningKind {
    /// The kind as a stable snake_case name (what Python and the CLI show).
    pub fn as_str(self) -> &'static str {
        match self {
            LoadWarningKind::UnparseableVersion => "unparseable_version",
            LoadWarningKind::LegacyMarker => "legacy_marker",
            LoadWarningKind::UnusableDir => "unusable_dir",
            LoadWarningKind::MalformedSidecar => "malformed_sidecar",
            LoadWarningKind::MalformedReuse => "malformed_reuse",
            LoadWarningKind::UncoveredLegacyTable => "uncovered_legacy_table",
            LoadWarningKind::MissingDonor => "missing_donor",
            LoadWarningKind::VersionFallback => "version_fallback",
            LoadWarningKind::LowFidelityRows => "low_fidelity_rows",
        }
    }
}

impl std::fmt::Display for LoadWarningKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing the loader skipped, relaxed or worked around.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LoadWarning {
    /// What the warning is about.
    pub kind: LoadWarningKind,
    /// The file or directory concerned, when there is one.
    pub path: Option<PathBuf>,
    /// The table basename concerned (`gemm_perf.parquet`), when the warning is about one table.
    pub table: Option<String>,
    /// A sentence saying what happened and what, if anything, to do about it.
    pub message: String,
}

impl std::fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.kind, self.message)
    }
}

/// The warnings of one database, in the order they were first raised, without repeats.
/// Written only while tables load (never on the estimate path).
#[derive(Debug, Default)]
pub(crate) struct WarningLog {
    entries: Mutex<Vec<LoadWarning>>,
}

impl WarningLog {
    /// Records a warning unless an identical one is already recorded.
    pub(crate) fn push(&self, warning: LoadWarning) {
        let mut entries = match self.entries.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !entries.contains(&warning) {
            entries.push(warning);
        }
    }

    /// A copy of the warnings recorded so far.
    pub(crate) fn snapshot(&self) -> Vec<LoadWarning> {
        match self.entries.lock() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_keeps_first_seen_order_without_repeats() {
        let log = WarningLog::default();
        let w = |kind, message: &str| LoadWarning {
            kind,
            path: None,
            table: None,
            message: message.to_string(),
        };
        log.push(w(LoadWarningKind::LegacyMarker, "b"));
        log.push(w(LoadWarningKind::UnparseableVersion, "a"));
        log.push(w(LoadWarningKind::LegacyMarker, "b"));
        let got = log.snapshot();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].kind, LoadWarningKind::LegacyMarker);
        assert_eq!(got[1].to_string(), "[unparseable_version] a");
        assert_eq!(
            LoadWarningKind::MalformedSidecar.as_str(),
            "malformed_sidecar"
        );
    }
}
