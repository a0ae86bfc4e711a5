//! Attention kernel lanes (spec 30 §9, 11 §4.1): per-lane densities of the attention tables and
//! the `lane_order` the compile step writes into every top-level attention op. A lane is a
//! `kernel_source` value; the order decides which lane answers a slice at query time.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::path::Path;

use crate::data::handover::{self, ATTENTION_COLUMNS};
use crate::data::parquet::RawTable;
use crate::data::sources::{Source, SourceResolver};
use crate::data::system::{yaml_scalar_text, SystemSpec};
use crate::data::versions::lane_default_key;
use crate::error::{AicError, Result};
use crate::fast_hash::FastHashMap;
use crate::spec::Backend;

/// The lane of rows without a `kernel_source` column or value.
pub const DEFAULT_LANE: &str = "default";

/// The framework-agnostic lanes every walk lists (spec 30 §9 step 4).
const KNOWN_LANES: [&str; 5] = ["fa3", "fla", "flashinfer", "trtllm_mha", "triton"];

/// Which attention table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionPhase {
    /// `context_attention_perf.parquet`
    Context,
    /// `generation_attention_perf.parquet`
    Generation,
}

impl AttentionPhase {
    /// The table basename.
    pub fn basename(self) -> &'static str {
        match self {
            AttentionPhase::Context => "context_attention_perf.parquet",
            AttentionPhase::Generation => "generation_attention_perf.parquet",
        }
    }

    /// `context` / `generation`, as in messages.
    pub fn label(self) -> &'static str {
        match self {
            AttentionPhase::Context => "context",
            AttentionPhase::Generation => "generation",
        }
    }
}

/// One lane's density: distinct slice keys and distinct full keys (first-wins rows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneDensity {
    /// The `kernel_source` value (`default` when absent).
    pub lane: String,
    /// Distinct slice keys among the lane's accepted rows.
    pub slices: usize,
    /// Distinct (slice key + grid point) keys.
    pub rows: usize,
}

/// (attn dtype id or 0, kv dtype id, n_kv_lookup, head_dim, window)
type SliceKey = (u32, u32, i64, i64, i64);
/// The slice key's id (see [`DensityAcc::slice_ids`]) + three grid coordinates.
type FullKey = (u32, i64, i64, i64);

/// One lane's rows as full keys. Distinct keys are counted by sorting a flat vector (packed
/// into one integer per key when the values allow) rather than by hash sets of wide keys: a
/// table has tens of thousands of rows, and growing hash sets over them cost more in fresh
/// memory and rehashing than the counting itself.
#[derive(Default)]
struct LaneAcc {
    /// Full keys, in row order (duplicates included).
    keys: Vec<FullKey>,
    /// (distinct slices, distinct full keys) of `keys`, while no key was added since.
    counted: Option<(usize, usize)>,
}

/// Bits needed to hold `x`.
fn bits(x: u64) -> u32 {
    u64::BITS - x.leading_zeros()
}

/// The keys packed into one `u64` each, order-preserving and one-to-one, with the shift that
/// leaves the slice id; `None` when a value is negative or the widths exceed 64 bits.
fn packed_keys(keys: &[FullKey]) -> Option<(Vec<u64>, u32)> {
    let mut max = [0u64; 4];
    for &(id, a, b, c) in keys {
        let a = u64::try_from(a).ok()?;
        let b = u64::try_from(b).ok()?;
        let c = u64::try_from(c).ok()?;
        max = [max[0].max(u64::from(id)), max[1].max(a), max[2].max(b), max[3].max(c)];
    }
    let w = max.map(bits);
    if w.iter().sum::<u32>() > u64::BITS {
        return None;
    }
    let (sc, sb) = (0, w[3]);
    let sa = sb + w[2];
    let sid = sa + w[1];
    let shl = |x: u64, s: u32| x.checked_shl(s).unwrap_or(0);
    let packed = keys
        .iter()
        .map(|&(id, a, b, c)| shl(u64::from(id), sid) | shl(a as u64, sa) | shl(b as u64, sb) | shl(c as u64, sc))
        .collect();
    Some((packed, sid))
}

/// Distinct values and distinct runs of `group` in a sorted slice.
fn distinct_sorted<T: PartialEq, G: PartialEq>(sorted: &[T], group: impl Fn(&T) -> G) -> (usize, usize) {
    let (mut values, mut groups) = (0, 0);
    for (i, v) in sorted.iter().enumerate() {
        if i == 0 || sorted[i - 1] != *v {
            values += 1;
        }
        if i == 0 || group(&sorted[i - 1]) != group(v) {
            groups += 1;
        }
    }
    (groups, values)
}

