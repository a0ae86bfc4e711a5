//! Read-only table views and the coverage summary (`PerfDatabase::table_view`,
//! `PerfDatabase::coverage`, `open_for_viewing`) on the shipped h200_sxm data:
//! the views hold the rows of the parquet files (spot values quoted in spec 20 and a full
//! row-by-row comparison with the primary GEMM file), and the coverage names the families,
//! dtypes, extents, rows and the files/versions that fed each table; unknown names are
//! errors listing the valid ones.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use aic_core::data::parquet::RawTable;
use aic_core::data::tables::{
    open_for_viewing, KeyValue, PerfDatabase, SliceView, TableId, TableView, COVERAGE_SCHEMA,
};
use aic_core::lookup::sol::gemm_sol_ms;
use aic_core::ErrorClass;

fn systems_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/systems"))
}

fn db(system: &str, backend: &str, version: Option<&str>) -> Arc<PerfDatabase> {
    open_for_viewing(&systems_root(), system, backend, version, true).unwrap_or_else(|e| panic!("open: {e}"))
}

fn h200_vllm() -> Arc<PerfDatabase> {
    db("h200_sxm", "vllm", Some("0.24.0"))
}

fn view(db: &PerfDatabase, table: TableId) -> TableView {
    db.table_view(table).unwrap_or_else(|e| panic!("{table}: {e}"))
}

fn text(v: &str) -> KeyValue {
    KeyValue::Text(v.to_string())
}

fn slice<'v>(view: &'v TableView, key: &[(&str, KeyValue)]) -> &'v SliceView {
    view.find_slice(key).unwrap_or_else(|| panic!("{}: no slice {key:?}", view.table))
}

#[track_caller]
fn close(label: &str, got: Option<f64>, want: f64, printed_decimals: i32) {
    let got = got.unwrap_or_else(|| panic!("{label}: point not collected"));
    let tol = 0.5 * 10f64.powi(-printed_decimals) * (1.0 + 1e-9);
    assert!((got - want).abs() <= tol, "{label}: {got} vs {want}");
}

/// GEMM (spec 20 §1.4 raw rows): bf16 / fp8 / fp8_block at (1024, 5120, 5120).
#[test]
fn gemm_view_holds_the_quoted_rows() {
    let v = view(&h200_vllm(), TableId::Gemm);
    for (quant, want) in [("bfloat16", 0.06753333), ("fp8", 0.05780266), ("fp8_block", 0.08561067)] {
        let s = slice(&v, &[("quant", text(quant))]);
        assert_eq!(s.axes, ["m", "n", "k"]);
        close(&format!("gemm {quant}"), s.latency_at(&[1024, 5120, 5120]), want, 8);
    }
    close("gemm fp8 m=1", slice(&v, &[("quant", text("fp8"))]).latency_at(&[1, 5120, 5120]), 0.0145164, 7);
}

