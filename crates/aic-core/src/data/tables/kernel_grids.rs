//! The loader the linear-attention kernel tables share (GDN, Mamba2, KDA).
//!
//! Those tables store their rows alike: a kernel name, a phase, `batch_size`, `seq_len`, a
//! table-specific list of integer shape columns, `latency` and an optional `power`. Each exact
//! key gets one grid: a 1-D `batch` curve for generation keys, a `[batch][seq]` grid otherwise,
//! raw-linear on both axes, the first row of a coordinate winning within a file and across files.
//! This module holds that one loading loop so that each table module keeps only its own rules:
//! its key and how a row's names become it, its empty-table message and its lookup fallbacks.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use crate::data::sources::Source;
use crate::error::{AicError, Result};
use crate::lookup::{Grid, GridBuilder, Leaf};

use super::{passes_filter, read_sources, to_u64, SourceRows};

/// The grids of one kernel table and the rows each source contributed.
pub(crate) struct KernelGrids<M> {
    /// Grids by exact key.
    pub(crate) grids: M,
    /// The files the grids were merged from, in priority order.
    pub(crate) sources: Vec<SourceRows>,
}

/// Loads the kernel rows of `sources` into one grid per key.
///
/// `shape_columns` are the integer columns read after `batch_size` and `seq_len`; `key_of`
/// makes a row's key from its kernel name, phase and shape values (in `shape_columns` order),
/// and `is_generation` says whether the key's leaves are 1-D batch curves. Rows a source's
/// kernel filter rejects are skipped; `on_empty` is the error when no row is kept at all.
pub(crate) fn load_kernel_grids<K, M, const N: usize>(
    sources: &[Source],
    shape_columns: [&str; N],
    key_of: impl Fn(&str, &str, [u64; N]) -> K,
    is_generation: impl Fn(&K) -> bool,
    on_empty: impl FnOnce(&[Source]) -> AicError,
) -> Result<KernelGrids<M>>
where
    K: Eq + Hash,
    M: FromIterator<(K, Arc<Grid>)>,
{
    let mut columns = vec!["kernel_source", "phase", "batch_size", "seq_len"];
    columns.extend_from_slice(&shape_columns);
    columns.extend_from_slice(&["latency", "power"]);
    let tables = read_sources(sources, &columns)?;
    let mut builders: HashMap<K, GridBuilder> = HashMap::new();
    let mut rows = 0usize;
    let mut used = Vec::new();
    for (table, filter) in &tables {
        let before = rows;
        let kernel = table.str("kernel_source")?;
        let phase = table.str("phase")?;
        let batch = table.int("batch_size")?;
        let seq = table.int("seq_len")?;
        let shapes: Vec<&[i64]> = shape_columns.iter().map(|c| table.int(c)).collect::<Result<_>>()?;
        let latency = table.float("latency")?;
        let power = table.opt_float("power")?;
        for i in 0..table.num_rows {
            if !passes_filter(filter, Some(kernel[i].as_str())) {
                continue;
            }
            let mut dims = [0u64; N];
            for (dim, (values, name)) in dims.iter_mut().zip(shapes.iter().zip(shape_columns)) {
                *dim = to_u64(values[i], name, table)?;
            }
            let key = key_of(&kernel[i], &phase[i], dims);
            let b = to_u64(batch[i], "batch_size", table)?;
            let generation = is_generation(&key);
            let coords = if generation { vec![b] } else { vec![b, to_u64(seq[i], "seq_len", table)?] };
            let leaf = Leaf::new(latency[i], power.as_ref().map_or(0.0, |c| c[i]));
            let builder = builders.entry(key).or_insert_with(|| GridBuilder::new(if generation { 1 } else { 2 }));
            if builder.insert(coords, leaf) {
                rows += 1;
            }
        }
        used.push(SourceRows::new(&table.path, rows - before));
    }
    if rows == 0 {
        return Err(on_empty(sources));
    }
    let grids = builders.into_iter().map(|(k, b)| (k, Arc::new(b.build(None)))).collect();
    Ok(KernelGrids { grids, sources: used })
}