impl LaneAcc {
    /// (distinct slices, distinct full keys) of the lane's rows so far.
    fn settle(&mut self) -> (usize, usize) {
        if let Some(counted) = self.counted {
            return counted;
        }
        let counted = match packed_keys(&self.keys) {
            Some((mut packed, sid)) => {
                packed.sort_unstable();
                distinct_sorted(&packed, |k| k.checked_shr(sid).unwrap_or(0))
            }
            None => {
                self.keys.sort_unstable();
                self.keys.dedup();
                distinct_sorted(&self.keys, |k| k.0)
            }
        };
        self.counted = Some(counted);
        counted
    }
}

/// Accumulates lane densities over sources in priority order.
#[derive(Default)]
struct DensityAcc {
    /// Lane indices in first-seen row order (lanes registered but never seen are left out).
    seen: Vec<usize>,
    order: Vec<String>,
    index: HashMap<String, usize>,
    lanes: Vec<LaneAcc>,
    strings: HashMap<String, u32>,
    /// Slice key -> dense id, shared by all lanes and sources.
    slice_ids: FastHashMap<SliceKey, u32>,
}

impl DensityAcc {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = self.strings.len() as u32 + 1;
        self.strings.insert(s.to_string(), id);
        id
    }

    fn lane(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.lanes.len();
        self.order.push(name.to_string());
        self.index.insert(name.to_string(), i);
        self.lanes.push(LaneAcc::default());
        i
    }

    fn add_source(&mut self, source: &Source, phase: AttentionPhase) -> Result<()> {
        if !source.path.is_file() {
            return Ok(());
        }
        let cols: &[&str] = &[
            "kernel_source",
            "attn_dtype",
            "kv_cache_dtype",
            "num_heads",
            "num_key_value_heads",
            "head_dim",
            "window_size",
            "isl",
            "batch_size",
            "step",
        ];
        // Decode what the engine's attention loader reads too, and hand the table over to it
        // afterwards (data::handover); a file whose extra columns do not decode is counted
        // from the lane columns alone, as before.
        let (t, full) = match RawTable::read_columns(&source.path, ATTENTION_COLUMNS) {
            Ok(t) => (t, true),
            Err(_) => (RawTable::read_columns(&source.path, cols)?, false),
        };
        self.count(source, phase, &t)?;
        if full {
            handover::keep(&source.path, ATTENTION_COLUMNS, t);
        }
        Ok(())
    }

    fn count(&mut self, source: &Source, phase: AttentionPhase, t: &RawTable) -> Result<()> {
        let kernel = t.opt_str_codes("kernel_source")?;
        let attn = match phase {
            AttentionPhase::Context => Some(t.str_codes("attn_dtype")?),
            AttentionPhase::Generation => None,
        };
        let kv = t.str_codes("kv_cache_dtype")?;
        let heads = t.int("num_heads")?;
        let n_kv = t.int("num_key_value_heads")?;
        let head_dim = t.int("head_dim")?;
        let window = t.opt_int("window_size")?;
        let isl = t.int("isl")?;
        let batch = t.int("batch_size")?;
        let step = match phase {
            AttentionPhase::Context => None,
            AttentionPhase::Generation => t.opt_int("step")?,
        };
        // Per-file string codes -> accumulator ids.
        let attn_ids: Vec<u32> = attn
            .as_ref()
            .map(|a| a.values.iter().map(|v| self.intern(v)).collect())
            .unwrap_or_default();
        let kv_ids: Vec<u32> = kv.values.iter().map(|v| self.intern(v)).collect();
        // Per-file kernel codes -> lane index, or None when the source filter drops the kernel.
        let lane_of_code: Vec<Option<usize>> = match &kernel {
            Some(k) => k
                .values
                .iter()
                .map(|name| {
                    source.accepts(Some(name)).then(|| {
                        self.lane(if name.is_empty() { DEFAULT_LANE } else { name })
                    })
                })
                .collect(),
            None => Vec::new(),
        };
        let no_column_lane = if kernel.is_none() && source.accepts(None) {
            Some(self.lane(DEFAULT_LANE))
        } else {
            None
        };
        let lane_of_row = |i: usize| match &kernel {
            Some(k) => lane_of_code[k.codes[i] as usize],
            None => no_column_lane,
        };
        // Room for each lane's rows up front, so the key vectors never grow by copying.
        let mut per_lane = vec![0usize; self.lanes.len()];
        for i in 0..t.num_rows {
            if let Some(li) = lane_of_row(i) {
                per_lane[li] += 1;
            }
        }
        for (lane, n) in self.lanes.iter_mut().zip(per_lane) {
            lane.keys.reserve(n);
        }
        // Lanes were registered per distinct value above; restore first-seen row order.
        let mut seen_order: Vec<usize> = Vec::new();
        let mut last_slice: Option<(SliceKey, u32)> = None;
        for i in 0..t.num_rows {
            let Some(li) = lane_of_row(i) else {
                continue;
            };
            if !seen_order.contains(&li) {
                seen_order.push(li);
            }
            let a = attn.as_ref().map_or(0, |a| attn_ids[a.codes[i] as usize]);
            let k = kv_ids[kv.codes[i] as usize];
            let n_kv_lookup = if n_kv[i] == heads[i] { 0 } else { n_kv[i] };
            let w = window.map_or(0, |w| w[i]);
            let slice: SliceKey = (a, k, n_kv_lookup, head_dim[i], w);
            // Rows of one slice are usually adjacent: look the id up only when it changes.
            let id = match last_slice {
                Some((s, id)) if s == slice => id,
                _ => {
                    let next = self.slice_ids.len() as u32;
                    let id = *self.slice_ids.entry(slice).or_insert(next);
                    last_slice = Some((slice, id));
                    id
                }
            };
            let full: FullKey = match phase {
                AttentionPhase::Context => (id, heads[i], isl[i], batch[i]),
                AttentionPhase::Generation => {
                    (id, heads[i], batch[i], isl[i] + step.map_or(0, |s| s[i]))
                }
            };
            self.lanes[li].keys.push(full);
            self.lanes[li].counted = None;
        }
        for l in seen_order {
            if !self.seen.contains(&l) {
                self.seen.push(l);
            }
        }
        Ok(())
    }

    fn snapshot(&mut self) -> Vec<LaneDensity> {
        let mut out = Vec::with_capacity(self.seen.len());
        for &i in &self.seen {
            let (slices, rows) = self.lanes[i].settle();
            out.push(LaneDensity {
                lane: self.order[i].clone(),
                slices,
                rows,
            });
        }
        out
    }
}