/// Every row of the primary GEMM file is in the view, first occurrence winning, its latency
/// raised to the GEMM SOL exactly as loaded (spec 10 §4.1).
#[test]
fn gemm_view_matches_the_primary_parquet_row_by_row() {
    let database = h200_vllm();
    let v = view(&database, TableId::Gemm);
    let path = systems_root().join("data/h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet");
    let raw = RawTable::read_columns(&path, &["gemm_dtype", "m", "n", "k", "latency"]).unwrap();
    let (dtype, m, n, k, latency) = (
        raw.str("gemm_dtype").unwrap(),
        raw.int("m").unwrap(),
        raw.int("n").unwrap(),
        raw.int("k").unwrap(),
        raw.float("latency").unwrap(),
    );
    let mut index: HashMap<(&str, [u64; 3]), f64> = HashMap::new();
    for s in &v.slices {
        let KeyValue::Text(q) = s.key_value("quant").unwrap() else { panic!("quant key") };
        for i in 0..s.len() {
            index.insert((q.as_str(), [s.columns[0][i], s.columns[1][i], s.columns[2][i]]), s.latency_ms[i]);
        }
    }
    let mem_bw = database.system.gpu.mem_bw;
    let mut seen = std::collections::HashSet::new();
    let mut checked = 0;
    for i in 0..raw.num_rows {
        let q = dtype[i].as_str();
        let key = [m[i] as u64, n[i] as u64, k[i] as u64];
        if q == "awq" || q == "gptq" || !seen.insert((q, key)) {
            continue;
        }
        let got = *index.get(&(q, key)).unwrap_or_else(|| panic!("row {i} ({q}, {key:?}) missing from the view"));
        let quant = aic_core::spec::GemmQuant::parse(q);
        let floor = quant
            .and_then(|g| database.system.flops(q, g.flops_key()).ok().map(|f| (f, g.bytes_per_elem())))
            .map_or(0.0, |(f, b)| gemm_sol_ms(key[0] as f64, key[1] as f64, key[2] as f64, f, b, mem_bw));
        assert_eq!(got, latency[i].max(floor), "row {i} ({q}, {key:?})");
        checked += 1;
    }
    assert!(checked > 1000, "only {checked} rows compared");
    let primary = &v.sources[0];
    assert_eq!(primary.path, "systems/data/h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet");
    assert_eq!((primary.framework.as_str(), primary.version.as_str()), ("vllm", "0.24.0"));
    assert_eq!(primary.rows, checked, "the primary file's rows all survive the merge");
    assert_eq!(v.rows(), v.sources.iter().map(|s| s.rows).sum::<usize>());
}

/// Attention (spec 20 §4.5, §5): the fa3 lane's context rows and the decode curve at b 8.
#[test]
fn attention_views_hold_the_quoted_rows() {
    let database = h200_vllm();
    let ctx = view(&database, TableId::ContextAttention);
    let key = |window: u64, kv: &str| {
        vec![
            ("lane", text("vllm_flash_attn_fa3")),
            ("fmha_quant", text("bfloat16")),
            ("kv_quant", text(kv)),
            ("n_kv", KeyValue::Int(4)),
            ("head_size", KeyValue::Int(128)),
            ("window_size", KeyValue::Int(window)),
        ]
    };
    let s = slice(&ctx, &key(0, "bfloat16"));
    assert_eq!(s.axes, ["num_heads", "isl", "batch"]);
    for (isl, want) in [(512, 0.02168533), (1024, 0.03483733), (2048, 0.08734934)] {
        close(&format!("ctx isl {isl}"), s.latency_at(&[32, isl, 1]), want, 8);
    }
    close("ctx window 128", slice(&ctx, &key(128, "bfloat16")).latency_at(&[32, 1024, 1]), 0.026976, 6);
    close("ctx kv fp8", slice(&ctx, &key(0, "fp8")).latency_at(&[32, 1024, 1]), 0.043472, 6);

    let gen = view(&database, TableId::GenerationAttention);
    let s = slice(
        &gen,
        &[
            ("lane", text("vllm_flash_attn_fa3")),
            ("kv_quant", text("bfloat16")),
            ("n_kv", KeyValue::Int(4)),
            ("head_size", KeyValue::Int(128)),
            ("window_size", KeyValue::Int(0)),
        ],
    );
    assert_eq!(s.axes, ["num_heads", "batch", "seq"]);
    assert!(s.key_value("fmha_quant").is_none(), "generation slices have no fmha component");
    for (seq, want) in [(1024, 0.016571), (2048, 0.017909), (4096, 0.030789)] {
        close(&format!("gen seq {seq}"), s.latency_at(&[32, 8, seq]), want, 6);
    }
}

/// Comm (spec 20 §9): custom all-reduce at 8 GPUs and NCCL all_gather, 1048576 elements.
#[test]
fn comm_views_hold_the_quoted_rows() {
    let database = h200_vllm();
    let ar = view(&database, TableId::CustomAllReduce);
    let s = slice(&ar, &[("num_gpus", KeyValue::Int(8))]);
    assert_eq!(s.axes, ["message_size"]);
    close("AR1", s.latency_at(&[1048576]), 0.01810592, 8);
    let nccl = view(&database, TableId::Nccl);
    let s = slice(&nccl, &[("dtype", text("half")), ("operation", text("all_gather")), ("num_gpus", KeyValue::Int(8))]);
    close("NC1 all_gather", s.latency_at(&[1048576]), 0.02446, 5);
    assert_eq!(nccl.sources.len(), 1);
    assert_eq!(nccl.sources[0].framework, "nccl");
}

