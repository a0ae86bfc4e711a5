//! Bad inputs need real surroundings: a systems folder in which one file is broken, a spec
//! that is valid except for one field, a parquet file with one poisoned cell. This module
//! builds them in a private temporary folder per case and removes it afterwards.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use aic_core::{Engine, EngineSpec};
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{Field, Schema};
use parquet::arrow::ArrowWriter;

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root exists")
}

/// The shipped systems folder.
pub fn shipped_systems() -> PathBuf {
    repo_root().join("data/systems")
}

/// The checked-in example spec (Qwen3-32B, h200_sxm, vLLM 0.24.0, TP 2).
pub fn example_spec() -> EngineSpec {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs/qwen3-32b_h200_vllm_tp2.json");
    EngineSpec::from_bytes(&std::fs::read(path).expect("example spec is checked in"))
        .expect("example spec decodes")
}

/// The example spec as JSON text, for cases that corrupt the text.
pub fn example_spec_json() -> String {
    example_spec().to_json()
}

/// The example spec as a JSON value, for cases that change one field.
pub fn example_spec_value() -> serde_json::Value {
    serde_json::from_str(&example_spec_json()).expect("spec JSON parses")
}

/// The folder all scratch roots of this process live in (replaced by `<tmp>` in the docs).
pub fn scratch_base() -> PathBuf {
    std::env::temp_dir().join(format!("aic-error-catalogue-{}", std::process::id()))
}

/// A private copy of the shipped systems folder: top-level YAML files copied (so a case can
/// edit them), `data/h200_sxm` mirrored as folders of symlinks to the shipped files (so a case
/// can replace one file cheaply). Removed on drop.
pub struct ShadowRoot {
    /// The systems folder to hand to the engine.
    pub root: PathBuf,
}

impl ShadowRoot {
    /// Builds the mirror for one case.
    pub fn new(case_id: &str) -> ShadowRoot {
        static SERIAL: AtomicUsize = AtomicUsize::new(0);
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let root = scratch_base()
            .join(format!("{case_id}-{serial}"))
            .join("systems");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("scratch folder");
        let shipped = shipped_systems();
        for entry in std::fs::read_dir(&shipped)
            .expect("shipped systems")
            .flatten()
        {
            let path = entry.path();
            if path.is_file() {
                std::fs::copy(&path, root.join(entry.file_name())).expect("copy system file");
            }
        }
        mirror(&shipped.join("data/h200_sxm"), &root.join("data/h200_sxm"));
        ShadowRoot { root }
    }

    /// Replaces the file at `rel` (relative to the systems folder) with `bytes`.
    pub fn replace(&self, rel: &str, bytes: &[u8]) {
        let path = self.root.join(rel);
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, bytes).expect("write replacement file");
    }

    /// Removes the file at `rel`.
    pub fn remove(&self, rel: &str) {
        std::fs::remove_file(self.root.join(rel)).expect("file to remove exists");
    }

    /// An engine for `spec` on this folder.
    pub fn engine(&self, spec: EngineSpec) -> aic_core::Result<Engine> {
        Engine::from_spec(spec, Some(&self.root))
    }
}

impl Drop for ShadowRoot {
    fn drop(&mut self) {
        if let Some(case_dir) = self.root.parent() {
            let _ = std::fs::remove_dir_all(case_dir);
        }
    }
}

fn mirror(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mirror folder");
    for entry in std::fs::read_dir(from)
        .expect("shipped data folder")
        .flatten()
    {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            mirror(&path, &target);
        } else {
            std::os::unix::fs::symlink(&path, &target).expect("symlink shipped file");
        }
    }
}

/// Where the example spec's GEMM table lives inside a systems folder.
pub const GEMM_TABLE: &str = "data/h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet";

/// The example spec with the shared layer off, so that only the requested version's own
/// tables feed the engine (no other backend can stand in for a broken file).
pub fn example_spec_without_shared_layer() -> EngineSpec {
    let mut spec = example_spec();
    spec.engine.enable_shared_layer = Some(false);
    spec
}

/// The bytes of a one-row-group parquet file with the given `(name, values)` columns.
pub fn parquet_bytes(columns: Vec<(&str, ArrayRef)>) -> Vec<u8> {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, array)| Field::new(*name, array.data_type().clone(), array.null_count() > 0))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .expect("columns form a batch");
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, None).expect("parquet writer");
    writer.write(&batch).expect("write batch");
    writer.close().expect("close parquet");
    out
}

