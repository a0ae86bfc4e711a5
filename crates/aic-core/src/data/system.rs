//! The system description (`systems/<system>.yaml`, spec 10 §6): GPU bandwidth and FLOPS,
//! node topology and memory constants. Every SOL formula and analytic op reads it, and its
//! `data_dir` locates the system's perf tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{AicError, Result};
use crate::spec::FlopsKey;

/// Top-level YAML files of a systems root that are not system descriptions.
const NON_SYSTEM_YAML: &[&str] = &[
    "query_versions",
    "perf_data_reuse_manifest",
    "attention_lane_defaults",
];

/// The `gpu:` section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct GpuSpec {
    /// Peak memory bandwidth, bytes/s.
    pub mem_bw: f64,
    /// Effective-bandwidth factor of analytic memory ops (default 1.0).
    #[serde(default = "one_f64")]
    pub mem_bw_empirical_scaling_factor: f64,
    /// Constant latency added per analytic memory op, seconds (default 0).
    #[serde(default)]
    pub mem_empirical_constant_latency: f64,
    /// Memory per GPU, bytes.
    pub mem_capacity: u64,
    /// Dense bf16 tensor-core FLOP/s.
    #[serde(default)]
    pub bfloat16_tc_flops: Option<f64>,
    /// Dense int8 tensor-core FLOP/s.
    #[serde(default)]
    pub int8_tc_flops: Option<f64>,
    /// Dense fp8 tensor-core FLOP/s.
    #[serde(default)]
    pub fp8_tc_flops: Option<f64>,
    /// Dense fp4 tensor-core FLOP/s.
    #[serde(default)]
    pub fp4_tc_flops: Option<f64>,
    /// Board power, W (not used by lookups).
    #[serde(default)]
    pub power: Option<f64>,
    /// Compute capability as an integer (90 = Hopper, 100 = Blackwell); absent on systems that
    /// are not NVIDIA GPUs (b60), where every sm test of spec 12 §1.1 is false.
    #[serde(default)]
    pub sm_version: Option<u32>,
}

fn one_f64() -> f64 {
    1.0
}

/// The `node:` section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct NodeSpec {
    /// GPUs in one node.
    pub num_gpus_per_node: u32,
    /// Bandwidth between nodes, bytes/s.
    pub inter_node_bw: f64,
    /// Bandwidth inside a node, bytes/s.
    pub intra_node_bw: f64,
    /// PCIe bandwidth, bytes/s (unused by lookups).
    #[serde(default)]
    pub pcie_bw: Option<f64>,
    /// Constant point-to-point latency, seconds.
    pub p2p_latency: f64,
    /// GPUs in one rack (GB200-class systems).
    #[serde(default)]
    pub num_gpus_per_rack: Option<u32>,
    /// Bandwidth between racks, bytes/s.
    #[serde(default)]
    pub inter_rack_bw: Option<f64>,
}

/// The `misc:` section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MiscSpec {
    /// NCCL buffer memory by GPU count, bytes.
    #[serde(default)]
    pub nccl_mem: BTreeMap<u32, u64>,
    /// Other runtime memory, bytes.
    #[serde(default)]
    pub other_mem: u64,
    /// NCCL table directory name under `comm/nccl/`.
    #[serde(default, deserialize_with = "opt_version_string")]
    pub nccl_version: Option<String>,
    /// OneCCL table directory name under `comm/oneccl/`.
    #[serde(default, deserialize_with = "opt_version_string")]
    pub oneccl_version: Option<String>,
}

/// Reads a YAML scalar that may be a string or a bare number (`2.23`) as text.
fn opt_version_string<'de, D>(d: D) -> std::result::Result<Option<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let value = Option::<serde_yaml::Value>::deserialize(d)?;
    match value {
        None | Some(serde_yaml::Value::Null) => Ok(None),
        Some(v) => yaml_scalar_text(&v)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom("expected a version string")),
    }
}

/// Text of a YAML scalar the way Python's `str()` shows the loaded value (strings as is,
/// numbers in their shortest form). `None` for mappings, sequences and null.
pub(crate) fn yaml_scalar_text(v: &serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i.to_string())
            } else if let Some(u) = n.as_u64() {
                Some(u.to_string())
            } else {
                n.as_f64().map(python_float_text)
            }
        }
        serde_yaml::Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_string()),
        _ => None,
    }
}

