//! GEMM table (`gemm_perf.parquet`, spec 10 §4.1): per quant, scattered `(n, k)` sites with
//! curves over `m`; every latency raised to the GEMM SOL at load when the system defines the
//! quant's FLOPS. A quant's rows are merged first-wins and built into sites on its first
//! lookup: a sweep reads one or two of a file's quants, and merging and building every quant
//! dominated a fresh process's first call.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use crate::data::sources::SourceResolver;
use crate::data::system::SystemSpec;
use crate::error::{AicError, Result};
use crate::lookup::sol::gemm_sol_ms;
use crate::lookup::{Leaf, ScatteredSites, ScatteredSitesBuilder};
use crate::spec::GemmQuant;

use super::{no_rows_message, passes_filter, read_sources, to_u64, SourceRows};

/// All GEMM rows of one database, by quant name in file order.
#[derive(Debug)]
pub struct GemmTable {
    quants: Vec<(String, LazySites)>,
    /// The files read, in priority order.
    files: Vec<PathBuf>,
    /// Rows each file kept, once asked for (merges every quant).
    sources: OnceLock<Vec<SourceRows>>,
}

/// One quant's accepted rows in source order, before the first-wins merge.
#[derive(Debug, Default)]
struct PendingRows {
    rows: Vec<(u64, u64, u64, Leaf)>,
    /// Per file read, the number of this quant's rows read up to and including it.
    ends: Vec<usize>,
}

/// One quant's rows, merged and built into sites on first use.
#[derive(Debug)]
struct LazySites {
    rows: Mutex<Option<PendingRows>>,
    /// The sites and, per file read, the rows the merge kept.
    built: OnceLock<(ScatteredSites, Vec<usize>)>,
}

impl LazySites {
    fn new(rows: PendingRows) -> Self {
        LazySites { rows: Mutex::new(Some(rows)), built: OnceLock::new() }
    }

    fn built(&self) -> &(ScatteredSites, Vec<usize>) {
        // `OnceLock` runs one initialiser at a time, so the rows are taken exactly once.
        self.built.get_or_init(|| {
            let pending = self.rows.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
            let mut builder = ScatteredSitesBuilder::with_capacity(pending.rows.len());
            let mut kept = vec![0usize; pending.ends.len()];
            let mut file = 0;
            for (i, (m, n, k, leaf)) in pending.rows.into_iter().enumerate() {
                while file < pending.ends.len() && i >= pending.ends[file] {
                    file += 1;
                }
                if builder.insert(m, n, k, leaf) {
                    kept[file] += 1;
                }
            }
            (builder.build(), kept)
        })
    }

    fn get(&self) -> &ScatteredSites {
        &self.built().0
    }
}

