//! Reading a spec file from disk without trusting the path: only a regular file, and only up
//! to a size no compiled spec comes near. A device, a FIFO or a huge file given as a spec path
//! would otherwise exhaust memory or block the caller forever (issue: hostile inputs).

use std::io::Read;
use std::path::Path;

use crate::error::{AicError, Result};

/// The largest spec file read, bytes (64 MiB). The biggest compiled spec of the shipped
/// models is well under 1 MiB.
pub const MAX_SPEC_FILE_BYTES: u64 = 64 << 20;

fn file_error(path: &Path, message: String) -> AicError {
    AicError::DataFile { path: path.to_path_buf(), message }
}

/// The bytes of the spec file at `path`: a regular file (symlinks followed) of at most
/// [`MAX_SPEC_FILE_BYTES`]; anything else is a `DataFile` error naming the path and the fix.
pub fn read_spec_file(path: &Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(path)
        .map_err(|e| file_error(path, format!("cannot read spec file: {e}")))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a folder" } else { "not a regular file (a device, FIFO or socket)" };
        return Err(file_error(
            path,
            format!("cannot read spec file: the path is {kind}; give the .aicspec or .json file \
                     written by `aic-compile compile`"),
        ));
    }
    if meta.len() > MAX_SPEC_FILE_BYTES {
        return Err(file_error(
            path,
            format!(
                "cannot read spec file: {} bytes is more than the {MAX_SPEC_FILE_BYTES}-byte \
                 limit for a spec; this is not a compiled spec",
                meta.len()
            ),
        ));
    }
    let file = std::fs::File::open(path)
        .map_err(|e| file_error(path, format!("cannot read spec file: {e}")))?;
    // The size may change between the check and the read: never take more than the limit.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_SPEC_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| file_error(path, format!("cannot read spec file: {e}")))?;
    if bytes.len() as u64 > MAX_SPEC_FILE_BYTES {
        return Err(file_error(
            path,
            format!("cannot read spec file: it grew past the {MAX_SPEC_FILE_BYTES}-byte limit while being read"),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_folders_devices_and_missing_files() {
        let dir = std::env::temp_dir();
        let err = read_spec_file(&dir).unwrap_err().to_string();
        assert!(err.contains("the path is a folder"), "{err}");
        #[cfg(unix)]
        {
            let err = read_spec_file(Path::new("/dev/zero")).unwrap_err().to_string();
            assert!(err.contains("not a regular file"), "{err}");
        }
        let err = read_spec_file(&dir.join("aic-no-such-spec.json")).unwrap_err().to_string();
        assert!(err.contains("cannot read spec file"), "{err}");
    }

    #[test]
    fn reads_a_regular_file() {
        let path = std::env::temp_dir().join(format!("aic-spec-file-{}.json", std::process::id()));
        std::fs::write(&path, b"{}").unwrap();
        assert_eq!(read_spec_file(&path).unwrap(), b"{}");
        std::fs::remove_file(&path).unwrap();
    }
}
