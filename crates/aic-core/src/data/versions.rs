//! Backend versions: the queryable slots of `query_versions.yaml` (spec 10 §7, 30 §10), the
//! resolution of a requested version (alias or literal) to a directory name, and the three
//! version comparators of spec 10 §8.8 — full PEP 440 (source resolution), the slot key
//! (deriving `next`) and the lane-default key (floor match in `attention_lane_defaults.yaml`).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::data::system::{yaml_scalar_text, SystemSpec};
use crate::error::{AicError, Result};
use crate::spec::Backend;

/// First-level directory names of a system's data tree that are legacy backend dirs, not families.
pub(crate) const LEGACY_BACKEND_DIRS: &[&str] = &["trtllm", "sglang", "vllm", "nccl", "oneccl"];

/// Version directories that hold data in the reference package on systems outside the vendored
/// subset (h200/b200/h100). `next` is derived across every defaults-governed system of the
/// reference's tree, so these keep the derived slot equal to the reference's (vllm `next` =
/// 0.27.0, which has no directory on any vendored system).
const UNVENDORED_VERSION_DIRS: &[(&str, &str)] = &[("vllm", "0.27.0")];

/// Legacy marker: the version dir's collection is incomplete (spec 10 §8.6).
pub(crate) const INCOMPLETE_MARKER: &str = "INCOMPLETE.txt";
/// Legacy marker: the version dir reuses another version's tables (deprecated, spec 10 §8.6).
pub(crate) const SHARED_LAYER_MARKER: &str = "SHARED_LAYER_REUSE.txt";

/// Marker files that do not count as data when deciding whether a version dir holds a file.
const MARKER_FILES: &[&str] = &[INCOMPLETE_MARKER, SHARED_LAYER_MARKER];

/// The environment variable that lets any literal version through.
pub const ALLOW_UNLISTED_ENV: &str = "AIC_ALLOW_UNLISTED_VERSIONS";

/// A requested version after alias resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedVersion {
    /// The literal version directory name (`None` only when ungated and nothing was requested).
    pub version: Option<String>,
    /// True when the version is a `next` slot with no directory on this system (loaded from
    /// backward fill only).
    pub tolerate_dirless: bool,
}

/// The queryable slots of one (system, backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSlots {
    /// The `current` slot.
    pub current: String,
    /// The optional `previous` slot.
    pub previous: Option<String>,
    /// The derived `next` slot.
    pub next: Option<String>,
}

impl VersionSlots {
    /// Python-dict rendering used in error messages: `{'current': '0.24.0', 'next': '0.27.0'}`.
    pub fn py_repr(&self) -> String {
        let mut parts = vec![format!("'current': {}", py_str_repr(&self.current))];
        if let Some(p) = &self.previous {
            parts.push(format!("'previous': {}", py_str_repr(p)));
        }
        if let Some(n) = &self.next {
            parts.push(format!("'next': {}", py_str_repr(n)));
        }
        format!("{{{}}}", parts.join(", "))
    }

    /// The slot value of an alias (`current`, `previous`, `next`); `None` for other names.
    fn alias(&self, name: &str) -> Option<Option<&str>> {
        match name {
            "current" => Some(Some(self.current.as_str())),
            "previous" => Some(self.previous.as_deref()),
            "next" => Some(self.next.as_deref()),
            _ => None,
        }
    }
}

/// Python `repr()` of a string (single quotes unless the text holds one and no double quote).
pub(crate) fn py_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Slot entry of `query_versions.yaml` for one backend.
#[derive(Debug, Clone, Default)]
struct SlotEntry {
    current: Option<String>,
    previous: Option<String>,
}

/// The parsed `query_versions.yaml`.
#[derive(Debug, Clone, Default)]
struct QueryVersions {
    defaults: Vec<(String, SlotEntry)>,
    overrides: Vec<(String, Vec<(String, SlotEntry)>)>,
}

impl QueryVersions {
    fn load(systems_root: &Path) -> Result<QueryVersions> {
        let path = systems_root.join("query_versions.yaml");
        if !path.is_file() {
            return Ok(QueryVersions::default());
        }
        let parsed = super::file_memo::parsed(&path, |text| {
            Self::parse(&path, text).map_err(|e| match e {
                AicError::System(message) => message,
                other => other.to_string(),
            })
        })
        .map_err(|e| AicError::System(format!("cannot read {}: {e}", path.display())))?;
        parsed.map_err(AicError::System)
    }

    /// Parses the text of `query_versions.yaml` read from `path` (named in errors).
    fn parse(path: &Path, text: &str) -> Result<QueryVersions> {
        let value: serde_yaml::Value = serde_yaml::from_str(text)
            .map_err(|e| AicError::System(format!("{}: {e}", path.display())))?;
        let bad = |what: &str| AicError::System(format!("{}: {what}", path.display()));
        let parse_backends = |v: &serde_yaml::Value| -> Result<Vec<(String, SlotEntry)>> {
            let mut out = Vec::new();
            let Some(map) = v.as_mapping() else {
                if v.is_null() {
                    return Ok(out);
                }
                return Err(bad("backend entries must be mappings"));
            };
            for (k, e) in map {
                let name = yaml_scalar_text(k).ok_or_else(|| bad("bad backend key"))?;
                let mut entry = SlotEntry::default();
                if let Some(m) = e.as_mapping() {
                    entry.current = m.get("current").and_then(yaml_scalar_text);
                    entry.previous = m.get("previous").and_then(yaml_scalar_text);
                } else if !e.is_null() {
                    return Err(bad(&format!("slot entry of '{name}' must be a mapping")));
                }
                out.push((name, entry));
            }
            Ok(out)
        };
        let mut qv = QueryVersions::default();
        if let Some(d) = value.get("defaults") {
            qv.defaults = parse_backends(d)?;
        }
        if let Some(o) = value.get("overrides").and_then(|o| o.as_mapping()) {
            for (k, v) in o {
                let system = yaml_scalar_text(k).ok_or_else(|| bad("bad system key"))?;
                qv.overrides.push((system, parse_backends(v)?));
            }
        }
        Ok(qv)
    }

