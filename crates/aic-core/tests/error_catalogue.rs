//! The bad-input catalogue of the core (issue 8): every bad input a caller can hand the engine
//! (spec bytes, system descriptions, perf tables, estimate arguments) is a case here, run for
//! real against the shipped data or a private copy with one file broken. Each case checks
//! that the input gives a typed error (not a panic, not a number), of the expected variant and
//! exception family, whose message contains the expected fragment.
//!
//! `docs/errors.md` lists the same cases with the full message each one gets; the test
//! `doc_lists_exactly_these_cases` fails when the doc and the cases differ (regenerate the
//! table with `AIC_BLESS=1 cargo test -p aic-core --test error_catalogue`).

#[path = "error_catalogue/doc_table.rs"]
mod doc_table;
#[path = "error_catalogue/fixtures.rs"]
mod fixtures;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use aic_core::data::parquet::RawTable;
use aic_core::data::system::SystemSpec;
use aic_core::data::versions::resolve_backend_version;
use aic_core::fpm::FpmError;
use aic_core::serving::ServingError;
use aic_core::spec::{Op, SPEC_MAGIC};
use aic_core::{AicError, Backend, BatchKind, Engine, EngineSpec, ErrorClass, RunMode};
use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray};
use serde_json::{json, Value};

use fixtures::*;

/// The typed error of one layer of the core: `AicError` (spec, data, lookups, engine) or the
/// error of a layer above it that wraps it (`FpmError`, `ServingError`).
trait LayerError: std::fmt::Display + std::fmt::Debug {
    /// The type's name as the doc shows it.
    const TYPE: &'static str;
    /// The exception family.
    fn class(&self) -> ErrorClass;
}

impl LayerError for AicError {
    const TYPE: &'static str = "AicError";
    fn class(&self) -> ErrorClass {
        AicError::class(self)
    }
}

impl LayerError for FpmError {
    const TYPE: &'static str = "FpmError";
    fn class(&self) -> ErrorClass {
        FpmError::class(self)
    }
}

impl LayerError for ServingError {
    const TYPE: &'static str = "ServingError";
    fn class(&self) -> ErrorClass {
        ServingError::class(self)
    }
}

/// One bad input and what it must produce; `E` is the error type of the layer it calls.
struct Case<E = AicError> {
    /// Stable id, the first column of the doc table.
    id: &'static str,
    /// The bad input, as the doc describes it.
    input: &'static str,
    /// The variant of `E` expected.
    variant: &'static str,
    /// The exception family expected.
    class: ErrorClass,
    /// A part of the message that says what is wrong (and, where it applies, what fixes it).
    fragment: &'static str,
    /// Feeds the input to the engine; must return the error.
    run: fn() -> Result<(), E>,
}