/// Lane densities of one attention table over the resolver's sources (or its primary only),
/// lanes in first-seen order.
pub fn attention_lane_density(
    resolver: &SourceResolver,
    phase: AttentionPhase,
    primary_only: bool,
) -> Result<Vec<LaneDensity>> {
    let sources: Vec<Source> = if primary_only {
        resolver
            .primary_source(phase.basename())
            .into_iter()
            .collect()
    } else {
        resolver.sources(phase.basename())
    };
    let mut acc = DensityAcc::default();
    for s in &sources {
        acc.add_source(s, phase)?;
    }
    Ok(acc.snapshot())
}

/// Primary and shared densities in one pass over the sources.
fn primary_and_shared(
    resolver: &SourceResolver,
    phase: AttentionPhase,
) -> Result<(Vec<LaneDensity>, Vec<LaneDensity>)> {
    let sources = resolver.sources(phase.basename());
    let has_primary = resolver.primary_source(phase.basename()).is_some();
    let mut acc = DensityAcc::default();
    let mut primary = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        acc.add_source(s, phase)?;
        if i == 0 && has_primary {
            primary = acc.snapshot();
        }
    }
    Ok((primary, acc.snapshot()))
}

/// Densities already computed in this process, by (data folder, backend, version, shared
/// layer, phase): every compile asks for them twice, and reading the attention tables
/// dominates a compile otherwise.
type DensityKey = (std::path::PathBuf, Backend, String, bool, AttentionPhase);
type DensityPair = (Vec<LaneDensity>, Vec<LaneDensity>);

fn cached_densities(
    system: &SystemSpec,
    backend: Backend,
    version: &str,
    enable_shared_layer: bool,
    phase: AttentionPhase,
) -> Result<DensityPair> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<DensityKey, DensityPair>>> = OnceLock::new();
    let key_of = |phase| (system.data_dir.clone(), backend, version.to_string(), enable_shared_layer, phase);
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(hit) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key_of(phase)) {
        return Ok(hit.clone());
    }
    let resolver = SourceResolver::new(system, backend, version, enable_shared_layer)?;
    // A compile asks for both phases, one after the other: the other phase's table is read
    // and counted on another core meanwhile (its result, or error, is simply not kept if it
    // fails; it is asked for again then).
    let other = match phase {
        AttentionPhase::Context => AttentionPhase::Generation,
        AttentionPhase::Generation => AttentionPhase::Context,
    };
    let (pair, other_pair) = crate::parallel::install(|| {
        rayon::join(|| primary_and_shared(&resolver, phase), || primary_and_shared(&resolver, other))
    });
    let pair = pair?;
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    cache.insert(key_of(phase), pair.clone());
    if let Ok(other_pair) = other_pair {
        cache.entry(key_of(other)).or_insert(other_pair);
    }
    Ok(pair)
}

