//! The loaded perf tables of one (system, backend, version, shared-layer) identity: built
//! from the resolved sources first-wins, loaded lazily once per table and shared by every
//! engine with the same identity (spec 10 §4, §8.7).

mod attention;
mod comm;
mod dsa;
mod dsv4;
mod gdn;
mod gemm;
mod mamba2;
mod mla;
mod moe;
mod quantize;
mod views;
mod attributes;
mod msa;
mod kda;
mod kernel_grids;

pub use attention::{AttentionKind, AttentionTable, SliceKey};
pub use comm::{CustomAllReduceTable, NcclTable};
pub use dsa::{
    dsa_buckets, is_no_dsa_rows, nearest_entry, DsaBucket, DsaKey, DsaModuleTable, DsaPart, DsaSlice, DsaTables, ModuleRows,
    SparseKernel, SparseKernelTable, SparseKernelTables,
};
pub use dsv4::{
    nearest_head, Dsv4Calibration, Dsv4Delta, Dsv4Key, Dsv4ModuleTable, Dsv4PagedMqa, Dsv4Tables, MhcKey, MhcTable,
};
pub use gdn::{normalise_gdn_kernel, GdnKey, GdnTable, GDN_RECURRENCE_KERNEL, GDN_TABLE};
pub use gemm::GemmTable;
pub use mamba2::{Mamba2Key, Mamba2Table, MAMBA2_TABLE};
pub use mla::{MlaBmmTable, MlaKernelTable, MlaModuleTable};
pub use moe::{MoeCurves, MoeKey, MoeTable};
pub use quantize::{QuantizeKernel, QuantizeTable};
pub use attributes::{nested_json, table_view_json, table_view_sources, TABLE_VIEW_ATTRIBUTES};
pub use views::{
    open_for_viewing, AxisExtent, DatabaseCoverage, KeyValue, KeyValues, SliceView, TableCoverage, TableId, TableView,
    COVERAGE_SCHEMA,
};
pub use kda::{KdaKey, KdaTable, KDA_TABLE};
pub use msa::{msa_generation_key, MsaTables, MSA_CONTEXT_TABLE, MSA_GENERATION_TABLE};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::data::parquet::RawTable;
use crate::data::sources::{Source, SourceResolver};
use crate::data::system::SystemSpec;
use crate::error::{AicError, Result};
use crate::spec::Backend;

/// The tables behind one engine, loaded on first use and kept (a failed load is kept too).
#[derive(Debug)]
pub struct PerfDatabase {
    /// Hardware description.
    pub system: Arc<SystemSpec>,
    /// Which files feed each table.
    pub resolver: SourceResolver,
    gemm: OnceLock<Result<Arc<GemmTable>>>,
    context_attention: OnceLock<Result<Arc<AttentionTable>>>,
    generation_attention: OnceLock<Result<Arc<AttentionTable>>>,
    custom_allreduce: OnceLock<Result<Arc<CustomAllReduceTable>>>,
    nccl: OnceLock<Result<Arc<NcclTable>>>,
    oneccl: OnceLock<Result<Arc<NcclTable>>>,
    compute_scale: OnceLock<Result<Arc<QuantizeTable>>>,
    moe: OnceLock<Result<Arc<MoeTable>>>,
    context_mla: OnceLock<Result<Arc<MlaKernelTable>>>,
    generation_mla: OnceLock<Result<Arc<MlaKernelTable>>>,
    context_mla_module: OnceLock<Result<Arc<MlaModuleTable>>>,
    generation_mla_module: OnceLock<Result<Arc<MlaModuleTable>>>,
    mla_bmm: OnceLock<Result<Arc<MlaBmmTable>>>,
    scale_matrix: OnceLock<Result<Arc<QuantizeTable>>>,
    dsa: DsaTables,
    gdn: OnceLock<Result<Arc<GdnTable>>>,
    mamba2: OnceLock<Result<Arc<Mamba2Table>>>,
    dsv4: Dsv4Tables,
    msa: MsaTables,
    kda: OnceLock<Result<Arc<KdaTable>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Identity {
    root: PathBuf,
    system: String,
    backend: Backend,
    version: String,
    shared: bool,
    strict: bool,
}

fn registry() -> &'static Mutex<HashMap<Identity, Arc<PerfDatabase>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<Identity, Arc<PerfDatabase>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

impl PerfDatabase {
    /// Opens (or reuses) the database of an identity. Tables load on first use.
    pub fn open(
        systems_root: &Path,
        system: &str,
        backend: Backend,
        version: &str,
        enable_shared_layer: bool,
    ) -> Result<Arc<PerfDatabase>> {
        Self::open_with_provenance(systems_root, system, backend, version, enable_shared_layer, false)
    }

