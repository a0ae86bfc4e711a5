//! The provenance files of a version directory (spec 10 §5, §8.2): `collection_meta.yaml`,
//! which says which tables a directory's collection covers, and `reuse.yaml`, which declares
//! donor versions for tables. This module only reads and validates them; what a problem
//! means (an error in strict mode, a warning otherwise) is decided by source resolution.

use std::collections::BTreeSet;
use std::path::Path;

use serde_yaml::Value;

use crate::data::system::yaml_scalar_text;

/// File name of the provenance sidecar.
pub(crate) const COLLECTION_META: &str = "collection_meta.yaml";
/// File name of the declared-reuse file.
pub(crate) const REUSE_FILE: &str = "reuse.yaml";

/// Keys every collection event of a schema-2 table entry carries.
const EVENT_KEYS: &[&str] = &[
    "collector_ref",
    "collector_hash",
    "case_plan_hash",
    "collected_at",
    "rows",
    "status",
];

/// Fields every `reuse:` entry needs, non-empty.
const REUSE_FIELDS: &[&str] = &["table", "from_version", "reason", "approved_by"];

/// A well-formed `collection_meta.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CollectionMeta {
    /// `provenance: legacy`, which relaxes the strict coverage check to a warning.
    pub(crate) legacy: bool,
    /// The table stems listed under `tables:` (`gemm_perf`).
    pub(crate) tables: BTreeSet<String>,
}

/// Compact one-line rendering of a YAML value for messages.
fn shown(v: &Value) -> String {
    match yaml_scalar_text(v) {
        Some(text) => format!("{text:?}"),
        None => serde_yaml::to_string(v)
            .map(|s| s.trim().replace('\n', " "))
            .unwrap_or_else(|_| "?".to_string()),
    }
}

/// A non-empty scalar field of a mapping, as text.
fn text_field(map: &Value, key: &str) -> Option<String> {
    map.get(key)
        .and_then(yaml_scalar_text)
        .filter(|s| !s.trim().is_empty())
}

/// Reads and validates a `collection_meta.yaml`. `Err` says what is wrong with it.
pub(crate) fn read_collection_meta(path: &Path) -> Result<CollectionMeta, String> {
    super::file_memo::parsed(path, parse_collection_meta)
        .map_err(|e| format!("cannot read the file: {e}"))?
}

/// Validates the text of a `collection_meta.yaml` (spec 10 §5).
pub(crate) fn parse_collection_meta(text: &str) -> Result<CollectionMeta, String> {
    let doc: Value = serde_yaml::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    if !doc.is_mapping() {
        return Err(format!(
            "the document must be a mapping with `schema_version`, `provenance`, `runtime` and \
             `tables`, got {}",
            shown(&doc)
        ));
    }
    let schema = match doc.get("schema_version") {
        None | Some(Value::Null) => 1,
        Some(v) => match v.as_u64() {
            Some(n @ (1 | 2)) => n,
            _ => return Err(format!("schema_version must be 1 or 2, got {}", shown(v))),
        },
    };
    let legacy = match doc.get("provenance") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => s == "legacy",
        Some(v) => return Err(format!("provenance must be a string, got {}", shown(v))),
    };
    match doc.get("runtime") {
        None | Some(Value::Null) if schema == 1 => {}
        Some(r) if r.is_mapping() => {
            if schema == 2 {
                for key in ["framework", "version"] {
                    if text_field(r, key).is_none() {
                        return Err(format!("schema_version 2 requires runtime.{key}"));
                    }
                }
            }
        }
        None | Some(Value::Null) => {
            return Err("schema_version 2 requires a `runtime` mapping".to_string())
        }
        Some(v) => return Err(format!("runtime must be a mapping, got {}", shown(v))),
    }
    let mut tables = BTreeSet::new();
    match doc.get("tables") {
        None | Some(Value::Null) => {}
        Some(Value::Mapping(map)) => {
            for (key, entry) in map {
                let stem = yaml_scalar_text(key)
                    .ok_or_else(|| format!("table names must be text, got {}", shown(key)))?;
                check_table_entry(&stem, entry, schema)?;
                tables.insert(stem);
            }
        }
        Some(v) => return Err(format!("tables must be a mapping, got {}", shown(v))),
    }
    Ok(CollectionMeta { legacy, tables })
}