    fn override_for(&self, system: &str, backend: &str) -> Option<&SlotEntry> {
        self.overrides
            .iter()
            .find(|(s, _)| s == system)
            .and_then(|(_, b)| b.iter().find(|(n, _)| n == backend).map(|(_, e)| e))
    }

    fn default_for(&self, backend: &str) -> Option<&SlotEntry> {
        self.defaults
            .iter()
            .find(|(n, _)| n == backend)
            .map(|(_, e)| e)
    }
}

/// Sorted, de-duplicated names of subdirectories of `dir` (not starting with `.`).
pub(crate) fn subdir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = super::dir_listing::entries(dir)
        .map(|entries| {
            entries
                .iter()
                .filter(|e| e.utf8 && !e.name.starts_with('.') && e.is_dir)
                .map(|e| e.name.clone())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

/// The family directories of a system's data tree (legacy backend dirs excluded), sorted.
pub(crate) fn family_dirs(data_dir: &Path) -> Vec<String> {
    subdir_names(data_dir)
        .into_iter()
        .filter(|n| !LEGACY_BACKEND_DIRS.contains(&n.as_str()))
        .collect()
}

/// Every version directory path of `backend` in a data tree: `<family>/<backend>/<v>` and the
/// legacy `<backend>/<v>`, as (version name, directory).
pub(crate) fn version_dirs(data_dir: &Path, backend: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for family in family_dirs(data_dir) {
        let base = data_dir.join(&family).join(backend);
        for v in subdir_names(&base) {
            out.push((v.clone(), base.join(v)));
        }
    }
    if LEGACY_BACKEND_DIRS.contains(&backend) {
        let base = data_dir.join(backend);
        for v in subdir_names(&base) {
            out.push((v.clone(), base.join(v)));
        }
    }
    out
}

/// Distinct version directory names of `backend` in a data tree, sorted by name.
pub(crate) fn version_names(data_dir: &Path, backend: &str) -> Vec<String> {
    let set: BTreeSet<String> = version_dirs(data_dir, backend)
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    set.into_iter().collect()
}

/// True when a version directory holds a table: a `*.parquet` file, or a `reuse.yaml` that
/// declares which donor's tables it uses. A folder with only markers, a sidecar or nothing at
/// all is not a version with data (it would silently take every table from other versions).
pub(crate) fn dir_has_table(dir: &Path) -> bool {
    let Some(entries) = super::dir_listing::entries(dir) else {
        return false;
    };
    entries.iter().any(|e| {
        !e.name.starts_with('.')
            && (e.name.ends_with(".parquet") || e.name == super::sidecars::REUSE_FILE)
            && e.is_file
    })
}

/// Distinct names of the versions of `backend` that hold a table in at least one of their
/// directories ([`dir_has_table`]), sorted by name: the versions an engine can be built for.
pub(crate) fn versions_with_tables(data_dir: &Path, backend: &str) -> Vec<String> {
    let set: BTreeSet<String> = version_dirs(data_dir, backend)
        .into_iter()
        .filter(|(_, dir)| dir_has_table(dir))
        .map(|(v, _)| v)
        .collect();
    set.into_iter().collect()
}

/// True when the directory holds a regular file other than dot-files and legacy markers.
fn holds_data_file(dir: &Path) -> bool {
    let Some(entries) = super::dir_listing::entries(dir) else {
        return false;
    };
    entries
        .iter()
        .any(|e| !e.name.starts_with('.') && !MARKER_FILES.contains(&e.name.as_str()) && e.is_file)
}

/// The queryable slots of (system, backend); `None` when the pair is ungated (no `current`
/// entry, or no version directory of the backend in the system's data tree).
pub fn version_slots(
    systems_root: &Path,
    system: &SystemSpec,
    backend: Backend,
) -> Result<Option<VersionSlots>> {
    Ok(gated_slots(systems_root, system, backend)?.map(|g| g.with_next(systems_root, system)))
}

/// The `current` and `previous` slots of a gated (system, backend), with what deriving `next`
/// needs. `next` is the one slot that depends on other systems' data trees (every
/// defaults-governed system is walked), so it is derived only when a request needs it.
struct GatedSlots {
    qv: QueryVersions,
    backend: &'static str,
    overridden: bool,
    current: String,
    previous: Option<String>,
}

impl GatedSlots {
    /// All three slots.
    fn with_next(self, systems_root: &Path, system: &SystemSpec) -> VersionSlots {
        let next = if self.overridden {
            None
        } else {
            derive_next(systems_root, &self.qv, system, self.backend, &self.current)
        };
        VersionSlots {
            current: self.current,
            previous: self.previous,
            next,
        }
    }

    /// The version a request resolves to when that needs no `next` slot: `current` (also for
    /// no request), an existing `previous`, or a literal equal to one of them. Such a version
    /// is never the dirless `next` (that one differs from both).
    fn without_next<'a>(&'a self, requested: Option<&'a str>) -> Option<&'a str> {
        match requested.unwrap_or("current") {
            "current" => Some(self.current.as_str()),
            "previous" => self.previous.as_deref(),
            "next" => None,
            literal if literal == self.current || self.previous.as_deref() == Some(literal) => {
                Some(literal)
            }
            _ => None,
        }
    }
}

/// [`GatedSlots`] of (system, backend); `None` when the pair is ungated (see [`version_slots`]).
fn gated_slots(
    systems_root: &Path,
    system: &SystemSpec,
    backend: Backend,
) -> Result<Option<GatedSlots>> {
    let qv = QueryVersions::load(systems_root)?;
    let b = backend.as_str();
    let overridden = qv.override_for(&system.name, b);
    let entry = overridden.or_else(|| qv.default_for(b));
    let Some(current) = entry.and_then(|e| e.current.clone()) else {
        return Ok(None);
    };
    if versions_with_tables(&system.data_dir, b).is_empty() {
        return Ok(None);
    }
    let previous = entry.and_then(|e| e.previous.clone());
    let overridden = overridden.is_some();
    Ok(Some(GatedSlots {
        qv,
        backend: b,
        overridden,
        current,
        previous,
    }))
}

/// `next`: the highest version (slot key) newer than `current` that holds a data file on any
/// system governed by the defaults for this backend.
fn derive_next(
    systems_root: &Path,
    qv: &QueryVersions,
    system: &SystemSpec,
    backend: &str,
    current: &str,
) -> Option<String> {
    let mut data_dirs: Vec<PathBuf> = Vec::new();
    for name in subdir_names(&systems_root.join("data")) {
        if qv.override_for(&name, backend).is_none() {
            data_dirs.push(systems_root.join("data").join(name));
        }
    }
    if !data_dirs.contains(&system.data_dir) {
        data_dirs.push(system.data_dir.clone());
    }
    let mut candidates: BTreeSet<String> = BTreeSet::new();
    for dir in &data_dirs {
        for (v, path) in version_dirs(dir, backend) {
            if holds_data_file(&path) {
                candidates.insert(v);
            }
        }
    }
    for (b, v) in UNVENDORED_VERSION_DIRS {
        if *b == backend {
            candidates.insert((*v).to_string());
        }
    }
    let cur = slot_key(current);
    candidates
        .into_iter()
        .filter(|v| slot_key(v) > cur)
        .max_by(|a, b| slot_key(a).cmp(&slot_key(b)))
}

/// True when `AIC_ALLOW_UNLISTED_VERSIONS` is `1`, `true` or `yes` (any case).
pub fn allow_unlisted_versions() -> bool {
    std::env::var(ALLOW_UNLISTED_ENV)
        .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
        .unwrap_or(false)
}

/// Resolves a requested version (alias, literal or `None` = current) for (system, backend).
pub fn resolve_backend_version(
    systems_root: &Path,
    system: &SystemSpec,
    backend: Backend,
    requested: Option<&str>,
) -> Result<ResolvedVersion> {
    resolve_with(
        systems_root,
        system,
        backend,
        requested,
        allow_unlisted_versions(),
    )
}

/// [`resolve_backend_version`] with the "allow unlisted" switch given explicitly.
pub fn resolve_with(
    systems_root: &Path,
    system: &SystemSpec,
    backend: Backend,
    requested: Option<&str>,
    allow_unlisted: bool,
) -> Result<ResolvedVersion> {
    let Some(gated) = gated_slots(systems_root, system, backend)? else {
        return Ok(ResolvedVersion {
            version: requested.map(str::to_string),
            tolerate_dirless: false,
        });
    };
    if let Some(version) = gated.without_next(requested) {
        return Ok(ResolvedVersion {
            version: Some(version.to_string()),
            tolerate_dirless: false,
        });
    }
    let slots = gated.with_next(systems_root, system);
    let b = backend.as_str();
    let name = requested.unwrap_or("current");
    let version = match slots.alias(name) {
        Some(Some(v)) => v.to_string(),
        Some(None) => {
            return Err(AicError::Value(format!(
                "{b} on {} has no '{name}' version; available slots: {}",
                system.name,
                slots.py_repr()
            )))
        }
        None => {
            let listed = name == slots.current
                || slots.previous.as_deref() == Some(name)
                || slots.next.as_deref() == Some(name);
            if !listed && !allow_unlisted {
                return Err(AicError::Value(format!(
                    "{b}/{} looks like an old-style raw version query; {} now resolves versions \
                     through queryable slots. New way: use an alias ('current'/'previous'/'next') \
                     or one of the slot versions {}. Old way (raw data-coordinate access, data \
                     outside these slots is not maintained to the queryable bar): re-run with the \
                     environment variable {ALLOW_UNLISTED_ENV}=1, or pass \
                     allow_unlisted_version=True in SDK code.",
                    py_str_repr(name),
                    system.name,
                    slots.py_repr()
                )));
            }
            name.to_string()
        }
    };
    let is_next = slots.next.as_deref() == Some(version.as_str())
        && version != slots.current
        && slots.previous.as_deref() != Some(version.as_str());
    let tolerate_dirless = is_next
        && !versions_with_tables(&system.data_dir, b).contains(&version);
    Ok(ResolvedVersion {
        version: Some(version),
        tolerate_dirless,
    })
}

// ---------------------------------------------------------------------------------------------
// (1) PEP 440

/// Pre-release part of the PEP 440 sort key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum PreKey {
    /// A dev release of a plain release sorts before every pre-release.
    NegInf,
    /// (letter rank a < b < rc, number)
    Pre(u8, u64),
    /// No pre-release.
    PosInf,
}

/// One segment of a local version label: strings sort before numbers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum LocalPart {
    Str(String),
    Num(u64),
}

