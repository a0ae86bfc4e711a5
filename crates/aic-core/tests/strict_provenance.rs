//! Provenance checks and load warnings of the perf-data loader (spec 10 §5, §8.2–§8.6):
//! strict provenance (coverage of family-layout dirs by `collection_meta.yaml`, donors,
//! malformed sidecars and reuse files, the legacy relaxation), the warnings collected instead
//! in non-strict mode, the other warnings the reference only logs (unparseable version names,
//! legacy markers, version fallback, low-fidelity cross-backend rows), and the Git LFS
//! pointer check. Synthetic system trees are written to a temporary directory per test.

use std::fs;
use std::path::{Path, PathBuf};

use aic_core::data::sources::SourceResolver;
use aic_core::data::system::SystemSpec;
use aic_core::data::warnings::{LoadWarning, LoadWarningKind};
use aic_core::{AicError, Backend, Engine, EngineSpec, ErrorClass};
use serde_json::{json, Value};

use LoadWarningKind as K;

fn shipped_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
}

/// A fresh, empty systems root for one test.
struct Tree {
    root: PathBuf,
}

impl Tree {
    fn new(tag: &str) -> Tree {
        let root = std::env::temp_dir().join(format!("aic_strict_{tag}_{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        fs::write(
            root.join("sys.yaml"),
            "data_dir: data/sys\ngpu:\n  mem_bw: 1.0e12\n  mem_capacity: 1\n  sm_version: 90\n\
             node:\n  num_gpus_per_node: 8\n  inter_node_bw: 1.0e9\n  intra_node_bw: 1.0e9\n  \
             p2p_latency: 0\nmisc: {}\n",
        )
        .unwrap();
        Tree { root }
    }

    /// Writes `text` to `data/sys/<rel>`.
    fn file(&self, rel: &str, text: &str) -> &Tree {
        let p = self.root.join("data/sys").join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
        self
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join("data/sys").join(rel)
    }

    fn resolver(
        &self,
        version: &str,
        shared: bool,
        strict: bool,
    ) -> Result<SourceResolver, AicError> {
        let system = SystemSpec::load(&self.root, "sys").unwrap();
        SourceResolver::with_strict_provenance(&system, Backend::Vllm, version, shared, strict)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn meta(provenance: &str, tables: &[&str]) -> String {
    let mut text = format!(
        "schema_version: 1\nprovenance: {provenance}\nruntime: {{framework: vllm}}\ntables:\n"
    );
    for t in tables {
        text.push_str(&format!("  {t}: {{status: complete}}\n"));
    }
    text
}

fn kinds(warnings: &[LoadWarning]) -> Vec<LoadWarningKind> {
    warnings.iter().map(|w| w.kind).collect()
}

#[track_caller]
fn provenance_error(r: Result<SourceResolver, AicError>, path_end: &str, needles: &[&str]) {
    let err = r.expect_err("strict provenance must reject this tree");
    assert_eq!(err.class(), ErrorClass::Value, "{err}");
    match &err {
        AicError::Provenance { path, message } => {
            assert!(
                path.ends_with(path_end),
                "{} should end with {path_end}",
                path.display()
            );
            for n in needles {
                assert!(message.contains(n), "{message:?} lacks {n:?}");
            }
        }
        other => panic!("expected a provenance error, got {other:?}"),
    }
    assert!(
        err.to_string().starts_with("perf data provenance error: "),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Strict coverage of primary dirs

/// A family-layout dir whose sidecar lists every table passes; one that misses a table fails
/// in strict mode (naming the sidecar and the table), and is not checked otherwise.
#[test]
fn coverage_of_primary_family_dirs() {
    let t = Tree::new("coverage");
    t.file("gemm/vllm/1.0.0/gemm_perf.parquet", "x")
        .file("gemm/vllm/1.0.0/extra_perf.parquet", "x")
        .file(
            "gemm/vllm/1.0.0/collection_meta.yaml",
            &meta("collected", &["gemm_perf", "extra_perf"]),
        );
    let r = t.resolver("1.0.0", true, true).unwrap();
    assert!(r.strict_provenance());
    assert!(r.load_warnings().is_empty(), "{:?}", r.load_warnings());

    t.file(
        "gemm/vllm/1.0.0/collection_meta.yaml",
        &meta("collected", &["gemm_perf"]),
    );
    provenance_error(
        t.resolver("1.0.0", true, true),
        "gemm/vllm/1.0.0/collection_meta.yaml",
        &[
            "does not list extra_perf under `tables:`",
            "turn strict provenance off",
        ],
    );
    // with the shared layer off the primary channel is still checked
    provenance_error(
        t.resolver("1.0.0", false, true),
        "collection_meta.yaml",
        &["extra_perf"],
    );
    // non-strict: coverage is not checked, nothing to warn about
    let r = t.resolver("1.0.0", true, false).unwrap();
    assert!(!r.strict_provenance());
    assert!(r.load_warnings().is_empty());
    assert_eq!(r.sources("gemm_perf.parquet").len(), 1);
}

/// `provenance: legacy` relaxes the coverage check to a warning per unlisted table.
#[test]
fn legacy_sidecar_relaxes_coverage() {
    let t = Tree::new("legacy");
    t.file("gemm/vllm/1.0.0/gemm_perf.parquet", "x")
        .file("gemm/vllm/1.0.0/extra_perf.parquet", "x")
        .file(
            "gemm/vllm/1.0.0/collection_meta.yaml",
            &meta("legacy", &["gemm_perf"]),
        );
    let r = t.resolver("1.0.0", true, true).unwrap();
    let w = r.load_warnings();
    assert_eq!(kinds(&w), [K::UncoveredLegacyTable]);
    assert_eq!(w[0].table.as_deref(), Some("extra_perf.parquet"));
    assert!(w[0]
        .path
        .as_ref()
        .unwrap()
        .ends_with("gemm/vllm/1.0.0/collection_meta.yaml"));
    assert!(
        w[0].message
            .contains("allowed because its provenance is legacy"),
        "{}",
        w[0].message
    );
}

/// A family-layout primary dir without a sidecar fails in strict mode; legacy-layout dirs,
/// older siblings (channel 3) and other backends (channel 4) are not checked.
#[test]
fn missing_sidecar_and_unchecked_channels() {
    let t = Tree::new("missing");
    t.file("gemm/vllm/1.0.0/gemm_perf.parquet", "x");
    provenance_error(
        t.resolver("1.0.0", true, true),
        "gemm/vllm/1.0.0/collection_meta.yaml",
        &["has no collection_meta.yaml", "gemm_perf"],
    );
    assert!(t
        .resolver("1.0.0", true, false)
        .unwrap()
        .load_warnings()
        .is_empty());

    let t = Tree::new("unchecked");
    t.file("gemm/vllm/1.0.0/gemm_perf.parquet", "x")
        .file(
            "gemm/vllm/1.0.0/collection_meta.yaml",
            &meta("collected", &["gemm_perf"]),
        )
        .file("gemm/vllm/0.9.0/gemm_perf.parquet", "x")
        .file(
            "gemm/vllm/0.9.0/collection_meta.yaml",
            "schema_version: 7\n",
        )
        .file("vllm/1.1.0/gemm_perf.parquet", "x");
    let r = t.resolver("1.0.0", true, true).unwrap();
    assert_eq!(r.sources("gemm_perf.parquet").len(), 2);
    // the legacy layout is never checked: no sidecar needed
    let r = t.resolver("1.1.0", true, true).unwrap();
    let listed: Vec<PathBuf> = r
        .sources("gemm_perf.parquet")
        .into_iter()
        .map(|s| s.path)
        .collect();
    assert_eq!(
        listed,
        [
            t.path("vllm/1.1.0/gemm_perf.parquet"),
            t.path("gemm/vllm/1.0.0/gemm_perf.parquet"),
            t.path("gemm/vllm/0.9.0/gemm_perf.parquet")
        ]
    );
}

/// A malformed sidecar: an error in strict mode, a warning otherwise (the dir stays usable).
#[test]
fn malformed_sidecar_is_error_or_warning() {
    for (text, needle) in [
        (
            "schema_version: 3\ntables: {gemm_perf: {}}\n",
            "schema_version must be 1 or 2",
        ),
        ("tables: [gemm_perf\n", "not valid YAML"),
        (
            "schema_version: 2\ntables:\n  gemm_perf: {rows: 1, status: complete}\n",
            "requires a `runtime` mapping",
        ),
    ] {
        let t = Tree::new("malformed");
        t.file("gemm/vllm/1.0.0/gemm_perf.parquet", "x")
            .file("gemm/vllm/1.0.0/collection_meta.yaml", text);
        provenance_error(
            t.resolver("1.0.0", true, true),
            "gemm/vllm/1.0.0/collection_meta.yaml",
            &[needle, "malformed"],
        );
        let r = t.resolver("1.0.0", true, false).unwrap();
        let w = r.load_warnings();
        assert_eq!(kinds(&w), [K::MalformedSidecar], "{text}");
        assert!(w[0].message.contains(needle), "{}", w[0].message);
        assert_eq!(r.sources("gemm_perf.parquet").len(), 1);
    }
}

// ---------------------------------------------------------------------------------------------
// Declared reuse

/// Donors are checked for the donated table only; a malformed `reuse.yaml` is an error in
/// strict mode and a warning otherwise (its complete entries still count); a donor without a
/// file is reported. With the shared layer off reuse files are not read at all.
#[test]
fn declared_reuse_and_donors() {
    let t = Tree::new("reuse");
    t.file("moe/vllm/1.0.0/moe_perf.parquet", "x")
        .file(
            "moe/vllm/1.0.0/collection_meta.yaml",
            &meta("collected", &["moe_perf"]),
        )
        .file("moe/vllm/2.0.0/moe_perf.parquet", "x")
        .file("moe/vllm/2.0.0/other_perf.parquet", "x")
        .file(
            "moe/vllm/2.0.0/collection_meta.yaml",
            &meta("collected", &["moe_perf"]),
        )
        .file(
            "moe/vllm/1.0.0/reuse.yaml",
            "reuse:\n- {table: moe_perf, from_version: 2.0.0, reason: r, approved_by: a}\n",
        );
    // the donor dir does not list other_perf, but only the donated table is checked
    let r = t.resolver("1.0.0", true, true).unwrap();
    let listed: Vec<PathBuf> = r
        .sources("moe_perf.parquet")
        .into_iter()
        .map(|s| s.path)
        .collect();
    assert_eq!(
        listed,
        [
            t.path("moe/vllm/1.0.0/moe_perf.parquet"),
            t.path("moe/vllm/2.0.0/moe_perf.parquet")
        ]
    );

    // a donor whose sidecar does not list the donated table
    t.file(
        "moe/vllm/2.0.0/collection_meta.yaml",
        &meta("collected", &["other_perf"]),
    );
    provenance_error(
        t.resolver("1.0.0", true, true),
        "moe/vllm/2.0.0/collection_meta.yaml",
        &["moe_perf"],
    );
    t.file(
        "moe/vllm/2.0.0/collection_meta.yaml",
        &meta("legacy", &["other_perf"]),
    );
    let r = t.resolver("1.0.0", true, true).unwrap();
    assert_eq!(kinds(&r.load_warnings()), [K::UncoveredLegacyTable]);
    t.file(
        "moe/vllm/2.0.0/collection_meta.yaml",
        &meta("collected", &["moe_perf", "other_perf"]),
    );

    // a malformed entry next to a good one; a declared donor that has no file
    t.file(
        "moe/vllm/1.0.0/reuse.yaml",
        "reuse:\n- {table: moe_perf, from_version: 2.0.0, reason: r, approved_by: a}\n- {table: moe_perf, \
         from_version: 3.0.0}\n- {table: gemm_perf, from_version: 2.0.0, reason: r, approved_by: a}\n",
    );
    provenance_error(
        t.resolver("1.0.0", true, true),
        "moe/vllm/1.0.0/reuse.yaml",
        &["entry 1 lacks a non-empty reason, approved_by"],
    );
    let r = t.resolver("1.0.0", true, false).unwrap();
    let w = r.load_warnings();
    assert_eq!(kinds(&w), [K::MalformedReuse, K::MissingDonor], "{w:?}");
    assert_eq!(w[1].table.as_deref(), Some("gemm_perf.parquet"));
    assert_eq!(r.sources("moe_perf.parquet").len(), 2);
    // shared layer off: no channel 2, the reuse file is not read
    let r = t.resolver("1.0.0", false, true).unwrap();
    assert!(r.load_warnings().is_empty());
    assert_eq!(r.sources("moe_perf.parquet").len(), 1);

    // no `reuse:` key at all
    t.file("moe/vllm/1.0.0/reuse.yaml", "schema_version: 1\n");
    provenance_error(
        t.resolver("1.0.0", true, true),
        "reuse.yaml",
        &["no `reuse:` key"],
    );
    assert_eq!(
        kinds(&t.resolver("1.0.0", true, false).unwrap().load_warnings()),
        [K::MalformedReuse]
    );
}

// ---------------------------------------------------------------------------------------------
// Warnings the reference only logs

/// Unparseable version names, legacy markers, unusable dirs and a version fallback are
/// collected as warnings while tables resolve (once each).
#[test]
fn resolution_warnings() {
    let t = Tree::new("warnings");
    let covered = meta("collected", &["gemm_perf"]);
    t.file("gemm/vllm/2.0.0/gemm_perf.parquet", "x")
        .file("gemm/vllm/2.0.0/collection_meta.yaml", &covered)
        .file("gemm/vllm/2.0.0/SHARED_LAYER_REUSE.txt", "0.9.0")
        .file("gemm/vllm/main/gemm_perf.parquet", "x")
        .file("gemm/vllm/1.0.0/gemm_perf.parquet", "x")
        .file("gemm/vllm/1.0.0/INCOMPLETE.txt", "")
        .file("gemm/vllm/0.9.0/gemm_perf.parquet", "x")
        .file("gemm/vllm/0.9.0/INCOMPLETE.txt", "")
        .file("gemm/vllm/0.9.0/collection_meta.yaml", &covered)
        .file(
            "attention/vllm/2.0.0/collection_meta.yaml",
            &meta("collected", &[]),
        )
        .file("attention/vllm/1.0.0/context_attention_perf.parquet", "x");
    let r = t.resolver("2.0.0", true, true).unwrap();
    assert_eq!(kinds(&r.load_warnings()), [K::LegacyMarker]);
    let gemm: Vec<PathBuf> = r
        .sources("gemm_perf.parquet")
        .into_iter()
        .map(|s| s.path)
        .collect();
    assert_eq!(
        gemm,
        [
            t.path("gemm/vllm/2.0.0/gemm_perf.parquet"),
            t.path("gemm/vllm/0.9.0/gemm_perf.parquet")
        ]
    );
    r.sources("gemm_perf.parquet");
    let attn = r.sources("context_attention_perf.parquet");
    assert_eq!(attn.len(), 2);
    assert!(!attn[0].path.exists());
    let w = r.load_warnings();
    assert_eq!(
        kinds(&w),
        [
            K::LegacyMarker,
            K::UnusableDir,
            K::LegacyMarker,
            K::UnparseableVersion,
            K::VersionFallback
        ],
        "{w:#?}"
    );
    assert!(w[0]
        .path
        .as_ref()
        .unwrap()
        .ends_with("gemm/vllm/2.0.0/SHARED_LAYER_REUSE.txt"));
    assert!(w[1].path.as_ref().unwrap().ends_with("gemm/vllm/1.0.0"));
    assert!(
        w[1].message
            .contains("INCOMPLETE.txt and no collection_meta.yaml"),
        "{}",
        w[1].message
    );
    assert!(w[2]
        .path
        .as_ref()
        .unwrap()
        .ends_with("gemm/vllm/0.9.0/INCOMPLETE.txt"));
    assert!(w[3].message.contains("'main'"), "{}", w[3].message);
    assert_eq!(
        w[4].table.as_deref(),
        Some("context_attention_perf.parquet")
    );
    assert!(
        w[4].message
            .starts_with("vllm 2.0.0 has no context_attention_perf.parquet"),
        "{}",
        w[4].message
    );
    assert_eq!(
        w[4].to_string(),
        format!("[version_fallback] {}", w[4].message)
    );

    // an unparseable requested version turns backward fill off, with a warning
    let r = t.resolver("main", true, false).unwrap();
    assert_eq!(r.sources("gemm_perf.parquet").len(), 1);
    assert_eq!(kinds(&r.load_warnings()), [K::UnparseableVersion]);
}

/// Cross-backend fill from a `shared_fallback` manifest entry warns about low-fidelity rows;
/// a `shared` entry does not.
#[test]
fn low_fidelity_cross_backend_rows() {
    let t = Tree::new("lowfi");
    fs::write(
        t.root.join("perf_data_reuse_manifest.yaml"),
        "groups:\n- {op_file: mla_context_module_perf.parquet, kernel_source: default, tier: \
         shared_fallback, frameworks: [trtllm, vllm]}\n- {op_file: gdn_perf.parquet, kernel_source: k, \
         tier: shared, frameworks: [trtllm, vllm]}\n",
    )
    .unwrap();
    t.file("mla/trtllm/1.0/mla_context_module_perf.parquet", "x")
        .file("mla/trtllm/1.0/gdn_perf.parquet", "x")
        .file("mla/vllm/1.0/mla_context_module_perf.parquet", "x")
        .file("mla/vllm/1.0/gdn_perf.parquet", "x");
    let r = t.resolver("1.0", true, false).unwrap();
    assert_eq!(r.sources("gdn_perf.parquet").len(), 2);
    assert!(r.load_warnings().is_empty());
    let s = r.sources("mla_context_module_perf.parquet");
    assert_eq!(s.len(), 2);
    assert!(s[1].accepts(Some("default")) && !s[1].accepts(Some("other")));
    let w = r.load_warnings();
    assert_eq!(kinds(&w), [K::LowFidelityRows]);
    assert!(w[0]
        .path
        .as_ref()
        .unwrap()
        .ends_with("mla/trtllm/1.0/mla_context_module_perf.parquet"));
    assert!(w[0].message.contains("kernel default"), "{}", w[0].message);
}

// ---------------------------------------------------------------------------------------------
// Shipped data

fn version_dirs(data_dir: &Path, backend: &str) -> Vec<String> {
    let mut names = Vec::new();
    for family in fs::read_dir(data_dir).unwrap().flatten() {
        if let Ok(versions) = fs::read_dir(family.path().join(backend)) {
            names.extend(
                versions
                    .flatten()
                    .map(|v| v.file_name().to_string_lossy().into_owned()),
            );
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The shipped subset passes strict provenance for every system, backend and version
/// directory it holds (spec 10 §8.6: "the recommended subset passes strict mode").
#[test]
fn shipped_data_passes_strict_provenance() {
    let root = shipped_root();
    let mut checked = 0;
    for system in ["h200_sxm", "b200_sxm", "h100_sxm"] {
        let spec = SystemSpec::load(&root, system).unwrap();
        for backend in [Backend::Vllm, Backend::Sglang, Backend::Trtllm] {
            for version in version_dirs(&spec.data_dir, backend.as_str()) {
                let r =
                    SourceResolver::with_strict_provenance(&spec, backend, &version, true, true)
                        .unwrap_or_else(|e| panic!("{system} {backend:?} {version}: {e}"));
                let construction: Vec<LoadWarning> = r.load_warnings();
                assert!(
                    construction.is_empty(),
                    "{system} {backend:?} {version}: {construction:#?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "{checked}");
}

/// On the shipped data the reference's low-fidelity warning fires for vLLM's MLA module
/// tables (filled from trtllm `default` rows, spec 10 §8.5) and reaches the engine.
#[test]
fn shipped_mla_module_fill_is_low_fidelity() {
    let id = "mla/DeepSeek-V3/h200_sxm/vllm/tp8-pp1-dp1-mtp1-ep8";
    let goldens: Value = serde_json::from_str(
        &fs::read_to_string(shipped_root().join("../../goldens/mla.json")).unwrap(),
    )
    .unwrap();
    let case = goldens["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap();
    let spec = json!({"schema_version": case["resolved"]["spec_schema_version"], "engine": case["resolved"]["engine"],
        "context_ops": case["spec_ops"]["context"], "generation_ops": case["spec_ops"]["generation"]});
    let engine = Engine::from_spec(
        EngineSpec::from_json(&spec.to_string()).unwrap(),
        Some(&shipped_root()),
    )
    .unwrap();
    engine.prefill_latency_ms(1, 1024, 0).unwrap();
    engine.decode_step_latency_ms(8, 1024, 64, 1.0).unwrap();
    let w = engine.load_warnings();
    let low: Vec<&LoadWarning> = w.iter().filter(|w| w.kind == K::LowFidelityRows).collect();
    let tables: Vec<&str> = low.iter().filter_map(|w| w.table.as_deref()).collect();
    assert!(
        tables.contains(&"mla_context_module_perf.parquet"),
        "{w:#?}"
    );
    assert!(
        tables.contains(&"mla_generation_module_perf.parquet"),
        "{w:#?}"
    );
    assert!(low.iter().all(|w| w
        .path
        .as_ref()
        .unwrap()
        .to_string_lossy()
        .contains("mla/trtllm/1.3.0rc20")));
}

// ---------------------------------------------------------------------------------------------
// Engines

/// A systems root holding h200_sxm.yaml and the vLLM 0.24.0 GEMM table, with a sidecar.
fn gemm_tree(tag: &str, sidecar: &str, parquet: Option<&[u8]>) -> (Tree, PathBuf) {
    let t = Tree::new(tag);
    let shipped = shipped_root();
    fs::copy(shipped.join("h200_sxm.yaml"), t.root.join("h200_sxm.yaml")).unwrap();
    let dir = t.root.join("data/h200_sxm/gemm/vllm/0.24.0");
    fs::create_dir_all(&dir).unwrap();
    match parquet {
        Some(bytes) => fs::write(dir.join("gemm_perf.parquet"), bytes).unwrap(),
        None => {
            fs::copy(
                shipped.join("data/h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"),
                dir.join("gemm_perf.parquet"),
            )
            .unwrap();
        }
    }
    fs::write(dir.join("collection_meta.yaml"), sidecar).unwrap();
    (t, dir)
}

/// An engine spec with one GEMM in each phase, on a given systems root.
fn gemm_spec(root: &Path, strict: bool) -> EngineSpec {
    let gemm = |name: &str| {
        json!({"Gemm": {"name": name, "scale_factor": 1.0, "n": 5120, "k": 5120, "quant_mode": "bfloat16",
            "scale_num_tokens": 1, "low_precision_input": false, "seq_split": 1, "below_grid_sol": false}})
    };
    let spec = json!({
        "schema_version": aic_core::spec::SPEC_SCHEMA_VERSION,
        "engine": {"model_name": "m", "system_name": "h200_sxm", "backend": "vllm", "backend_version": "0.24.0",
            "systems_path": root.to_string_lossy(), "strict_provenance": strict},
        "context_ops": [gemm("context_qkv_gemm")],
        "generation_ops": [gemm("generation_qkv_gemm")],
    });
    EngineSpec::from_json(&spec.to_string()).unwrap()
}

/// `strict_provenance` in the spec reaches the loader: an uncovered table fails the engine
/// build with a typed error; the same data builds non-strictly; a malformed sidecar is a
/// warning readable from the engine.
#[test]
fn engine_strict_flag_and_warnings() {
    let (t, _) = gemm_tree("engine", &meta("collected", &["gemm_perf"]), None);
    let ok = Engine::from_spec(gemm_spec(&t.root, true), None).unwrap();
    assert!(ok.database().resolver.strict_provenance());
    assert!(ok.load_warnings().is_empty());
    assert!(ok.prefill_latency_ms(1, 1024, 0).unwrap() > 0.0);

    let (t, _) = gemm_tree("engine_uncovered", &meta("collected", &["moe_perf"]), None);
    let err = Engine::from_spec(gemm_spec(&t.root, true), None).unwrap_err();
    assert!(matches!(err, AicError::Provenance { .. }), "{err:?}");
    assert!(err.to_string().contains("does not list gemm_perf"), "{err}");
    let lax = Engine::from_spec(gemm_spec(&t.root, false), None).unwrap();
    assert!(lax.load_warnings().is_empty());
    assert!(lax.prefill_latency_ms(1, 1024, 0).unwrap() > 0.0);

    let (t, _) = gemm_tree("engine_malformed", "provenance: [x]\n", None);
    assert!(matches!(
        Engine::from_spec(gemm_spec(&t.root, true), None),
        Err(AicError::Provenance { .. })
    ));
    let lax = Engine::from_spec(gemm_spec(&t.root, false), None).unwrap();
    let w = lax.load_warnings();
    assert_eq!(kinds(&w), [K::MalformedSidecar]);
    assert!(
        w[0].message.contains("provenance must be a string"),
        "{}",
        w[0].message
    );
}

/// An unresolved Git LFS pointer in place of a table is a perf-database error naming the file
/// and the fix (spec 10 §1), raised when the table is used.
#[test]
fn lfs_pointer_names_file_and_fix() {
    let pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 736281\n";
    let (t, dir) = gemm_tree("lfs", &meta("collected", &["gemm_perf"]), Some(pointer));
    let engine = Engine::from_spec(gemm_spec(&t.root, false), None).unwrap();
    let err = engine.prefill_latency_ms(1, 1024, 0).unwrap_err();
    assert_eq!(err.class(), ErrorClass::PerfDataNotAvailable);
    match &err {
        AicError::DataFile { path, message } => {
            assert_eq!(path, &dir.join("gemm_perf.parquet"));
            assert!(
                message.contains("Git LFS pointer") && message.contains("git lfs pull"),
                "{message}"
            );
        }
        other => panic!("expected a data-file error, got {other:?}"),
    }
}
