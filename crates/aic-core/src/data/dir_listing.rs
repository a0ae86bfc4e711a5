//! Directory listings remembered per process.
//!
//! Resolving a system's data folders and backend versions lists the same directories many
//! times per compile and again for every engine built (family folders, backend folders,
//! version folders), and each listing stats every entry. A listing is kept here with the
//! directory's modification time and reused while that time is unchanged; adding, removing
//! or renaming an entry changes it. A directory modified within the last [`RACY_SECS`]
//! seconds is not remembered (a second change within the file system's timestamp tick would
//! leave the time unchanged), so freshly written folders, as in tests, are always listed anew.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Listings of directories modified more recently than this are not kept.
const RACY_SECS: u64 = 2;

/// One directory entry, with what its path (symlinks followed) is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DirEntry {
    /// The entry's name (lossily converted when it is not UTF-8).
    pub name: String,
    /// The name is valid UTF-8.
    pub utf8: bool,
    /// The path is a directory.
    pub is_dir: bool,
    /// The path is a regular file.
    pub is_file: bool,
}

type Listings = HashMap<PathBuf, (SystemTime, Arc<[DirEntry]>)>;

fn listings() -> &'static Mutex<Listings> {
    static LISTINGS: OnceLock<Mutex<Listings>> = OnceLock::new();
    LISTINGS.get_or_init(|| Mutex::new(HashMap::new()))
}

fn read(dir: &Path) -> Option<Arc<[DirEntry]>> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let raw = entry.file_name();
        let utf8 = raw.to_str().is_some();
        let name = raw.to_string_lossy().into_owned();
        // The entry's own type comes with the listing on most file systems (no stat); only a
        // symbolic link (or an unknown type) is followed to what it points at.
        let (is_dir, is_file) = match entry.file_type() {
            Ok(t) if !t.is_symlink() => (t.is_dir(), t.is_file()),
            _ => match std::fs::metadata(entry.path()) {
                Ok(m) => (m.is_dir(), m.is_file()),
                Err(_) => (false, false),
            },
        };
        out.push(DirEntry { name, utf8, is_dir, is_file });
    }
    Some(out.into())
}

/// The entries of `dir` (in `read_dir` order), or `None` when it cannot be listed.
pub(crate) fn entries(dir: &Path) -> Option<Arc<[DirEntry]>> {
    let modified = std::fs::metadata(dir).ok()?.modified().ok();
    let Some(modified) = modified else {
        return read(dir);
    };
    if let Some((at, hit)) = listings().lock().unwrap_or_else(|e| e.into_inner()).get(dir) {
        if *at == modified {
            return Some(hit.clone());
        }
    }
    let listed = read(dir)?;
    let settled = SystemTime::now()
        .duration_since(modified)
        .is_ok_and(|age| age >= Duration::from_secs(RACY_SECS));
    if settled {
        listings()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(dir.to_path_buf(), (modified, listed.clone()));
    }
    Some(listed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_directory_is_listed_anew_after_a_change() {
        let dir = std::env::temp_dir().join(format!("aic-dir-listing-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let names = |d: &Path| {
            let mut n: Vec<(String, bool)> = entries(d).unwrap().iter().map(|e| (e.name.clone(), e.is_dir)).collect();
            n.sort();
            n
        };
        assert_eq!(names(&dir), vec![("sub".to_string(), true)]);
        std::fs::write(dir.join("a.parquet"), b"x").unwrap();
        assert_eq!(names(&dir), vec![("a.parquet".to_string(), false), ("sub".to_string(), true)]);
        assert!(entries(&dir.join("missing")).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_are_followed() {
        let dir = std::env::temp_dir().join(format!("aic-dir-listing-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("real_dir")).unwrap();
        std::fs::write(dir.join("real.parquet"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.join("real_dir"), dir.join("link_dir")).unwrap();
        std::os::unix::fs::symlink(dir.join("real.parquet"), dir.join("link.parquet")).unwrap();
        std::os::unix::fs::symlink(dir.join("gone"), dir.join("dangling")).unwrap();
        let mut got: Vec<(String, bool, bool)> =
            entries(&dir).unwrap().iter().map(|e| (e.name.clone(), e.is_dir, e.is_file)).collect();
        got.sort();
        let want = [
            ("dangling", false, false),
            ("link.parquet", false, true),
            ("link_dir", true, false),
            ("real.parquet", false, true),
            ("real_dir", true, false),
        ];
        let want: Vec<(String, bool, bool)> =
            want.iter().map(|(n, d, f)| (n.to_string(), *d, *f)).collect();
        assert_eq!(got, want);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