/// A parsed PEP 440 version with the ordering of Python's `packaging`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pep440Version {
    epoch: u64,
    release: Vec<u64>,
    pre: Option<(u8, u64)>,
    post: Option<u64>,
    dev: Option<u64>,
    local: Option<Vec<LocalPart>>,
}

type Pep440Key<'a> = (
    u64,
    &'a [u64],
    PreKey,
    Option<u64>,
    DevKey,
    Option<&'a [LocalPart]>,
);

/// Dev part of the sort key: a missing dev segment sorts last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum DevKey {
    Dev(u64),
    None,
}

/// Cursor over the lower-cased version text.
struct Scanner<'a> {
    s: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn eat_str(&mut self, t: &str) -> bool {
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    /// Digits as a number (`Some(None)` on overflow is treated as a parse failure by callers).
    fn number(&mut self) -> Option<Option<u64>> {
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        if start == self.i {
            return None;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).ok()?;
        Some(text.parse::<u64>().ok())
    }
    /// Skips one optional `-`, `_` or `.` separator.
    fn sep(&mut self) {
        if matches!(self.peek(), Some(b'-' | b'_' | b'.')) {
            self.i += 1;
        }
    }
}

impl Pep440Version {
    /// Parses a version with PEP 440 normalisation rules; `None` when it is not a version.
    pub fn parse(s: &str) -> Option<Self> {
        let lower = s.trim().to_ascii_lowercase();
        let mut sc = Scanner {
            s: lower.as_bytes(),
            i: 0,
        };
        sc.eat(b'v');
        // epoch and release
        let first = sc.number()??;
        let mut epoch = 0;
        let mut release = vec![first];
        if sc.eat(b'!') {
            epoch = first;
            release = vec![sc.number()??];
        }
        loop {
            let save = sc.i;
            if sc.eat(b'.') {
                if let Some(n) = sc.number() {
                    release.push(n?);
                    continue;
                }
            }
            sc.i = save;
            break;
        }
        // pre-release
        let mut pre = None;
        {
            let save = sc.i;
            sc.sep();
            let labels: [(&str, u8); 7] = [
                ("alpha", 0),
                ("a", 0),
                ("beta", 1),
                ("b", 1),
                ("preview", 2),
                ("pre", 2),
                ("rc", 2),
            ];
            let mut found = None;
            for (label, rank) in labels {
                if sc.eat_str(label) {
                    found = Some(rank);
                    break;
                }
            }
            if found.is_none() && sc.eat(b'c') {
                found = Some(2);
            }
            match found {
                Some(rank) => {
                    let after_label = sc.i;
                    sc.sep();
                    let n = match sc.number() {
                        Some(n) => n?,
                        None => {
                            sc.i = after_label;
                            0
                        }
                    };
                    pre = Some((rank, n));
                }
                None => sc.i = save,
            }
        }
        // post-release
        let mut post = None;
        {
            let save = sc.i;
            let mut done = false;
            if sc.eat(b'-') {
                if let Some(n) = sc.number() {
                    post = Some(n?);
                    done = true;
                } else {
                    sc.i = save;
                }
            }
            if !done {
                sc.sep();
                let found = sc.eat_str("post") || sc.eat_str("rev") || sc.eat(b'r');
                if found {
                    let after_label = sc.i;
                    sc.sep();
                    let n = match sc.number() {
                        Some(n) => n?,
                        None => {
                            sc.i = after_label;
                            0
                        }
                    };
                    post = Some(n);
                } else {
                    sc.i = save;
                }
            }
        }
        // dev-release
        let mut dev = None;
        {
            let save = sc.i;
            sc.sep();
            if sc.eat_str("dev") {
                let after_label = sc.i;
                sc.sep();
                let n = match sc.number() {
                    Some(n) => n?,
                    None => {
                        sc.i = after_label;
                        0
                    }
                };
                dev = Some(n);
            } else {
                sc.i = save;
            }
        }
        // local label
        let mut local = None;
        if sc.eat(b'+') {
            let rest = std::str::from_utf8(&sc.s[sc.i..]).ok()?;
            let mut parts = Vec::new();
            for part in rest.split(['-', '_', '.']) {
                if part.is_empty() || !part.bytes().all(|c| c.is_ascii_alphanumeric()) {
                    return None;
                }
                if part.bytes().all(|c| c.is_ascii_digit()) {
                    parts.push(LocalPart::Num(part.parse().ok()?));
                } else {
                    parts.push(LocalPart::Str(part.to_string()));
                }
            }
            local = Some(parts);
            sc.i = sc.s.len();
        }
        if sc.i != sc.s.len() {
            return None;
        }
        while release.len() > 1 && release.last() == Some(&0) {
            release.pop();
        }
        if release == [0] {
            release.clear();
        }
        Some(Pep440Version {
            epoch,
            release,
            pre,
            post,
            dev,
            local,
        })
    }