    /// [`PerfDatabase::open`] with provenance verified strictly when `strict_provenance` is
    /// set (spec 10 §8.6, see [`SourceResolver::with_strict_provenance`]); strictness is part
    /// of the identity.
    pub fn open_with_provenance(
        systems_root: &Path,
        system: &str,
        backend: Backend,
        version: &str,
        enable_shared_layer: bool,
        strict_provenance: bool,
    ) -> Result<Arc<PerfDatabase>> {
        let id = Identity {
            root: systems_root.to_path_buf(),
            system: system.to_string(),
            backend,
            version: version.to_string(),
            shared: enable_shared_layer,
            strict: strict_provenance,
        };
        if let Some(db) = registry().lock().map_err(|_| poisoned())?.get(&id) {
            return Ok(db.clone());
        }
        let spec = Arc::new(SystemSpec::load(systems_root, system)?);
        let resolver =
            SourceResolver::with_strict_provenance(&spec, backend, version, enable_shared_layer, strict_provenance)?;
        let db = Arc::new(PerfDatabase {
            system: spec,
            resolver,
            gemm: OnceLock::new(),
            context_attention: OnceLock::new(),
            generation_attention: OnceLock::new(),
            custom_allreduce: OnceLock::new(),
            nccl: OnceLock::new(),
            oneccl: OnceLock::new(),
            compute_scale: OnceLock::new(),
            moe: OnceLock::new(),
            context_mla: OnceLock::new(),
            generation_mla: OnceLock::new(),
            context_mla_module: OnceLock::new(),
            generation_mla_module: OnceLock::new(),
            mla_bmm: OnceLock::new(),
            scale_matrix: OnceLock::new(),
            dsa: DsaTables::default(),
            gdn: OnceLock::new(),
            mamba2: OnceLock::new(),
            dsv4: Dsv4Tables::default(),
            msa: MsaTables::default(),
            kda: OnceLock::new(),
        });
        let mut reg = registry().lock().map_err(|_| poisoned())?;
        Ok(reg.entry(id).or_insert(db).clone())
    }

    // The table accessors below lend the table (`&Arc`) rather than clone the `Arc`: ops call
    // some of them on every estimate, and a refcount increment on an `Arc` shared by every
    // thread bounces its cache line between cores (two threads sharing one engine lost ~17 %
    // of their throughput to it). A caller that keeps the table clones it once, at compile.

