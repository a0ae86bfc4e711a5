//! Gated-DeltaNet table (`linear_attention/.../gdn_perf.parquet`, spec 31 §6.1–§6.3): the
//! Qwen3.5 linear-attention kernels (conv1d and chunked scan in prefill, conv update and
//! recurrence in decode), one grid per exact kernel shape. It exists apart from the attention
//! tables because its keys, leaf axes and name normalisation are its own.

use std::collections::HashMap;
use std::sync::Arc;

use crate::data::sources::SourceResolver;
use crate::error::Result;
use crate::lookup::Grid;

use super::kernel_grids::{load_kernel_grids, KernelGrids};
use super::{no_rows_message, SourceRows};

/// The table's basename.
pub const GDN_TABLE: &str = "gdn_perf.parquet";

/// The decode-recurrence kernel name every recurrent decode kernel is stored under.
pub const GDN_RECURRENCE_KERNEL: &str = "fused_sigmoid_gating_delta_rule_update";

/// The kernel name a row is stored under (spec 31 §6.3 step 2): the two recurrent decode
/// kernels become [`GDN_RECURRENCE_KERNEL`]; every other name is kept.
pub fn normalise_gdn_kernel(kernel: &str) -> &str {
    match kernel {
        "fused_recurrent_gated_delta_rule" | "fused_recurrent_gated_delta_rule_packed_decode" => GDN_RECURRENCE_KERNEL,
        other => other,
    }
}

/// The exact shape one GDN grid belongs to (spec 31 §6.3 step 3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GdnKey {
    /// Normalised kernel name.
    pub kernel_source: String,
    /// `context` or `generation` (any other string is a context-type key).
    pub phase: String,
    /// Model hidden size.
    pub d_model: u64,
    /// Convolution width.
    pub d_conv: u64,
    /// Key heads of the shard.
    pub num_k_heads: u64,
    /// Key head size.
    pub head_k_dim: u64,
    /// Value heads of the shard.
    pub num_v_heads: u64,
    /// Value head size.
    pub head_v_dim: u64,
}

impl GdnKey {
    /// Whether leaves of this key are 1-D batch curves (generation) or `[batch][seq]` grids.
    pub fn is_generation(&self) -> bool {
        self.phase == "generation"
    }
}

/// The GDN grids of one database.
#[derive(Debug)]
pub struct GdnTable {
    grids: HashMap<GdnKey, Arc<Grid>>,
    sources: Vec<SourceRows>,
}

