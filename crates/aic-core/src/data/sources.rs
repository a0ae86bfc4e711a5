//! Source resolution (spec 10 §1, §8): for one load identity (system, backend, version,
//! shared layer, strict provenance) every table basename gets an ordered list of files, merged
//! first-wins by the table loaders. Channel 1 is the requested version's own file; with the
//! shared layer on, channel 2 adds declared donors (`reuse.yaml`), channel 3 older versions of
//! the same backend and channel 4 other backends' rows whose kernel the reuse manifest declares
//! identical.
//!
//! Provenance (§5, §8.6) is verified when the resolver is built: the requested version's
//! family-layout dirs and the declared donors are checked against their `collection_meta.yaml`
//! (strictly only in strict mode), and malformed sidecars or reuse files are errors in strict
//! mode and [`LoadWarning`]s otherwise. Everything else the reference only logs (skipped
//! version names, legacy markers, fallbacks) is collected as warnings too.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::data::sidecars::{
    read_collection_meta, read_reuse, CollectionMeta, ReuseEntry, COLLECTION_META, REUSE_FILE,
};
use crate::data::system::{yaml_scalar_text, SystemSpec};
use crate::data::tables::display_path;
use crate::data::versions::{
    family_dirs, sort_newest_first, version_names, Pep440Version, INCOMPLETE_MARKER, SHARED_LAYER_MARKER,
};
use crate::data::warnings::{LoadWarning, LoadWarningKind, WarningLog};
use crate::error::{AicError, Result};
use crate::spec::Backend;

/// Basenames that are never resolved through the channels (loaded from `comm/nccl|oneccl`).
const COMM_LIBRARY_TABLES: &[&str] = &["nccl_perf.parquet", "oneccl_perf.parquet"];

/// The environment variable that turns strict provenance on for every engine.
pub const STRICT_PROVENANCE_ENV: &str = "AIC_STRICT_PROVENANCE";

/// True when `AIC_STRICT_PROVENANCE` is `1`, `true` or `yes` (any case).
pub fn strict_provenance_from_env() -> bool {
    std::env::var(STRICT_PROVENANCE_ENV).is_ok_and(|v| switch_is_on(&v))
}

/// Whether an environment switch's text turns it on: `1`, `true` or `yes`, any case.
fn switch_is_on(text: &str) -> bool {
    matches!(text.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes")
}

/// One file feeding a table, with the `kernel_source` values it may contribute (cross-backend
/// sources only; `None` = every row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The parquet file (may not exist for a primary).
    pub path: PathBuf,
    /// Allowed `kernel_source` values; rows outside it (or without the column) are dropped.
    pub kernel_filter: Option<BTreeSet<String>>,
}

impl Source {
    /// True when a row with this `kernel_source` (None = no column) passes the filter.
    pub fn accepts(&self, kernel_source: Option<&str>) -> bool {
        match (&self.kernel_filter, kernel_source) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(f), Some(k)) => f.contains(k),
        }
    }
}

/// One usable `groups:` entry of `perf_data_reuse_manifest.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ManifestEntry {
    op_file: String,
    kernel_source: String,
    tier: String,
    frameworks: Vec<String>,
}

/// Reads the cross-backend reuse manifest (missing file = no entries).
fn load_manifest(systems_root: &Path) -> Result<Vec<ManifestEntry>> {
    let path = systems_root.join("perf_data_reuse_manifest.yaml");
    if !path.is_file() {
        return Ok(Vec::new());
    }
    super::file_memo::parsed(&path, parse_manifest)
        .map_err(|e| AicError::System(format!("cannot read {}: {e}", path.display())))?
        .map_err(|e| AicError::System(format!("{}: {e}", path.display())))
}

/// The usable entries of the manifest text; `Err` when it is not YAML.
fn parse_manifest(text: &str) -> std::result::Result<Vec<ManifestEntry>, String> {
    let value: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let Some(groups) = value.get("groups").and_then(|g| g.as_sequence()) else {
        return Ok(out);
    };
    for g in groups {
        let text_of = |k: &str| g.get(k).and_then(yaml_scalar_text).unwrap_or_default();
        let mut op_file = text_of("op_file");
        let kernel_source = text_of("kernel_source");
        if op_file.is_empty() || kernel_source.is_empty() {
            continue;
        }
        if let Some(stem) = op_file.strip_suffix(".txt") {
            op_file = format!("{stem}.parquet");
        }
        let frameworks = g
            .get("frameworks")
            .and_then(|f| f.as_sequence())
            .map(|s| {
                s.iter()
                    .filter_map(yaml_scalar_text)
                    .map(|f| f.to_lowercase())
                    .collect()
            })
            .unwrap_or_default();
        out.push(ManifestEntry {
            op_file,
            kernel_source,
            tier: text_of("tier"),
            frameworks,
        });
    }
    Ok(out)
}

/// True unless the dir carries a legacy `INCOMPLETE.txt` without a `collection_meta.yaml`.
fn dir_usable(dir: &Path) -> bool {
    !dir.join(INCOMPLETE_MARKER).exists() || dir.join(COLLECTION_META).exists()
}

/// Stems of the parquet files in a directory (`gemm_perf`), sorted.
fn parquet_stems(dir: &Path) -> Vec<String> {
    let mut stems = Vec::new();
    if let Some(entries) = super::dir_listing::entries(dir) {
        for e in entries.iter() {
            if let Some(stem) = e.name.strip_suffix(".parquet") {
                if !e.name.starts_with('.') && e.is_file {
                    stems.push(stem.to_string());
                }
            }
        }
    }
    stems.sort();
    stems
}

