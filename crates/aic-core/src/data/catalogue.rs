//! What a systems folder offers: every system it describes, its hardware headline and, per
//! backend, the version slots a spec can be compiled for. Newcomers ask "which systems can I
//! plan on?" before anything else; this answers it from the data itself (`aic-compile data
//! show` with no system), and says plainly where a system ships no perf tables.

use std::path::Path;

use serde::Serialize;

use super::system::{list_systems, SystemSpec};
use super::versions::{version_slots, versions_with_tables};
use crate::spec::Backend;

/// The three backends, in the order the catalogue lists them.
pub const BACKENDS: [Backend; 3] = [Backend::Trtllm, Backend::Sglang, Backend::Vllm];

/// One backend of one system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendSupport {
    /// `trtllm`, `sglang` or `vllm`.
    pub backend: &'static str,
    /// The `current` slot; `None` when the backend has no perf data on this system.
    pub current: Option<String>,
    /// The `previous` slot, when the versions file names one.
    pub previous: Option<String>,
    /// The derived `next` slot, when a newer version has data somewhere.
    pub next: Option<String>,
    /// Every version of the backend with a table (a parquet file or a `reuse.yaml`) in this
    /// system's data tree, sorted by name; empty version folders are not listed.
    pub versions_with_data: Vec<String>,
}

impl BackendSupport {
    /// True when an engine can be built for this backend (some version has tables).
    pub fn has_data(&self) -> bool {
        self.current.is_some()
    }
}

/// One system of a systems folder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemSummary {
    /// The system name (`<name>.yaml`).
    pub name: String,
    /// Compute capability; `None` for systems that are not NVIDIA GPUs (b60).
    pub sm_version: Option<u32>,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// GPUs per NVLink rack (GB200/GB300 NVL72), when the YAML names one.
    pub gpus_per_rack: Option<u32>,
    /// Memory per GPU, bytes.
    pub mem_capacity: u64,
    /// Per backend: slots and versions with data.
    pub backends: Vec<BackendSupport>,
    /// Why the system description could not be read, if it could not.
    pub error: Option<String>,
}

impl SystemSummary {
    /// True when no backend has perf data (a hardware description only).
    pub fn has_perf_data(&self) -> bool {
        self.backends.iter().any(BackendSupport::has_data)
    }
}

/// Every system under `systems_root`, by name.
pub fn system_catalogue(systems_root: &Path) -> Vec<SystemSummary> {
    list_systems(systems_root)
        .into_iter()
        .map(|name| match SystemSpec::load(systems_root, &name) {
            Ok(spec) => summarize(systems_root, &spec),
            Err(e) => SystemSummary {
                name,
                sm_version: None,
                gpus_per_node: 0,
                gpus_per_rack: None,
                mem_capacity: 0,
                backends: Vec::new(),
                error: Some(e.to_string()),
            },
        })
        .collect()
}

fn summarize(systems_root: &Path, spec: &SystemSpec) -> SystemSummary {
    let mut error = None;
    let backends = BACKENDS
        .iter()
        .map(|&backend| {
            let slots = version_slots(systems_root, spec, backend).unwrap_or_else(|e| {
                error.get_or_insert_with(|| e.to_string());
                None
            });
            BackendSupport {
                backend: backend.as_str(),
                current: slots.as_ref().map(|s| s.current.clone()),
                previous: slots.as_ref().and_then(|s| s.previous.clone()),
                next: slots.and_then(|s| s.next),
                versions_with_data: versions_with_tables(&spec.data_dir, backend.as_str()),
            }
        })
        .collect();
    SystemSummary {
        name: spec.name.clone(),
        sm_version: spec.gpu.sm_version,
        gpus_per_node: spec.node.num_gpus_per_node,
        gpus_per_rack: spec.node.num_gpus_per_rack,
        mem_capacity: spec.gpu.mem_capacity,
        backends,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> Vec<SystemSummary> {
        system_catalogue(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems"))
    }

    fn find<'a>(all: &'a [SystemSummary], name: &str) -> &'a SystemSummary {
        all.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name} is not shipped"))
    }

    #[test]
    fn every_shipped_system_is_listed_with_its_slots() {
        let all = shipped();
        assert_eq!(all.len(), 14);
        assert!(all.iter().all(|s| s.error.is_none()), "{all:?}");
        // Spec 12 §3.1: the defaults-governed systems share their slots.
        let gb200 = find(&all, "gb200");
        assert_eq!((gb200.gpus_per_node, gb200.gpus_per_rack), (4, Some(72)));
        let vllm = &gb200.backends[2];
        assert_eq!(vllm.current.as_deref(), Some("0.24.0"));
        assert_eq!(vllm.next.as_deref(), Some("0.27.0"));
        // a100_sxm is frozen at one version per backend; b60 has vllm only, with `previous`.
        let a100 = find(&all, "a100_sxm");
        assert_eq!(a100.backends[0].current.as_deref(), Some("1.0.0"));
        assert!(a100.backends.iter().all(|b| b.next.is_none() && b.previous.is_none()));
        let b60 = find(&all, "b60");
        assert_eq!(b60.sm_version, None);
        assert!(!b60.backends[0].has_data() && !b60.backends[1].has_data());
        assert_eq!(b60.backends[2].current.as_deref(), Some("0.26.0"));
        assert_eq!(b60.backends[2].previous.as_deref(), Some("0.20.0"));
    }

    #[test]
    fn hardware_only_systems_have_no_perf_data() {
        let all = shipped();
        let without: Vec<&str> =
            all.iter().filter(|s| !s.has_perf_data()).map(|s| s.name.as_str()).collect();
        assert_eq!(without, ["a100_pcie", "a30", "h100_pcie", "l4"]);
    }
}