/// MoE (spec 20 §10.4): bf16 power_law_1.2 (8, 128, 2048, 768) tp1 ep2 curve.
#[test]
fn moe_view_holds_the_quoted_curve() {
    let v = view(&h200_vllm(), TableId::Moe);
    let s = slice(
        &v,
        &[
            ("kernel_split", text("standard")),
            ("quant", text("bfloat16")),
            ("distribution", text("power_law_1.2")),
            ("topk", KeyValue::Int(8)),
            ("num_experts", KeyValue::Int(128)),
            ("hidden_size", KeyValue::Int(2048)),
            ("inter_size", KeyValue::Int(768)),
            ("moe_tp_size", KeyValue::Int(1)),
            ("moe_ep_size", KeyValue::Int(2)),
        ],
    );
    assert_eq!(s.axes, ["num_tokens"]);
    for (tokens, want) in [(64, 0.172653), (768, 0.257786), (1024, 0.291341), (4096, 0.621734), (16384, 1.980915)] {
        close(&format!("moe {tokens}"), s.latency_at(&[tokens]), want, 6);
    }
    assert_eq!(*s.axis("num_tokens").unwrap().last().unwrap(), 16384, "16384 is the last point");
}

/// MLA (spec 20 §14.5): the vLLM context module rows and the TRT-LLM decode BMM.
#[test]
fn mla_views_hold_the_quoted_rows() {
    let m = view(&h200_vllm(), TableId::ContextMlaModule);
    let s = slice(
        &m,
        &[
            ("fmha_quant", text("bfloat16")),
            ("kv_quant", text("fp8")),
            ("gemm_quant", text("fp8_block")),
            ("native_heads", KeyValue::Int(128)),
        ],
    );
    close("module isl 1024", s.latency_at(&[16, 1024, 1]), 0.2367, 4);
    close("module isl 2048", s.latency_at(&[16, 2048, 1]), 0.3937, 4);
    let trt = db("h200_sxm", "trtllm", Some("1.3.0rc20"));
    let b = view(&trt, TableId::MlaBmm);
    let s = slice(&b, &[("quant", text("fp8")), ("op", text("mla_gen_pre")), ("num_heads", KeyValue::Int(16))]);
    close("B1", s.latency_at(&[64]), 0.00856, 5);
}

/// Quantize (spec 20 §1.4): computescale and scale_matrix fp8 rows.
#[test]
fn quantize_views_hold_the_quoted_rows() {
    let database = h200_vllm();
    let cs = view(&database, TableId::ComputeScale);
    let s = slice(&cs, &[("quant", text("fp8"))]);
    assert_eq!(s.axes, ["m", "k"]);
    close("computescale (1024, 5120)", s.latency_at(&[1024, 5120]), 0.00306453, 8);
    close("computescale (1, 5120)", s.latency_at(&[1, 5120]), 0.00115093, 8);
    let sm = view(&database, TableId::ScaleMatrix);
    close("scale_matrix (1024, 5120)", slice(&sm, &[("quant", text("fp8"))]).latency_at(&[1024, 5120]), 0.00446933, 8);
}