/// Python `str(float)` for the plain values that can appear as version keys.
fn python_float_text(f: f64) -> String {
    if f.is_finite() && f == f.trunc() && f.abs() < 1e16 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

#[derive(Deserialize)]
struct RawSystem {
    data_dir: String,
    gpu: GpuSpec,
    node: NodeSpec,
    misc: MiscSpec,
}

/// Rejects values no real system has and every formula would turn into an infinite, NaN or
/// negative latency: non-positive bandwidths and scaling, negative latencies, non-finite numbers.
/// FLOPS entries may be non-positive placeholders (they read as missing, see
/// [`SystemSpec::flops`]) but not NaN or infinite.
fn check_physical(raw: &RawSystem) -> std::result::Result<(), String> {
    let bad = |field: &str, rule: &str, value: f64| {
        Err(format!(
            "{field} must be {rule}, got {value}; correct it in the system YAML"
        ))
    };
    let positive = [
        ("gpu.mem_bw", Some(raw.gpu.mem_bw)),
        ("gpu.mem_bw_empirical_scaling_factor", Some(raw.gpu.mem_bw_empirical_scaling_factor)),
        ("node.inter_node_bw", Some(raw.node.inter_node_bw)),
        ("node.intra_node_bw", Some(raw.node.intra_node_bw)),
        ("node.inter_rack_bw", raw.node.inter_rack_bw),
    ];
    for (field, value) in positive {
        match value {
            Some(v) if !(v.is_finite() && v > 0.0) => return bad(field, "a finite number > 0", v),
            _ => {}
        }
    }
    let non_negative = [
        ("gpu.mem_empirical_constant_latency", Some(raw.gpu.mem_empirical_constant_latency)),
        ("node.p2p_latency", Some(raw.node.p2p_latency)),
        ("gpu.power", raw.gpu.power),
        ("node.pcie_bw", raw.node.pcie_bw),
    ];
    for (field, value) in non_negative {
        match value {
            Some(v) if !(v.is_finite() && v >= 0.0) => return bad(field, "a finite number >= 0", v),
            _ => {}
        }
    }
    let flops = [
        ("gpu.bfloat16_tc_flops", raw.gpu.bfloat16_tc_flops),
        ("gpu.int8_tc_flops", raw.gpu.int8_tc_flops),
        ("gpu.fp8_tc_flops", raw.gpu.fp8_tc_flops),
        ("gpu.fp4_tc_flops", raw.gpu.fp4_tc_flops),
    ];
    for (field, value) in flops {
        match value {
            Some(v) if !v.is_finite() => return bad(field, "a finite number", v),
            _ => {}
        }
    }
    if raw.node.num_gpus_per_node == 0 {
        return Err("node.num_gpus_per_node must be at least 1, got 0; correct it in the system \
                    YAML"
            .to_string());
    }
    if raw.node.num_gpus_per_rack == Some(0) {
        return Err("node.num_gpus_per_rack must be at least 1, got 0; correct it in the system \
                    YAML"
            .to_string());
    }
    Ok(())
}

/// One system: its name, where its data lives, and the three YAML sections.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemSpec {
    /// System name (`h200_sxm`), the YAML file stem.
    pub name: String,
    /// The systems root the YAML was read from.
    pub systems_root: PathBuf,
    /// `systems_root` joined with the YAML's `data_dir`.
    pub data_dir: PathBuf,
    /// GPU section.
    pub gpu: GpuSpec,
    /// Node section.
    pub node: NodeSpec,
    /// Misc section.
    pub misc: MiscSpec,
}

/// The system names (YAML stems) found in a systems root, sorted.
pub fn list_systems(systems_root: &Path) -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(entries) = std::fs::read_dir(systems_root) {
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_file() || path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                if !stem.starts_with('.') && !NON_SYSTEM_YAML.contains(&stem) {
                    names.push(stem.to_string());
                }
            }
        }
    }
    names.sort();
    names
}