    fn key(&self) -> Pep440Key<'_> {
        let pre = match (self.pre, self.post, self.dev) {
            (None, None, Some(_)) => PreKey::NegInf,
            (None, _, _) => PreKey::PosInf,
            (Some((r, n)), _, _) => PreKey::Pre(r, n),
        };
        let dev = match self.dev {
            Some(n) => DevKey::Dev(n),
            None => DevKey::None,
        };
        (
            self.epoch,
            &self.release,
            pre,
            self.post,
            dev,
            self.local.as_deref(),
        )
    }
}

impl PartialOrd for Pep440Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pep440Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// Version names newest first under PEP 440 (equal versions in ascending byte order of the
/// name), then — only with `keep_unparseable` — the unparseable names in descending byte order.
pub fn sort_newest_first(names: &[String], keep_unparseable: bool) -> Vec<String> {
    let mut parsed: Vec<(Pep440Version, &String)> = Vec::new();
    let mut other: Vec<&String> = Vec::new();
    for n in names {
        match Pep440Version::parse(n) {
            Some(v) => parsed.push((v, n)),
            None => other.push(n),
        }
    }
    parsed.sort_by(|(va, na), (vb, nb)| vb.cmp(va).then_with(|| na.as_bytes().cmp(nb.as_bytes())));
    let mut out: Vec<String> = parsed.into_iter().map(|(_, n)| n.clone()).collect();
    if keep_unparseable {
        other.sort_by(|a, b| b.as_bytes().cmp(a.as_bytes()));
        out.extend(other.into_iter().cloned());
    }
    out
}