/// The variant name of an error (`WireFormat`, `SchemaVersion`, ...), from its `Debug` form.
fn variant_name(e: &impl std::fmt::Debug) -> String {
    let debug = format!("{e:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The Python exception a class maps to (see `crates/aic-ffi/src/errors.rs`).
fn python_class(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::PerfDataNotAvailable => "PerfDataNotAvailableError",
        ErrorClass::EmpiricalNotImplemented => "EmpiricalNotImplementedError",
        ErrorClass::MissingSystemFlops => "MissingSystemFlopsError",
        ErrorClass::Value => "ValueError",
    }
}

fn ignore<T, E>(r: Result<T, E>) -> Result<(), E> {
    r.map(|_| ())
}

fn spec_from_value(value: &Value) -> aic_core::Result<()> {
    ignore(EngineSpec::from_bytes(value.to_string().as_bytes()))
}

fn engine_from_value(value: &Value) -> aic_core::Result<Engine> {
    Engine::from_spec_bytes(value.to_string().as_bytes(), Some(&shipped_systems()))
}

fn shipped_engine() -> Engine {
    Engine::from_spec(example_spec(), Some(&shipped_systems())).expect("example engine builds")
}

/// Prefill on a copy of the shipped data whose GEMM table is replaced by `bytes`.
fn prefill_with_gemm_table(case: &str, bytes: &[u8], shared_layer: bool) -> aic_core::Result<()> {
    let root = ShadowRoot::new(case);
    root.replace(GEMM_TABLE, bytes);
    let spec = if shared_layer {
        example_spec()
    } else {
        example_spec_without_shared_layer()
    };
    ignore(root.engine(spec)?.prefill_latency_ms(1, 128, 0))
}

/// A corrupt parquet file the fuzzer found, kept next to this test as a regression input.
fn regression_file(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/error_catalogue")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// An engine on a copy of the shipped data whose `h200_sxm.yaml` is `text`.
fn engine_with_system_yaml(case: &str, text: &str) -> aic_core::Result<()> {
    let root = ShadowRoot::new(case);
    root.replace("h200_sxm.yaml", text.as_bytes());
    ignore(root.engine(example_spec()))
}

/// The shipped h200 YAML with one line replaced.
fn h200_yaml_with(from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(shipped_systems().join("h200_sxm.yaml")).unwrap();
    assert!(text.contains(from), "h200_sxm.yaml has no {from:?}");
    text.replacen(from, to, 1)
}

/// A binary spec whose first context op is a `Fallback` nested `depth` deep (built byte by
/// byte: encoding such a spec through serde would itself recurse that deep).
fn deeply_nested_binary_spec(depth: usize) -> Vec<u8> {
    let engine_json = serde_json::to_string(&example_spec().engine).unwrap();
    let mut out = Vec::new();
    out.extend_from_slice(SPEC_MAGIC);
    out.extend_from_slice(&15u32.to_le_bytes());
    out.extend_from_slice(&(engine_json.len() as u64).to_le_bytes());
    out.extend_from_slice(engine_json.as_bytes());
    out.extend_from_slice(&1u64.to_le_bytes()); // one context op
    for _ in 0..depth {
        out.extend_from_slice(&16u32.to_le_bytes()); // Op::Fallback
        out.extend_from_slice(&0u64.to_le_bytes()); // empty name
    }
    out.extend_from_slice(&5u32.to_le_bytes()); // Op::P2P leaf
    out.extend_from_slice(&1u64.to_le_bytes());
    out.push(b'p');
    out.extend_from_slice(&0f64.to_le_bytes());
    for v in [1u32, 8, 1] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for _ in 0..depth {
        out.extend_from_slice(&0u64.to_le_bytes()); // empty fallback chain
    }
    out.extend_from_slice(&0u64.to_le_bytes()); // no generation ops
    out
}

/// The example spec with the scale factor of its first GEMM set to `value`.
fn spec_with_gemm_scale(value: f64) -> EngineSpec {
    let mut spec = example_spec();
    let gemm = spec
        .context_ops
        .iter_mut()
        .find_map(|op| match op {
            Op::Gemm(g) => Some(g),
            _ => None,
        })
        .expect("example spec has a GEMM");
    gemm.scale_factor = value;
    spec
}

/// A one-op list holding a GLM-5 DSA op (`DsaContext` / `DsaGeneration`) with `extra` fields
/// replaced.
fn dsa_ops(variant: &str, extra: Value) -> String {
    let mut op = json!({
        "name": "attention", "scale_factor": 1.0, "num_heads": 8, "kv_cache_dtype": "fp8",
        "fmha_quant_mode": "bfloat16", "gemm_quant_mode": "bfloat16",
        "architecture": "GlmMoeDsaForCausalLM", "index_topk": 2048
    });
    for (k, v) in extra.as_object().expect("object of fields") {
        op[k] = v.clone();
    }
    json!([{ variant: op }]).to_string()
}

/// The example engine moved to another system / backend / version, in a database mode.
fn dsa_engine(system: &str, backend: &str, version: &str, mode: &str) -> aic_core::Result<Engine> {
    let mut spec = example_spec_value();
    spec["engine"]["system_name"] = json!(system);
    spec["engine"]["backend"] = json!(backend);
    spec["engine"]["backend_version"] = json!(version);
    spec["engine"]["database_mode"] = json!(mode);
    engine_from_value(&spec)
}

/// A one-op list holding a DeepSeek-V4-Flash tp-8 attention op (`Dsv4Context` /
/// `Dsv4Generation`) or an `Mhc` op, with `extra` fields replaced.
fn dsv4_ops(variant: &str, extra: Value) -> String {
    let mut op = if variant == "Mhc" {
        json!({
            "name": "mhc", "scale_factor": 1.0, "op": "pre", "hc_mult": 4, "hidden_size": 4096,
            "architecture": "DeepseekV4ForCausalLM"
        })
    } else {
        json!({
            "name": "attention", "scale_factor": 1.0, "attn_kind": "Csa", "num_heads": 8, "native_heads": 64,
            "tp_size": 8, "kv_cache_dtype": "fp8", "fmha_quant_mode": "bfloat16", "gemm_quant_mode": "fp8_block",
            "architecture": "DeepseekV4ForCausalLM", "window_size": 128, "hidden_size": 4096, "q_lora_rank": 1024,
            "index_topk": 512, "o_groups": 1
        })
    };
    for (k, v) in extra.as_object().expect("object of fields") {
        op[k] = v.clone();
    }
    json!([{ variant: op }]).to_string()
}

fn cases() -> Vec<Case> {
    vec![
        // ---- spec bytes -------------------------------------------------------------------
        Case {
            id: "spec-empty-bytes",
            input: "zero-byte spec",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "not an aic engine spec",
            run: || ignore(EngineSpec::from_bytes(b"")),
        },
        Case {
            id: "spec-garbage-bytes",
            input: "bytes that are neither binary spec nor JSON",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "not an aic engine spec: expected the binary form",
            run: || ignore(EngineSpec::from_bytes(b"\x00\x01garbage")),
        },
        Case {
            id: "spec-json-truncated",
            input: "spec JSON cut in half",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "invalid spec JSON: EOF while parsing",
            run: || {
                let text = example_spec_json();
                ignore(EngineSpec::from_bytes(&text.as_bytes()[..text.len() / 2]))
            },
        },
        Case {
            id: "spec-json-not-utf8",
            input: "spec JSON with an invalid UTF-8 byte",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "spec JSON is not UTF-8",
            run: || ignore(EngineSpec::from_bytes(b"{\"schema_version\": \xff}")),
        },
        Case {
            id: "spec-json-other-schema",
            input: "spec JSON with `schema_version` 14",
            variant: "SchemaVersion",
            class: ErrorClass::Value,
            fragment: "unsupported schema version for EngineSpec: got 14, expected 15",
            run: || {
                let mut v = example_spec_value();
                v["schema_version"] = json!(14);
                spec_from_value(&v)
            },
        },
        Case {
            id: "spec-binary-other-schema",
            input: "binary spec whose header says schema 14",
            variant: "SchemaVersion",
            class: ErrorClass::Value,
            fragment: "got 14, expected 15",
            run: || {
                let mut bytes = example_spec().to_bytes();
                bytes[8..12].copy_from_slice(&14u32.to_le_bytes());
                ignore(EngineSpec::from_bytes(&bytes))
            },
        },
        Case {
            id: "spec-binary-header-only",
            input: "binary spec cut inside the schema version",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "truncated spec: 2 bytes after the header",
            run: || {
                let bytes = example_spec().to_bytes();
                ignore(EngineSpec::from_bytes(&bytes[..10]))
            },
        },
        Case {
            id: "spec-binary-truncated",
            input: "binary spec cut in half",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "corrupt or truncated spec payload",
            run: || {
                let bytes = example_spec().to_bytes();
                ignore(EngineSpec::from_bytes(&bytes[..bytes.len() / 2]))
            },
        },
        Case {
            id: "spec-binary-trailing-bytes",
            input: "binary spec followed by 4 extra bytes",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "4 unexpected bytes after the spec payload",
            run: || {
                let mut bytes = example_spec().to_bytes();
                bytes.extend_from_slice(b"junk");
                ignore(EngineSpec::from_bytes(&bytes))
            },
        },
        Case {
            id: "spec-deep-nesting",
            input: "binary spec with a `Fallback` op nested 100 000 deep",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "nest deeper than 16 levels",
            run: || ignore(EngineSpec::from_bytes(&deeply_nested_binary_spec(100_000))),
        },
        Case {
            id: "spec-unknown-backend",
            input: "spec with `backend: \"tensorrt\"`",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "unknown variant `tensorrt`, expected one of `trtllm`, `sglang`, `vllm`",
            run: || {
                let mut v = example_spec_value();
                v["engine"]["backend"] = json!("tensorrt");
                spec_from_value(&v)
            },
        },
        Case {
            id: "spec-unknown-op",
            input: "spec with an op kind the engine does not know (`Conv2d`)",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "unknown variant `Conv2d`",
            run: || {
                let mut v = example_spec_value();
                v["context_ops"][0] = json!({"Conv2d": {"name": "conv"}});
                spec_from_value(&v)
            },
        },
        Case {
            id: "spec-missing-field",
            input: "spec without `engine.system_name`",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "missing field `system_name`",
            run: || {
                let mut v = example_spec_value();
                v["engine"].as_object_mut().unwrap().remove("system_name");
                spec_from_value(&v)
            },
        },
        Case {
            id: "spec-negative-size",
            input: "spec whose GEMM has `n: -1`",
            variant: "WireFormat",
            class: ErrorClass::Value,
            fragment: "invalid value: integer `-1`, expected u32",
            run: || {
                let mut v = example_spec_value();
                let gemm = v["context_ops"].as_array_mut().unwrap().iter_mut().find(|o| o.get("Gemm").is_some()).unwrap();
                gemm["Gemm"]["n"] = json!(-1);
                spec_from_value(&v)
            },
        },
        Case {
            id: "spec-negative-scale-factor",
            input: "spec whose GEMM has `scale_factor: -1.0`",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "scale_factor must be a finite number >= 0, got -1",
            run: || ignore(Engine::from_spec(spec_with_gemm_scale(-1.0), Some(&shipped_systems()))),
        },
        Case {
            id: "spec-nan-scale-factor",
            input: "binary spec whose GEMM has a NaN `scale_factor`",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "scale_factor must be a finite number >= 0, got NaN",
            run: || ignore(Engine::from_spec_bytes(&spec_with_gemm_scale(f64::NAN).to_bytes(), Some(&shipped_systems()))),
        },
        Case {
            id: "spec-no-backend-version",
            input: "spec with `backend_version: null`",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "backend_version is required",
            run: || {
                let mut v = example_spec_value();
                v["engine"]["backend_version"] = Value::Null;
                ignore(engine_from_value(&v))
            },
        },
        Case {
            id: "spec-unknown-backend-version",
            input: "spec for vLLM `9.9.9`, a version without data",
            variant: "Value",
            class: ErrorClass::Value,
            fragment: "backend version '9.9.9' has no data for vllm on h200_sxm (versions with data: ",
            run: || {
                let mut v = example_spec_value();
                v["engine"]["backend_version"] = json!("9.9.9");
                ignore(engine_from_value(&v))
            },
        },
        Case {
            id: "spec-system-without-perf-data",
            input: "spec for `l4` (a system shipped as a hardware description only) with vLLM `0.24.0`",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "perf data directory not found in either the legacy layout (systems/data/l4/vllm/0.24.0)",
            run: || {
                let mut v = example_spec_value();
                v["engine"]["system_name"] = json!("l4");
                v["engine"]["backend_version"] = json!("0.24.0");
                let err = engine_from_value(&v).unwrap_err();
                assert!(err.to_string().contains("system 'l4' ships no vllm perf data"), "{err}");
                Err(err)
            },
        },
        Case {
            id: "spec-null-version-data-less-system",
            input: "spec for `a100_pcie` as compiled with no version (the system has no perf data, so none resolves)",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "backend_version is required to load the perf database: system 'a100_pcie' ships no vllm perf data",
            run: || {
                let mut v = example_spec_value();
                v["engine"]["system_name"] = json!("a100_pcie");
                v["engine"]["backend_version"] = json!(null);
                ignore(engine_from_value(&v))
            },
        },
        Case {
            id: "spec-unknown-system",
            input: "spec for system `h300_sxm`",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "unknown system 'h300_sxm'",
            run: || {
                let mut v = example_spec_value();
                v["engine"]["system_name"] = json!("h300_sxm");
                let err = engine_from_value(&v).unwrap_err();
                assert!(err.to_string().contains("valid systems: [a100_pcie, a100_sxm, a30, b200_sxm, b300_sxm, b60, gb200, gb300, h100_pcie, h100_sxm, h200_sxm, l4, l40s, rtx_pro_6000_server]"), "{err}");
                Err(err)
            },
        },
        Case {
            id: "spec-unknown-transfer-kind",
            input: "spec whose `transfer_policy` names `xbogus`",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "engine.transfer_policy: unknown transfer kind/preset 'xbogus'; valid kinds: xop, xprofile, xquant, xshape; presets: aggressive, balanced, conservative, off",
            run: || {
                let mut v = example_spec_value();
                v["engine"]["transfer_policy"] = json!(["xshape", "xbogus"]);
                ignore(engine_from_value(&v))
            },
        },
        Case {
            id: "spec-missing-systems-folder",
            input: "spec whose `systems_path` does not exist",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "does not exist or is not a folder; pass the folder that holds h200_sxm.yaml",
            run: || {
                let mut v = example_spec_value();
                v["engine"]["systems_path"] = json!(scratch_base().join("spec-missing-systems-folder/nowhere"));
                ignore(engine_from_value(&v))
            },
        },
        Case {
            id: "spec-file-missing",
            input: "`Engine::from_spec_file` on a path that does not exist",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "cannot read spec file: No such file or directory",
            run: || ignore(Engine::from_spec_file(&scratch_base().join("spec-file-missing/nowhere.json"), None)),
        },
        Case {
            id: "spec-file-not-regular",
            input: "`Engine::from_spec_file` on a device (`/dev/zero`), a FIFO or a folder",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "cannot read spec file: the path is not a regular file (a device, FIFO or socket)",
            run: || ignore(Engine::from_spec_file(std::path::Path::new("/dev/zero"), None)),
        },
        Case {
            id: "spec-file-too-large",
            input: "`Engine::from_spec_file` on a file over 64 MiB",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "bytes is more than the 67108864-byte limit for a spec",
            run: || {
                let dir = scratch_base().join("spec-file-too-large");
                std::fs::create_dir_all(&dir).unwrap();
                let path = dir.join("huge.json");
                std::fs::File::create(&path).unwrap().set_len((64 << 20) + 1).unwrap();
                ignore(Engine::from_spec_file(&path, None))
            },
        },
        Case {
            id: "batch-too-many-threads",
            input: "`estimate_batch` with `threads` above four per core (and above 64)",
            variant: "Value",
            class: ErrorClass::Value,
            fragment: "threads must be at most",
            run: || {
                let engine = shipped_engine();
                ignore(engine.estimate_batch(aic_core::BatchKind::Decode, &[1], &[128], &[2], Some(1 << 20)))
            },
        },
        // ---- system descriptions -----------------------------------------------------------
        Case {
            id: "system-yaml-malformed",
            input: "`h200_sxm.yaml` that is not YAML (a tab in the indentation)",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "h200_sxm.yaml: ",
            run: || engine_with_system_yaml("system-yaml-malformed", "data_dir: data/h200_sxm\ngpu:\n\tmem_bw: 1\n"),
        },
        Case {
            id: "system-yaml-empty",
            input: "zero-byte `h200_sxm.yaml`",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "h200_sxm.yaml: ",
            run: || engine_with_system_yaml("system-yaml-empty", ""),
        },
        Case {
            id: "system-yaml-missing-field",
            input: "`h200_sxm.yaml` without `gpu.mem_bw`",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "missing field `mem_bw`",
            run: || engine_with_system_yaml("system-yaml-missing-field", &h200_yaml_with("  mem_bw: 4800000000000\n", "")),
        },
        Case {
            id: "system-yaml-wrong-type",
            input: "`h200_sxm.yaml` with `mem_bw: fast`",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "invalid type: string \"fast\"",
            run: || engine_with_system_yaml("system-yaml-wrong-type", &h200_yaml_with("mem_bw: 4800000000000", "mem_bw: fast")),
        },
        Case {
            id: "system-yaml-zero-bandwidth",
            input: "`h200_sxm.yaml` with `mem_bw: 0`",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "gpu.mem_bw must be a finite number > 0, got 0; correct it in the system YAML",
            run: || engine_with_system_yaml("system-yaml-zero-bandwidth", &h200_yaml_with("mem_bw: 4800000000000", "mem_bw: 0")),
        },
        Case {
            id: "system-yaml-nan-latency",
            input: "`h200_sxm.yaml` with `p2p_latency: .nan`",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "node.p2p_latency must be a finite number >= 0, got NaN",
            run: || engine_with_system_yaml("system-yaml-nan-latency", &h200_yaml_with("p2p_latency: 1.0e-05", "p2p_latency: .nan")),
        },
        Case {
            id: "system-yaml-no-gpus",
            input: "system YAML text with `num_gpus_per_node: 0`",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "node.num_gpus_per_node must be at least 1, got 0",
            run: || {
                let text = h200_yaml_with("num_gpus_per_node: 8", "num_gpus_per_node: 0");
                ignore(SystemSpec::from_yaml_str(&shipped_systems(), "h200_sxm", &text))
            },
        },
        Case {
            id: "versions-file-malformed",
            input: "`query_versions.yaml` that is not YAML, when resolving a version",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "query_versions.yaml: ",
            run: || {
                let root = ShadowRoot::new("versions-file-malformed");
                root.replace("query_versions.yaml", b"systems: [unclosed\n");
                let system = SystemSpec::load(&root.root, "h200_sxm")?;
                ignore(resolve_backend_version(&root.root, &system, Backend::Vllm, None))
            },
        },
        Case {
            id: "reuse-manifest-malformed",
            input: "`perf_data_reuse_manifest.yaml` that is not YAML (shared layer on)",
            variant: "System",
            class: ErrorClass::Value,
            fragment: "perf_data_reuse_manifest.yaml: ",
            run: || {
                let root = ShadowRoot::new("reuse-manifest-malformed");
                root.replace("perf_data_reuse_manifest.yaml", b"entries: [unclosed\n");
                ignore(root.engine(example_spec()))
            },
        },
        // ---- perf tables -------------------------------------------------------------------
        Case {
            id: "table-missing",
            input: "the spec's GEMM table deleted (shared layer off)",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "no GEMM rows loaded from 1 source(s)",
            run: || {
                let root = ShadowRoot::new("table-missing");
                root.remove(GEMM_TABLE);
                ignore(root.engine(example_spec_without_shared_layer())?.prefill_latency_ms(1, 128, 0))
            },
        },
        Case {
            id: "table-lfs-pointer",
            input: "GEMM table that is an unresolved Git LFS pointer",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "unresolved Git LFS pointer, not parquet data; run `git lfs pull`",
            run: || {
                let pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 4096\n";
                prefill_with_gemm_table("table-lfs-pointer", pointer, true)
            },
        },
        Case {
            id: "table-zero-bytes",
            input: "zero-byte GEMM table",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "empty file (0 bytes)",
            run: || prefill_with_gemm_table("table-zero-bytes", b"", true),
        },
        Case {
            id: "table-not-parquet",
            input: "GEMM table that is a CSV file",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "not a parquet file (the file does not start with the PAR1 magic)",
            run: || prefill_with_gemm_table("table-not-parquet", b"m,n,k,latency\n1,2,3,0.5\n", true),
        },
        Case {
            id: "table-corrupt-parquet",
            input: "GEMM table with the parquet magic around garbage",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "corrupt parquet footer: the footer claims ",
            run: || prefill_with_gemm_table("table-corrupt-parquet", b"PAR1 this is not a parquet body PAR1", true),
        },
        Case {
            id: "table-truncated-parquet",
            input: "GEMM table cut in half",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "corrupt parquet footer: the file does not end with the PAR1 magic",
            run: || {
                let full = std::fs::read(shipped_systems().join(GEMM_TABLE)).unwrap();
                prefill_with_gemm_table("table-truncated-parquet", &full[..full.len() / 2], true)
            },
        },
        Case {
            id: "table-missing-column",
            input: "GEMM table without a `latency` column",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "parquet column \"latency\" missing (have: [\"gemm_dtype\", \"m\", \"n\", \"k\"])",
            run: || {
                let bytes = parquet_bytes(vec![
                    ("gemm_dtype", Arc::new(StringArray::from(vec!["bfloat16"])) as ArrayRef),
                    ("m", Arc::new(Int64Array::from(vec![1]))),
                    ("n", Arc::new(Int64Array::from(vec![1024]))),
                    ("k", Arc::new(Int64Array::from(vec![1024]))),
                ]);
                prefill_with_gemm_table("table-missing-column", &bytes, true)
            },
        },
        Case {
            id: "table-mistyped-column",
            input: "GEMM table whose `m` column holds strings",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "parquet column \"m\" has type string, expected integer",
            run: || {
                let bytes = parquet_bytes(vec![
                    ("gemm_dtype", Arc::new(StringArray::from(vec!["bfloat16"])) as ArrayRef),
                    ("m", Arc::new(StringArray::from(vec!["one"]))),
                    ("n", Arc::new(Int64Array::from(vec![1024]))),
                    ("k", Arc::new(Int64Array::from(vec![1024]))),
                    ("latency", Arc::new(Float64Array::from(vec![0.01]))),
                ]);
                prefill_with_gemm_table("table-mistyped-column", &bytes, true)
            },
        },
        Case {
            id: "table-null-latency",
            input: "GEMM table with a null `latency` cell",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "parquet column \"latency\" has a null value at row 3",
            run: || {
                let mut latency = plausible_latencies();
                latency[3] = None;
                prefill_with_gemm_table("table-null-latency", &gemm_table_with_latency(latency), true)
            },
        },
        Case {
            id: "table-nan-latency",
            input: "GEMM table with a NaN `latency`",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "parquet column \"latency\" has the value NaN at row 2, but perf data must be finite and >= 0",
            run: || {
                let mut latency = plausible_latencies();
                latency[2] = Some(f64::NAN);
                prefill_with_gemm_table("table-nan-latency", &gemm_table_with_latency(latency), true)
            },
        },
        Case {
            id: "table-negative-latency",
            input: "GEMM table with `latency` -0.5",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "has the value -0.5 at row 5, but perf data must be finite and >= 0; re-collect or remove that row",
            run: || {
                let mut latency = plausible_latencies();
                latency[5] = Some(-0.5);
                prefill_with_gemm_table("table-negative-latency", &gemm_table_with_latency(latency), true)
            },
        },
        Case {
            id: "table-infinite-power",
            input: "GEMM table with an infinite `power`",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "parquet column \"power\" has the value inf at row 0",
            run: || {
                let bytes = parquet_bytes(vec![
                    ("gemm_dtype", Arc::new(StringArray::from(vec!["bfloat16"])) as ArrayRef),
                    ("m", Arc::new(Int64Array::from(vec![1]))),
                    ("n", Arc::new(Int64Array::from(vec![1024]))),
                    ("k", Arc::new(Int64Array::from(vec![1024]))),
                    ("latency", Arc::new(Float64Array::from(vec![0.01]))),
                    ("power", Arc::new(Float64Array::from(vec![f64::INFINITY]))),
                ]);
                prefill_with_gemm_table("table-infinite-power", &bytes, true)
            },
        },
        Case {
            id: "table-negative-size",
            input: "GEMM table with `m` = -1",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "negative value -1 in integer column \"m\"",
            run: || {
                let bytes = parquet_bytes(vec![
                    ("gemm_dtype", Arc::new(StringArray::from(vec!["bfloat16"])) as ArrayRef),
                    ("m", Arc::new(Int64Array::from(vec![-1]))),
                    ("n", Arc::new(Int64Array::from(vec![1024]))),
                    ("k", Arc::new(Int64Array::from(vec![1024]))),
                    ("latency", Arc::new(Float64Array::from(vec![0.01]))),
                ]);
                prefill_with_gemm_table("table-negative-size", &bytes, true)
            },
        },
        Case {
            id: "table-corrupt-footer",
            input: "GEMM table whose footer puts a column at a negative offset (found by fuzzing; the parquet reader asserted)",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "corrupt parquet footer: column ",
            run: || prefill_with_gemm_table("table-corrupt-footer", &regression_file("negative_column_offset.parquet"), true),
        },
        Case {
            id: "table-reader-panic",
            input: "`RawTable::from_parquet_bytes` on a file whose string page made the parquet reader divide by zero (found by fuzzing); its page headers run past their column chunk, which the page checks now refuse before the reader runs",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "corrupt parquet file: column \"op_name\" has a page of 20 compressed bytes past its chunk's end",
            run: || {
                let bytes = regression_file("byte_array_zero_values.parquet");
                ignore(RawTable::from_parquet_bytes(std::path::Path::new("byte_array_zero_values.parquet"), &bytes, None))
            },
        },
        Case {
            id: "table-schema-claims",
            input: "`RawTable::from_parquet_bytes` on a file whose schema root claims 790 million children (found by fuzzing; the reader would allocate 6 GB and abort)",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "corrupt parquet footer: unknown Thrift type 15",
            run: || {
                let bytes = regression_file("schema_children_overflow.parquet");
                ignore(RawTable::from_parquet_bytes(std::path::Path::new("schema_children_overflow.parquet"), &bytes, None))
            },
        },
        Case {
            id: "table-schema-misread",
            input: "`RawTable::from_parquet_bytes` on a file whose footer hides a 790-million child count from the first pre-check: the root's repetition field is declared a boolean, which the pre-check skipped as zero bytes while the reader reads an integer there (found by fuzzing). aic now reads the schema itself and the reader skips it",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "corrupt parquet footer: ",
            run: || {
                let bytes = regression_file("schema_children_misdeclared.parquet");
                ignore(RawTable::from_parquet_bytes(std::path::Path::new("schema_children_misdeclared.parquet"), &bytes, None))
            },
        },
        Case {
            id: "table-page-claims",
            input: "`RawTable::from_parquet_bytes` on a table whose data page claims 100 MB uncompressed (the reader would allocate it up front)",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "corrupt parquet file: column \"latency\" has a page of 100000000 bytes",
            run: || {
                let bytes = fixtures::table_with_page_size_claim(100_000_000);
                ignore(RawTable::from_parquet_bytes(std::path::Path::new("page_claim.parquet"), &bytes, None))
            },
        },
        Case {
            id: "table-string-expansion",
            input: "`RawTable::from_parquet_bytes` on a 1 MB table whose 600 rows all hold the same 1 MiB string (one dictionary value, run-length codes): 629 MB of text when read row by row",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "corrupt parquet file: its string columns expand to 629160000 bytes of text",
            run: || {
                let bytes = fixtures::table_with_repeated_string(600, 1 << 20);
                ignore(RawTable::from_parquet_bytes(std::path::Path::new("repeated_string.parquet"), &bytes, None))
            },
        },
        Case {
            id: "table-bytes-lfs-pointer",
            input: "`RawTable::from_parquet_bytes` on a Git LFS pointer",
            variant: "DataFile",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "unresolved Git LFS pointer",
            run: || {
                let pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 4096\n";
                ignore(RawTable::from_parquet_bytes(std::path::Path::new("in-memory.parquet"), pointer, None))
            },
        },
        // ---- estimate arguments -------------------------------------------------------------
        Case {
            id: "memory-qwen35-without-gdn-facts",
            input: "KV-cache estimate of a `QWEN35` model whose facts lack the Gated-DeltaNet geometry",
            variant: "Value",
            class: ErrorClass::Value,
            fragment: "KV-cache model for family QWEN35 needs the Gated-DeltaNet facts",
            run: || {
                let spec = example_spec();
                let facts: aic_core::memory::ModelFacts = serde_json::from_value(json!({
                    "architecture": "Qwen3_5ForConditionalGeneration", "family": "QWEN35", "num_layers": 64,
                    "hidden_size": 5120, "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256}))
                .unwrap();
                let system = SystemSpec::load(&shipped_systems(), "h200_sxm")?;
                let request = aic_core::memory::KvCacheRequest::new(8192, 256, aic_core::memory::MemoryFraction::OfTotal(0.9));
                ignore(aic_core::memory::estimate_kv_cache(&spec, &facts, &system, &request))
            },
        },
        Case {
            id: "args-prefix-equals-isl",
            input: "prefill with `prefix` = `isl` = 128",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "isl must be greater than 0 after removing prefix, but got 0",
            run: || ignore(shipped_engine().prefill_latency_ms(1, 128, 128)),
        },
        Case {
            id: "args-isl-zero",
            input: "prefill with `isl` = 0",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "isl must be greater than 0 after removing prefix, but got 0",
            run: || ignore(shipped_engine().prefill_latency_ms(1, 0, 0)),
        },
        Case {
            id: "args-mixed-prefix-exceeds-isl",
            input: "mixed step with `prefix` 200 > `isl` 128",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "isl must be greater than 0 after removing prefix, but got -72",
            run: || ignore(shipped_engine().mixed_step_latency_ms(128, 0, 128, 16, 200, 1.0, 1.0)),
        },
        Case {
            id: "args-batch-zero",
            input: "prefill of a batch of 0 requests",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "batch=0",
            run: || ignore(shipped_engine().prefill_latency_ms(0, 128, 0)),
        },
        Case {
            id: "args-nan-scale",
            input: "mixed step with `seq_imbalance_correction_scale` NaN",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "seq_imbalance_correction_scale must be a finite number (1.0 leaves attention unscaled), got NaN",
            run: || ignore(shipped_engine().mixed_step_latency_ms(128, 4, 128, 16, 0, f64::NAN, 1.0)),
        },
        Case {
            id: "args-infinite-gen-scale",
            input: "decode step with `gen_seq_imbalance_correction_scale` -inf",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "gen_seq_imbalance_correction_scale must be a finite number",
            run: || ignore(shipped_engine().decode_step_latency_ms(8, 128, 16, f64::NEG_INFINITY)),
        },
        Case {
            id: "args-infinite-scale",
            input: "static run with `gen_scale` +inf",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "got inf",
            run: || {
                let run = aic_core::StaticRun { gen_scale: f64::INFINITY, ..aic_core::StaticRun::new(1, 128, 16) };
                ignore(shipped_engine().run_static(&run))
            },
        },
        Case {
            id: "args-overflowing-estimate",
            input: "static run of 2^32 − 1 requests of 2^32 − 1 tokens with `seq_scale` 1e300 (found by the `engine_args` fuzz target)",
            variant: "Value",
            class: ErrorClass::Value,
            fragment: "the context pass overflowed to inf ms",
            run: || {
                let run = aic_core::StaticRun { seq_scale: 1e300, ..aic_core::StaticRun::new(u32::MAX, u32::MAX, 255) };
                ignore(shipped_engine().run_static(&run))
            },
        },
        Case {
            id: "args-run-mode",
            input: "run mode `static_bogus`",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "invalid mode \"static_bogus\"; expected one of \"static\", \"static_ctx\", \"static_gen\"",
            run: || ignore(RunMode::parse("static_bogus")),
        },
        Case {
            id: "args-batch-kind",
            input: "batch estimate kind `prefil`",
            variant: "Value",
            class: ErrorClass::Value,
            fragment: "unknown batch estimate kind \"prefil\"; expected \"prefill\", \"decode\" or \"decode_step\"",
            run: || ignore(BatchKind::parse("prefil")),
        },
        Case {
            id: "args-batch-columns",
            input: "batch estimate with columns of 3, 2 and 3 values",
            variant: "Value",
            class: ErrorClass::Value,
            fragment: "batch columns must have equal lengths, got 3, 2, 3",
            run: || ignore(shipped_engine().estimate_batch(BatchKind::Prefill, &[1, 1, 1], &[128, 128], &[0, 0, 0], Some(1))),
        },
        Case {
            id: "args-batch-threads-zero",
            input: "batch estimate on 0 threads",
            variant: "Value",
            class: ErrorClass::Value,
            fragment: "threads must be at least 1",
            run: || ignore(shipped_engine().estimate_batch(BatchKind::Prefill, &[1], &[128], &[0], Some(0))),
        },
        Case {
            id: "args-batch-bad-point",
            input: "batch estimate whose second point has `prefix` = `isl`",
            variant: "BatchPoint",
            class: ErrorClass::Value,
            fragment: "batch point 1 [1, 128, 128]: invalid engine config: isl must be greater than 0",
            run: || ignore(shipped_engine().estimate_batch(BatchKind::Prefill, &[1, 1], &[128, 128], &[0, 128], Some(1))),
        },
        Case {
            id: "args-ops-json-malformed",
            input: "`evaluate_ops_json` with truncated JSON",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "evaluate_ops_json: invalid op list JSON",
            run: || ignore(shipped_engine().evaluate_ops_json("[{", true, 1, 128, 0, 1.0, None)),
        },
        Case {
            id: "args-missing-flops",
            input: "an nvfp4 GEMM on h200_sxm (no `fp4_tc_flops`)",
            variant: "MissingSystemFlops",
            class: ErrorClass::MissingSystemFlops,
            fragment: "quant mode 'nvfp4' needs 'fp4_tc_flops'",
            run: || {
                let ops = r#"[{"Gemm":{"name":"g","scale_factor":1.0,"n":4096,"k":4096,"quant_mode":"nvfp4","scale_num_tokens":1}}]"#;
                let mut spec = example_spec();
                spec.engine.database_mode = aic_core::DatabaseMode::Sol;
                let engine = Engine::from_spec(spec, Some(&shipped_systems()))?;
                ignore(engine.evaluate_ops_json(ops, true, 1, 128, 0, 1.0, None))
            },
        },
        Case {
            id: "dsa-context-key-missing",
            input: "a `DsaContext` whose (architecture, fmha, kv, gemm) key the DSA table lacks",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "context DSA module data missing for DsaKey { architecture: \"GlmMoeDsaForCausalLM\"",
            run: || {
                let ops = dsa_ops("DsaContext", json!({"gemm_quant_mode": "fp8"}));
                ignore(shipped_engine().evaluate_ops_json(&ops, true, 1, 1024, 0, 1.0, None))
            },
        },
        Case {
            id: "dsa-generation-key-missing",
            input: "a `DsaGeneration` whose key the DSA table lacks",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "generation DSA module data missing for DsaKey {",
            run: || {
                let ops = dsa_ops("DsaGeneration", json!({"gemm_quant_mode": "fp8"}));
                ignore(shipped_engine().evaluate_ops_json(&ops, false, 1, 1024, 0, 1.0, None))
            },
        },
        Case {
            id: "dsa-table-missing",
            input: "every source of the DSA generation table deleted",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "no DSA module rows loaded from 1 source(s)",
            run: || {
                let root = ShadowRoot::new("dsa-table-missing");
                for version in ["vllm/0.24.0", "trtllm/1.3.0rc23", "trtllm/1.3.0rc20"] {
                    root.remove(&format!("data/h200_sxm/sparse_attention/{version}/dsa_generation_module_perf.parquet"));
                }
                let ops = dsa_ops("DsaGeneration", json!({}));
                ignore(root.engine(example_spec())?.evaluate_ops_json(&ops, false, 1, 1024, 0, 1.0, None))
            },
        },
        Case {
            id: "dsa-empirical-no-data",
            input: "a DeepSeek-V3.2 `DsaContext` without a table key, EMPIRICAL mode",
            variant: "EmpiricalNotImplemented",
            class: ErrorClass::EmpiricalNotImplemented,
            fragment: "No empirical utilisation data to estimate this op at query=[16.0, 1024.0, 1.0]",
            run: || {
                let ops = dsa_ops(
                    "DsaContext",
                    json!({"architecture": "DeepseekV32ForCausalLM", "num_heads": 16, "gemm_quant_mode": "fp8"}),
                );
                let engine = dsa_engine("h200_sxm", "vllm", "0.24.0", "EMPIRICAL")?;
                ignore(engine.evaluate_ops_json(&ops, true, 1, 1024, 0, 1.0, None))
            },
        },
        Case {
            id: "dsa-cp-sparse-tables-missing",
            input: "a `DsaContext` with `cp_size` 2 on a database without the CP sparse tables",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "DSA CP modeling needs sparse tables ['mqa', 'topk_last', 'topk_flat'] for GlmMoeDsaForCausalLM (num_heads=8)",
            run: || {
                let ops = dsa_ops("DsaContext", json!({"cp_size": 2}));
                ignore(shipped_engine().evaluate_ops_json(&ops, true, 1, 4096, 0, 1.0, None))
            },
        },
        Case {
            id: "dsa-cp-isl-beyond-grid",
            input: "a `DsaContext` with `cp_size` 4 at an isl beyond the sparse tables (b200 sglang)",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "DSA CP: isl=32768 exceeds the collected sparse-kernel grid (max isl=16384)",
            run: || {
                let ops = dsa_ops("DsaContext", json!({"num_heads": 64, "cp_size": 4}));
                let engine = dsa_engine("b200_sxm", "sglang", "0.5.14", "SILICON")?;
                ignore(engine.evaluate_ops_json(&ops, true, 1, 32768, 0, 1.0, None))
            },
        },
        Case {
            id: "dsa-cp-sol-split",
            input: "the SOL decomposition of a `DsaContext` with `cp_size` 4",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "DSA context SOL_FULL decomposition is not supported for cp_size=4",
            run: || {
                let ops = dsa_ops("DsaContext", json!({"num_heads": 64, "cp_size": 4}));
                ignore(shipped_engine().evaluate_ops_sol_json(&ops, true, 1, 8192, 0, 1.0, None))
            },
        },
        Case {
            id: "mamba2-sol-split",
            input: "the SOL decomposition of a `Mamba2` op (Nemotron-H conv1d kernel)",
            variant: "NoSolDecomposition",
            class: ErrorClass::Value,
            fragment: "no SOL decomposition for op \"context_mamba_conv1d\" (Mamba2",
            run: || {
                let ops = json!([{"Mamba2": {"name": "context_mamba_conv1d", "scale_factor": 23.0,
                    "kernel_source": "causal_conv1d_fn", "phase": "context", "d_model": 2688, "d_state": 128,
                    "d_conv": 4, "nheads": 64, "head_dim": 64, "n_groups": 8, "chunk_size": 128}}])
                .to_string();
                ignore(shipped_engine().evaluate_ops_sol_json(&ops, true, 4, 1000, 0, 1.0, None))
            },
        },
        Case {
            id: "dsv4-context-key-missing",
            input: "a `Dsv4Context` with a bfloat16 KV cache (the DSV4 tables hold fp8 only)",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "DSV4 module data missing for ModuleKey { fmha_quant: \"bfloat16\", kv_quant: \"bfloat16\", gemm_quant: \"fp8_block\" }",
            run: || {
                let ops = dsv4_ops("Dsv4Context", json!({"kv_cache_dtype": "bfloat16"}));
                let engine = dsa_engine("h200_sxm", "sglang", "0.5.14", "SILICON")?;
                ignore(engine.evaluate_ops_json(&ops, true, 1, 1024, 0, 1.0, None))
            },
        },
        Case {
            id: "dsv4-generation-key-missing",
            input: "a `Dsv4Generation` with a bfloat16 KV cache",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "DSV4 module data missing for ModuleKey { fmha_quant: \"\", kv_quant: \"bfloat16\"",
            run: || {
                let ops = dsv4_ops("Dsv4Generation", json!({"kv_cache_dtype": "bfloat16"}));
                let engine = dsa_engine("h200_sxm", "sglang", "0.5.14", "SILICON")?;
                ignore(engine.evaluate_ops_json(&ops, false, 1, 1024, 0, 1.0, None))
            },
        },
        Case {
            id: "dsv4-table-missing",
            input: "a `Dsv4Context` on h200 trtllm 1.3.0rc20 (no DSV4 tables)",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "perf database error: no DSV4 module rows loaded from 1 source(s) (first: systems/data/h200_sxm/trtllm/1.3.0rc20/dsv4_csa_context_module_perf.parquet)",
            run: || {
                let ops = dsv4_ops("Dsv4Context", json!({}));
                let engine = dsa_engine("h200_sxm", "trtllm", "1.3.0rc20", "SILICON")?;
                ignore(engine.evaluate_ops_json(&ops, true, 1, 1024, 0, 1.0, None))
            },
        },
        Case {
            id: "dsv4-empirical-no-data",
            input: "a `Dsv4Context` on h100 trtllm (no DSV4 tables), EMPIRICAL mode",
            variant: "EmpiricalNotImplemented",
            class: ErrorClass::EmpiricalNotImplemented,
            fragment: "No empirical utilisation data to estimate this op at query=[3000.0, 2.0]",
            run: || {
                let ops = dsv4_ops("Dsv4Context", json!({}));
                let engine = dsa_engine("h100_sxm", "trtllm", "1.3.0rc20", "EMPIRICAL")?;
                ignore(engine.evaluate_ops_json(&ops, true, 2, 2000, 1000, 1.0, None))
            },
        },
        Case {
            id: "dsv4-cp-sparse-tables-missing",
            input: "a DeepSeek-V4-Pro CSA `Dsv4Context` with `cp_size` 2 (no paged-MQA rows for 128 heads)",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "DeepSeek-V4 CSA CP modeling needs sparse tables (paged_mqa_logits + csa_topk_calib top_last) at num_heads=128, b=1",
            run: || {
                let ops = dsv4_ops(
                    "Dsv4Context",
                    json!({"num_heads": 16, "native_heads": 128, "hidden_size": 7168, "q_lora_rank": 1536,
                           "index_topk": 1024, "o_groups": 2, "cp_size": 2}),
                );
                let engine = dsa_engine("h200_sxm", "sglang", "0.5.14", "SILICON")?;
                ignore(engine.evaluate_ops_json(&ops, true, 1, 4096, 0, 1.0, None))
            },
        },
        Case {
            id: "mhc-key-missing",
            input: "an `Mhc` op with a hidden size the mHC table lacks",
            variant: "PerfData",
            class: ErrorClass::PerfDataNotAvailable,
            fragment: "MHC module data missing for MhcKey { op_name: \"pre\", hc_mult: 4, hidden_size: 1234 } at systems/data/h200_sxm/sglang/0.5.14",
            run: || {
                let ops = dsv4_ops("Mhc", json!({"hidden_size": 1234}));
                let engine = dsa_engine("h200_sxm", "sglang", "0.5.14", "SILICON")?;
                ignore(engine.evaluate_ops_json(&ops, true, 1, 8, 0, 1.0, None))
            },
        },
        Case {
            id: "args-backend-name",
            input: "backend name `tensorrt`",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "unknown backend \"tensorrt\"; expected one of \"trtllm\", \"sglang\", \"vllm\"",
            run: || ignore(Backend::parse("tensorrt")),
        },
        // ---- memory model -------------------------------------------------------------------
        Case {
            id: "memory-layer-split-missing",
            input: "KV-cache model of a Step-3.7 (`STEP3P7`) model whose facts lack the sliding/global `layer_kv` split",
            variant: "Value",
            class: ErrorClass::Value,
            fragment: "KV-cache model for family STEP3P7 needs the sliding/global layer split",
            run: || {
                let facts: aic_core::memory::ModelFacts = serde_json::from_value(json!({
                    "architecture": "Step3p7FlashForCausalLM", "family": "STEP3P7", "num_layers": 45,
                    "hidden_size": 4096, "num_attention_heads": 64, "num_key_value_heads": 8,
                    "head_dim": 128}))
                .unwrap();
                ignore(aic_core::memory::KvCacheModel::for_model(&facts, aic_core::spec::KvQuant::Bfloat16, 4))
            },
        },
        // ---- hostile inputs, round two (issue 22) --------------------------------------------
        Case {
            id: "spec-op-size-zero",
            input: "spec JSON whose `CustomAllReduce` has `tp_size: 0` (it would price at 0 ms)",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "context_ops[11] (CustomAllReduce \"context_ar_1\"): tp_size must be at least 1, got 0",
            run: || {
                let mut v = example_spec_value();
                v["context_ops"][11]["CustomAllReduce"]["tp_size"] = json!(0);
                spec_from_value(&v)
            },
        },
        Case {
            id: "spec-attention-heads-zero",
            input: "spec JSON whose `ContextAttention` has `n: 0` heads",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "context_ops[3] (ContextAttention \"context_attention\"): n must be at least 1, got 0",
            run: || {
                let mut v = example_spec_value();
                v["context_ops"][3]["ContextAttention"]["n"] = json!(0);
                spec_from_value(&v)
            },
        },
        Case {
            id: "spec-seq-split-zero",
            input: "binary spec whose GEMM has `seq_split: 0`",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "context_ops[2] (Gemm \"context_qkv_gemm\"): seq_split must be at least 1, got 0",
            run: || {
                let mut spec = example_spec();
                let Op::Gemm(g) = &mut spec.context_ops[2] else { panic!("op 2 is the QKV GEMM") };
                g.seq_split = 0;
                ignore(EngineSpec::from_bytes(&spec.to_bytes()))
            },
        },
        Case {
            id: "spec-engine-tp-zero",
            input: "spec JSON whose engine config has `tp_size: 0`",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "engine.tp_size must be at least 1, got 0",
            run: || {
                let mut v = example_spec_value();
                v["engine"]["tp_size"] = json!(0);
                spec_from_value(&v)
            },
        },
        Case {
            id: "evaluate-ops-size-zero",
            input: "`evaluate_ops_json` of an `Nccl` op over `num_gpus: 0`",
            variant: "InvalidConfig",
            class: ErrorClass::Value,
            fragment: "ops[0] (Nccl \"nccl\"): num_gpus must be at least 1, got 0",
            run: || {
                let ops = r#"[{"Nccl":{"name":"nccl","scale_factor":1.0,"hidden_size":4096.0,"num_gpus":0,"dtype":"half","operation":"all_gather"}}]"#;
                ignore(shipped_engine().evaluate_ops_json(ops, true, 1, 128, 0, 1.0, None))
            },
        },
        Case {
            id: "spec-version-empty-folder",
            input: "spec for vLLM `0.30.0` on a systems folder where `gemm/vllm/0.30.0` exists but is empty",
            variant: "Value",
            class: ErrorClass::Value,
            fragment: "backend version '0.30.0' has no data for vllm on h200_sxm: its folders hold no table",
            run: || {
                let shadow = ShadowRoot::new("spec-version-empty-folder");
                std::fs::create_dir_all(shadow.root.join("data/h200_sxm/gemm/vllm/0.30.0")).expect("empty folder");
                let listed = aic_core::data::catalogue::system_catalogue(&shadow.root);
                let h200 = listed.iter().find(|s| s.name == "h200_sxm").expect("h200 listed");
                assert!(!h200.backends[2].versions_with_data.iter().any(|v| v == "0.30.0"), "{h200:?}");
                let mut spec = example_spec();
                spec.engine.backend_version = Some("0.30.0".to_string());
                ignore(shadow.engine(spec))
            },
        },
        Case {
            id: "args-decode-too-many-steps",
            input: "summed decode of `osl` 2^32 − 1 (stride 32): 134 million priced steps, hours of work before the overflow check",
            variant: "Value",
            class: ErrorClass::Value,
            fragment: "the decode phase would price 134217728 steps one by one (osl 4294967295, stride 32)",
            run: || ignore(shipped_engine().decode_latency_ms(1, 128, u32::MAX)),
        },
    ]
}

/// The cases of the forward-pass model, whose calls return `FpmError` (the FPM layer sits
/// above the engine; its error wraps `AicError`).
fn fpm_cases() -> Vec<Case<FpmError>> {
    vec![
        Case {
            id: "fpm-options-unknown",
            input: "FPM options `{\"bucket_cont\": 4}` (a misspelt option name)",
            variant: "OptionsJson",
            class: ErrorClass::Value,
            fragment: "invalid options JSON: unknown field \"bucket_cont\" in options; valid fields: max_observations,",
            run: || ignore(aic_core::fpm::ForwardPassPerfModel::from_regression(Some(r#"{"bucket_cont":4}"#))),
        },
        Case {
            id: "fpm-options-list",
            input: "FPM options given as the JSON list `[64, 5]`",
            variant: "OptionsJson",
            class: ErrorClass::Value,
            fragment: "invalid options JSON: options must be a JSON object, got a list",
            run: || ignore(aic_core::fpm::ForwardPassPerfModel::from_regression(Some("[64, 5]"))),
        },
        Case {
            id: "fpm-counters-misplaced",
            input: "FPM record with `num_decode_requests` at the top level instead of in `scheduled_requests`",
            variant: "Payload",
            class: ErrorClass::Value,
            fragment: "invalid FPM payload: unknown field \"num_decode_requests\" in the FPM record",
            run: || {
                let m = aic_core::fpm::ForwardPassPerfModel::from_regression(None)?;
                ignore(m.estimate_forward_pass_time_ms(r#"{"num_decode_requests":3,"sum_decode_kv_tokens":300}"#))
            },
        },
        Case {
            id: "fpm-wall-time-negative",
            input: "tuning iteration whose record has `wall_time: -1`",
            variant: "InvalidMetrics",
            class: ErrorClass::Value,
            fragment: "invalid forward pass metrics: wall_time must be a finite number of seconds >= 0 (0: not measured), got -1",
            run: || {
                let m = aic_core::fpm::ForwardPassPerfModel::from_regression(None)?;
                m.tune_with_fpms(r#"[[{"wall_time":-1,"scheduled_requests":{"num_decode_requests":1}}]]"#)
            },
        },
    ]
}

/// The cases of the serving level, whose calls return `ServingError` (the serving layer sits
/// above the engine; its error wraps `AicError` as `ServingError::Core`).
fn serving_cases() -> Vec<Case<ServingError>> {
    vec![
        Case {
            id: "serving-request-osl-zero",
            input: "serving request (static) with `osl` 0 (the reference prices it as 1)",
            variant: "Core",
            class: ErrorClass::Value,
            fragment: "osl must be a positive integer (output tokens per request, the first one included), got 0",
            run: || ignore(aic_core::serving::estimate_json(r#"{"mode": "static", "isl": 128, "osl": 0, "batch_size": 1}"#, None)),
        },
        Case {
            id: "serving-request-workers-zero",
            input: "disagg serving request with 0 prefill workers (priced a TTFT and 0 tokens/s/gpu)",
            variant: "Core",
            class: ErrorClass::Value,
            fragment: "prefill_num_workers must be a positive integer (workers of that role), got 0",
            run: || {
                ignore(aic_core::serving::estimate_json(
                    r#"{"mode": "disagg", "isl": 128, "osl": 64, "prefill": {"batch_size": 1, "num_workers": 0},
                        "decode": {"batch_size": 8, "num_workers": 1}}"#,
                    None,
                ))
            },
        },
        Case {
            id: "serving-request-fraction",
            input: "agg serving request with `free_gpu_memory_fraction` 1.5",
            variant: "Core",
            class: ErrorClass::Value,
            fragment: "free_gpu_memory_fraction must be a finite number in (0, 1]",
            run: || {
                ignore(aic_core::serving::estimate_json(
                    r#"{"mode": "agg", "isl": 128, "osl": 64, "batch_size": 8, "free_gpu_memory_fraction": 1.5}"#,
                    None,
                ))
            },
        },
        Case {
            id: "serving-request-short-kv-slot",
            input: "agg serving request with `max_seq_len` 1024 < `isl + osl` 2048",
            variant: "Core",
            class: ErrorClass::Value,
            fragment: "max_seq_len must be at least isl + osl = 2048",
            run: || {
                ignore(aic_core::serving::estimate_json(
                    r#"{"mode": "agg", "isl": 1024, "osl": 1024, "batch_size": 8, "max_seq_len": 1024}"#,
                    None,
                ))
            },
        },
        Case {
            id: "serving-request-nan",
            input: "serving request JSON holding `NaN` (as Python's `json.dumps` writes it)",
            variant: "Core",
            class: ErrorClass::Value,
            fragment: "field nextn_accepted: expected value at line 1 column 58 (NaN and Infinity are not JSON numbers: pass a finite number)",
            run: || ignore(aic_core::serving::estimate_json(r#"{"mode": "agg", "isl": 128, "osl": 64, "nextn_accepted": NaN}"#, None)),
        },
        Case {
            id: "sweep-request-latency-negative",
            input: "sweep request with `request_latency` -1",
            variant: "Core",
            class: ErrorClass::Value,
            fragment: "request_latency must be a finite number > 0 (the end-to-end latency target in ms), got -1",
            run: || {
                ignore(aic_core::serving::sweep::sweep_json(
                    r#"{"total_gpus": 8, "isl": 1024, "osl": 128, "ttft": 2000.0, "tpot": 30.0, "request_latency": -1.0, "agg": []}"#,
                    None,
                ))
            },
        },
        Case {
            id: "sweep-request-nan",
            input: "sweep request JSON whose `ttft` is `NaN` (the message named no field)",
            variant: "Core",
            class: ErrorClass::Value,
            fragment: "invalid sweep request JSON: field ttft: expected value",
            run: || {
                ignore(aic_core::serving::sweep::sweep_json(
                    r#"{"total_gpus": 8, "isl": 1024, "osl": 128, "ttft": NaN, "tpot": 30.0, "agg": []}"#,
                    None,
                ))
            },
        },
        Case {
            id: "sweep-request-prefix-covers-isl",
            input: "sweep request with `prefix` equal to `isl` (every candidate infeasible: \"no feasible configuration\")",
            variant: "Core",
            class: ErrorClass::Value,
            fragment: "prefix must be less than isl",
            run: || {
                ignore(aic_core::serving::sweep::sweep_json(
                    r#"{"total_gpus": 8, "isl": 1024, "osl": 128, "prefix": 1024, "ttft": 2000.0, "tpot": 30.0, "agg": []}"#,
                    None,
                ))
            },
        },
        Case {
            id: "sweep-request-top-n-zero",
            input: "sweep request with `top_n` 0 (returned no configuration)",
            variant: "Core",
            class: ErrorClass::Value,
            fragment: "top_n must be a positive integer (best configurations kept per experiment), got 0",
            run: || {
                ignore(aic_core::serving::sweep::sweep_json(
                    r#"{"total_gpus": 8, "isl": 1024, "osl": 128, "ttft": 2000.0, "tpot": 30.0, "top_n": 0, "agg": []}"#,
                    None,
                ))
            },
        },
        Case {
            id: "calibration-constant-huge",
            input: "calibration constants whose `ttft_overhead_ms` is 1e308 (every calibrated TTFT came out `inf`)",
            variant: "Core",
            class: ErrorClass::Value,
            fragment: "calibration group '*/*/*': ttft_overhead_ms must be a finite number in [0, 60000], got 1e308",
            run: || {
                ignore(aic_core::serving::Calibration::from_json(
                    r#"{"version": 1, "groups": {"*/*/*": {"tpot_scale": 1.0, "tpot_overhead_ms": 0.0, "ttft_scale": 1.0,
                        "ttft_queue": 0.0, "ttft_overhead_ms": 1e308}}}"#,
                ))
            },
        },
    ]
}

/// What a case's error turned out to be, in the terms the doc shows.
struct Caught {
    /// `AicError::WireFormat`, `FpmError::OptionsJson`, ...
    variant: String,
    /// The full message.
    message: String,
}

/// A case after running it: what the doc shows of it, and its error (or why it failed).
struct Checked {
    id: &'static str,
    input: &'static str,
    class: ErrorClass,
    outcome: Result<Caught, String>,
}

/// Runs a case: it must return an error (a panic is reported as such, not propagated).
fn error_of<E: LayerError>(case: &Case<E>) -> Result<E, String> {
    match catch_unwind(AssertUnwindSafe(case.run)) {
        Ok(Err(e)) => Ok(e),
        Ok(Ok(())) => Err(format!(
            "{}: the bad input was accepted (no error)",
            case.id
        )),
        Err(_) => Err(format!("{}: the bad input made the engine panic", case.id)),
    }
}

/// Runs a case and checks its error against the expectation.
fn check<E: LayerError>(case: &Case<E>) -> Checked {
    let outcome = (|| {
        let err = error_of(case)?;
        let message = err.to_string();
        let variant = variant_name(&err);
        if variant != case.variant || err.class() != case.class {
            return Err(format!(
                "{}: expected {}::{} ({:?}), got {}::{variant} ({:?}): {message}",
                case.id,
                E::TYPE,
                case.variant,
                case.class,
                E::TYPE,
                err.class()
            ));
        }
        if !message.contains(case.fragment) {
            return Err(format!(
                "{}: the message lacks {:?}:\n{message}",
                case.id, case.fragment
            ));
        }
        Ok(Caught { variant: format!("{}::{variant}", E::TYPE), message })
    })();
    Checked { id: case.id, input: case.input, class: case.class, outcome }
}

/// Every case run once per test process (both tests below read the outcomes), core cases
/// first, then those of the layers above.
fn outcomes() -> &'static [Checked] {
    static OUTCOMES: OnceLock<Vec<Checked>> = OnceLock::new();
    OUTCOMES.get_or_init(|| {
        let core = cases().iter().map(check).collect::<Vec<_>>();
        let fpm = fpm_cases().iter().map(check).collect::<Vec<_>>();
        let serving = serving_cases().iter().map(check).collect::<Vec<_>>();
        core.into_iter().chain(fpm).chain(serving).collect()
    })
}

#[test]
fn every_bad_input_gives_its_typed_error() {
    let failures: Vec<&String> = outcomes()
        .iter()
        .filter_map(|c| c.outcome.as_ref().err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} case(s) failed:\n{}",
        failures.len(),
        outcomes().len(),
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

#[test]
fn case_ids_are_unique_and_enough() {
    let mut ids: Vec<&str> = cases()
        .iter()
        .map(|c| c.id)
        .chain(fpm_cases().iter().map(|c| c.id))
        .chain(serving_cases().iter().map(|c| c.id))
        .collect();
    ids.sort_unstable();
    let before = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), before, "duplicate case ids");
    assert!(before >= 30, "the core catalogue has only {before} cases");
}

/// The doc's `rust` table, rendered from the cases and the messages they produce.
fn render_rust_section() -> String {
    let mut out = String::from(
        "| id | bad input | core error | Python exception | message |\n|---|---|---|---|---|\n",
    );
    for case in outcomes() {
        let caught = match &case.outcome {
            Ok(caught) => caught,
            Err(failure) => panic!("fix the failing case before checking the doc: {failure}"),
        };
        out.push_str(&format!(
            "| `{}` | {} | `{}` | `{}` | {} |\n",
            case.id,
            case.input.replace('|', "\\|"),
            caught.variant,
            python_class(case.class),
            doc_table::doc_message(&caught.message)
        ));
    }
    out
}

#[test]
fn doc_lists_exactly_these_cases() {
    doc_table::check_or_bless("rust", &render_rust_section());
}

#[test]
fn doc_catalogue_ids_are_unique_across_languages() {
    let doc = std::fs::read_to_string(doc_table::errors_doc()).expect("docs/errors.md");
    let mut all = Vec::new();
    for name in ["rust", "python", "c"] {
        let text = doc_table::section(&doc, name)
            .unwrap_or_else(|| panic!("docs/errors.md lacks the `{name}` catalogue section"));
        all.extend(doc_table::section_ids(&text));
    }
    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!(
        all.len(),
        total,
        "an id appears twice in the docs/errors.md catalogue"
    );
}

#[test]
fn doc_c_rows_name_checks_that_exist_in_the_c_test() {
    let doc = std::fs::read_to_string(doc_table::errors_doc()).expect("docs/errors.md");
    let section =
        doc_table::section(&doc, "c").expect("docs/errors.md lacks the `c` catalogue section");
    let c_test = fixtures::repo_root().join("crates/aic-ffi/tests/c/aic_abi_test.c");
    let program =
        std::fs::read_to_string(&c_test).unwrap_or_else(|e| panic!("{}: {e}", c_test.display()));
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| `")).collect();
    assert!(!rows.is_empty(), "the C catalogue section has no rows");
    for row in rows {
        // last cell: `function`: "label"
        let cell = row
            .trim_end_matches('|')
            .rsplit('|')
            .next()
            .unwrap_or_default();
        let function = cell.split('`').nth(1).unwrap_or_default();
        let label = cell.split('"').nth(1).unwrap_or_default();
        assert!(
            !function.is_empty() && !label.is_empty(),
            "malformed C catalogue row: {row}"
        );
        assert!(
            program.contains(&format!("static void {function}(")),
            "{row}: no function {function} in the C test"
        );
        assert!(
            program.contains(&format!("\"{label}\"")),
            "{row}: no check labelled {label:?} in the C test"
        );
    }
}