impl SystemSpec {
    /// Reads `<systems_root>/<system>.yaml`.
    pub fn load(systems_root: &Path, system: &str) -> Result<SystemSpec> {
        let path = systems_root.join(format!("{system}.yaml"));
        let valid_name = !system.is_empty()
            && !system.contains(['/', '\\'])
            && system != "."
            && system != ".."
            && !NON_SYSTEM_YAML.contains(&system);
        if !systems_root.is_dir() {
            return Err(AicError::System(format!(
                "systems folder {} does not exist or is not a folder; pass the folder that holds \
                 {system}.yaml (the shipped one is data/systems), or set AIC_SYSTEMS_PATH",
                systems_root.display()
            )));
        }
        if !valid_name || !path.is_file() {
            return Err(AicError::System(format!(
                "unknown system '{system}': no {system}.yaml in {}; valid systems: [{}]",
                systems_root.display(),
                list_systems(systems_root).join(", ")
            )));
        }
        // Every entry point loads the system again: the parse is remembered per file.
        super::file_memo::parsed(&path, |text| Self::from_yaml(systems_root, system, text))
            .map_err(|e| AicError::System(format!("cannot read {}: {e}", path.display())))?
            .map_err(|msg| AicError::System(format!("{}: {msg}", path.display())))
    }

    /// Parses the text of a system YAML named `system` under `systems_root` (no file is read):
    /// the entry point for descriptions held in memory, and for fuzzing. Malformed YAML, a
    /// missing field or a physically impossible value (a zero bandwidth, a NaN) is an
    /// [`AicError::System`] naming the field.
    pub fn from_yaml_str(systems_root: &Path, system: &str, text: &str) -> Result<SystemSpec> {
        Self::from_yaml(systems_root, system, text)
            .map_err(|msg| AicError::System(format!("{system}.yaml: {msg}")))
    }

    /// Parses a system YAML text (the `name` and `systems_root` are given by the caller).
    fn from_yaml(
        systems_root: &Path,
        system: &str,
        text: &str,
    ) -> std::result::Result<SystemSpec, String> {
        let raw: RawSystem = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        check_physical(&raw)?;
        Ok(SystemSpec {
            name: system.to_string(),
            systems_root: systems_root.to_path_buf(),
            data_dir: systems_root.join(&raw.data_dir),
            gpu: raw.gpu,
            node: raw.node,
            misc: raw.misc,
        })
    }

    /// The `*_tc_flops` entry a quant mode needs; absent or non-positive is an error.
    pub fn flops(&self, quant_name: &str, key: FlopsKey) -> Result<f64> {
        let value = match key {
            FlopsKey::Bfloat16 => self.gpu.bfloat16_tc_flops,
            FlopsKey::Int8 => self.gpu.int8_tc_flops,
            FlopsKey::Fp8 => self.gpu.fp8_tc_flops,
            FlopsKey::Fp4 => self.gpu.fp4_tc_flops,
        };
        match value {
            Some(v) if v > 0.0 => Ok(v),
            _ => Err(AicError::MissingSystemFlops(format!(
                "quant mode '{quant_name}' needs '{}', which this system's YAML does not define \
                 (or defines as a non-positive placeholder): either the platform does not \
                 support {} compute and the quant mode cannot be modeled on it, or the system \
                 YAML is missing the entry (system {})",
                key.yaml_key(),
                key.dtype_label(),
                self.name
            ))),
        }
    }

    /// Point-to-point bandwidth among `n` GPUs: intra-node, inter-node, then inter-rack.
    pub fn p2p_bw(&self, n: u32) -> f64 {
        if n <= self.node.num_gpus_per_node {
            self.node.intra_node_bw
        } else if self.node.num_gpus_per_rack.is_none_or(|rack| n <= rack) {
            self.node.inter_node_bw
        } else {
            self.node.inter_rack_bw.unwrap_or(self.node.inter_node_bw)
        }
    }

    /// Analytic memory-op time in ms: scaled bandwidth plus the constant latency.
    pub fn mem_op_ms(&self, bytes: f64) -> f64 {
        (bytes / (self.gpu.mem_bw * self.gpu.mem_bw_empirical_scaling_factor)
            + self.gpu.mem_empirical_constant_latency)
            * 1000.0
    }

    /// Speed-of-light memory time in ms (raw bandwidth, no constant).
    pub fn mem_op_sol_ms(&self, bytes: f64) -> f64 {
        bytes / self.gpu.mem_bw * 1000.0
    }

    /// The data directory relative to the systems root, with `/` separators (`data/h200_sxm`).
    pub fn data_dir_label(&self) -> String {
        let rel = self
            .data_dir
            .strip_prefix(&self.systems_root)
            .unwrap_or(&self.data_dir);
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
    }

