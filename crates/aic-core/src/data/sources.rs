//! Source resolution (spec 10 §1, §8): for one load identity (system, backend, version,
//! shared layer) every table basename gets an ordered list of files, merged first-wins by the
//! table loaders. Channel 1 is the requested version's own file; with the shared layer on,
//! channel 2 adds declared donors (`reuse.yaml`), channel 3 older versions of the same backend
//! and channel 4 other backends' rows whose kernel the reuse manifest declares identical.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::data::system::{yaml_scalar_text, SystemSpec};
use crate::data::versions::{family_dirs, sort_newest_first, version_names, Pep440Version};
use crate::error::{AicError, Result};
use crate::spec::Backend;

/// Basenames that are never resolved through the channels (loaded from `comm/nccl|oneccl`).
const COMM_LIBRARY_TABLES: &[&str] = &["nccl_perf.parquet", "oneccl_perf.parquet"];

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
    let text = std::fs::read_to_string(&path)
        .map_err(|e| AicError::System(format!("cannot read {}: {e}", path.display())))?;
    let value: serde_yaml::Value = serde_yaml::from_str(&text)
        .map_err(|e| AicError::System(format!("{}: {e}", path.display())))?;
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

/// Reads the `reuse:` entries of one `reuse.yaml` as (table, from_version); malformed entries
/// are skipped (non-strict mode).
fn load_reuse(path: &Path) -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Ok(value) = serde_yaml::from_str::<serde_yaml::Value>(&text) else {
        return Vec::new();
    };
    let Some(list) = value.get("reuse").and_then(|r| r.as_sequence()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in list {
        let field = |k: &str| e.get(k).and_then(yaml_scalar_text).unwrap_or_default();
        let (table, from) = (field("table"), field("from_version"));
        let complete = ["reason", "approved_by"]
            .iter()
            .all(|k| !field(k).is_empty());
        if !table.is_empty() && !from.is_empty() && complete {
            out.push((table, from));
        }
    }
    out
}

/// True unless the dir carries a legacy `INCOMPLETE.txt` without a `collection_meta.yaml`.
fn dir_usable(dir: &Path) -> bool {
    !dir.join("INCOMPLETE.txt").exists() || dir.join("collection_meta.yaml").exists()
}

/// Resolves and memoises the source lists of one load identity.
#[derive(Debug, Clone)]
pub struct SourceResolver {
    data_dir: PathBuf,
    label: String,
    backend: Backend,
    version: String,
    shared: bool,
    families: Vec<String>,
    manifest: Arc<Vec<ManifestEntry>>,
    /// (table stem, from_version) declared by the requested version's `reuse.yaml` files.
    reuse: Vec<(String, String)>,
    nccl_version: Option<String>,
    oneccl_version: Option<String>,
    cache: Arc<Mutex<HashMap<String, Vec<Source>>>>,
}

impl SourceResolver {
    /// Prepares resolution for (system, backend, version, shared layer).
    pub fn new(
        system: &SystemSpec,
        backend: Backend,
        version: &str,
        enable_shared_layer: bool,
    ) -> Result<SourceResolver> {
        let data_dir = system.data_dir.clone();
        let families = family_dirs(&data_dir);
        let manifest = if enable_shared_layer {
            load_manifest(&system.systems_root)?
        } else {
            Vec::new()
        };
        let mut reuse = Vec::new();
        if enable_shared_layer {
            let mut dirs: Vec<PathBuf> = families
                .iter()
                .map(|f| data_dir.join(f).join(backend.as_str()).join(version))
                .collect();
            dirs.push(data_dir.join(backend.as_str()).join(version));
            for dir in dirs {
                let file = dir.join("reuse.yaml");
                if file.is_file() {
                    reuse.extend(load_reuse(&file));
                }
            }
        }
        Ok(SourceResolver {
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
            families,
            manifest: Arc::new(manifest),
            reuse,
            nccl_version: system.misc.nccl_version.clone(),
            oneccl_version: system.misc.oneccl_version.clone(),
            cache: Arc::new(Mutex::new(HashMap::new())),
        })
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

    /// The system's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// `systems/data/<system>/<backend>/<version>`, the folder named in perf-database errors.
    pub fn data_root_label(&self) -> String {
        self.label.clone()
    }

    /// An existing, usable file for `basename` at (framework dir name, version): the first family
    /// holding it, else the legacy `<framework>/<version>/` location.
    fn existing_file(&self, framework: &str, version: &str, basename: &str) -> Option<PathBuf> {
        for family in &self.families {
            let dir = self.data_dir.join(family).join(framework).join(version);
            let file = dir.join(basename);
            if file.is_file() && dir_usable(&dir) {
                return Some(file);
            }
        }
        let dir = self.data_dir.join(framework).join(version);
        let file = dir.join(basename);
        (file.is_file() && dir_usable(&dir)).then_some(file)
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
        let mut out: Vec<Source> = self.primary_source(basename).into_iter().collect();
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
        for (table, from) in &self.reuse {
            if format!("{table}.parquet") == basename && !donors.contains(from) {
                donors.push(from.clone());
            }
        }
        for from in &donors {
            if let Some(p) = self.existing_file(b, from, basename) {
                out.push(plain(p));
            }
        }

        // Channel 3: strictly older versions of the same backend, newest first (PEP 440).
        if let Some(requested) = Pep440Version::parse(&self.version) {
            let names: Vec<String> = version_names(&self.data_dir, b)
                .into_iter()
                .filter(|n| *n != self.version && !donors.contains(n))
                .collect();
            for name in sort_newest_first(&names, false) {
                let older = Pep440Version::parse(&name).is_some_and(|v| v < requested);
                if !older {
                    continue;
                }
                if let Some(p) = self.existing_file(b, &name, basename) {
                    out.push(plain(p));
                }
            }
        }

        // Channel 4: other frameworks' rows of kernels declared identical, with a filter.
        let mut filters: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
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
                }
            }
        }
        for (framework, filter) in filters {
            let names = version_names(&self.data_dir, &framework);
            for name in sort_newest_first(&names, true) {
                if let Some(p) = self.existing_file(&framework, &name, basename) {
                    out.push(Source {
                        path: p,
                        kernel_filter: Some(filter.clone()),
                    });
                }
            }
        }
        out
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