impl GemmTable {
    /// Loads every source; quants merge first-wins (files in priority order) on first use.
    pub fn load(resolver: &SourceResolver, system: &SystemSpec) -> Result<GemmTable> {
        let sources = resolver.sources("gemm_perf.parquet");
        let tables = read_sources(
            &sources,
            &["gemm_dtype", "m", "n", "k", "latency", "power", "kernel_source"],
        )?;
        let mut builders: Vec<(String, PendingRows, Option<(f64, f64)>)> = Vec::new();
        let mut accepted = 0usize;
        let mut files = Vec::new();
        for (table, filter) in &tables {
            // Strings stay dictionary-coded: the filter, the quant name and its slot are
            // decided once per distinct value, not once per row.
            let dtype = table.str_codes("gemm_dtype")?;
            let (m, n, k) = (table.int("m")?, table.int("n")?, table.int("k")?);
            let latency = table.float("latency")?;
            let power = table.opt_float("power")?;
            let kernel = table.opt_str_codes("kernel_source")?;
            let kernel_ok: Vec<bool> = kernel
                .as_ref()
                .map(|c| c.values.iter().map(|v| passes_filter(filter, Some(v.as_str()))).collect())
                .unwrap_or_default();
            let no_kernel_ok = passes_filter(filter, None);
            let mut slot_of: Vec<Option<usize>> = vec![None; dtype.values.len()];
            // Room for each quant's rows of this file up front (no regrowth by copying).
            let mut per_code = vec![0usize; dtype.values.len()];
            for &c in dtype.codes.iter() {
                per_code[c as usize] += 1;
            }
            let mut reserved = vec![false; dtype.values.len()];
            for i in 0..table.num_rows {
                let ok = match &kernel {
                    Some(c) => kernel_ok[c.codes[i] as usize],
                    None => no_kernel_ok,
                };
                if !ok {
                    continue;
                }
                let code = dtype.codes[i] as usize;
                let q = dtype.values[code].as_str();
                if q == "awq" || q == "gptq" {
                    continue;
                }
                let slot = match slot_of[code] {
                    Some(p) => p,
                    None => {
                        let p = match builders.iter().position(|b| b.0 == q) {
                            Some(p) => p,
                            None => {
                                // SOL constants of this quant, if the system defines its FLOPS.
                                let consts = GemmQuant::parse(q).and_then(|gq| {
                                    system.flops(q, gq.flops_key()).ok().map(|f| (f, gq.bytes_per_elem()))
                                });
                                builders.push((q.to_string(), PendingRows::default(), consts));
                                builders.len() - 1
                            }
                        };
                        slot_of[code] = Some(p);
                        p
                    }
                };
                let (mi, ni, ki) = (to_u64(m[i], "m", table)?, to_u64(n[i], "n", table)?, to_u64(k[i], "k", table)?);
                let raw = latency[i];
                let p = power.as_ref().map_or(0.0, |c| c[i]);
                let mut leaf = Leaf::new(raw, p);
                if let Some((flops, bpe)) = builders[slot].2 {
                    let sol = gemm_sol_ms(mi as f64, ni as f64, ki as f64, flops, bpe, system.gpu.mem_bw);
                    if sol > leaf.latency {
                        leaf.latency = sol;
                    }
                }
                if !reserved[code] {
                    reserved[code] = true;
                    builders[slot].1.rows.reserve(per_code[code]);
                }
                builders[slot].1.rows.push((mi, ni, ki, leaf));
                accepted += 1;
            }
            files.push(table.path.clone());
            // Close this file's range in every quant (a quant first seen later starts here).
            for b in &mut builders {
                b.1.ends.resize(files.len() - 1, 0);
                let end = b.1.rows.len();
                b.1.ends.push(end);
            }
        }
        // The first accepted row always survives the merge, so no accepted row = no rows.
        if accepted == 0 {
            return Err(no_rows_message("GEMM", &sources));
        }
        Ok(GemmTable {
            quants: builders.into_iter().map(|(q, b, _)| (q, LazySites::new(b))).collect(),
            files,
            sources: OnceLock::new(),
        })
    }

    /// The sites of one quant (by table name, e.g. `fp8` for `fp8_static`).
    pub fn quant(&self, name: &str) -> Option<&ScatteredSites> {
        self.quants.iter().find(|q| q.0 == name).map(|q| q.1.get())
    }

    /// The position of a quant among [`GemmTable::quants`], for [`GemmTable::quant_at`].
    pub fn quant_position(&self, name: &str) -> Option<usize> {
        self.quants.iter().position(|q| q.0 == name)
    }

    /// The sites of the quant at a position from [`GemmTable::quant_position`].
    pub fn quant_at(&self, position: usize) -> Option<&ScatteredSites> {
        self.quants.get(position).map(|q| q.1.get())
    }

    /// Every quant with its sites, in file order.
    pub fn quants(&self) -> impl Iterator<Item = (&str, &ScatteredSites)> {
        self.quants.iter().map(|(q, s)| (q.as_str(), s.get()))
    }

    /// The files this table was merged from, with the rows each contributed (merges every
    /// quant not merged yet).
    pub fn sources(&self) -> &[SourceRows] {
        self.sources.get_or_init(|| {
            let mut kept = vec![0usize; self.files.len()];
            for (_, sites) in &self.quants {
                for (total, n) in kept.iter_mut().zip(&sites.built().1) {
                    *total += n;
                }
            }
            self.files.iter().zip(kept).map(|(f, n)| SourceRows::new(f, n)).collect()
        })
    }

    /// Quant names present, in file order.
    pub fn available(&self) -> Vec<&str> {
        self.quants.iter().map(|q| q.0.as_str()).collect()
    }

    /// The miss error for a quant without rows.
    pub fn quant_missing(&self, quant: &str, label: &str) -> AicError {
        AicError::perf(format!(
            "GEMM perf data missing for quant '{quant}' at {label}; available: {:?}",
            self.available()
        ))
    }
}