/// The state of a directory's `collection_meta.yaml`.
enum Sidecar {
    /// No sidecar.
    Absent,
    /// A sidecar that does not parse or breaks its schema, and why.
    Malformed(String),
    /// A well-formed sidecar.
    Present(CollectionMeta),
}

fn read_sidecar(dir: &Path) -> Sidecar {
    let path = dir.join(COLLECTION_META);
    if !path.is_file() {
        return Sidecar::Absent;
    }
    match read_collection_meta(&path) {
        Ok(meta) => Sidecar::Present(meta),
        Err(why) => Sidecar::Malformed(why),
    }
}

/// Resolves and memoises the source lists of one load identity.
#[derive(Debug, Clone)]
pub struct SourceResolver {
    data_dir: PathBuf,
    label: String,
    backend: Backend,
    version: String,
    shared: bool,
    strict: bool,
    families: Vec<String>,
    manifest: Arc<Vec<ManifestEntry>>,
    /// The complete entries of the requested version's `reuse.yaml` files, in file order.
    reuse: Vec<ReuseEntry>,
    nccl_version: Option<String>,
    oneccl_version: Option<String>,
    cache: Arc<Mutex<HashMap<String, Vec<Source>>>>,
    warnings: Arc<WarningLog>,
}

impl SourceResolver {
    /// Prepares resolution for (system, backend, version, shared layer), non-strict.
    pub fn new(
        system: &SystemSpec,
        backend: Backend,
        version: &str,
        enable_shared_layer: bool,
    ) -> Result<SourceResolver> {
        Self::with_strict_provenance(system, backend, version, enable_shared_layer, false)
    }

    /// Prepares resolution and verifies provenance (spec 10 §8.6). With `strict`, a
    /// family-layout dir of the requested version whose `collection_meta.yaml` is missing,
    /// malformed or does not list one of its tables, a declared donor whose sidecar does not
    /// list the donated table, and a malformed `reuse.yaml` are [`AicError::Provenance`]
    /// errors (a `provenance: legacy` sidecar only warns). Without it, malformed files are
    /// warnings and coverage is not checked.
    pub fn with_strict_provenance(
        system: &SystemSpec,
        backend: Backend,
        version: &str,
        enable_shared_layer: bool,
        strict: bool,
    ) -> Result<SourceResolver> {
        let data_dir = system.data_dir.clone();
        let families = family_dirs(&data_dir);
        let manifest = if enable_shared_layer {
            load_manifest(&system.systems_root)?
        } else {
            Vec::new()
        };
        let mut resolver = SourceResolver {
            label: format!(
                "systems/{}/{}/{}",
                system.data_dir_label(),
                backend.as_str(),
                version
            ),
            data_dir,
            backend,
            version: version.to_string(),
            shared: enable_shared_layer,
            strict,
            families,
            manifest: Arc::new(manifest),
            reuse: Vec::new(),
            nccl_version: system.misc.nccl_version.clone(),
            oneccl_version: system.misc.oneccl_version.clone(),
            cache: Arc::new(Mutex::new(HashMap::new())),
            warnings: Arc::new(WarningLog::default()),
        };
        let requested = resolver.requested_dirs();
        for dir in &requested {
            resolver.warn_legacy_markers(dir);
        }
        if enable_shared_layer {
            for dir in &requested {
                let file = dir.join(REUSE_FILE);
                if !file.is_file() {
                    continue;
                }
                let parsed = read_reuse(&file);
                for problem in parsed.problems {
                    resolver.violation(
                        LoadWarningKind::MalformedReuse,
                        &file,
                        None,
                        format!(
                            "malformed {}: {problem}; the entry is ignored",
                            display_path(&file)
                        ),
                    )?;
                }
                resolver.reuse.extend(parsed.entries);
            }
        }
        for dir in requested.iter().filter(|d| resolver.is_family_dir(d)) {
            resolver.verify_primary_dir(dir)?;
        }
        if enable_shared_layer {
            resolver.verify_donors()?;
        }
        Ok(resolver)
    }

    /// The backend whose tables are resolved.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The literal version directory name requested.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Whether channels 2–4 (the shared layer) are active.
    pub fn shared_layer(&self) -> bool {
        self.shared
    }

    /// Whether provenance was verified strictly.
    pub fn strict_provenance(&self) -> bool {
        self.strict
    }

    /// The system's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// `systems/data/<system>/<backend>/<version>`, the folder named in perf-database errors.
    pub fn data_root_label(&self) -> String {
        self.label.clone()
    }

    /// What the loader skipped, relaxed or worked around so far: warnings of the provenance
    /// check (at construction) and of every table resolved since, in first-seen order.
    pub fn load_warnings(&self) -> Vec<LoadWarning> {
        self.warnings.snapshot()
    }

    fn warn(&self, kind: LoadWarningKind, path: Option<&Path>, table: Option<&str>, message: String) {
        self.warnings.push(LoadWarning {
            kind,
            path: path.map(Path::to_path_buf),
            table: table.map(str::to_string),
            message,
        });
    }

    /// A provenance problem: an error in strict mode, a warning otherwise.
    fn violation(
        &self,
        kind: LoadWarningKind,
        path: &Path,
        table: Option<&str>,
        message: String,
    ) -> Result<()> {
        if self.strict {
            return Err(AicError::Provenance {
                path: path.to_path_buf(),
                message: format!("{message} (strict provenance is on: fix the file, or turn it off)"),
            });
        }
        self.warn(kind, Some(path), table, message);
        Ok(())
    }