    #[test]
    fn h200_fields() {
        let s = SystemSpec::load(&root(), "h200_sxm").unwrap();
        assert_eq!(s.name, "h200_sxm");
        assert_eq!(s.data_dir, root().join("data/h200_sxm"));
        assert_eq!(s.data_dir_label(), "data/h200_sxm");
        assert_eq!(s.gpu.mem_bw, 4.8e12);
        assert_eq!(s.gpu.mem_bw_empirical_scaling_factor, 0.8);
        assert_eq!(s.gpu.mem_empirical_constant_latency, 3e-6);
        assert_eq!(s.gpu.mem_capacity, 151_397_597_184);
        assert_eq!(s.gpu.bfloat16_tc_flops, Some(989e12));
        assert_eq!(s.gpu.int8_tc_flops, Some(1978e12));
        assert_eq!(s.gpu.fp8_tc_flops, Some(1978e12));
        assert_eq!(s.gpu.fp4_tc_flops, None);
        assert_eq!(s.gpu.power, Some(700.0));
        assert_eq!(s.gpu.sm_version, Some(90));
        assert_eq!(s.node.num_gpus_per_node, 8);
        assert_eq!(s.node.inter_node_bw, 50e9);
        assert_eq!(s.node.intra_node_bw, 450e9);
        assert_eq!(s.node.pcie_bw, Some(64e9));
        assert_eq!(s.node.p2p_latency, 1e-5);
        assert_eq!(s.node.num_gpus_per_rack, None);
        assert_eq!(s.node.inter_rack_bw, None);
        let nccl: Vec<(u32, u64)> = s.misc.nccl_mem.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(
            nccl,
            vec![(1, 0), (2, 358_612_992), (4, 411_041_792), (8, 411_041_792)]
        );
        assert_eq!(s.misc.other_mem, 3_758_096_384);
        assert_eq!(s.misc.nccl_version.as_deref(), Some("2.26.2"));
        assert_eq!(s.misc.oneccl_version, None);
    }

    #[test]
    fn b200_and_h100_differences() {
        let b = SystemSpec::load(&root(), "b200_sxm").unwrap();
        assert_eq!(b.gpu.mem_bw, 7.7e12);
        assert_eq!(b.gpu.mem_capacity, 193_273_528_320);
        assert_eq!(b.gpu.bfloat16_tc_flops, Some(2250e12));
        assert_eq!(b.gpu.fp8_tc_flops, Some(4500e12));
        assert_eq!(b.gpu.fp4_tc_flops, Some(9000e12));
        assert_eq!(b.gpu.sm_version, Some(100));
        assert_eq!(b.node.intra_node_bw, 900e9);
        assert_eq!(b.misc.nccl_version.as_deref(), Some("2.27.3"));
        let h = SystemSpec::load(&root(), "h100_sxm").unwrap();
        assert_eq!(h.gpu.mem_bw, 3.35e12);
        assert_eq!(h.gpu.mem_capacity, 85_899_345_920);
        assert_eq!(h.misc.nccl_version.as_deref(), Some("2.27.3"));
        assert_eq!(h.gpu.sm_version, Some(90));
    }

    #[test]
    fn flops_lookup_and_missing() {
        let s = SystemSpec::load(&root(), "h200_sxm").unwrap();
        assert_eq!(s.flops("bfloat16", FlopsKey::Bfloat16).unwrap(), 989e12);
        assert_eq!(s.flops("fp8", FlopsKey::Fp8).unwrap(), 1978e12);
        assert_eq!(s.flops("sq", FlopsKey::Int8).unwrap(), 1978e12);
        let err = s.flops("nvfp4", FlopsKey::Fp4).unwrap_err();
        assert!(matches!(err, AicError::MissingSystemFlops(_)));
        assert_eq!(
            err.to_string(),
            "missing system flops: quant mode 'nvfp4' needs 'fp4_tc_flops', which this system's \
             YAML does not define (or defines as a non-positive placeholder): either the \
             platform does not support Fp4 compute and the quant mode cannot be modeled on it, \
             or the system YAML is missing the entry (system h200_sxm)"
        );
        // Spec 12 §1.2 / §5.1: a100_sxm has no fp8 entry; b60 has fp8 but no fp4.
        let a100 = SystemSpec::load(&root(), "a100_sxm").unwrap();
        assert!(matches!(a100.flops("fp8_block", FlopsKey::Fp8), Err(AicError::MissingSystemFlops(_))));
        assert_eq!(a100.flops("bfloat16", FlopsKey::Bfloat16).unwrap(), 312e12);
        let b60 = SystemSpec::load(&root(), "b60").unwrap();
        assert_eq!(b60.gpu.sm_version, None);
        assert_eq!(b60.flops("fp8", FlopsKey::Fp8).unwrap(), 98.304e12);
        assert!(b60.flops("nvfp4", FlopsKey::Fp4).is_err());
        let mut z = s.clone();
        z.gpu.fp8_tc_flops = Some(0.0);
        assert!(matches!(
            z.flops("fp8", FlopsKey::Fp8),
            Err(AicError::MissingSystemFlops(_))
        ));
    }

