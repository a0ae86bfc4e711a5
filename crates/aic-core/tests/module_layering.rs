//! The layering of the crate's top-level modules, read from the source (issue 35): `error` is
//! the bottom of the crate, so no other module of the crate may be reachable from it. The
//! errors of a higher layer (`fpm::FpmError`, `serving::ServingError`) wrap `AicError`, never
//! the reverse.
//!
//! The test reads every `.rs` file under `src/`, strips comments and string literals, and
//! collects each path that leaves a module: `crate::x::..` (in `use` lines, `use crate::{a,
//! b::c}` groups and paths in code) and `super::` chains that climb past the file's own
//! top-level module. Names the crate root re-exports (`crate::AicError`) resolve through
//! `lib.rs`'s `pub use` lines. See the edge list with
//! `cargo test -p aic-core --test module_layering -- --nocapture`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// The crate's top-level modules (those `lib.rs` declares).
const MODULES: &[&str] = &[
    "builder", "data", "engine", "error", "fast_hash", "fpm", "lookup", "memory", "ops", "parallel",
    "serving", "spec",
];

/// One module-to-module edge and the files that make it.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The source with comments and string / char literals replaced by spaces (line structure
/// kept), so that prose and messages that mention `crate::x` make no edge.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && starts_literal(&b, i) {
            // Raw string r"..." / r#"..."# (or br"...").
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &b[i..j.min(b.len())] {
                out.push(blank(ch));
            }
            i = j;
        } else if c == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            for &ch in &b[i..(j + 1).min(b.len())] {
                out.push(blank(ch));
            }
            i = j + 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only blank the former.
            let close = if next == Some('\\') {
                (i + 3..b.len().min(i + 12)).find(|&j| b[j] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(j) => {
                    for _ in i..=j {
                        out.push(' ');
                    }
                    i = j + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether the `r` at `i` starts a raw string: not the end of an identifier (`br` is fine).
fn starts_literal(b: &[char], i: usize) -> bool {
    let before = |k: usize| k > 0 && is_ident_char(b[k - 1]);
    !before(i) || (b[i - 1] == 'b' && !before(i - 1))
}

/// A tiny token stream: identifiers, `::`, and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let b: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
        } else if is_ident_char(c) {
            let start = i;
            while i < b.len() && is_ident_char(b[i]) {
                i += 1;
            }
            out.push(b[start..i].iter().collect());
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// The first segments of every path a `{ ... }` group starting at `toks[open]` lists
/// (`{a, b::c, self, d::{e, f}}` gives `a`, `b`, `d`; `self` gives nothing new), and the index
/// after the closing brace.
fn group_heads(toks: &[String], open: usize) -> (Vec<String>, usize) {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expect_head = true;
    let mut i = open;
    while i < toks.len() {
        let t = toks[i].as_str();
        match t {
            "{" => {
                depth += 1;
                if depth == 1 {
                    expect_head = true;
                }
            }
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return (heads, i + 1);
                }
            }
            "," if depth == 1 => expect_head = true,
            _ => {
                if depth == 1 && expect_head {
                    if t != "self" && t != "*" {
                        heads.push(t.to_string());
                    }
                    expect_head = false;
                }
            }
        }
        i += 1;
    }
    panic!("unclosed `{{` in a `crate::{{..}}` group");
}

/// The names the crate root re-exports (`pub use engine::{Engine, ..}` in `lib.rs`) and the
/// module each comes from.
fn root_reexports(lib_rs: &str) -> BTreeMap<String, String> {
    let toks = tokens(&code_only(lib_rs));
    let mut names = BTreeMap::new();
    let mut i = 0;
    while i + 2 < toks.len() {
        if toks[i] == "pub" && toks[i + 1] == "use" {
            let module = toks[i + 2].clone();
            assert!(
                MODULES.contains(&module.as_str()),
                "lib.rs re-exports from `{module}`, which is not a known top-level module"
            );
            let mut j = i + 3;
            while j < toks.len() && toks[j] != ";" {
                let t = toks[j].as_str();
                let is_name = t.chars().next().is_some_and(char::is_alphabetic)
                    && t != "as"
                    && t != "self";
                // The last segment of each path, or the alias after `as`.
                let ends_path = matches!(toks.get(j + 1).map(String::as_str), Some("," | "}" | ";"));
                if is_name && ends_path {
                    names.insert(t.to_string(), module.clone());
                }
                assert!(t != "*", "lib.rs has a glob re-export from `{module}`: name its items");
                j += 1;
            }
            i = j;
        } else {
            i += 1;
        }
    }
    names
}

/// The top-level module a `crate::`-level name belongs to.
fn resolve(name: &str, reexports: &BTreeMap<String, String>, file: &str) -> String {
    if MODULES.contains(&name) {
        return name.to_string();
    }
    reexports.get(name).cloned().unwrap_or_else(|| {
        panic!(
            "{file}: `crate::{name}` is neither a top-level module nor a re-export of lib.rs; \
             add it to MODULES or teach this test the new re-export"
        )
    })
}

/// The top-level module of a file and the depth of the file's own module below the root
/// (`fpm/mod.rs` and `fpm.rs`: 1, `fpm/metrics.rs`: 2).
fn module_of(rel: &Path) -> Option<(String, usize)> {
    let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.len() == 1 && parts[0] == "lib.rs" {
        return None;
    }
    let top = parts[0].trim_end_matches(".rs").to_string();
    let last = parts.last().unwrap();
    let depth = if last == "mod.rs" { parts.len() - 1 } else { parts.len() };
    Some((top, depth))
}

/// The module edges one file makes.
fn file_edges(code: &str, own: &str, file_depth: usize, reexports: &BTreeMap<String, String>, file: &str) -> BTreeSet<String> {
    let toks = tokens(code);
    let mut targets = BTreeSet::new();
    // Braces opened by an inline `mod name {`, to know how deep a `super::` starts.
    let mut brace_is_mod: Vec<bool> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].as_str();
        match t {
            "{" => {
                let is_mod = i >= 2 && toks[i - 2] == "mod" && is_ident_char(toks[i - 1].chars().next().unwrap_or(' '));
                brace_is_mod.push(is_mod);
            }
            "}" => {
                brace_is_mod.pop();
            }
            _ => {}
        }
        let prev_is_path = i > 0 && toks[i - 1] == "::";
        if (t == "crate" || t == "super") && !prev_is_path && toks.get(i + 1).map(String::as_str) == Some("::") {
            let mut j = i;
            let mut climbs = 0;
            if t == "super" {
                while toks.get(j).map(String::as_str) == Some("super") && toks.get(j + 1).map(String::as_str) == Some("::") {
                    climbs += 1;
                    j += 2;
                }
                let depth = file_depth + brace_is_mod.iter().filter(|m| **m).count();
                if climbs < depth {
                    // Still inside the file's own top-level module.
                    i = j;
                    continue;
                }
            } else {
                j += 2;
            }
            match toks.get(j).map(String::as_str) {
                Some("{") => {
                    let (heads, after) = group_heads(&toks, j);
                    for head in heads {
                        targets.insert(resolve(&head, reexports, file));
                    }
                    i = after;
                    continue;
                }
                Some("*") => panic!("{file}: glob import from the crate root; name the items"),
                Some(name) if is_ident_char(name.chars().next().unwrap_or(' ')) => {
                    targets.insert(resolve(name, reexports, file));
                }
                other => panic!("{file}: cannot read the path after `{t}::` ({other:?})"),
            }
            i = j + 1;
            continue;
        }
        i += 1;
    }
    targets.remove(own);
    targets
}