/// One `tables:` entry: a mapping (schema 1 also allows an empty entry); schema 2 requires
/// `rows`, `status` and a non-empty `collections` list of complete events.
fn check_table_entry(stem: &str, entry: &Value, schema: u64) -> Result<(), String> {
    if entry.is_null() && schema == 1 {
        return Ok(());
    }
    if !entry.is_mapping() {
        return Err(format!(
            "tables.{stem} must be a mapping, got {}",
            shown(entry)
        ));
    }
    if schema == 1 {
        return Ok(());
    }
    for key in ["rows", "status"] {
        if entry.get(key).is_none_or(Value::is_null) {
            return Err(format!("schema_version 2 requires tables.{stem}.{key}"));
        }
    }
    let events = match entry.get("collections") {
        Some(Value::Sequence(events)) if !events.is_empty() => events,
        _ => {
            return Err(format!(
                "schema_version 2 requires a non-empty list tables.{stem}.collections"
            ))
        }
    };
    for (i, event) in events.iter().enumerate() {
        let missing: Vec<&str> = EVENT_KEYS
            .iter()
            .copied()
            .filter(|k| event.get(*k).is_none_or(Value::is_null))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "tables.{stem}.collections[{i}] lacks {}",
                missing.join(", ")
            ));
        }
    }
    Ok(())
}

/// One complete `reuse:` entry: the table stem and the donor version directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReuseEntry {
    /// The donated table's stem (`moe_perf`).
    pub(crate) table: String,
    /// The donor version directory name.
    pub(crate) from_version: String,
}

/// A read `reuse.yaml`: its complete entries, in file order, and what was wrong with the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReuseFile {
    /// Entries with every required field.
    pub(crate) entries: Vec<ReuseEntry>,
    /// One sentence per problem (unreadable file, no `reuse` list, incomplete entry).
    pub(crate) problems: Vec<String>,
}

/// Reads a `reuse.yaml`, keeping the complete entries and describing the rest.
pub(crate) fn read_reuse(path: &Path) -> ReuseFile {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_reuse(&text),
        Err(e) => ReuseFile {
            entries: Vec::new(),
            problems: vec![format!("cannot read the file: {e}")],
        },
    }
}