/// A small, well-formed bf16 GEMM table over a 2x2x2 grid, with `latency` given by the caller
/// (8 rows: m in {1, 4096}, n in {1024, 8192}, k in {1024, 8192}).
pub fn gemm_table_with_latency(latency: Vec<Option<f64>>) -> Vec<u8> {
    let mut m = Vec::new();
    let mut n = Vec::new();
    let mut k = Vec::new();
    for &mi in &[1i64, 4096] {
        for &ni in &[1024i64, 8192] {
            for &ki in &[1024i64, 8192] {
                m.push(mi);
                n.push(ni);
                k.push(ki);
            }
        }
    }
    let rows = m.len();
    assert_eq!(latency.len(), rows, "one latency per row");
    parquet_bytes(vec![
        (
            "gemm_dtype",
            Arc::new(StringArray::from(vec!["bfloat16"; rows])) as ArrayRef,
        ),
        ("m", Arc::new(Int64Array::from(m))),
        ("n", Arc::new(Int64Array::from(n))),
        ("k", Arc::new(Int64Array::from(k))),
        ("latency", Arc::new(Float64Array::from(latency))),
    ])
}

/// Eight plausible latencies (ms) for [`gemm_table_with_latency`].
pub fn plausible_latencies() -> Vec<Option<f64>> {
    (1..=8).map(|i| Some(0.01 * i as f64)).collect()
}

/// A one-column table (300,000 floats in one uncompressed data page) whose page header then
/// claims `claimed` uncompressed bytes: the page-size lie of a hostile file, with everything
/// else intact. `claimed` must fit the four-byte varint of the real size.
pub fn table_with_page_size_claim(claimed: i64) -> Vec<u8> {
    use parquet::file::metadata::ParquetMetaDataReader;
    use parquet::file::properties::WriterProperties;

    let values: ArrayRef = Arc::new(Float64Array::from((0..300_000).map(f64::from).collect::<Vec<_>>()));
    let schema = Arc::new(Schema::new(vec![Field::new("latency", values.data_type().clone(), false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![values]).expect("one column");
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_data_page_size_limit(8 << 20)
        .set_write_batch_size(300_000)
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, Some(props)).expect("parquet writer");
    writer.write(&batch).expect("write batch");
    writer.close().expect("close parquet");

    let bytes = bytes::Bytes::from(out.clone());
    let meta = ParquetMetaDataReader::new().parse_and_finish(&bytes).expect("own footer");
    let (start, _) = meta.row_group(0).column(0).byte_range();
    let at = start as usize;
    // PageHeader: field 1 (type, i32) = 0 (data page), then field 2 (uncompressed size, i32).
    assert_eq!(&out[at..at + 3], &[0x15, 0x00, 0x15], "a data page header");
    let varint = |mut z: u64| {
        let mut v = Vec::new();
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                v.push(b);
                return v;
            }
            v.push(b | 0x80);
        }
    };
    let real_len = out[at + 3..].iter().position(|b| b & 0x80 == 0).expect("varint end") + 1;
    let patched = varint((claimed as u64) << 1);
    assert_eq!(patched.len(), real_len, "the claim must keep the header's length");
    out[at + 3..at + 3 + real_len].copy_from_slice(&patched);
    out
}

/// A one-column table whose `rows` rows all hold the same `len`-byte string, written as one
/// dictionary value and run-length codes: a small file whose text, read row by row, is
/// `rows × len` bytes.
pub fn table_with_repeated_string(rows: usize, len: usize) -> Vec<u8> {
    use arrow_array::types::Int32Type;
    use arrow_array::DictionaryArray;
    use parquet::file::properties::WriterProperties;

    let keys = arrow_array::Int32Array::from(vec![0; rows]);
    let values = StringArray::from(vec!["x".repeat(len)]);
    let column: ArrayRef = Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values)).expect("dictionary"));
    let schema = Arc::new(Schema::new(vec![Field::new("kernel_source", column.data_type().clone(), false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![column]).expect("one column");
    let props = WriterProperties::builder().set_dictionary_page_size_limit(2 * len + (1 << 20)).build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, Some(props)).expect("parquet writer");
    writer.write(&batch).expect("write batch");
    writer.close().expect("close parquet");
    out
}
