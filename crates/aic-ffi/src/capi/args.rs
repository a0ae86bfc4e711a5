//! Reading C arguments into Rust values, with a [`CallError`] that names the argument, the
//! offending value and the fix whenever one is unusable.

use std::ffi::{c_char, CStr};
use std::path::PathBuf;

use super::status::{AicStatus, CallError};

/// A required NUL-terminated UTF-8 path.
///
/// # Safety
/// `ptr` must be NULL or point to a NUL-terminated string that stays valid during the call.
pub(super) unsafe fn path(ptr: *const c_char, name: &str) -> Result<PathBuf, CallError> {
    if ptr.is_null() {
        return Err(CallError::new(
            AicStatus::NullPointer,
            format!("{name} is NULL; pass a NUL-terminated UTF-8 path"),
        ));
    }
    // SAFETY: non-null and NUL-terminated per the caller's contract.
    let bytes = unsafe { CStr::from_ptr(ptr) };
    let text = bytes.to_str().map_err(|e| {
        CallError::new(
            AicStatus::InvalidUtf8,
            format!(
                "{name} is not valid UTF-8 ({e}; the path bytes are {:?}); pass the path encoded as UTF-8",
                bytes.to_string_lossy()
            ),
        )
    })?;
    if text.is_empty() {
        return Err(CallError::new(AicStatus::InvalidArgument, format!("{name} is an empty string; pass a path")));
    }
    Ok(PathBuf::from(text))
}

/// An optional path: NULL means "use the default".
///
/// # Safety
/// As [`path`].
pub(super) unsafe fn optional_path(ptr: *const c_char, name: &str) -> Result<Option<PathBuf>, CallError> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { path(ptr, name) }.map(Some).map_err(|e| match e.status {
        AicStatus::InvalidArgument => CallError::new(e.status, format!("{} or NULL for the default", e.message)),
        _ => e,
    })
}

/// `len` bytes at `ptr`.
///
/// # Safety
/// `ptr` must be NULL or valid for reads of `len` bytes during the call.
pub(super) unsafe fn bytes<'a>(ptr: *const u8, len: usize, name: &str) -> Result<&'a [u8], CallError> {
    if ptr.is_null() {
        return Err(CallError::new(
            AicStatus::NullPointer,
            format!("{name} is NULL; pass a pointer to the spec bytes and their length"),
        ));
    }
    if len > isize::MAX as usize {
        return Err(CallError::new(
            AicStatus::InvalidArgument,
            format!("{name}_len is {len}, more than any buffer can hold; pass the length of the spec in bytes"),
        ));
    }
    // SAFETY: non-null, len within isize::MAX, readable per the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A count argument (requests, tokens) as the engine's `u32`.
pub(super) fn count(value: i64, name: &str) -> Result<u32, CallError> {
    u32::try_from(value).map_err(|_| {
        CallError::new(
            AicStatus::InvalidArgument,
            format!("{name} is {value}; it must be between 0 and {} inclusive", u32::MAX),
        )
    })
}

/// Checks that an out-pointer is not NULL before any work is done.
pub(super) fn out_pointer<T>(ptr: *mut T, name: &str, what: &str) -> Result<(), CallError> {
    if ptr.is_null() {
        return Err(CallError::new(AicStatus::NullPointer, format!("{name} is NULL; pass a pointer to {what}")));
    }
    Ok(())
}

/// Writes a result through a checked out-pointer (no alignment is assumed).
///
/// # Safety
/// `ptr` must be non-null and valid for a write of a `T`.
pub(super) unsafe fn write<T>(ptr: *mut T, value: T) {
    // SAFETY: per the caller's contract; `write_unaligned` has no alignment requirement.
    unsafe { ptr.write_unaligned(value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_outside_u32_are_rejected_with_the_value() {
        assert_eq!(count(0, "isl").unwrap(), 0);
        assert_eq!(count(i64::from(u32::MAX), "isl").unwrap(), u32::MAX);
        let err = count(-1, "batch_size").unwrap_err();
        assert_eq!(err.status, AicStatus::InvalidArgument);
        assert_eq!(err.message, "batch_size is -1; it must be between 0 and 4294967295 inclusive");
        assert_eq!(count(1 << 32, "isl").unwrap_err().status, AicStatus::InvalidArgument);
    }

    #[test]
    fn paths_must_be_present_utf8_and_non_empty() {
        let ok = c"data/systems";
        assert_eq!(unsafe { path(ok.as_ptr(), "p") }.unwrap(), PathBuf::from("data/systems"));
        assert_eq!(unsafe { path(std::ptr::null(), "p") }.unwrap_err().status, AicStatus::NullPointer);
        assert_eq!(unsafe { optional_path(std::ptr::null(), "p") }.unwrap(), None);
        let bad = c"caf\xe9";
        let err = unsafe { path(bad.as_ptr(), "spec_path") }.unwrap_err();
        assert_eq!(err.status, AicStatus::InvalidUtf8);
        assert!(err.message.starts_with("spec_path is not valid UTF-8"), "{}", err.message);
        let err = unsafe { optional_path(c"".as_ptr(), "systems_path") }.unwrap_err();
        assert_eq!(
            (err.status, err.message.as_str()),
            (AicStatus::InvalidArgument, "systems_path is an empty string; pass a path or NULL for the default")
        );
    }
}