/// Every module edge of the crate, with the files that make it.
fn crate_edges() -> Edges {
    let src = src_dir();
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let reexports = root_reexports(&lib);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges = Edges::new();
    for path in files {
        let rel = path.strip_prefix(&src).unwrap().to_path_buf();
        let Some((own, depth)) = module_of(&rel) else { continue };
        assert!(MODULES.contains(&own.as_str()), "{}: module `{own}` is not in MODULES", rel.display());
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file = rel.to_string_lossy().into_owned();
        for target in file_edges(&code_only(&text), &own, depth, &reexports, &file) {
            edges.entry((own.clone(), target)).or_default().insert(file.clone());
        }
    }
    edges
}

/// A shortest cycle through `start` (`start -> .. -> start`), if there is one.
fn cycle_through(start: &str, edges: &Edges) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from.as_str()).or_default().push(to.as_str());
    }
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &to in next.get(node).map(Vec::as_slice).unwrap_or_default() {
            if to == start {
                // Walk back from `node` to `start`, then read it forwards and close the loop.
                let mut back = vec![node];
                while *back.last().unwrap() != start {
                    back.push(parent[back.last().unwrap()]);
                }
                let mut cycle: Vec<String> = back.iter().rev().map(|s| s.to_string()).collect();
                cycle.push(start.to_string());
                return Some(cycle);
            }
            if to != start && !parent.contains_key(to) {
                parent.insert(to, node);
                queue.push_back(to);
            }
        }
    }
    None
}