    /// The existing directories of the requested version: `<family>/<backend>/<version>` and
    /// the legacy `<backend>/<version>`.
    fn requested_dirs(&self) -> Vec<PathBuf> {
        let b = self.backend.as_str();
        let mut dirs: Vec<PathBuf> = self
            .families
            .iter()
            .map(|f| self.data_dir.join(f).join(b).join(&self.version))
            .collect();
        dirs.push(self.data_dir.join(b).join(&self.version));
        dirs.retain(|d| d.is_dir());
        dirs
    }

    /// True for a `<data_dir>/<family>/<framework>/<version>` directory (family layout).
    fn is_family_dir(&self, dir: &Path) -> bool {
        dir.strip_prefix(&self.data_dir).is_ok_and(|rel| {
            let parts: Vec<_> = rel.components().collect();
            parts.len() == 3
                && self
                    .families
                    .iter()
                    .any(|f| parts[0].as_os_str() == f.as_str())
        })
    }

    /// Warns about the deprecated markers of a directory that is read.
    fn warn_legacy_markers(&self, dir: &Path) {
        let shared_marker = dir.join(SHARED_LAYER_MARKER);
        if shared_marker.is_file() {
            self.warn(
                LoadWarningKind::LegacyMarker,
                Some(&shared_marker),
                None,
                format!(
                    "{} is a deprecated legacy marker and has no effect; declare donors in a \
                     reuse.yaml instead",
                    display_path(&shared_marker)
                ),
            );
        }
        let incomplete = dir.join(INCOMPLETE_MARKER);
        if incomplete.is_file() && dir.join(COLLECTION_META).is_file() {
            self.warn(
                LoadWarningKind::LegacyMarker,
                Some(&incomplete),
                None,
                format!(
                    "{} is a legacy marker, ignored because the dir has a collection_meta.yaml",
                    display_path(&incomplete)
                ),
            );
        }
    }

    /// Usability of a dir holding a wanted file; an unusable one is reported as skipped.
    fn usable_for(&self, dir: &Path, basename: &str) -> bool {
        if dir_usable(dir) {
            self.warn_legacy_markers(dir);
            return true;
        }
        self.warn(
            LoadWarningKind::UnusableDir,
            Some(dir),
            Some(basename),
            format!(
                "skipped {}: it has a legacy INCOMPLETE.txt and no collection_meta.yaml, so its \
                 {basename} is not used; add a collection_meta.yaml if the data is usable",
                display_path(dir)
            ),
        );
        false
    }

    /// Strict coverage of one family-layout dir of the requested version: every data file
    /// stem listed by a present, well-formed sidecar. Non-strict: only a malformed sidecar
    /// is reported (as a warning).
    fn verify_primary_dir(&self, dir: &Path) -> Result<()> {
        let stems = parquet_stems(dir);
        if stems.is_empty() || !dir_usable(dir) {
            return Ok(());
        }
        self.verify_coverage(dir, &stems, None)
    }

    /// Channel-2 donors: each declared donor file must be covered by its dir's sidecar (only
    /// the donated table is checked); a donor without a usable file is reported.
    fn verify_donors(&self) -> Result<()> {
        let b = self.backend.as_str();
        let mut seen: BTreeSet<(&str, &str)> = BTreeSet::new();
        for entry in &self.reuse {
            if !seen.insert((entry.table.as_str(), entry.from_version.as_str())) {
                continue;
            }
            let basename = format!("{}.parquet", entry.table);
            match self.existing_file(b, &entry.from_version, &basename) {
                Some(file) => {
                    let dir = file.parent().unwrap_or(&self.data_dir).to_path_buf();
                    if self.is_family_dir(&dir) {
                        self.verify_coverage(&dir, std::slice::from_ref(&entry.table), Some(&basename))?;
                    }
                }
                None => self.warn(
                    LoadWarningKind::MissingDonor,
                    None,
                    Some(&basename),
                    format!(
                        "{b} {} declares {} {} as donor of {}, but that version has no usable \
                         {basename}; the declaration adds nothing",
                        self.version, b, entry.from_version, entry.table
                    ),
                ),
            }
        }
        Ok(())
    }

    /// Checks that `dir`'s sidecar is well formed and (strict mode) lists every stem.
    fn verify_coverage(&self, dir: &Path, stems: &[String], table: Option<&str>) -> Result<()> {
        let meta_path = dir.join(COLLECTION_META);
        let meta = match read_sidecar(dir) {
            Sidecar::Absent => {
                if self.strict {
                    return Err(AicError::Provenance {
                        path: meta_path,
                        message: format!(
                            "{} has no collection_meta.yaml, but strict provenance needs one \
                             listing its tables ({}); add it, or turn strict provenance off",
                            display_path(dir),
                            stems.join(", ")
                        ),
                    });
                }
                return Ok(());
            }
            Sidecar::Malformed(why) => {
                return self.violation(
                    LoadWarningKind::MalformedSidecar,
                    &meta_path,
                    table,
                    format!("malformed {}: {why}", display_path(&meta_path)),
                );
            }
            Sidecar::Present(meta) => meta,
        };
        if !self.strict {
            return Ok(());
        }
        let uncovered: Vec<&str> = stems
            .iter()
            .map(String::as_str)
            .filter(|s| !meta.tables.contains(*s))
            .collect();
        if uncovered.is_empty() {
            return Ok(());
        }
        if meta.legacy {
            for stem in uncovered {
                self.warn(
                    LoadWarningKind::UncoveredLegacyTable,
                    Some(&meta_path),
                    Some(&format!("{stem}.parquet")),
                    format!(
                        "{} does not list {stem}; allowed because its provenance is legacy",
                        display_path(&meta_path)
                    ),
                );
            }
            return Ok(());
        }
        Err(AicError::Provenance {
            path: meta_path.clone(),
            message: format!(
                "{} does not list {} under `tables:`, so strict provenance rejects {}; add a \
                 `tables:` entry for each, or turn strict provenance off",
                display_path(&meta_path),
                uncovered.join(", "),
                if uncovered.len() == 1 { "that table" } else { "those tables" }
            ),
        })
    }