/// The framework-default lane from `attention_lane_defaults.yaml`: `(matched, lane)` where
/// `matched` says the map has an entry for (backend, floor-matched version, sm).
pub fn framework_default_lane(
    systems_root: &Path,
    backend: Backend,
    version: &str,
    sm_version: Option<u32>,
) -> Result<(bool, Option<String>)> {
    let path = systems_root.join("attention_lane_defaults.yaml");
    if !path.is_file() {
        return Ok((false, None));
    }
    let value: serde_yaml::Value = super::file_memo::parsed(&path, |text| {
        serde_yaml::from_str::<serde_yaml::Value>(text).map_err(|e| e.to_string())
    })
    .map_err(|e| AicError::System(format!("cannot read {}: {e}", path.display())))?
    .map_err(|e| AicError::System(format!("{}: {e}", path.display())))?;
    let Some(versions) = value.get(backend.as_str()).and_then(|v| v.as_mapping()) else {
        return Ok((false, None));
    };
    let want = lane_default_key(version);
    let mut best: Option<(Vec<u64>, &serde_yaml::Value)> = None;
    for (k, v) in versions {
        let Some(name) = yaml_scalar_text(k) else {
            continue;
        };
        let key = lane_default_key(&name);
        if key <= want && best.as_ref().is_none_or(|(b, _)| key > *b) {
            best = Some((key, v));
        }
    }
    let Some((_, sms)) = best else {
        return Ok((false, None));
    };
    let Some(sms) = sms.as_mapping() else {
        return Ok((false, None));
    };
    for (k, v) in sms {
        let sm = yaml_scalar_text(k).and_then(|s| s.trim().parse::<u32>().ok());
        if sm.is_some() && sm == sm_version {
            return Ok((true, yaml_scalar_text(v)));
        }
    }
    Ok((false, None))
}

/// Lanes an `attention_backend` override pins, or the unsupported-override error.
fn override_lanes(backend: Backend, name: &str) -> Result<Vec<String>> {
    let lanes: Option<Vec<&str>> = match backend {
        Backend::Sglang => match name {
            "fa3" | "triton" | "trtllm_mha" | "flashinfer" | "fla" => Some(vec![name]),
            _ => None,
        },
        Backend::Vllm => match name {
            "triton" => Some(vec!["vllm_triton_attn"]),
            "flashinfer" => Some(vec![
                "vllm_flashinfer_trtllmprefill",
                "vllm_flashinfer_trtllmdecode",
                "vllm_flashinfer",
            ]),
            _ => None,
        },
        Backend::Trtllm => None,
    };
    match lanes {
        Some(l) => Ok(l.into_iter().map(str::to_string).collect()),
        None => {
            let supported = match backend {
                Backend::Sglang => "['default', 'fa3', 'triton', 'trtllm_mha', 'flashinfer', 'fla']",
                Backend::Vllm => "['default', 'triton', 'flashinfer']",
                Backend::Trtllm => "['default']",
            };
            Err(AicError::InvalidConfig(format!(
                "attention_backend='{name}' is not supported on backend '{}'; supported values: \
                 {supported}.",
                backend.as_str()
            )))
        }
    }
}

/// `walk(D)` of spec 30 §9 step 4.
fn walk(pinned: &[String], d: &[LaneDensity]) -> Vec<String> {
    let density = |lane: &str| {
        d.iter()
            .find(|x| x.lane == lane)
            .map_or((0, 0), |x| (x.slices, x.rows))
    };
    let sort_key = |lane: &str| {
        let (s, r) = density(lane);
        (Reverse(s), Reverse(r), lane.to_string())
    };
    let is_pinned = |lane: &str| pinned.iter().any(|p| p == lane);
    let mut out: Vec<String> = pinned.to_vec();
    let mut donors: Vec<&str> = KNOWN_LANES.iter().copied().filter(|l| !is_pinned(l)).collect();
    donors.sort_by_key(|l| sort_key(l));
    out.extend(donors.into_iter().map(str::to_string));
    out.push(DEFAULT_LANE.to_string());
    let mut rest: Vec<&str> = d
        .iter()
        .map(|x| x.lane.as_str())
        .filter(|l| !KNOWN_LANES.contains(l) && *l != DEFAULT_LANE && !is_pinned(l))
        .collect();
    rest.sort_by_key(|l| sort_key(l));
    out.extend(rest.into_iter().map(str::to_string));
    out
}

