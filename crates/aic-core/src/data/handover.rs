//! Decoded attention tables handed from the compile step to the engine's table load.
//!
//! Compiling a spec counts the attention lanes of both attention tables (`data::lanes`), and
//! the engine built from that spec in the same process then loads the same files again. The
//! density pass therefore decodes the columns the engine's attention loader reads and leaves
//! each decoded table here; the loader takes it back instead of decoding the file a second
//! time. A table is handed over only for the same file (path, length and modification time
//! unchanged) and the same column list, and taken at most once, so what the loader sees is
//! exactly what a fresh read would give. At most [`CAPACITY`] tables wait here; the oldest is
//! dropped first, so a process that compiles without ever loading an engine holds a bounded
//! amount of memory.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use crate::data::parquet::RawTable;

/// The columns the engine's attention loader reads, in its order (a superset of the
/// lane-density pass's columns).
pub(crate) const ATTENTION_COLUMNS: &[&str] = &[
    "kernel_source",
    "attn_dtype",
    "kv_cache_dtype",
    "num_heads",
    "num_key_value_heads",
    "head_dim",
    "window_size",
    "isl",
    "step",
    "batch_size",
    "latency",
    "power",
];

/// Tables waiting at most (one context and one generation table of a few data folders).
const CAPACITY: usize = 8;

/// A file's identity: path, length and modification time.
type FileId = (PathBuf, u64, Option<SystemTime>);

struct Waiting {
    file: FileId,
    columns: &'static [&'static str],
    table: RawTable,
}

fn slot() -> &'static Mutex<Vec<Waiting>> {
    static SLOT: OnceLock<Mutex<Vec<Waiting>>> = OnceLock::new();
    SLOT.get_or_init(|| Mutex::new(Vec::new()))
}

fn file_id(path: &Path) -> Option<FileId> {
    let meta = std::fs::metadata(path).ok()?;
    Some((path.to_path_buf(), meta.len(), meta.modified().ok()))
}

/// Leaves a table decoded from `path` with exactly `columns` for a later [`take`].
pub(crate) fn keep(path: &Path, columns: &'static [&'static str], table: RawTable) {
    let Some(file) = file_id(path) else {
        return;
    };
    let mut waiting = slot().lock().unwrap_or_else(|e| e.into_inner());
    waiting.retain(|w| w.file.0 != file.0);
    if waiting.len() >= CAPACITY {
        waiting.remove(0);
    }
    waiting.push(Waiting { file, columns, table });
}

/// The table a [`keep`] left for this file and column list, if the file is unchanged since.
pub(crate) fn take(path: &Path, columns: &[&str]) -> Option<RawTable> {
    let mut waiting = slot().lock().unwrap_or_else(|e| e.into_inner());
    let at = waiting.iter().position(|w| w.file.0 == path)?;
    let w = waiting.remove(at);
    drop(waiting);
    (w.columns == columns && file_id(path).as_ref() == Some(&w.file)).then_some(w.table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::parquet::Column;

    fn table(path: &Path, rows: usize) -> RawTable {
        RawTable::from_columns(path.to_path_buf(), vec![("isl".into(), Column::Int(vec![1; rows]))]).unwrap()
    }

    #[test]
    fn a_kept_table_is_taken_once_for_the_same_file_and_columns() {
        let dir = std::env::temp_dir().join(format!("aic-handover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.parquet");
        std::fs::write(&path, b"x").unwrap();
        keep(&path, ATTENTION_COLUMNS, table(&path, 3));
        assert!(take(&path, &["isl"]).is_none(), "another column list is not handed over");
        keep(&path, ATTENTION_COLUMNS, table(&path, 3));
        assert_eq!(take(&path, ATTENTION_COLUMNS).map(|t| t.num_rows), Some(3));
        assert!(take(&path, ATTENTION_COLUMNS).is_none(), "taken at most once");
        keep(&path, ATTENTION_COLUMNS, table(&path, 3));
        std::fs::write(&path, b"changed").unwrap();
        assert!(take(&path, ATTENTION_COLUMNS).is_none(), "a changed file is read again");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
