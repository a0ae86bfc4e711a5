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
        let path = entry.path();
        out.push(DirEntry { name, utf8, is_dir: path.is_dir(), is_file: path.is_file() });
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
}
