//! The thread-local "last error" text of the C ABI.
//!
//! C has no exceptions: an `aic_*` call returns a status code and leaves the human-readable
//! reason here, for the calling thread only, until that thread's next call of a function that
//! returns a status. A successful call leaves the text empty.

use std::cell::RefCell;
use std::ffi::{c_char, CString};

thread_local! {
    static MESSAGE: RefCell<CString> = RefCell::new(CString::default());
}

/// Records the reason of a failed call. A NUL byte inside the text (from a path, say) is
/// written as `\0`, since the C string ends at the first NUL.
pub(super) fn set(message: &str) {
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    let _ = MESSAGE.try_with(|m| *m.borrow_mut() = text);
}

/// Empties the text after a successful call (without reallocating when it is already empty).
pub(super) fn clear() {
    let _ = MESSAGE.try_with(|m| {
        if !m.borrow().is_empty() {
            *m.borrow_mut() = CString::default();
        }
    });
}

/// The text as a NUL-terminated string owned by this thread, or NULL while the thread is
/// being torn down.
pub(super) fn as_ptr() -> *const c_char {
    MESSAGE.try_with(|m| m.borrow().as_ptr()).unwrap_or(std::ptr::null())
}

/// Length of the text in bytes, without the terminating NUL.
pub(super) fn len() -> usize {
    MESSAGE.try_with(|m| m.borrow().as_bytes().len()).unwrap_or(0)
}

/// Copies as much of the text as fits into `buffer` (always NUL-terminated when `capacity > 0`)
/// and returns the full length, like `snprintf`.
///
/// # Safety
/// `buffer` must be NULL or valid for writes of `capacity` bytes.
pub(super) unsafe fn copy_into(buffer: *mut c_char, capacity: usize) -> usize {
    MESSAGE
        .try_with(|m| {
            let text = m.borrow();
            let bytes = text.as_bytes();
            if !buffer.is_null() && capacity > 0 {
                let n = bytes.len().min(capacity - 1);
                // SAFETY: the caller guarantees `capacity` writable bytes at `buffer`; n < capacity.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buffer, n);
                    buffer.add(n).write(0);
                }
            }
            bytes.len()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_clear_and_copy() {
        set("bad\0value");
        assert_eq!(len(), "bad\\0value".len());
        let mut small = [1 as c_char; 5];
        let full = unsafe { copy_into(small.as_mut_ptr(), small.len()) };
        assert_eq!(full, 10);
        let copied: Vec<u8> = small.iter().map(|&c| c as u8).collect();
        assert_eq!(copied, b"bad\\\0");
        assert_eq!(unsafe { copy_into(std::ptr::null_mut(), 0) }, 10);
        clear();
        assert_eq!(len(), 0);
        assert_eq!(unsafe { std::ffi::CStr::from_ptr(as_ptr()) }.to_bytes(), b"");
    }

    #[test]
    fn each_thread_has_its_own_text() {
        set("main thread");
        std::thread::spawn(|| assert_eq!(len(), 0)).join().unwrap();
        assert_eq!(len(), "main thread".len());
    }
}