    /// An existing, usable file for `basename` at (framework dir name, version): the first family
    /// holding it, else the legacy `<framework>/<version>/` location.
    fn existing_file(&self, framework: &str, version: &str, basename: &str) -> Option<PathBuf> {
        for family in &self.families {
            let dir = self.data_dir.join(family).join(framework).join(version);
            let file = dir.join(basename);
            if file.is_file() && self.usable_for(&dir, basename) {
                return Some(file);
            }
        }
        let dir = self.data_dir.join(framework).join(version);
        let file = dir.join(basename);
        (file.is_file() && self.usable_for(&dir, basename)).then_some(file)
    }

    /// Channel 1: the requested version's file, or its nominal legacy path when no family has
    /// it; `None` only when that directory is unusable.
    fn primary_path(&self, basename: &str) -> Option<PathBuf> {
        let b = self.backend.as_str();
        if let Some(found) = self.existing_file(b, &self.version, basename) {
            return Some(found);
        }
        let dir = self.data_dir.join(b).join(&self.version);
        dir_usable(&dir).then(|| dir.join(basename))
    }

    /// The channel-1 source of `basename` (what "primary only" densities read).
    pub fn primary_source(&self, basename: &str) -> Option<Source> {
        self.primary_path(basename).map(|path| Source {
            path,
            kernel_filter: None,
        })
    }