    #[test]
    fn p2p_bandwidth_tiers() {
        let mut s = SystemSpec::load(&root(), "h200_sxm").unwrap();
        assert_eq!(s.p2p_bw(2), 450e9);
        assert_eq!(s.p2p_bw(8), 450e9);
        assert_eq!(s.p2p_bw(16), 50e9);
        assert_eq!(s.p2p_bw(1024), 50e9);
        s.node.num_gpus_per_rack = Some(72);
        assert_eq!(s.p2p_bw(72), 50e9);
        assert_eq!(s.p2p_bw(144), 50e9);
        s.node.inter_rack_bw = Some(25e9);
        assert_eq!(s.p2p_bw(144), 25e9);
    }

    #[test]
    fn mem_ops() {
        let s = SystemSpec::load(&root(), "h200_sxm").unwrap();
        let bytes = 4.8e9;
        assert_eq!(s.mem_op_sol_ms(bytes), 1.0);
        assert_eq!(s.mem_op_ms(bytes), (4.8e9 / (4.8e12 * 0.8) + 3e-6) * 1000.0);
        assert!((s.mem_op_ms(bytes) - 1.253).abs() < 1e-12);
    }

    #[test]
    fn unknown_system_lists_valid_names() {
        let err = SystemSpec::load(&root(), "h300_sxm").unwrap_err();
        assert!(matches!(err, AicError::System(_)));
        let msg = err.to_string();
        assert!(msg.contains("'h300_sxm'"), "{msg}");
        assert!(msg.contains("valid systems: [a100_pcie, a100_sxm, a30, b200_sxm, b300_sxm, b60, gb200, gb300, h100_pcie, h100_sxm, h200_sxm, l4, l40s, rtx_pro_6000_server]"), "{msg}");
        assert!(msg.contains("systems"), "{msg}");
        assert!(SystemSpec::load(&root(), "query_versions").is_err());
        assert!(SystemSpec::load(&root(), "../systems/h200_sxm").is_err());
    }

    #[test]
    fn malformed_yaml_names_file_and_field() {
        let dir = std::env::temp_dir().join(format!(
            "aic_sys_test_{}_{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("bad.yaml"),
            "data_dir: data/bad\ngpu:\n  mem_capacity: 1\n  sm_version: 90\nnode:\n  \
             num_gpus_per_node: 8\n  inter_node_bw: 1\n  intra_node_bw: 1\n  p2p_latency: 0\n\
             misc: {}\n",
        )
        .unwrap();
        std::fs::write(dir.join("broken.yaml"), "data_dir: [unclosed\n").unwrap();
        let msg = SystemSpec::load(&dir, "bad").unwrap_err().to_string();
        assert!(msg.contains("bad.yaml"), "{msg}");
        assert!(msg.contains("mem_bw"), "{msg}");
        let msg = SystemSpec::load(&dir, "broken").unwrap_err().to_string();
        assert!(msg.contains("broken.yaml"), "{msg}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bare_number_versions_read_as_text() {
        let text = "data_dir: data/x\ngpu:\n  mem_bw: 1\n  mem_capacity: 1\n  sm_version: 80\n\
                    node:\n  num_gpus_per_node: 8\n  inter_node_bw: 1\n  intra_node_bw: 1\n  \
                    p2p_latency: 0\nmisc:\n  nccl_version: 2.23\n";
        let s = SystemSpec::from_yaml(Path::new("r"), "x", text).unwrap();
        assert_eq!(s.misc.nccl_version.as_deref(), Some("2.23"));
        assert_eq!(s.gpu.mem_bw_empirical_scaling_factor, 1.0);
        assert_eq!(s.gpu.mem_empirical_constant_latency, 0.0);
    }
}