    /// The GEMM table.
    pub fn gemm(&self) -> Result<&Arc<GemmTable>> {
        self.gemm.get_or_init(|| GemmTable::load(&self.resolver, &self.system).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The context-attention table.
    pub fn context_attention(&self) -> Result<&Arc<AttentionTable>> {
        self.context_attention
            .get_or_init(|| {
                AttentionTable::load(&self.resolver, &self.system, AttentionKind::Context).map(Arc::new)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The generation-attention table.
    pub fn generation_attention(&self) -> Result<&Arc<AttentionTable>> {
        self.generation_attention
            .get_or_init(|| {
                AttentionTable::load(&self.resolver, &self.system, AttentionKind::Generation)
                    .map(Arc::new)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The custom all-reduce table.
    pub fn custom_allreduce(&self) -> Result<&Arc<CustomAllReduceTable>> {
        self.custom_allreduce
            .get_or_init(|| CustomAllReduceTable::load(&self.resolver).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The system-wide NCCL table.
    pub fn nccl(&self) -> Result<&Arc<NcclTable>> {
        self.nccl.get_or_init(|| NcclTable::load(&self.resolver).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The OneCCL table (same layout as NCCL): where collectives go when NCCL has no data for
    /// a key, e.g. on b60 whose `comm/nccl/<version>` folder does not exist (spec 12 §7.2).
    pub fn oneccl(&self) -> Result<&Arc<NcclTable>> {
        self.oneccl.get_or_init(|| NcclTable::load_oneccl(&self.resolver).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The MoE table.
    pub fn moe(&self) -> Result<&Arc<MoeTable>> {
        self.moe.get_or_init(|| MoeTable::load(&self.resolver).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The op-level MLA kernel table (context or generation).
    pub fn mla_kernel(&self, context: bool) -> Result<&Arc<MlaKernelTable>> {
        let cell = if context { &self.context_mla } else { &self.generation_mla };
        cell.get_or_init(|| MlaKernelTable::load(&self.resolver, context).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The fused MLA module table (context or generation).
    pub fn mla_module(&self, context: bool) -> Result<&Arc<MlaModuleTable>> {
        let cell = if context { &self.context_mla_module } else { &self.generation_mla_module };
        cell.get_or_init(|| MlaModuleTable::load(&self.resolver, context).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The MLA decode BMM table.
    pub fn mla_bmm(&self) -> Result<&Arc<MlaBmmTable>> {
        self.mla_bmm.get_or_init(|| MlaBmmTable::load(&self.resolver).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// A quantisation kernel table (fp8_static GEMMs).
    pub fn quantize(&self, kernel: QuantizeKernel) -> Result<&Arc<QuantizeTable>> {
        let cell = match kernel {
            QuantizeKernel::ComputeScale => &self.compute_scale,
            QuantizeKernel::ScaleMatrix => &self.scale_matrix,
        };
        cell.get_or_init(|| QuantizeTable::load(&self.resolver, kernel).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The sparse-attention (DSA) tables, loaded on first use.
    pub fn dsa(&self) -> &DsaTables {
        &self.dsa
    }

    /// The Gated-DeltaNet kernel table (spec 31 §6).
    pub fn gdn(&self) -> Result<&Arc<GdnTable>> {
        self.gdn.get_or_init(|| GdnTable::load(&self.resolver).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The Mamba2 kernel table (spec 33 §7.2).
    pub fn mamba2(&self) -> Result<&Arc<Mamba2Table>> {
        self.mamba2.get_or_init(|| Mamba2Table::load(&self.resolver).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The DeepSeek-V4 tables (spec 34), loaded on first use.
    pub fn dsv4(&self) -> &Dsv4Tables {
        &self.dsv4
    }

    /// The MiniMax sparse-attention tables (spec 36 §5.3), loaded on first use.
    pub fn msa(&self) -> &MsaTables {
        &self.msa
    }

    /// The Kimi delta attention table (spec 36 §6.3), loaded on first use.
    pub fn kda(&self) -> Result<&Arc<KdaTable>> {
        self.kda.get_or_init(|| KdaTable::load(&self.resolver).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// `systems/data/<system>/<backend>/<version>`, as error messages name the data.
    pub fn label(&self) -> String {
        self.resolver.data_root_label()
    }
}

fn poisoned() -> AicError {
    AicError::config("perf database registry lock poisoned by an earlier panic")
}

/// What a table's `latency` column holds, which decides whether negative values are data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LatencyKind {
    /// Measured kernel times: negative values are corrupt data.
    Measured,
    /// Differences between two kernels (quantize `computescale`, spec 10 §4.7): any sign.
    Delta,
}

/// The tables read from a table's sources, each with the kernel filter of its source.
pub(crate) type SourceTables = Vec<(RawTable, Option<Arc<std::collections::BTreeSet<String>>>)>;

/// Reads the existing sources of a table, in priority order, with the wanted columns.
/// Returns the number of listed sources (for messages) and the tables read.
pub(crate) fn read_sources(sources: &[Source], wanted: &[&str]) -> Result<SourceTables> {
    read_sources_of(sources, wanted, LatencyKind::Measured)
}

/// [`read_sources`] for a table whose `latency` column is of the given kind.
pub(crate) fn read_sources_of(sources: &[Source], wanted: &[&str], latency: LatencyKind) -> Result<SourceTables> {
    let mut out = Vec::new();
    for src in sources {
        if !src.path.is_file() {
            continue;
        }
        let table = match crate::data::handover::take(&src.path, wanted) {
            Some(t) => t,
            None => RawTable::read_columns(&src.path, wanted)?,
        };
        check_measurements(&table, latency)?;
        out.push((table, src.kernel_filter.clone().map(Arc::new)));
    }
    Ok(out)
}

/// Rejects a NaN or infinite value in any float column read, and a negative measured
/// `latency` or `power`: interpolating such a row would turn every estimate near it into NaN
/// or a negative time without any error.
fn check_measurements(table: &RawTable, latency: LatencyKind) -> Result<()> {
    for (name, values) in table.float_columns() {
        let signed = name == "latency" && latency == LatencyKind::Delta;
        let must_be_non_negative = (name == "latency" || name == "power") && !signed;
        let bad = values
            .iter()
            .position(|v| !v.is_finite() || (must_be_non_negative && *v < 0.0));
        if let Some(row) = bad {
            let rule = if must_be_non_negative { "finite and >= 0" } else { "finite" };
            return Err(AicError::DataFile {
                path: table.path.clone(),
                message: format!(
                    "parquet column \"{name}\" has the value {} at row {row}, but perf data must be \
                     {rule}; re-collect or remove that row",
                    values[row]
                ),
            });
        }
    }
    Ok(())
}

/// The message for a table with no usable rows.
pub(crate) fn no_rows_message(what: &str, sources: &[Source]) -> AicError {
    let first = sources
        .first()
        .map(|s| display_path(&s.path))
        .unwrap_or_else(|| "<none>".to_string());
    AicError::perf(format!(
        "no {what} rows loaded from {} source(s) (first: {first}); the table is missing or empty \
         for this system, backend and version: restore the file or choose a backend version that \
         has it",
        sources.len()
    ))
}

/// One file that fed a table and how many of its rows survived the first-wins merge.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SourceRows {
    /// The file, from its `systems/` component on.
    pub path: String,
    /// The framework directory the file sits under (`vllm`, `sglang`, `trtllm`, `nccl`, ...).
    pub framework: String,
    /// The version directory the file sits under.
    pub version: String,
    /// Rows of this file the table kept.
    pub rows: usize,
}

impl SourceRows {
    /// The record of `path`, which contributed `rows` rows.
    pub(crate) fn new(path: &Path, rows: usize) -> SourceRows {
        let dir_name = |p: Option<&Path>| {
            p.and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
        };
        let version_dir = path.parent();
        SourceRows {
            path: display_path(path),
            framework: dir_name(version_dir.and_then(Path::parent)),
            version: dir_name(version_dir),
            rows,
        }
    }
}

/// A data path shown from its `systems/` component on (no machine-specific prefix).
pub(crate) fn display_path(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    match text.rfind("/systems/") {
        Some(i) => text[i + 1..].to_string(),
        None => text,
    }
}

/// Whether a row passes a source's kernel filter (a row without the column fails an active filter).
pub(crate) fn passes_filter(
    filter: &Option<Arc<std::collections::BTreeSet<String>>>,
    kernel: Option<&str>,
) -> bool {
    match filter {
        None => true,
        Some(set) => kernel.is_some_and(|k| set.contains(k)),
    }
}

/// Converts a non-negative integer cell to u64, naming the file on a bad value.
pub(crate) fn to_u64(value: i64, column: &str, table: &RawTable) -> Result<u64> {
    u64::try_from(value).map_err(|_| AicError::DataFile {
        path: table.path.clone(),
        message: format!("negative value {value} in integer column \"{column}\""),
    })
}
