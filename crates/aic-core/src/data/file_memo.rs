//! Parsed small text files remembered per process.
//!
//! Every entry point re-reads the same YAML files: the system description, the version slots
//! (`query_versions.yaml`), the lane defaults, the reuse manifest and one `collection_meta.yaml`
//! per version folder. A sweep calls the engine a handful of times and each call resolves its
//! sources anew, so the same few dozen files were parsed several times per process. A parsed
//! result is kept here with the file's length and modification time and reused while both are
//! unchanged. As in `data::dir_listing`, a file modified within the last [`RACY_SECS`] seconds
//! is not remembered (a second write within the file system's timestamp tick could keep both
//! the same), so a freshly written file, as in tests, is always parsed anew.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Files modified more recently than this are not remembered.
const RACY_SECS: u64 = 2;

/// (length, modification time) of a file.
type Stamp = (u64, SystemTime);

type Memo = HashMap<(PathBuf, TypeId), (Stamp, Arc<dyn Any + Send + Sync>)>;

fn memo() -> &'static Mutex<Memo> {
    static MEMO: OnceLock<Mutex<Memo>> = OnceLock::new();
    MEMO.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The file's stamp when it can be remembered (readable metadata, settled modification time).
fn settled_stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    let modified = meta.modified().ok()?;
    let settled = SystemTime::now()
        .duration_since(modified)
        .is_ok_and(|age| age >= Duration::from_secs(RACY_SECS));
    settled.then_some((meta.len(), modified))
}

/// `parse` applied to the text of `path`, or the result remembered for the unchanged file.
/// The result type `T` is part of the key, so two parsers of one file do not mix. A read error
/// is returned as is and never remembered.
pub(crate) fn parsed<T, F>(path: &Path, parse: F) -> std::io::Result<T>
where
    T: Clone + Send + Sync + 'static,
    F: FnOnce(&str) -> T,
{
    let stamp = settled_stamp(path);
    let key = (path.to_path_buf(), TypeId::of::<T>());
    if let Some(stamp) = stamp {
        let memo = memo().lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, value)) = memo.get(&key) {
            if *at == stamp {
                if let Some(v) = value.downcast_ref::<T>() {
                    return Ok(v.clone());
                }
            }
        }
    }
    let text = std::fs::read_to_string(path)?;
    let value = parse(&text);
    // Remember only if the file did not change while it was read.
    if let Some(stamp) = stamp.filter(|s| settled_stamp(path).as_ref() == Some(s)) {
        memo()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (stamp, Arc::new(value.clone())));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("aic-file-memo-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_fresh_file_is_parsed_anew_after_every_write() {
        let d = dir("fresh");
        let p = d.join("a.yaml");
        std::fs::write(&p, "one").unwrap();
        assert_eq!(parsed(&p, |t| t.to_string()).unwrap(), "one");
        std::fs::write(&p, "two").unwrap();
        assert_eq!(parsed(&p, |t| t.to_string()).unwrap(), "two");
        assert!(parsed(&d.join("missing.yaml"), |t| t.len()).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_settled_file_is_parsed_once_until_it_changes() {
        let d = dir("settled");
        let p = d.join("b.yaml");
        std::fs::write(&p, "abc").unwrap();
        let old = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options().write(true).open(&p).unwrap().set_modified(old).unwrap();
        let calls = std::cell::Cell::new(0);
        let parse = |t: &str| {
            calls.set(calls.get() + 1);
            t.len() as u64
        };
        assert_eq!(parsed(&p, parse).unwrap(), 3);
        assert_eq!(parsed(&p, parse).unwrap(), 3);
        assert_eq!(calls.get(), 1, "the unchanged file is parsed once");
        // another result type is another entry
        assert_eq!(parsed(&p, |t| t.to_string()).unwrap(), "abc");
        // a rewrite (new length and time) is seen
        std::fs::write(&p, "abcdef").unwrap();
        assert_eq!(parsed(&p, parse).unwrap(), 6);
        assert_eq!(calls.get(), 2);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
