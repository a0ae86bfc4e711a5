//! MiniMax sparse-attention (MSA) module tables (spec 36 §5.3).
//!
//! MSA rows share the DSA module schema and load rules (buckets by kernel source, skip-indexer
//! rows dropped, last row wins inside a file, first source wins across files), so this module
//! only names the files and adds the one MSA-specific step: generation keys blank their FMHA
//! component, merging the generation rows of every `mla_dtype` into one slice.

use std::sync::{Arc, OnceLock};

use crate::data::sources::SourceResolver;
use crate::error::Result;

use super::dsa::{DsaKey, DsaModuleTable, DsaPart};

/// The MSA context module table file.
pub const MSA_CONTEXT_TABLE: &str = "msa_context_module_perf.parquet";
/// The MSA generation module table file.
pub const MSA_GENERATION_TABLE: &str = "msa_generation_module_perf.parquet";

/// The key of an MSA generation slice: the row key with its FMHA component blanked.
pub fn msa_generation_key(key: &DsaKey) -> DsaKey {
    [key[0].clone(), String::new(), key[2].clone(), key[3].clone()]
}

/// The MSA tables of one database, each loaded on first use and kept (a failed load too).
#[derive(Debug, Default)]
pub struct MsaTables {
    context: OnceLock<Result<Arc<DsaModuleTable>>>,
    generation: OnceLock<Result<Arc<DsaModuleTable>>>,
}

impl MsaTables {
    /// The context (`context = true`) or generation module table.
    pub fn module(&self, resolver: &SourceResolver, context: bool) -> Result<&Arc<DsaModuleTable>> {
        let cell = if context { &self.context } else { &self.generation };
        cell.get_or_init(|| {
            if context {
                DsaModuleTable::load_file(resolver, MSA_CONTEXT_TABLE, true, DsaPart::Full).map(Arc::new)
            } else {
                DsaModuleTable::load_file(resolver, MSA_GENERATION_TABLE, false, DsaPart::Full)
                    .map(|t| Arc::new(t.merge_keys(msa_generation_key)))
            }
        })
        .as_ref()
        .map_err(Clone::clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_key_blanks_only_the_fmha_component() {
        let key: DsaKey = ["MiniMaxM3ForCausalLM".into(), "fp8".into(), "bfloat16".into(), "fp8_block".into()];
        assert_eq!(msa_generation_key(&key), ["MiniMaxM3ForCausalLM".to_string(), String::new(), "bfloat16".into(), "fp8_block".into()]);
    }
}