// ---------------------------------------------------------------------------------------------
// (2) Slot key

/// The 6-integer "slot" key of spec 10 §8.8 (2) that orders candidates for `next`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotKey(pub [u64; 6]);

/// Digit run starting at `i`: (value, end index). Saturates on overflow.
fn digit_run(b: &[u8], i: usize) -> (u64, usize) {
    let mut j = i;
    let mut v: u64 = 0;
    while j < b.len() && b[j].is_ascii_digit() {
        v = v.saturating_mul(10).saturating_add(u64::from(b[j] - b'0'));
        j += 1;
    }
    (v, j)
}

/// First match of `N(.N){count-1}` (leftmost start): the numbers and the end index.
fn find_dotted(b: &[u8], count: usize) -> Option<(Vec<u64>, usize)> {
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()) {
            let mut nums = Vec::with_capacity(count);
            let (v, mut j) = digit_run(b, i);
            nums.push(v);
            while nums.len() < count {
                if j + 1 < b.len() && b[j] == b'.' && b[j + 1].is_ascii_digit() {
                    let (v, e) = digit_run(b, j + 1);
                    nums.push(v);
                    j = e;
                } else {
                    break;
                }
            }
            if nums.len() == count {
                return Some((nums, j));
            }
        }
        i += 1;
    }
    None
}

/// The slot key of a version name (spec 10 §8.8 (2)); used to derive the `next` slot.
pub fn slot_key(name: &str) -> SlotKey {
    let lower = name.to_ascii_lowercase();
    let b = lower.as_bytes();
    let (abc, end) = if let Some((n, end)) = find_dotted(b, 3) {
        ([n[0], n[1], n[2]], end)
    } else if let Some((n, end)) = find_dotted(b, 2) {
        ([n[0], n[1], 0], end)
    } else {
        return SlotKey([0; 6]);
    };
    // rc number anywhere
    let mut pq = (1, 0);
    let mut saw_rc = false;
    let mut k = 0;
    while let Some(pos) = lower[k..].find("rc") {
        let at = k + pos + 2;
        if at < b.len() && b[at].is_ascii_digit() {
            pq = (0, digit_run(b, at).0);
            saw_rc = false;
            break;
        }
        saw_rc = true;
        k = k + pos + 1;
    }
    if saw_rc {
        pq = (0, 0);
    }
    // last digit run after the matched part
    let mut t = 0;
    let mut i = end;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let (v, e) = digit_run(b, i);
            t = v;
            i = e;
        } else {
            i += 1;
        }
    }
    SlotKey([abc[0], abc[1], abc[2], pq.0, pq.1, t])
}

// ---------------------------------------------------------------------------------------------
// (3) Lane-default key

