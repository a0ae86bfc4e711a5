//! GEMM table (`gemm_perf.parquet`, spec 10 §4.1): per quant, scattered `(n, k)` sites with
//! curves over `m`; every latency raised to the GEMM SOL at load when the system defines the
//! quant's FLOPS. A quant's sites are built on its first lookup: a sweep reads one or two of
//! a file's quants, and building every quant's sites dominated a fresh process's first call.

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
    sources: Vec<SourceRows>,
}

/// One quant's rows, built into sites on first use (the same builder, so the same sites).
#[derive(Debug)]
struct LazySites {
    rows: Mutex<Option<ScatteredSitesBuilder>>,
    sites: OnceLock<ScatteredSites>,
}

impl LazySites {
    fn new(builder: ScatteredSitesBuilder) -> Self {
        LazySites { rows: Mutex::new(Some(builder)), sites: OnceLock::new() }
    }

    fn get(&self) -> &ScatteredSites {
        // `OnceLock` runs one initialiser at a time, so the builder is taken exactly once.
        self.sites.get_or_init(|| {
            let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
            rows.take().unwrap_or_default().build()
        })
    }
}

impl GemmTable {
    /// Loads and merges every source first-wins.
    pub fn load(resolver: &SourceResolver, system: &SystemSpec) -> Result<GemmTable> {
        let sources = resolver.sources("gemm_perf.parquet");
        let tables = read_sources(
            &sources,
            &["gemm_dtype", "m", "n", "k", "latency", "power", "kernel_source"],
        )?;
        let mut builders: Vec<(String, ScatteredSitesBuilder, Option<(f64, f64)>)> = Vec::new();
        let mut rows = 0usize;
        let mut used = Vec::new();
        for (table, filter) in &tables {
            let before = rows;
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
                                builders.push((q.to_string(), ScatteredSitesBuilder::new(), consts));
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
                if builders[slot].1.insert(mi, ni, ki, leaf) {
                    rows += 1;
                }
            }
            used.push(SourceRows::new(&table.path, rows - before));
        }
        if rows == 0 {
            return Err(no_rows_message("GEMM", &sources));
        }
        Ok(GemmTable {
            quants: builders.into_iter().map(|(q, b, _)| (q, LazySites::new(b))).collect(),
            sources: used,
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

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
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