/// Combines pinned lanes with the primary and shared densities (spec 30 §9 step 5).
fn combine(pinned: &[String], primary: &[LaneDensity], shared: &[LaneDensity]) -> Vec<String> {
    if primary.is_empty() {
        return walk(pinned, shared);
    }
    let is_pinned = |lane: &String| pinned.contains(lane);
    let in_primary = |lane: &String| primary.iter().any(|x| x.lane == *lane);
    let mut out: Vec<String> = pinned.to_vec();
    out.extend(
        walk(pinned, primary)
            .into_iter()
            .filter(|l| in_primary(l) && !is_pinned(l)),
    );
    out.extend(
        walk(pinned, shared)
            .into_iter()
            .filter(|l| !in_primary(l) && !is_pinned(l)),
    );
    out
}

/// The `lane_order` of a top-level attention op (spec 30 §9, 11 §4.1).
pub fn attention_lane_order(
    systems_root: &Path,
    system: &SystemSpec,
    backend: Backend,
    version: &str,
    phase: AttentionPhase,
    enable_shared_layer: bool,
    attention_backend_override: Option<&str>,
) -> Result<Vec<String>> {
    let override_name = attention_backend_override.filter(|o| *o != DEFAULT_LANE);
    let mut pinned: Vec<String> = match override_name {
        Some(o) => override_lanes(backend, o)?,
        None => Vec::new(),
    };
    let (matched, framework_lane) =
        framework_default_lane(systems_root, backend, version, system.gpu.sm_version)?;
    if let Some(lane) = framework_lane {
        if lane != DEFAULT_LANE && !pinned.contains(&lane) {
            pinned.push(lane);
        }
    }
    if pinned.is_empty() && !matched {
        return Ok(vec![DEFAULT_LANE.to_string()]);
    }
    let (primary, shared) = cached_densities(system, backend, version, enable_shared_layer, phase)?;
    if let Some(o) = override_name {
        let lanes = override_lanes(backend, o)?;
        if !lanes.iter().any(|l| shared.iter().any(|d| d.lane == *l)) {
            return Err(AicError::InvalidConfig(format!(
                "attention_backend='{o}' has no {} attention measurements for {} {} on {} \
                 (lanes {:?}; measured lanes {:?})",
                phase.label(),
                backend.as_str(),
                version,
                system.name,
                lanes,
                shared.iter().map(|d| d.lane.as_str()).collect::<Vec<_>>()
            )));
        }
    }
    Ok(combine(&pinned, &primary, &shared))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
    }

    fn sys(name: &str) -> SystemSpec {
        SystemSpec::load(&root(), name).unwrap()
    }

    /// Distinct slices and keys counted with hash sets, the plain way.
    fn naive(keys: &[FullKey]) -> (usize, usize) {
        let slices: std::collections::HashSet<u32> = keys.iter().map(|k| k.0).collect();
        let rows: std::collections::HashSet<FullKey> = keys.iter().copied().collect();
        (slices.len(), rows.len())
    }

    #[test]
    fn packed_and_wide_counts_agree_with_hash_sets() {
        // duplicates, a slice seen again later, and values that need many bits
        let mut keys: Vec<FullKey> = vec![
            (0, 32, 4096, 1), (0, 32, 4096, 1), (1, 32, 4096, 1), (0, 8, 1, 1),
            (2, 1 << 20, 1 << 14, 512), (1, 32, 4096, 1), (0, 0, 0, 0),
        ];
        keys.extend((0..500).map(|i| (i % 7, i64::from(i % 13), i64::from(i % 5), 3)));
        let mut acc = LaneAcc { keys: keys.clone(), counted: None };
        assert!(packed_keys(&keys).is_some(), "these keys pack into 64 bits");
        assert_eq!(acc.settle(), naive(&keys));
        // a negative value, and values too wide to pack together, take the tuple path
        for extra in [(3, -1, 2, 2), (4, i64::MAX, i64::MAX, 1)] {
            let mut wide = keys.clone();
            wide.push(extra);
            wide.push(extra);
            assert!(packed_keys(&wide).is_none());
            let mut acc = LaneAcc { keys: wide.clone(), counted: None };
            assert_eq!(acc.settle(), naive(&wide));
        }
        // counts are kept until a key is added
        acc.keys.push((9, 1, 1, 1));
        assert_eq!(acc.settle(), naive(&keys), "no recount without a reset");
        acc.counted = None;
        let (slices, rows) = naive(&keys);
        assert_eq!(acc.settle(), (slices + 1, rows + 1));
        assert_eq!(LaneAcc::default().settle(), (0, 0));
    }

    fn dens(list: &[(&str, usize, usize)]) -> Vec<LaneDensity> {
        list.iter()
            .map(|(l, s, r)| LaneDensity {
                lane: l.to_string(),
                slices: *s,
                rows: *r,
            })
            .collect()
    }

    fn sorted(mut d: Vec<LaneDensity>) -> Vec<LaneDensity> {
        d.sort_by(|a, b| a.lane.cmp(&b.lane));
        d
    }

    fn density(
        system: &str,
        backend: Backend,
        version: &str,
        phase: AttentionPhase,
        primary: bool,
    ) -> Vec<LaneDensity> {
        let r = SourceResolver::new(&sys(system), backend, version, true).unwrap();
        attention_lane_density(&r, phase, primary).unwrap()
    }

    fn order(
        system: &str,
        backend: Backend,
        version: &str,
        phase: AttentionPhase,
        shared: bool,
        ovr: Option<&str>,
    ) -> Result<Vec<String>> {
        attention_lane_order(&root(), &sys(system), backend, version, phase, shared, ovr)
    }

    fn v(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    use AttentionPhase::{Context, Generation};

    #[test]
    fn densities_sm90() {
        for s in ["h200_sxm", "h100_sxm"] {
            for primary in [true, false] {
                assert_eq!(
                    sorted(density(s, Backend::Vllm, "0.24.0", Context, primary)),
                    dens(&[("vllm_flash_attn_fa3", 84, 50252), ("vllm_flash_attn_fa4", 3, 578)])
                );
                assert_eq!(
                    sorted(density(s, Backend::Vllm, "0.24.0", Generation, primary)),
                    dens(&[("vllm_flash_attn_fa3", 84, 61366), ("vllm_flash_attn_fa4", 3, 800)])
                );
                assert_eq!(
                    sorted(density(s, Backend::Sglang, "0.5.14", Context, primary)),
                    dens(&[("fa3", 66, 31622), ("triton", 24, 3468)])
                );
                assert_eq!(
                    sorted(density(s, Backend::Sglang, "0.5.14", Generation, primary)),
                    dens(&[("fa3", 66, 37176), ("triton", 16, 3292)])
                );
                assert_eq!(
                    density(s, Backend::Trtllm, "1.3.0rc20", Generation, primary),
                    dens(&[("torch_flow", 66, 52033)])
                );
            }
        }
        assert_eq!(
            density("h200_sxm", Backend::Trtllm, "1.3.0rc20", Context, false),
            dens(&[("torch_flow", 99, 75837)])
        );
        assert_eq!(
            density("h100_sxm", Backend::Trtllm, "1.3.0rc20", Context, false),
            dens(&[("torch_flow", 99, 75840)])
        );
    }

    #[test]
    fn densities_b200() {
        let vllm_ctx_primary = dens(&[
            ("vllm_flashinfer_trtllmdecode", 72, 3684),
            ("vllm_flashinfer_trtllmprefill", 72, 44664),
            ("vllm_triton_attn", 9, 1632),
        ]);
        assert_eq!(
            sorted(density("b200_sxm", Backend::Vllm, "0.24.0", Context, true)),
            vllm_ctx_primary
        );
        let mut shared = vllm_ctx_primary.clone();
        shared.insert(0, dens(&[("vllm_flashinfer", 50, 35360)]).remove(0));
        assert_eq!(
            sorted(density("b200_sxm", Backend::Vllm, "0.24.0", Context, false)),
            shared
        );
        assert_eq!(
            sorted(density("b200_sxm", Backend::Vllm, "0.24.0", Generation, false)),
            dens(&[
                ("vllm_flashinfer", 50, 36240),
                ("vllm_flashinfer_trtllmdecode", 72, 59582),
                ("vllm_triton_attn", 9, 2228),
            ])
        );
        assert_eq!(
            sorted(density("b200_sxm", Backend::Sglang, "0.5.14", Context, false)),
            dens(&[("flashinfer", 10, 2584), ("triton", 39, 9486), ("trtllm_mha", 66, 31141)])
        );
        assert_eq!(
            sorted(density("b200_sxm", Backend::Sglang, "0.5.14", Generation, false)),
            dens(&[("flashinfer", 10, 3570), ("triton", 26, 8620), ("trtllm_mha", 66, 36311)])
        );
        assert_eq!(
            sorted(density("b200_sxm", Backend::Trtllm, "1.3.0rc20", Context, false)),
            dens(&[("torch_flow", 72, 67107), ("torch_flow_flashinfer", 16, 2312)])
        );
        assert_eq!(
            sorted(density("b200_sxm", Backend::Trtllm, "1.3.0rc20", Generation, false)),
            dens(&[("torch_flow", 48, 46980), ("torch_flow_flashinfer", 16, 3540)])
        );
        // first-seen order: b200 sglang context lanes appear as trtllm_mha, triton, flashinfer
        let lanes: Vec<String> = density("b200_sxm", Backend::Sglang, "0.5.14", Context, false)
            .into_iter()
            .map(|d| d.lane)
            .collect();
        assert_eq!(lanes, v(&["trtllm_mha", "triton", "flashinfer"]));
    }

    #[test]
    fn lane_orders_spec_tables() {
        let sm90_vllm = v(&[
            "vllm_flash_attn_fa3",
            "vllm_flash_attn_fa4",
            "fa3",
            "fla",
            "flashinfer",
            "triton",
            "trtllm_mha",
            "default",
        ]);
        let sm90_sglang = v(&["fa3", "triton", "fla", "flashinfer", "trtllm_mha", "default"]);
        for s in ["h200_sxm", "h100_sxm"] {
            for phase in [Context, Generation] {
                assert_eq!(
                    order(s, Backend::Vllm, "0.24.0", phase, true, None).unwrap(),
                    sm90_vllm
                );
                assert_eq!(
                    order(s, Backend::Sglang, "0.5.14", phase, true, None).unwrap(),
                    sm90_sglang
                );
                assert_eq!(
                    order(s, Backend::Trtllm, "1.3.0rc20", phase, true, None).unwrap(),
                    v(&["default"])
                );
            }
        }
        let b200_ctx = v(&[
            "vllm_flashinfer_trtllmprefill",
            "vllm_flashinfer_trtllmdecode",
            "vllm_triton_attn",
            "fa3",
            "fla",
            "flashinfer",
            "triton",
            "trtllm_mha",
            "default",
            "vllm_flashinfer",
        ]);
        assert_eq!(
            order("b200_sxm", Backend::Vllm, "0.24.0", Context, true, None).unwrap(),
            b200_ctx
        );
        assert_eq!(
            order("b200_sxm", Backend::Vllm, "0.24.0", Generation, true, None).unwrap(),
            b200_ctx[1..].to_vec()
        );
        // without the shared layer the 0.22.0-only lane disappears (goldens §1.2)
        assert_eq!(
            order("b200_sxm", Backend::Vllm, "0.24.0", Context, false, None).unwrap(),
            b200_ctx[..9].to_vec()
        );
        assert_eq!(
            order("b200_sxm", Backend::Vllm, "0.24.0", Generation, false, None).unwrap(),
            b200_ctx[1..9].to_vec()
        );
        let b200_sglang = v(&["triton", "trtllm_mha", "flashinfer", "fa3", "fla", "default"]);
        for phase in [Context, Generation] {
            assert_eq!(
                order("b200_sxm", Backend::Sglang, "0.5.14", phase, true, None).unwrap(),
                b200_sglang
            );
            assert_eq!(
                order("b200_sxm", Backend::Trtllm, "1.3.0rc20", phase, true, None).unwrap(),
                v(&["default"])
            );
        }
    }

    #[test]
    fn lane_orders_with_overrides() {
        assert_eq!(
            order("h200_sxm", Backend::Sglang, "0.5.14", Context, true, Some("triton")).unwrap(),
            v(&["triton", "fa3", "fla", "flashinfer", "trtllm_mha", "default"])
        );
        assert_eq!(
            order("b200_sxm", Backend::Vllm, "0.24.0", Context, true, Some("flashinfer")).unwrap(),
            v(&[
                "vllm_flashinfer_trtllmprefill",
                "vllm_flashinfer_trtllmdecode",
                "vllm_flashinfer",
                "vllm_triton_attn",
                "fa3",
                "fla",
                "flashinfer",
                "triton",
                "trtllm_mha",
                "default",
            ])
        );
        // `default` pins nothing
        assert_eq!(
            order("h200_sxm", Backend::Trtllm, "1.3.0rc20", Context, true, Some("default"))
                .unwrap(),
            v(&["default"])
        );
        let e = order("h200_sxm", Backend::Trtllm, "1.3.0rc20", Context, true, Some("fa3"))
            .unwrap_err();
        assert!(e.to_string().contains(
            "attention_backend='fa3' is not supported on backend 'trtllm'; supported values: \
             ['default']."
        ));
        assert!(order("h200_sxm", Backend::Vllm, "0.24.0", Context, true, Some("fa3")).is_err());
        // an override lane with no measurements is an error
        let e = order("h200_sxm", Backend::Sglang, "0.5.14", Context, true, Some("flashinfer"))
            .unwrap_err();
        assert!(e.to_string().contains("has no context attention measurements"), "{e}");
    }

    #[test]
    fn lane_orders_other_versions() {
        // vllm next = 0.27.0 (no own rows): walk(shared)
        let next = v(&[
            "fa3",
            "fla",
            "flashinfer",
            "triton",
            "trtllm_mha",
            "default",
            "vllm_flash_attn_fa3",
            "vllm_flash_attn_fa4",
        ]);
        for phase in [Context, Generation] {
            assert_eq!(
                order("h200_sxm", Backend::Vllm, "0.27.0", phase, true, None).unwrap(),
                next
            );
        }
        // below the lowest map key: ["default"]
        assert_eq!(
            order("b200_sxm", Backend::Vllm, "0.22.0", Context, true, None).unwrap(),
            v(&["default"])
        );
        assert_eq!(
            order("h200_sxm", Backend::Sglang, "0.5.13", Context, true, None).unwrap(),
            v(&["default"])
        );
        // sglang next 0.5.16 floor-matches 0.5.14 (pin fa3) and rides backward fill
        assert_eq!(
            order("h200_sxm", Backend::Sglang, "0.5.16", Context, true, None).unwrap(),
            v(&["fa3", "triton", "fla", "flashinfer", "trtllm_mha", "default"])
        );
    }

    #[test]
    fn lane_default_floor_match() {
        let r = root();
        let f = |b, ver: &str, sm: u32| framework_default_lane(&r, b, ver, Some(sm)).unwrap();
        assert_eq!(f(Backend::Sglang, "0.5.14", 90), (true, Some("fa3".into())));
        assert_eq!(f(Backend::Sglang, "0.5.14.post1", 90), (true, Some("fa3".into())));
        assert_eq!(f(Backend::Sglang, "0.5.14rc1", 90), (true, Some("fa3".into())));
        assert_eq!(f(Backend::Sglang, "0.5.14", 100), (true, Some("triton".into())));
        assert_eq!(f(Backend::Sglang, "0.5.14", 103), (true, Some("triton".into())));
        assert_eq!(f(Backend::Sglang, "0.5.14", 120), (true, Some("flashinfer".into())));
        assert_eq!(f(Backend::Sglang, "0.5.13", 90), (false, None));
        assert_eq!(f(Backend::Vllm, "0.27.0", 100), (true, Some("default".into())));
        assert_eq!(f(Backend::Vllm, "0.24", 90), (false, None));
        assert_eq!(f(Backend::Vllm, "v0.24.0", 90), (false, None));
        assert_eq!(f(Backend::Vllm, "0.1.dev19262", 90), (false, None));
        assert_eq!(f(Backend::Vllm, "0.24.0", 120), (false, None));
        assert_eq!(f(Backend::Trtllm, "1.3.0rc20", 90), (false, None));
        // A system without an sm (b60) matches no row (spec 12 §4).
        assert_eq!(framework_default_lane(&r, Backend::Sglang, "0.5.14", None).unwrap(), (false, None));
    }

    #[test]
    fn walk_rules() {
        // empty density: pinned + donors by name + default
        assert_eq!(
            walk(&v(&["fa3"]), &[]),
            v(&["fa3", "fla", "flashinfer", "triton", "trtllm_mha", "default"])
        );
        let d = dens(&[("zz", 5, 1), ("aa", 5, 1), ("triton", 1, 10), ("default", 3, 3)]);
        assert_eq!(
            walk(&[], &d),
            v(&["triton", "fa3", "fla", "flashinfer", "trtllm_mha", "default", "aa", "zz"])
        );
    }
}