fn describe(edges: &Edges) -> String {
    let mut text = String::new();
    for ((from, to), files) in edges {
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        text.push_str(&format!("  {from} -> {to}    ({})\n", files.join(", ")));
    }
    text
}

#[test]
fn no_module_cycle_passes_through_error() {
    let edges = crate_edges();
    println!("module edges of aic-core (from -> to, and the files that make each):\n{}", describe(&edges));
    if let Some(cycle) = cycle_through("error", &edges) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let files = &edges[&(w[0].clone(), w[1].clone())];
                format!("{} -> {} (in {})", w[0], w[1], files.iter().cloned().collect::<Vec<_>>().join(", "))
            })
            .collect();
        panic!(
            "the module graph has a cycle through `error`: {}\n  {}\nErrors of a layer belong at \
             or below it: a higher module's error type may wrap `AicError`, never the reverse.",
            cycle.join(" -> "),
            steps.join("\n  ")
        );
    }
}

#[test]
fn error_depends_on_no_other_module() {
    let edges = crate_edges();
    let upward: Vec<String> = edges
        .iter()
        .filter(|((from, _), _)| from == "error")
        .map(|((_, to), files)| format!("error -> {to} (in {})", files.iter().cloned().collect::<Vec<_>>().join(", ")))
        .collect();
    assert!(
        upward.is_empty(),
        "`error` is the bottom of the crate and must use no other crate module, but has:\n  {}",
        upward.join("\n  ")
    );
}

/// The reader itself: a group import, a path in code, `super::` inside and above the module,
/// comments and strings, an inline test module.
#[test]
fn edge_reader_handles_groups_paths_super_comments_and_strings() {
    let reexports = BTreeMap::from([("AicError".to_string(), "error".to_string())]);
    let code = r####"
        use crate::{data::{system, parquet}, lookup::gemm, self as _unused, AicError};
        use super::sibling::Thing;          // fpm/x.rs: stays in fpm
        use super::super::ops::Op;          // fpm/x.rs: climbs to the root, then ops
        // use crate::serving::Nope;
        /* crate::builder::Nope */
        const S: &str = "crate::parallel::Nope";
        const R: &str = r#"crate::memory::Nope"#;
        fn f<'a>(x: &'a str) -> char { let _ = crate::engine::Engine::new(x); '\'' }
        const Q: &[u8] = br"crate::builder::Nope"; const C: u8 = b'"'; fn g() { crate::spec::f(); }
        #[cfg(test)]
        mod tests {
            use super::*;                    // fpm::x::tests -> fpm::x: stays
            use super::super::Other;         // -> fpm: stays
        }
    "####;
    let got = file_edges(&code_only(code), "fpm", 2, &reexports, "fpm/x.rs");
    let want: BTreeSet<String> =
        ["data", "lookup", "error", "ops", "engine", "spec"].iter().map(|s| s.to_string()).collect();
    assert_eq!(got, want);

    // A top-level file (depth 1): `super::x` is the crate root's `x`.
    let got = file_edges(&code_only("use super::spec::Op; use self::inner::X;"), "engine", 1, &reexports, "engine.rs");
    assert_eq!(got, BTreeSet::from(["spec".to_string()]));
}

#[test]
fn cycle_finder_names_the_cycle() {
    let mut edges = Edges::new();
    for (a, b) in [("data", "error"), ("error", "fpm"), ("fpm", "engine"), ("engine", "data"), ("ops", "data")] {
        edges.entry((a.to_string(), b.to_string())).or_default().insert(format!("{a}.rs"));
    }
    assert_eq!(
        cycle_through("error", &edges),
        Some(["error", "fpm", "engine", "data", "error"].iter().map(|s| s.to_string()).collect())
    );
    edges.remove(&("error".to_string(), "fpm".to_string()));
    assert_eq!(cycle_through("error", &edges), None);
}