/// The coverage summary: every table listed once in order, families, dtypes, extents that
/// agree with the views, row counts that add up, sources with versions; the JSON keys are
/// the documented schema.
#[test]
fn coverage_of_h200_vllm() {
    let database = h200_vllm();
    let c = database.coverage();
    assert_eq!(
        (c.schema, c.system.as_str(), c.backend.as_str(), c.version.as_str()),
        (COVERAGE_SCHEMA, "h200_sxm", "vllm", "0.24.0")
    );
    assert!(c.shared_layer);
    assert_eq!(c.tables.iter().map(|t| t.table).collect::<Vec<_>>(), TableId::ALL.map(TableId::name));
    let table = |name: &str| c.tables.iter().find(|t| t.table == name).unwrap();

    let gemm = table("gemm");
    assert_eq!((gemm.family, gemm.file, gemm.error.as_deref()), ("gemm", "gemm_perf.parquet", None));
    let quants = &gemm.keys.iter().find(|k| k.name == "quant").unwrap().values;
    for q in ["bfloat16", "fp8", "fp8_block"] {
        assert!(quants.contains(&text(q)), "{quants:?}");
    }
    let gemm_view = view(&database, TableId::Gemm);
    assert_eq!(gemm.rows, gemm_view.rows());
    assert_eq!(gemm.slices, gemm_view.slices.len());
    let m = gemm.axes.iter().find(|a| a.name == "m").unwrap();
    let all_m: Vec<u64> = gemm_view.slices.iter().flat_map(|s| s.axis("m").unwrap().to_vec()).collect();
    assert_eq!((m.min, m.max), (*all_m.iter().min().unwrap(), *all_m.iter().max().unwrap()));
    assert!(m.min == 1 && m.count > 10, "{m:?}");
    assert_eq!(gemm.rows, gemm.sources.iter().map(|s| s.rows).sum::<usize>());
    assert_eq!(gemm.sources[0].version, "0.24.0");

    let ctx = table("context_attention");
    assert_eq!(ctx.family, "attention");
    let lanes = &ctx.keys.iter().find(|k| k.name == "lane").unwrap().values;
    assert!(lanes.contains(&text("vllm_flash_attn_fa3")), "{lanes:?}");
    assert_eq!(ctx.axes.iter().map(|a| a.name).collect::<Vec<_>>(), ["num_heads", "isl", "batch"]);
    assert_eq!(table("custom_allreduce").family, "comm");
    assert_eq!(table("nccl").family, "comm");
    assert_eq!(table("moe").family, "moe");
    assert!(table("moe").rows > 0);
    for t in &c.tables {
        assert!(t.error.is_some() || t.rows > 0, "{}: loaded but empty", t.table);
        assert!(t.error.is_none() || (t.rows == 0 && t.sources.is_empty()), "{}", t.table);
    }

    // The JSON schema: these keys, no more, no fewer (compared as sorted sets).
    let json = serde_json::to_value(&c).unwrap();
    let keys_of = |v: &serde_json::Value| {
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    let sorted = |names: &[&str]| {
        let mut names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        names.sort();
        names
    };
    assert_eq!(
        keys_of(&json),
        sorted(&["schema", "system", "backend", "version", "shared_layer", "data_root", "tables"])
    );
    let first = &json["tables"][0];
    assert_eq!(
        keys_of(first),
        sorted(&["table", "family", "file", "error", "rows", "slices", "keys", "axes", "sources"])
    );
    assert_eq!(keys_of(&first["axes"][0]), sorted(&["name", "min", "max", "count"]));
    assert_eq!(keys_of(&first["keys"][0]), sorted(&["name", "values"]));
    assert_eq!(keys_of(&first["sources"][0]), sorted(&["path", "framework", "version", "rows"]));
}

/// Without a version the backend's current slot is used; unknown systems, backends and
/// versions are errors that list the valid choices.
#[test]
fn open_for_viewing_resolves_the_current_slot_and_rejects_unknown_names() {
    assert_eq!(db("h200_sxm", "vllm", None).resolver.version(), "0.24.0");
    let root = systems_root();
    let err = |system: &str, backend: &str, version: Option<&str>| {
        let e = open_for_viewing(&root, system, backend, version, true).map(|_| ()).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Value, "{e}");
        e.to_string()
    };
    let e = err("h201_sxm", "vllm", None);
    assert!(e.contains("h201_sxm") && e.contains("h200_sxm") && e.contains("b200_sxm"), "{e}");
    let e = err("h200_sxm", "tensorrt", None);
    assert!(e.contains("\"tensorrt\"") && e.contains("trtllm") && e.contains("sglang") && e.contains("vllm"), "{e}");
    let e = err("h200_sxm", "vllm", Some("9.9.9"));
    assert!(e.contains("9.9.9") && e.contains("0.24.0") && e.contains("current"), "{e}");
}