/// Parses the text of a `reuse.yaml` (spec 10 §8.2).
pub(crate) fn parse_reuse(text: &str) -> ReuseFile {
    let mut out = ReuseFile::default();
    let doc: Value = match serde_yaml::from_str(text) {
        Ok(doc) => doc,
        Err(e) => {
            out.problems.push(format!("not valid YAML: {e}"));
            return out;
        }
    };
    let list = match doc.get("reuse") {
        Some(Value::Sequence(list)) => list,
        None => {
            out.problems
                .push("no `reuse:` key; declare donors as a `reuse:` list".to_string());
            return out;
        }
        Some(v) => {
            out.problems.push(format!(
                "`reuse` must be a list of entries, got {}",
                shown(v)
            ));
            return out;
        }
    };
    for (i, entry) in list.iter().enumerate() {
        let missing: Vec<&str> = REUSE_FIELDS
            .iter()
            .copied()
            .filter(|k| text_field(entry, k).is_none())
            .collect();
        if !missing.is_empty() {
            out.problems.push(format!(
                "entry {i} lacks a non-empty {} (every entry needs table, from_version, reason \
                 and approved_by)",
                missing.join(", ")
            ));
            continue;
        }
        out.entries.push(ReuseEntry {
            table: text_field(entry, "table").unwrap_or_default(),
            from_version: text_field(entry, "from_version").unwrap_or_default(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_meta_schema_1() {
        let m = parse_collection_meta(
            "schema_version: 1\nprovenance: legacy\nruntime: {framework: vllm, version: 0.24.0}\n\
             tables:\n  gemm_perf: {status: complete}\n  moe_perf:\n",
        )
        .unwrap();
        assert!(m.legacy);
        assert_eq!(
            m.tables.iter().collect::<Vec<_>>(),
            ["gemm_perf", "moe_perf"]
        );
        // absent schema_version = 1, absent provenance = not legacy, absent tables = none
        let m = parse_collection_meta("runtime: {framework: vllm}\n").unwrap();
        assert!(!m.legacy);
        assert!(m.tables.is_empty());
    }

    #[test]
    fn collection_meta_schema_2() {
        let ok = "schema_version: 2\nprovenance: collected\nruntime: {framework: trtllm, version: \
                  1.3.0rc20}\ntables:\n  gemm_perf:\n    rows: 10\n    status: complete\n    \
                  collections:\n    - {collector_ref: a, collector_hash: b, case_plan_hash: c, \
                  collected_at: d, rows: 10, status: complete}\n";
        assert!(parse_collection_meta(ok).is_ok());
        let no_runtime = "schema_version: 2\ntables: {}\n";
        assert!(parse_collection_meta(no_runtime)
            .unwrap_err()
            .contains("runtime"));
        let no_version = ok.replace(", version: 1.3.0rc20", "");
        assert!(parse_collection_meta(&no_version)
            .unwrap_err()
            .contains("runtime.version"));
        let no_events = ok.replace("collections:", "collectionz:");
        assert!(parse_collection_meta(&no_events)
            .unwrap_err()
            .contains("tables.gemm_perf.collections"));
        let bad_event = ok.replace("case_plan_hash: c, ", "");
        assert_eq!(
            parse_collection_meta(&bad_event).unwrap_err(),
            "tables.gemm_perf.collections[0] lacks case_plan_hash"
        );
    }

    #[test]
    fn collection_meta_malformed() {
        let err = |t: &str| parse_collection_meta(t).unwrap_err();
        assert!(err("tables: [unclosed\n").starts_with("not valid YAML"));
        assert!(err("").contains("must be a mapping"));
        assert_eq!(
            err("schema_version: 3\n"),
            "schema_version must be 1 or 2, got \"3\""
        );
        assert!(err("provenance: [a]\n").starts_with("provenance must be a string"));
        assert!(err("tables: [gemm_perf]\n").starts_with("tables must be a mapping"));
        assert!(err("tables:\n  gemm_perf: complete\n").starts_with("tables.gemm_perf must be"));
        assert!(err("runtime: vllm\n").starts_with("runtime must be a mapping"));
    }

    #[test]
    fn reuse_entries_and_problems() {
        let r = parse_reuse(
            "schema_version: 1\nreuse:\n- {table: moe_perf, from_version: 0.24.0, reason: r, \
             approved_by: x}\n- {table: gemm_perf, from_version: 0.24.0}\n- {table: a, \
             from_version: '1.0', reason: r, approved_by: ''}\n",
        );
        assert_eq!(
            r.entries,
            vec![ReuseEntry {
                table: "moe_perf".into(),
                from_version: "0.24.0".into()
            }]
        );
        assert_eq!(r.problems.len(), 2);
        assert!(r.problems[0].starts_with("entry 1 lacks a non-empty reason, approved_by"));
        assert!(r.problems[1].starts_with("entry 2 lacks a non-empty approved_by"));
        let r = parse_reuse("schema_version: 1\n");
        assert!(r.entries.is_empty());
        assert!(r.problems[0].starts_with("no `reuse:` key"));
        assert!(parse_reuse("reuse: moe\n").problems[0].starts_with("`reuse` must be a list"));
        assert!(parse_reuse("reuse: [\n").problems[0].starts_with("not valid YAML"));
    }
}