/// The lane-default key of spec 10 §8.8 (3): leading dotted integers, a glued suffix keeping
/// its leading digits; `[0]` when the name has none.
pub fn lane_default_key(name: &str) -> Vec<u64> {
    let mut key = Vec::new();
    for seg in name.split('.') {
        if !seg.is_empty() && seg.bytes().all(|c| c.is_ascii_digit()) {
            key.push(digit_run(seg.as_bytes(), 0).0);
            continue;
        }
        let (v, end) = digit_run(seg.as_bytes(), 0);
        if end > 0 {
            key.push(v);
        }
        break;
    }
    if key.is_empty() {
        key.push(0);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
    }

    fn sys(name: &str) -> SystemSpec {
        SystemSpec::load(&root(), name).unwrap()
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pep440_parse_and_normalise() {
        let p = |s: &str| Pep440Version::parse(s).unwrap();
        assert_eq!(p("1.0"), p("1.0.0"));
        assert_eq!(p("1.0.0.0").cmp(&p("1.0")), Ordering::Equal);
        assert!(p("1!0.1") > p("2.0.0"));
        assert!(p("1.0.0.dev1") < p("1.0.0a1"));
        assert!(p("1.0.0a1") < p("1.0.0b2"));
        assert!(p("1.0.0b2") < p("1.0.0rc1"));
        assert!(p("1.0.0rc2") < p("1.0.0rc10"));
        assert!(p("1.0.0rc10") < p("1.0.0"));
        assert!(p("1.0.0") < p("1.0.0.post1"));
        assert!(p("1.0.0.post1") < p("1.0.0.post2.dev3"));
        assert!(p("1.0.0.post2.dev3") < p("1.0.0.post2"));
        assert!(p("1.0.0") < p("1.0.0+local"));
        assert_eq!(p("1.3.0RC5"), p("1.3.0rc5"));
        assert_eq!(p("1.3.0-rc6"), p("1.3.0rc6"));
        assert_eq!(p("1.3.0.rc7"), p("1.3.0rc7"));
        assert_eq!(p("v1.0.1"), p("1.0.1"));
        assert_eq!(p("1.0c1"), p("1.0rc1"));
        assert_eq!(p("1.0-1"), p("1.0.post1"));
        assert_eq!(p("1.0.post"), p("1.0.post0"));
        assert!(p("0.5.6") < p("0.5.6.post2"));
        assert!(p("0.5.6.post2") < p("0.5.9"));
        assert!(p("0.1.dev19262") < p("0.14.0"));
        assert!(p("1.2.0rc5") < p("1.3.0rc10"));
        assert!(p("1.3.0rc10") < p("1.3.0rc11"));
        assert!(p("1.3.0rc20") < p("1.3.0rc23"));
        assert!(p("1.0+abc") < p("1.0+1"));
        assert!(p("1.0+1") < p("1.0+1.a"));
        for bad in ["main", "latest", "1.0.0_fix", "alpha", "zeta", "", "1.0+", "1..0"] {
            assert!(Pep440Version::parse(bad).is_none(), "{bad}");
        }
    }

    const SYNTH: &[&str] = &[
        "1.3.0.rc7",
        "1.3.0-rc6",
        "1.3.0RC5",
        "v1.0.1",
        "1.0.0.post2.dev3",
        "1.0.0.post1",
        "1.0.0+local",
        "1.0",
        "1.0.0",
        "1.0.0.0",
        "1.0.0rc10",
        "1.0.0rc2",
        "1.0.0rc1",
        "1.0.0b2",
        "1.0.0a1",
        "1.0.0.dev1",
        "0.14.0",
        "0.5.10",
        "0.5.9",
        "0.5.6.post2",
        "0.5.6",
        "0.1.dev19262",
        "1!0.1",
        "2.1.0rc1",
        "2.0.0",
        "main",
        "latest",
        "1.0.0_fix",
        "zeta",
        "alpha",
    ];

    #[test]
    fn pep440_worked_orders() {
        let mut shuffled = names(SYNTH);
        shuffled.reverse();
        shuffled.rotate_left(7);
        // channel 3 for requested 2.0.0: strictly older, newest first
        let req = Pep440Version::parse("2.0.0").unwrap();
        let older: Vec<String> = sort_newest_first(&shuffled, false)
            .into_iter()
            .filter(|n| Pep440Version::parse(n).unwrap() < req)
            .collect();
        assert_eq!(older, names(&SYNTH[..22]));
        // channel 4: everything, unparseable last in descending byte order
        let all = sort_newest_first(&shuffled, true);
        let mut expect = names(&["1!0.1", "2.1.0rc1", "2.0.0"]);
        expect.extend(names(&SYNTH[..22]));
        expect.extend(names(&["zeta", "main", "latest", "alpha", "1.0.0_fix"]));
        assert_eq!(all, expect);
        // requested 1.0.0: 1.0 and 1.0.0.0 are equal, not older
        let req = Pep440Version::parse("1.0.0").unwrap();
        let older: Vec<String> = sort_newest_first(&shuffled, false)
            .into_iter()
            .filter(|n| Pep440Version::parse(n).unwrap() < req)
            .collect();
        assert_eq!(older, names(&SYNTH[10..22]));
    }

    #[test]
    fn slot_key_reference_outputs() {
        let k = |s: &str| slot_key(s).0;
        assert_eq!(k("1.3.0rc20"), [1, 3, 0, 0, 20, 20]);
        assert_eq!(k("1.3.0"), [1, 3, 0, 1, 0, 0]);
        assert_eq!(k("0.5.6.post2"), [0, 5, 6, 1, 0, 2]);
        assert_eq!(k("0.1.dev19262"), [0, 1, 0, 1, 0, 19262]);
        assert_eq!(k("1.0.0.dev1"), [1, 0, 0, 1, 0, 1]);
        assert_eq!(k("1.0.0a1"), [1, 0, 0, 1, 0, 1]);
        assert_eq!(k("1.3.0rc5.post1"), [1, 3, 0, 0, 5, 1]);
        assert_eq!(k("1.0"), [1, 0, 0, 1, 0, 0]);
        assert_eq!(k("1.0"), k("1.0.0"));
        assert_eq!(k("2.23"), [2, 23, 0, 1, 0, 0]);
        assert_eq!(k("v0.24"), [0, 24, 0, 1, 0, 0]);
        assert_eq!(k("main"), [0; 6]);
        assert_eq!(k("1.3.0RC"), [1, 3, 0, 0, 0, 0]);
        assert!(slot_key("1.3.0rc20") < slot_key("1.3.0rc23"));
        assert!(slot_key("1.3.0rc23") < slot_key("1.3.0"));
        assert!(slot_key("0.5.6") < slot_key("0.5.6.post2"));
        assert!(slot_key("1.0.0") < slot_key("1.0.0.dev7"));
        assert!(slot_key("0.5.16") < slot_key("0.5.16.post1"));
        assert!(slot_key("1.3.0rc100") < slot_key("1.3.0"));
    }

    #[test]
    fn lane_default_key_reference_outputs() {
        assert_eq!(lane_default_key("1.3.0rc23"), vec![1, 3, 0]);
        assert_eq!(lane_default_key("0.5.14.post1"), vec![0, 5, 14]);
        assert_eq!(lane_default_key("0.5.14rc1"), vec![0, 5, 14]);
        assert_eq!(lane_default_key("0.1.dev19262"), vec![0, 1]);
        assert_eq!(lane_default_key("2.23"), vec![2, 23]);
        assert_eq!(lane_default_key("0.24"), vec![0, 24]);
        assert_eq!(lane_default_key("v0.24.0"), vec![0]);
        assert_eq!(lane_default_key("main"), vec![0]);
        assert!(lane_default_key("0.24") < lane_default_key("0.24.0"));
        assert!(lane_default_key("0.27.0") > lane_default_key("0.24.0"));
    }

    #[test]
    fn slots_of_target_systems() {
        for s in ["h200_sxm", "b200_sxm", "h100_sxm"] {
            let s = sys(s);
            let v = version_slots(&root(), &s, Backend::Vllm).unwrap().unwrap();
            assert_eq!(
                v,
                VersionSlots {
                    current: "0.24.0".into(),
                    previous: None,
                    next: Some("0.27.0".into())
                }
            );
            let g = version_slots(&root(), &s, Backend::Sglang).unwrap().unwrap();
            assert_eq!(g.current, "0.5.14");
            assert_eq!(g.next.as_deref(), Some("0.5.16"));
            let t = version_slots(&root(), &s, Backend::Trtllm).unwrap().unwrap();
            assert_eq!(t.current, "1.3.0rc20");
            assert_eq!(t.next.as_deref(), Some("1.3.0rc23"));
            assert_eq!(
                v.py_repr(),
                "{'current': '0.24.0', 'next': '0.27.0'}".to_string()
            );
        }
    }

    #[test]
    fn resolution_aliases_and_literals() {
        for name in ["h200_sxm", "b200_sxm", "h100_sxm"] {
            let s = sys(name);
            let r = |b, req| resolve_with(&root(), &s, b, req, false);
            let ok = |v: &str, dirless: bool| ResolvedVersion {
                version: Some(v.into()),
                tolerate_dirless: dirless,
            };
            assert_eq!(r(Backend::Vllm, None).unwrap(), ok("0.24.0", false));
            assert_eq!(r(Backend::Vllm, Some("current")).unwrap(), ok("0.24.0", false));
            assert_eq!(r(Backend::Vllm, Some("next")).unwrap(), ok("0.27.0", true));
            assert_eq!(r(Backend::Vllm, Some("0.27.0")).unwrap(), ok("0.27.0", true));
            assert_eq!(r(Backend::Vllm, Some("0.24.0")).unwrap(), ok("0.24.0", false));
            assert_eq!(r(Backend::Sglang, None).unwrap(), ok("0.5.14", false));
            assert_eq!(r(Backend::Sglang, Some("next")).unwrap(), ok("0.5.16", false));
            assert_eq!(r(Backend::Sglang, Some("0.5.16")).unwrap(), ok("0.5.16", false));
            assert_eq!(r(Backend::Trtllm, None).unwrap(), ok("1.3.0rc20", false));
            assert_eq!(r(Backend::Trtllm, Some("next")).unwrap(), ok("1.3.0rc23", false));
            assert_eq!(
                r(Backend::Trtllm, Some("1.3.0rc20")).unwrap(),
                ok("1.3.0rc20", false)
            );
            for b in [Backend::Vllm, Backend::Sglang, Backend::Trtllm] {
                let e = r(b, Some("previous")).unwrap_err();
                assert!(matches!(e, AicError::Value(_)));
                assert_eq!(e.class(), crate::error::ErrorClass::Value);
            }
            assert!(r(Backend::Trtllm, Some("1.3.0rc10")).is_err());
            assert!(r(Backend::Sglang, Some("0.5.10")).is_err());
            // the switch lets any literal through, unchanged
            assert_eq!(
                resolve_with(&root(), &s, Backend::Vllm, Some("0.22.0"), true).unwrap(),
                ok("0.22.0", false)
            );
        }
    }

    #[test]
    fn version_error_goldens() {
        let h200 = sys("h200_sxm");
        let e = resolve_with(&root(), &h200, Backend::Vllm, Some("previous"), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vllm on h200_sxm has no 'previous' version; available slots: {'current': '0.24.0', \
             'next': '0.27.0'}"
        );
        let b200 = sys("b200_sxm");
        let e = resolve_with(&root(), &b200, Backend::Vllm, Some("0.22.0"), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vllm/'0.22.0' looks like an old-style raw version query; b200_sxm now resolves \
             versions through queryable slots. New way: use an alias ('current'/'previous'/'next') \
             or one of the slot versions {'current': '0.24.0', 'next': '0.27.0'}. Old way (raw \
             data-coordinate access, data outside these slots is not maintained to the queryable \
             bar): re-run with the environment variable AIC_ALLOW_UNLISTED_VERSIONS=1, or pass \
             allow_unlisted_version=True in SDK code."
        );
    }

    fn temp_root(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "aic_versions_{tag}_{}_{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write_system(root: &Path, name: &str) {
        std::fs::write(
            root.join(format!("{name}.yaml")),
            format!(
                "data_dir: data/{name}\ngpu:\n  mem_bw: 1\n  mem_capacity: 1\n  sm_version: 90\n\
                 node:\n  num_gpus_per_node: 8\n  inter_node_bw: 1\n  intra_node_bw: 1\n  \
                 p2p_latency: 0\nmisc: {{}}\n"
            ),
        )
        .unwrap();
    }

    fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    #[test]
    fn synthetic_next_derivation() {
        // spec 10 §8.8 (2): defaults vllm 1.0.0, sglang 0.5.14, trtllm 1.3.0rc20
        let root = temp_root("next");
        std::fs::write(
            root.join("query_versions.yaml"),
            "defaults:\n  vllm: {current: 1.0.0}\n  sglang: {current: 0.5.14}\n  \
             trtllm: {current: 1.3.0rc20}\noverrides:\n  other:\n    vllm: {current: 0.1.0}\n",
        )
        .unwrap();
        write_system(&root, "s1");
        for v in ["1.0.0", "1.0.0.dev7", "1.0.0rc3", "0.9.0"] {
            touch(&root, &format!("data/s1/gemm/vllm/{v}/gemm_perf.parquet"));
        }
        for v in ["0.5.14", "0.5.16", "0.5.16.post1"] {
            touch(&root, &format!("data/s1/gemm/sglang/{v}/gemm_perf.parquet"));
        }
        for v in ["1.3.0rc20", "1.3.0rc23", "1.3.0rc100", "1.3.0"] {
            touch(&root, &format!("data/s1/gemm/trtllm/{v}/gemm_perf.parquet"));
        }
        // a newer dir holding only a marker does not count; an overridden system is excluded
        touch(&root, "data/s1/gemm/sglang/0.5.99/INCOMPLETE.txt");
        touch(&root, "data/other/gemm/sglang/0.6.0/gemm_perf.parquet");
        std::fs::write(
            root.join("query_versions.yaml"),
            "defaults:\n  vllm: {current: 1.0.0}\n  sglang: {current: 0.5.14}\n  \
             trtllm: {current: 1.3.0rc20}\noverrides:\n  other:\n    sglang: {current: 0.1.0}\n",
        )
        .unwrap();
        let s = SystemSpec::load(&root, "s1").unwrap();
        let next = |b| version_slots(&root, &s, b).unwrap().unwrap().next;
        assert_eq!(next(Backend::Vllm).as_deref(), Some("1.0.0.dev7"));
        assert_eq!(next(Backend::Sglang).as_deref(), Some("0.5.16.post1"));
        assert_eq!(next(Backend::Trtllm).as_deref(), Some("1.3.0"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn ungated_passes_through() {
        let root = temp_root("ungated");
        std::fs::write(
            root.join("query_versions.yaml"),
            "defaults:\n  vllm: {current: 1.0.0}\noverrides:\n  s2:\n    vllm:\n      \
             current: 0.26.0\n      previous: 0.20.0\n",
        )
        .unwrap();
        write_system(&root, "s1");
        write_system(&root, "s2");
        touch(&root, "data/s1/gemm/trtllm/1.0/gemm_perf.parquet");
        touch(&root, "data/s2/gemm/vllm/0.26.0/gemm_perf.parquet");
        let s1 = SystemSpec::load(&root, "s1").unwrap();
        // no vllm dir on s1 -> ungated; trtllm has no slot entry -> ungated
        assert_eq!(version_slots(&root, &s1, Backend::Vllm).unwrap(), None);
        assert_eq!(version_slots(&root, &s1, Backend::Trtllm).unwrap(), None);
        let r = resolve_with(&root, &s1, Backend::Trtllm, None, false).unwrap();
        assert_eq!(r.version, None);
        let r = resolve_with(&root, &s1, Backend::Trtllm, Some("next"), false).unwrap();
        assert_eq!(r.version.as_deref(), Some("next"));
        // override with a previous slot and no next
        let s2 = SystemSpec::load(&root, "s2").unwrap();
        let slots = version_slots(&root, &s2, Backend::Vllm).unwrap().unwrap();
        assert_eq!(slots.previous.as_deref(), Some("0.20.0"));
        assert_eq!(slots.next, None);
        let r = resolve_with(&root, &s2, Backend::Vllm, Some("previous"), false).unwrap();
        assert_eq!(r.version.as_deref(), Some("0.20.0"));
        let e = resolve_with(&root, &s2, Backend::Vllm, Some("next"), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vllm on s2 has no 'next' version; available slots: {'current': '0.26.0', \
             'previous': '0.20.0'}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn py_repr_quotes() {
        assert_eq!(py_str_repr("0.22.0"), "'0.22.0'");
        assert_eq!(py_str_repr("a'b"), "\"a'b\"");
        assert_eq!(py_str_repr("a'b\""), "'a\\'b\"'");
    }

    #[test]
    fn empty_version_folders_are_not_versions_with_data() {
        let root = temp_root("empty_versions");
        std::fs::create_dir_all(root.join("data/s3/gemm/vllm/0.9.0")).unwrap();
        touch(&root, "data/s3/gemm/vllm/1.0.0/gemm_perf.parquet");
        touch(&root, "data/s3/mla/vllm/1.1.0/collection_meta.yaml");
        touch(&root, "data/s3/moe/vllm/1.2.0/INCOMPLETE.txt");
        touch(&root, "data/s3/comm/vllm/1.3.0/reuse.yaml");
        let data = root.join("data/s3");
        assert_eq!(version_names(&data, "vllm"), ["0.9.0", "1.0.0", "1.1.0", "1.2.0", "1.3.0"]);
        assert_eq!(versions_with_tables(&data, "vllm"), ["1.0.0", "1.3.0"]);
        // every folder of a backend empty: the backend has no data at all
        std::fs::create_dir_all(root.join("data/s3/gemm/sglang/0.5.0")).unwrap();
        assert!(versions_with_tables(&data, "sglang").is_empty());
        let _ = std::fs::remove_dir_all(&root);
    }
}