    /// The ordered sources of a table basename such as `gemm_perf.parquet` (memoised).
    pub fn sources(&self, basename: &str) -> Vec<Source> {
        if let Ok(cache) = self.cache.lock() {
            if let Some(hit) = cache.get(basename) {
                return hit.clone();
            }
        }
        let list = self.resolve(basename);
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(basename.to_string(), list.clone());
        }
        list
    }

    fn resolve(&self, basename: &str) -> Vec<Source> {
        let primary = self.primary_path(basename);
        let mut out: Vec<Source> = primary
            .iter()
            .map(|path| Source {
                path: path.clone(),
                kernel_filter: None,
            })
            .collect();
        if !self.shared || COMM_LIBRARY_TABLES.contains(&basename) {
            return out;
        }
        let b = self.backend.as_str();
        let plain = |path: PathBuf| Source {
            path,
            kernel_filter: None,
        };

        // Channel 2: declared donors of the requested version (may be newer).
        let mut donors: Vec<String> = Vec::new();
        for entry in &self.reuse {
            if format!("{}.parquet", entry.table) == basename && !donors.contains(&entry.from_version) {
                donors.push(entry.from_version.clone());
            }
        }
        for from in &donors {
            if let Some(p) = self.existing_file(b, from, basename) {
                out.push(plain(p));
            }
        }

        // Channel 3: strictly older versions of the same backend, newest first (PEP 440).
        match Pep440Version::parse(&self.version) {
            Some(requested) => {
                let names: Vec<String> = version_names(&self.data_dir, b)
                    .into_iter()
                    .filter(|n| *n != self.version && !donors.contains(n))
                    .collect();
                // Unparseable names come last; they are reported and skipped.
                for name in sort_newest_first(&names, true) {
                    let Some(parsed) = Pep440Version::parse(&name) else {
                        self.warn_unparseable(&name);
                        continue;
                    };
                    if parsed >= requested {
                        continue;
                    }
                    if let Some(p) = self.existing_file(b, &name, basename) {
                        out.push(plain(p));
                    }
                }
            }
            None => self.warn(
                LoadWarningKind::UnparseableVersion,
                None,
                None,
                format!(
                    "the requested {b} version '{}' is not a PEP 440 version, so no older {b} \
                     version fills its tables (backward fill is off for it)",
                    self.version
                ),
            ),
        }

        // Channel 4: other frameworks' rows of kernels declared identical, with a filter.
        let mut filters: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut low_fidelity: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for e in self.manifest.iter() {
            let tier_ok = e.tier == "shared" || e.tier == "shared_fallback";
            if e.op_file != basename || !tier_ok || !e.frameworks.iter().any(|f| f == b) {
                continue;
            }
            for f in &e.frameworks {
                if f != b {
                    filters
                        .entry(f.clone())
                        .or_default()
                        .insert(e.kernel_source.clone());
                    if e.tier == "shared_fallback" {
                        low_fidelity
                            .entry(f.clone())
                            .or_default()
                            .insert(e.kernel_source.clone());
                    }
                }
            }
        }
        for (framework, filter) in filters {
            let names = version_names(&self.data_dir, &framework);
            for name in sort_newest_first(&names, true) {
                if let Some(p) = self.existing_file(&framework, &name, basename) {
                    if let Some(kernels) = low_fidelity.get(&framework) {
                        self.warn_low_fidelity(&p, basename, kernels);
                    }
                    out.push(Source {
                        path: p,
                        kernel_filter: Some(filter.clone()),
                    });
                }
            }
        }
        self.warn_version_fallback(basename, primary.as_deref(), &out);
        out
    }

    fn warn_unparseable(&self, name: &str) {
        let b = self.backend.as_str();
        self.warn(
            LoadWarningKind::UnparseableVersion,
            None,
            None,
            format!(
                "{b} version directory '{name}' is not a PEP 440 version, so backward fill skips \
                 it; rename it to a version such as 1.2.3 if its data should be used"
            ),
        );
    }

    fn warn_low_fidelity(&self, file: &Path, basename: &str, kernels: &BTreeSet<String>) {
        let kernels: Vec<&str> = kernels.iter().map(String::as_str).collect();
        self.warn(
            LoadWarningKind::LowFidelityRows,
            Some(file),
            Some(basename),
            format!(
                "{} may fill missing {basename} keys with rows of kernel {}: a shared_fallback \
                 entry of perf_data_reuse_manifest.yaml, i.e. low-fidelity framework-implicit rows",
                display_path(file),
                kernels.join(", ")
            ),
        );
    }

    /// Warns when the requested version has no file for a table that other sources feed.
    fn warn_version_fallback(&self, basename: &str, primary: Option<&Path>, sources: &[Source]) {
        let has_primary = primary.is_some_and(Path::is_file);
        let others: Vec<&Source> = sources
            .iter()
            .filter(|s| Some(s.path.as_path()) != primary)
            .collect();
        if has_primary || others.is_empty() {
            return;
        }
        let first = display_path(&others[0].path);
        let more = match others.len() {
            1 => String::new(),
            n => format!(" and {} more source(s)", n - 1),
        };
        self.warn(
            LoadWarningKind::VersionFallback,
            Some(&others[0].path),
            Some(basename),
            format!(
                "{} {} has no {basename}; its rows come from {first}{more}",
                self.backend.as_str(),
                self.version
            ),
        );
    }

    /// The NCCL table: `comm/nccl/<misc.nccl_version>/nccl_perf.parquet` (legacy
    /// `nccl/<ver>/` when only that exists); `None` when the system names no NCCL version.
    pub fn nccl_path(&self) -> Option<PathBuf> {
        self.comm_library_path("nccl", self.nccl_version.as_deref()?)
    }

    /// The OneCCL table, like [`Self::nccl_path`] for `misc.oneccl_version`.
    pub fn oneccl_path(&self) -> Option<PathBuf> {
        self.comm_library_path("oneccl", self.oneccl_version.as_deref()?)
    }

    fn comm_library_path(&self, lib: &str, version: &str) -> Option<PathBuf> {
        let basename = format!("{lib}_perf.parquet");
        let family = self
            .data_dir
            .join("comm")
            .join(lib)
            .join(version)
            .join(&basename);
        if family.is_file() {
            return Some(family);
        }
        let legacy = self.data_dir.join(lib).join(version).join(&basename);
        Some(if legacy.is_file() { legacy } else { family })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
    }

    fn resolver(system: &str, backend: Backend, version: &str, shared: bool) -> SourceResolver {
        let s = SystemSpec::load(&root(), system).unwrap();
        SourceResolver::new(&s, backend, version, shared).unwrap()
    }

    /// (relative path under data/<system>/, filter) of each source.
    fn listed(r: &SourceResolver, basename: &str) -> Vec<(String, Option<Vec<String>>)> {
        r.sources(basename)
            .into_iter()
            .map(|s| {
                let rel = s
                    .path
                    .strip_prefix(r.data_dir())
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                (rel, s.kernel_filter.map(|f| f.into_iter().collect()))
            })
            .collect()
    }

    fn plain(paths: &[&str]) -> Vec<(String, Option<Vec<String>>)> {
        paths.iter().map(|p| (p.to_string(), None)).collect()
    }

    #[test]
    fn h200_custom_allreduce_fills_from_older_versions() {
        let r = resolver("h200_sxm", Backend::Sglang, "0.5.14", true);
        assert_eq!(
            listed(&r, "custom_allreduce_perf.parquet"),
            plain(&[
                "comm/sglang/0.5.14/custom_allreduce_perf.parquet",
                "comm/sglang/0.5.10/custom_allreduce_perf.parquet",
                "comm/sglang/0.5.9/custom_allreduce_perf.parquet",
                "comm/sglang/0.5.6.post2/custom_allreduce_perf.parquet",
            ])
        );
        let r = resolver("h200_sxm", Backend::Vllm, "0.24.0", true);
        assert_eq!(
            listed(&r, "custom_allreduce_perf.parquet"),
            plain(&[
                "comm/vllm/0.24.0/custom_allreduce_perf.parquet",
                "comm/vllm/0.19.0/custom_allreduce_perf.parquet",
                "comm/vllm/0.18.0/custom_allreduce_perf.parquet",
                "comm/vllm/0.14.0/custom_allreduce_perf.parquet",
            ])
        );
        let r = resolver("h200_sxm", Backend::Trtllm, "1.3.0rc20", true);
        assert_eq!(
            listed(&r, "custom_allreduce_perf.parquet"),
            plain(&[
                "comm/trtllm/1.3.0rc20/custom_allreduce_perf.parquet",
                "comm/trtllm/1.3.0rc10/custom_allreduce_perf.parquet",
                "comm/trtllm/1.2.0rc5/custom_allreduce_perf.parquet",
            ])
        );
    }

    #[test]
    fn spec_8_5_table() {
        let mla_ctx = "mla_context_module_perf.parquet";
        let mla_gen = "mla_generation_module_perf.parquet";
        let dflt = Some(vec!["default".to_string()]);
        // h200
        let r = resolver("h200_sxm", Backend::Vllm, "0.24.0", true);
        assert_eq!(
            listed(&r, "moe_perf.parquet"),
            plain(&["moe/vllm/0.24.0/moe_perf.parquet", "moe/vllm/0.19.0/moe_perf.parquet"])
        );
        for b in [mla_ctx, mla_gen] {
            assert_eq!(
                listed(&r, b),
                vec![
                    (format!("mla/vllm/0.24.0/{b}"), None),
                    (format!("mla/trtllm/1.3.0rc20/{b}"), dflt.clone()),
                ]
            );
        }
        let r = resolver("h200_sxm", Backend::Sglang, "0.5.14", true);
        assert_eq!(
            listed(&r, "moe_perf.parquet"),
            plain(&["moe/sglang/0.5.14/moe_perf.parquet", "moe/sglang/0.5.10/moe_perf.parquet"])
        );
        assert_eq!(
            listed(&r, "mla_bmm_perf.parquet"),
            vec![
                ("mla_bmm/sglang/0.5.14/mla_bmm_perf.parquet".to_string(), None),
                ("mla_bmm/trtllm/1.3.0rc20/mla_bmm_perf.parquet".to_string(), dflt.clone()),
            ]
        );
        let r = resolver("h200_sxm", Backend::Trtllm, "1.3.0rc20", true);
        assert_eq!(
            listed(&r, "moe_perf.parquet"),
            plain(&[
                "moe/trtllm/1.3.0rc20/moe_perf.parquet",
                "moe/trtllm/1.3.0rc10/moe_perf.parquet"
            ])
        );
        assert_eq!(
            listed(&r, mla_ctx),
            vec![
                (format!("mla/trtllm/1.3.0rc20/{mla_ctx}"), None),
                (format!("mla/vllm/0.24.0/{mla_ctx}"), dflt.clone()),
            ]
        );
        assert_eq!(
            listed(&r, "mla_bmm_perf.parquet"),
            vec![
                ("mla_bmm/trtllm/1.3.0rc20/mla_bmm_perf.parquet".to_string(), None),
                ("mla_bmm/sglang/0.5.14/mla_bmm_perf.parquet".to_string(), dflt.clone()),
            ]
        );
        // b200
        let r = resolver("b200_sxm", Backend::Vllm, "0.24.0", true);
        for b in ["context_attention_perf.parquet", "generation_attention_perf.parquet"] {
            assert_eq!(
                listed(&r, b),
                plain(&[
                    &format!("attention/vllm/0.24.0/{b}"),
                    &format!("attention/vllm/0.22.0/{b}")
                ])
            );
        }
        assert_eq!(
            listed(&r, "moe_perf.parquet"),
            plain(&[
                "moe/vllm/0.24.0/moe_perf.parquet",
                "moe/vllm/0.22.0/moe_perf.parquet",
                "moe/vllm/0.19.0/moe_perf.parquet"
            ])
        );
        assert_eq!(
            listed(&r, "custom_allreduce_perf.parquet"),
            plain(&[
                "comm/vllm/0.24.0/custom_allreduce_perf.parquet",
                "comm/vllm/0.19.0/custom_allreduce_perf.parquet"
            ])
        );
        assert_eq!(
            listed(&r, mla_gen),
            vec![
                (format!("mla/vllm/0.24.0/{mla_gen}"), None),
                (format!("mla/trtllm/1.3.0rc20/{mla_gen}"), dflt.clone()),
            ]
        );
        let r = resolver("b200_sxm", Backend::Sglang, "0.5.14", true);
        assert_eq!(
            listed(&r, "custom_allreduce_perf.parquet"),
            plain(&[
                "comm/sglang/0.5.14/custom_allreduce_perf.parquet",
                "comm/sglang/0.5.10/custom_allreduce_perf.parquet",
                "comm/sglang/0.5.9/custom_allreduce_perf.parquet"
            ])
        );
        let r = resolver("b200_sxm", Backend::Trtllm, "1.3.0rc20", true);
        assert_eq!(
            listed(&r, "custom_allreduce_perf.parquet"),
            plain(&[
                "comm/trtllm/1.3.0rc20/custom_allreduce_perf.parquet",
                "comm/trtllm/1.3.0rc10/custom_allreduce_perf.parquet",
                "comm/trtllm/1.2.0rc5/custom_allreduce_perf.parquet"
            ])
        );
        // h100
        let r = resolver("h100_sxm", Backend::Vllm, "0.24.0", true);
        assert_eq!(
            listed(&r, "custom_allreduce_perf.parquet"),
            plain(&[
                "comm/vllm/0.24.0/custom_allreduce_perf.parquet",
                "comm/vllm/0.19.0/custom_allreduce_perf.parquet",
                "comm/vllm/0.14.0/custom_allreduce_perf.parquet"
            ])
        );
        let r = resolver("h100_sxm", Backend::Sglang, "0.5.14", true);
        assert_eq!(
            listed(&r, "gemm_perf.parquet"),
            plain(&[
                "gemm/sglang/0.5.14/gemm_perf.parquet",
                "gemm/sglang/0.5.6.post2/gemm_perf.parquet"
            ])
        );
        assert_eq!(
            listed(&r, "moe_perf.parquet"),
            plain(&["moe/sglang/0.5.14/moe_perf.parquet", "moe/sglang/0.5.10/moe_perf.parquet"])
        );
        assert_eq!(
            listed(&r, "custom_allreduce_perf.parquet"),
            plain(&[
                "comm/sglang/0.5.14/custom_allreduce_perf.parquet",
                "comm/sglang/0.5.10/custom_allreduce_perf.parquet",
                "comm/sglang/0.5.9/custom_allreduce_perf.parquet",
                "comm/sglang/0.5.6.post2/custom_allreduce_perf.parquet"
            ])
        );
        // sglang has no MLA module tables: the nominal legacy primary only
        assert_eq!(
            listed(&r, mla_ctx),
            plain(&["sglang/0.5.14/mla_context_module_perf.parquet"])
        );
        let r = resolver("h100_sxm", Backend::Trtllm, "1.3.0rc20", true);
        assert_eq!(
            listed(&r, "moe_perf.parquet"),
            plain(&[
                "moe/trtllm/1.3.0rc20/moe_perf.parquet",
                "moe/trtllm/1.3.0rc10/moe_perf.parquet"
            ])
        );
    }

    #[test]
    fn primary_only_tables() {
        for system in ["h200_sxm", "b200_sxm", "h100_sxm"] {
            for (b, v) in [
                (Backend::Vllm, "0.24.0"),
                (Backend::Sglang, "0.5.14"),
                (Backend::Trtllm, "1.3.0rc20"),
            ] {
                let r = resolver(system, b, v, true);
                let mut tables = vec![
                    "computescale_perf.parquet",
                    "scale_matrix_perf.parquet",
                    "context_mla_perf.parquet",
                    "generation_mla_perf.parquet",
                ];
                if !(system == "h100_sxm" && b == Backend::Sglang) {
                    tables.push("gemm_perf.parquet");
                }
                if !(system == "b200_sxm" && b == Backend::Vllm) {
                    tables.push("context_attention_perf.parquet");
                    tables.push("generation_attention_perf.parquet");
                }
                for t in tables {
                    let s = r.sources(t);
                    assert_eq!(s.len(), 1, "{system} {b:?} {t}: {s:?}");
                }
            }
        }
    }

    #[test]
    fn shared_layer_off_is_primary_only() {
        let r = resolver("h200_sxm", Backend::Sglang, "0.5.14", false);
        assert_eq!(
            listed(&r, "custom_allreduce_perf.parquet"),
            plain(&["comm/sglang/0.5.14/custom_allreduce_perf.parquet"])
        );
        let r = resolver("b200_sxm", Backend::Vllm, "0.24.0", false);
        assert_eq!(
            listed(&r, "context_attention_perf.parquet"),
            plain(&["attention/vllm/0.24.0/context_attention_perf.parquet"])
        );
        assert!(!r.shared_layer());
    }

    #[test]
    fn dirless_next_version_rides_backward_fill() {
        let r = resolver("b200_sxm", Backend::Vllm, "0.27.0", true);
        assert_eq!(
            listed(&r, "context_attention_perf.parquet"),
            plain(&[
                "vllm/0.27.0/context_attention_perf.parquet",
                "attention/vllm/0.24.0/context_attention_perf.parquet",
                "attention/vllm/0.22.0/context_attention_perf.parquet",
            ])
        );
        assert!(!r.sources("gemm_perf.parquet")[0].path.exists());
        assert_eq!(
            listed(&r, "gemm_perf.parquet")[1].0,
            "gemm/vllm/0.24.0/gemm_perf.parquet"
        );
        assert_eq!(r.data_root_label(), "systems/data/b200_sxm/vllm/0.27.0");
        // sglang next has its own dirs but not for gemm
        let r = resolver("h200_sxm", Backend::Sglang, "0.5.16", true);
        assert_eq!(
            listed(&r, "gemm_perf.parquet"),
            plain(&[
                "sglang/0.5.16/gemm_perf.parquet",
                "gemm/sglang/0.5.14/gemm_perf.parquet"
            ])
        );
    }

    #[test]
    fn declared_reuse_channel_takes_newer_donor() {
        // b200 vllm 0.22.0 declares 0.24.0 for attention and moe
        let r = resolver("b200_sxm", Backend::Vllm, "0.22.0", true);
        assert_eq!(
            listed(&r, "context_attention_perf.parquet"),
            plain(&[
                "attention/vllm/0.22.0/context_attention_perf.parquet",
                "attention/vllm/0.24.0/context_attention_perf.parquet",
            ])
        );
        assert_eq!(
            listed(&r, "moe_perf.parquet"),
            plain(&[
                "moe/vllm/0.22.0/moe_perf.parquet",
                "moe/vllm/0.24.0/moe_perf.parquet",
                "moe/vllm/0.19.0/moe_perf.parquet",
            ])
        );
        // b200 trtllm 1.3.0rc23 gemm comes from its declared donor
        let r = resolver("b200_sxm", Backend::Trtllm, "1.3.0rc23", true);
        assert_eq!(
            listed(&r, "gemm_perf.parquet"),
            plain(&["trtllm/1.3.0rc23/gemm_perf.parquet", "gemm/trtllm/1.3.0rc20/gemm_perf.parquet"])
        );
    }

    #[test]
    fn nccl_and_labels() {
        let r = resolver("h200_sxm", Backend::Vllm, "0.24.0", true);
        let p = r.nccl_path().unwrap();
        assert!(p.ends_with("comm/nccl/2.26.2/nccl_perf.parquet"));
        assert!(p.is_file());
        assert_eq!(r.oneccl_path(), None);
        assert_eq!(r.data_root_label(), "systems/data/h200_sxm/vllm/0.24.0");
        assert_eq!(r.backend(), Backend::Vllm);
        assert_eq!(r.version(), "0.24.0");
        // nccl is never resolved through the channels
        assert_eq!(r.sources("nccl_perf.parquet").len(), 1);
        let r = resolver("h100_sxm", Backend::Trtllm, "1.3.0rc20", true);
        assert!(r.nccl_path().unwrap().ends_with("comm/nccl/2.27.3/nccl_perf.parquet"));
    }

    #[test]
    fn strict_switch_values() {
        for on in ["1", "true", "TRUE", " yes "] {
            assert!(switch_is_on(on), "{on}");
        }
        for off in ["", "0", "false", "no", "on"] {
            assert!(!switch_is_on(off), "{off}");
        }
        assert_eq!(STRICT_PROVENANCE_ENV, "AIC_STRICT_PROVENANCE");
    }

    #[test]
    fn filters_and_memo() {
        let r = resolver("h200_sxm", Backend::Vllm, "0.24.0", true);
        let a = r.sources("mla_context_module_perf.parquet");
        let b = r.clone().sources("mla_context_module_perf.parquet");
        assert_eq!(a, b);
        assert!(a[0].accepts(None));
        assert!(a[1].accepts(Some("default")));
        assert!(!a[1].accepts(Some("FLASHMLA")));
        assert!(!a[1].accepts(None));
        fn send_sync<T: Send + Sync>() {}
        send_sync::<SourceResolver>();
    }

    #[test]
    fn synthetic_tree_channels() {
        use std::fs;
        let root = std::env::temp_dir().join(format!(
            "aic_sources_{}_{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        fs::write(
            root.join("sys.yaml"),
            "data_dir: data/sys\ngpu:\n  mem_bw: 1\n  mem_capacity: 1\n  sm_version: 90\n\
             node:\n  num_gpus_per_node: 8\n  inter_node_bw: 1\n  intra_node_bw: 1\n  \
             p2p_latency: 0\nmisc: {}\n",
        )
        .unwrap();
        fs::write(
            root.join("perf_data_reuse_manifest.yaml"),
            "groups:\n- {op_file: gemm_perf.txt, kernel_source: k1, tier: shared, \
             frameworks: [VLLM, trtllm]}\n- {op_file: gemm_perf.parquet, kernel_source: k2, \
             tier: shared_fallback, frameworks: [vllm, trtllm, sglang]}\n- {op_file: \
             gemm_perf.parquet, kernel_source: k3, tier: absence_load_bearing, frameworks: \
             [vllm, sglang]}\n- {op_file: gemm_perf.parquet, kernel_source: '', tier: shared, \
             frameworks: [vllm, sglang]}\n",
        )
        .unwrap();
        let mk = |rel: &str| {
            let p = root.join("data/sys").join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, b"x").unwrap();
        };
        for v in ["2.0.0", "1.0", "1.0.0", "1.0.0.0", "main", "0.9", "0.8", "3.0"] {
            mk(&format!("gemm/vllm/{v}/gemm_perf.parquet"));
        }
        // an unusable dir (legacy INCOMPLETE marker without a sidecar) is skipped
        mk("gemm/vllm/0.9/INCOMPLETE.txt");
        // a marker with a sidecar is usable
        mk("gemm/vllm/0.8/INCOMPLETE.txt");
        mk("gemm/vllm/0.8/collection_meta.yaml");
        // legacy layout dir
        mk("vllm/0.7/gemm_perf.parquet");
        for v in ["1.0", "zeta", "2.5"] {
            mk(&format!("gemm/trtllm/{v}/gemm_perf.parquet"));
        }
        mk("gemm/sglang/0.1/gemm_perf.parquet");
        let s = SystemSpec::load(&root, "sys").unwrap();
        let r = SourceResolver::new(&s, Backend::Vllm, "2.0.0", true).unwrap();
        let k12: Option<Vec<String>> = Some(vec!["k1".into(), "k2".into()]);
        let k2: Option<Vec<String>> = Some(vec!["k2".into()]);
        assert_eq!(
            listed(&r, "gemm_perf.parquet"),
            vec![
                ("gemm/vllm/2.0.0/gemm_perf.parquet".to_string(), None),
                ("gemm/vllm/1.0/gemm_perf.parquet".to_string(), None),
                ("gemm/vllm/1.0.0/gemm_perf.parquet".to_string(), None),
                ("gemm/vllm/1.0.0.0/gemm_perf.parquet".to_string(), None),
                ("gemm/vllm/0.8/gemm_perf.parquet".to_string(), None),
                ("vllm/0.7/gemm_perf.parquet".to_string(), None),
                ("gemm/sglang/0.1/gemm_perf.parquet".to_string(), k2),
                ("gemm/trtllm/2.5/gemm_perf.parquet".to_string(), k12.clone()),
                ("gemm/trtllm/1.0/gemm_perf.parquet".to_string(), k12.clone()),
                ("gemm/trtllm/zeta/gemm_perf.parquet".to_string(), k12),
            ]
        );
        // an unparseable requested version: primary (+ channel 4) only
        let r = SourceResolver::new(&s, Backend::Vllm, "main", true).unwrap();
        let l = listed(&r, "gemm_perf.parquet");
        assert_eq!(l[0].0, "gemm/vllm/main/gemm_perf.parquet");
        assert!(l[1].1.is_some());
        let _ = fs::remove_dir_all(&root);
    }
}