impl GdnTable {
    /// Loads and merges every source first-wins (no SOL clamp at load, spec 31 §6.3 step 5).
    pub fn load(resolver: &SourceResolver) -> Result<Self> {
        let KernelGrids { grids, sources } = load_kernel_grids(
            &resolver.sources(GDN_TABLE),
            ["d_model", "d_conv", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim"],
            |kernel, phase, [d_model, d_conv, num_k_heads, head_k_dim, num_v_heads, head_v_dim]| GdnKey {
                kernel_source: normalise_gdn_kernel(kernel).to_string(),
                phase: phase.to_string(),
                d_model, d_conv, num_k_heads, head_k_dim, num_v_heads, head_v_dim,
            },
            GdnKey::is_generation,
            |sources| no_rows_message("GDN", sources),
        )?;
        Ok(GdnTable { grids, sources })
    }

    /// The grid of an exact key, shared.
    pub fn grid(&self, key: &GdnKey) -> Option<Arc<Grid>> {
        self.grids.get(key).cloned()
    }

    /// Whether the table holds the key.
    pub fn contains(&self, key: &GdnKey) -> bool {
        self.grids.contains_key(key)
    }

    /// The files this table was merged from, with the rows each contributed.
    pub fn sources(&self) -> &[SourceRows] {
        &self.sources
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::system::SystemSpec;
    use crate::spec::Backend;
    use std::path::{Path, PathBuf};

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
    }

    fn resolver(system: &str, backend: Backend, version: &str, shared: bool) -> SourceResolver {
        let s = SystemSpec::load(&root(), system).unwrap();
        SourceResolver::new(&s, backend, version, shared).unwrap()
    }

    /// `(framework/version, filter)` of each source of the GDN table.
    fn listed(r: &SourceResolver) -> Vec<(String, Option<Vec<String>>)> {
        r.sources(GDN_TABLE)
            .into_iter()
            .map(|s| {
                let dir = s.path.parent().unwrap();
                let label = format!(
                    "{}/{}",
                    dir.parent().unwrap().file_name().unwrap().to_string_lossy(),
                    dir.file_name().unwrap().to_string_lossy()
                );
                (label, s.kernel_filter.map(|f| f.into_iter().collect()))
            })
            .collect()
    }

    fn filter(names: &[&str]) -> Option<Vec<String>> {
        Some(names.iter().map(|n| n.to_string()).collect())
    }

    #[test]
    fn kernel_names_normalise() {
        assert_eq!(normalise_gdn_kernel("fused_recurrent_gated_delta_rule"), GDN_RECURRENCE_KERNEL);
        assert_eq!(normalise_gdn_kernel("fused_recurrent_gated_delta_rule_packed_decode"), GDN_RECURRENCE_KERNEL);
        assert_eq!(normalise_gdn_kernel("chunk_gated_delta_rule_flashinfer"), "chunk_gated_delta_rule_flashinfer");
    }

    #[test]
    fn sources_follow_the_reuse_manifest() {
        // Spec 31 §6.2: per backend, the primary file then the other frameworks' filtered rows.
        let t = resolver("h200_sxm", Backend::Trtllm, "1.3.0rc20", true);
        assert_eq!(
            listed(&t),
            vec![
                ("trtllm/1.3.0rc20".into(), None),
                (
                    "sglang/0.5.14".into(),
                    filter(&[
                        "causal_conv1d_fn",
                        "causal_conv1d_update",
                        "chunk_gated_delta_rule",
                        "fused_recurrent_gated_delta_rule"
                    ])
                ),
                ("vllm/0.24.0".into(), filter(&["causal_conv1d_fn", "causal_conv1d_update", "chunk_gated_delta_rule"])),
            ]
        );
        let v = resolver("h200_sxm", Backend::Vllm, "0.24.0", true);
        assert_eq!(
            listed(&v),
            vec![
                ("vllm/0.24.0".into(), None),
                (
                    "sglang/0.5.14".into(),
                    filter(&[
                        "causal_conv1d_fn",
                        "causal_conv1d_update",
                        "chunk_gated_delta_rule",
                        "fused_recurrent_gated_delta_rule_packed_decode"
                    ])
                ),
                ("trtllm/1.3.0rc20".into(), filter(&["causal_conv1d_fn", "causal_conv1d_update", "chunk_gated_delta_rule"])),
            ]
        );
        // Shared layer off (SOL / EMPIRICAL views): the primary file only.
        assert_eq!(listed(&resolver("h200_sxm", Backend::Trtllm, "1.3.0rc20", false)), vec![("trtllm/1.3.0rc20".into(), None)]);
    }

    #[test]
    fn leaves_are_batch_curves_in_decode_and_grids_in_prefill() {
        let table = GdnTable::load(&resolver("h200_sxm", Backend::Vllm, "0.24.0", true)).unwrap();
        let key = |kernel: &str, phase: &str| GdnKey {
            kernel_source: kernel.into(),
            phase: phase.into(),
            d_model: 4096,
            d_conv: 4,
            num_k_heads: 2,
            head_k_dim: 128,
            num_v_heads: 8,
            head_v_dim: 128,
        };
        let scan = table.grid(&key("chunk_gated_delta_rule_flashinfer", "context")).unwrap();
        assert_eq!(scan.depth(), 2);
        let rec = table.grid(&key(GDN_RECURRENCE_KERNEL, "generation")).unwrap();
        assert_eq!(rec.depth(), 1);
        // The raw decode name is normalised away at load.
        assert!(!table.contains(&key("fused_recurrent_gated_delta_rule_packed_decode", "generation")));
        // vllm's two uncollected decode cells are filled by sglang's rows: 407 batches in all.
        assert_eq!(table.sources()[0].rows, 9100);
    }
}
