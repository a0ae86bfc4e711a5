//! Status codes of the C ABI and the error type its entry points fail with.
//!
//! Every `aic_*` call that can fail returns an [`AicStatus`]; the reason goes to the
//! thread-local last-error text. Core errors map onto the same families as the Python
//! exceptions (see `errors.rs`), plus codes for what only a C caller can get wrong: NULL
//! pointers, non-UTF-8 paths, bad handles and out-of-range integers.

use std::any::Any;
use std::ffi::{c_char, CStr};

use aic_core::{AicError, ErrorClass};

/// Outcome of an `aic_*` call. Every failure also leaves a message in
/// `aic_last_error_message()`.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AicStatus {
    /// Success; the result was written through the out-pointer.
    Ok = 0,
    /// A required pointer argument (a path, the spec bytes or an out-pointer) is NULL.
    NullPointer = 1,
    /// A path argument is not valid UTF-8.
    InvalidUtf8 = 2,
    /// The engine handle was never issued by this library: zero-initialised, forged or corrupted.
    InvalidHandle = 3,
    /// The engine handle was freed by `aic_engine_free` (a use after free or a double free).
    FreedHandle = 4,
    /// An argument is out of range (a negative count, one above 4294967295, an empty path) or
    /// the engine rejects it (e.g. `prefix >= isl`); Python raises `ValueError` for the latter.
    InvalidArgument = 5,
    /// The spec bytes are neither a JSON nor a binary engine spec of the supported schema.
    InvalidSpec = 6,
    /// The spec file cannot be read (missing, unreadable, a folder).
    Io = 7,
    /// A perf table, slice or data file needed for the engine or the estimate is missing or
    /// unreadable (Python: `PerfDataNotAvailableError`).
    PerfDataNotAvailable = 8,
    /// The empirical estimate has no reference data to work from (Python:
    /// `EmpiricalNotImplementedError`).
    EmpiricalNotImplemented = 9,
    /// A quant mode needs a tensor-core FLOPS entry the system description does not define
    /// (Python: `MissingSystemFlopsError`).
    MissingSystemFlops = 10,
    /// A bug inside aic (a caught panic); please report it with the message.
    Internal = 11,
}

impl AicStatus {
    const ALL: [AicStatus; 12] = [
        AicStatus::Ok,
        AicStatus::NullPointer,
        AicStatus::InvalidUtf8,
        AicStatus::InvalidHandle,
        AicStatus::FreedHandle,
        AicStatus::InvalidArgument,
        AicStatus::InvalidSpec,
        AicStatus::Io,
        AicStatus::PerfDataNotAvailable,
        AicStatus::EmpiricalNotImplemented,
        AicStatus::MissingSystemFlops,
        AicStatus::Internal,
    ];

    /// The status with this numeric value, if there is one.
    pub fn from_code(code: i32) -> Option<AicStatus> {
        AicStatus::ALL.into_iter().find(|s| *s as i32 == code)
    }

    /// The C name of the code (`"AIC_STATUS_NULL_POINTER"`, ...), as a static C string.
    pub fn c_name(self) -> &'static CStr {
        match self {
            AicStatus::Ok => c"AIC_STATUS_OK",
            AicStatus::NullPointer => c"AIC_STATUS_NULL_POINTER",
            AicStatus::InvalidUtf8 => c"AIC_STATUS_INVALID_UTF8",
            AicStatus::InvalidHandle => c"AIC_STATUS_INVALID_HANDLE",
            AicStatus::FreedHandle => c"AIC_STATUS_FREED_HANDLE",
            AicStatus::InvalidArgument => c"AIC_STATUS_INVALID_ARGUMENT",
            AicStatus::InvalidSpec => c"AIC_STATUS_INVALID_SPEC",
            AicStatus::Io => c"AIC_STATUS_IO",
            AicStatus::PerfDataNotAvailable => c"AIC_STATUS_PERF_DATA_NOT_AVAILABLE",
            AicStatus::EmpiricalNotImplemented => c"AIC_STATUS_EMPIRICAL_NOT_IMPLEMENTED",
            AicStatus::MissingSystemFlops => c"AIC_STATUS_MISSING_SYSTEM_FLOPS",
            AicStatus::Internal => c"AIC_STATUS_INTERNAL",
        }
    }

    /// The code of a core error: spec decoding failures are [`AicStatus::InvalidSpec`], the
    /// rest follow the error's exception family.
    pub fn of_core_error(error: &AicError) -> AicStatus {
        match error {
            AicError::SchemaVersion { .. } | AicError::WireFormat(_) => AicStatus::InvalidSpec,
            other => match other.class() {
                ErrorClass::PerfDataNotAvailable => AicStatus::PerfDataNotAvailable,
                ErrorClass::EmpiricalNotImplemented => AicStatus::EmpiricalNotImplemented,
                ErrorClass::MissingSystemFlops => AicStatus::MissingSystemFlops,
                ErrorClass::Value => AicStatus::InvalidArgument,
            },
        }
    }
}

/// Why an entry point failed: the code it returns and the text it leaves as the last error.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CallError {
    pub(super) status: AicStatus,
    pub(super) message: String,
}

impl CallError {
    pub(super) fn new(status: AicStatus, message: impl Into<String>) -> Self {
        CallError { status, message: message.into() }
    }

    /// A panic caught at the boundary.
    pub(super) fn panic(payload: &(dyn Any + Send)) -> Self {
        let text = payload
            .downcast_ref::<&'static str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic with a non-string payload".to_string());
        CallError::new(AicStatus::Internal, format!("internal error in aic (a bug; please report it): {text}"))
    }
}

impl From<AicError> for CallError {
    fn from(error: AicError) -> Self {
        CallError::new(AicStatus::of_core_error(&error), error.to_string())
    }
}

/// `c_name` as a raw pointer for C.
pub(super) fn status_name_ptr(code: i32) -> *const c_char {
    AicStatus::from_code(code).map_or(c"AIC_STATUS_UNKNOWN", AicStatus::c_name).as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_dense_and_named() {
        for (i, status) in AicStatus::ALL.iter().enumerate() {
            assert_eq!(*status as i32, i as i32);
            assert_eq!(AicStatus::from_code(i as i32), Some(*status));
            let name = status.c_name().to_str().unwrap();
            let debug = format!("{status:?}");
            let screaming: String = debug
                .chars()
                .enumerate()
                .flat_map(|(j, c)| {
                    let sep = (j > 0 && c.is_ascii_uppercase()).then_some('_');
                    sep.into_iter().chain(std::iter::once(c.to_ascii_uppercase()))
                })
                .collect();
            assert_eq!(name, format!("AIC_STATUS_{screaming}"));
        }
        assert_eq!(AicStatus::from_code(12), None);
        assert_eq!(AicStatus::from_code(-1), None);
    }

    #[test]
    fn core_errors_map_by_family() {
        assert_eq!(AicStatus::of_core_error(&AicError::WireFormat("x".into())), AicStatus::InvalidSpec);
        assert_eq!(AicStatus::of_core_error(&AicError::SchemaVersion { got: 1, expected: 15 }), AicStatus::InvalidSpec);
        assert_eq!(AicStatus::of_core_error(&AicError::perf("x")), AicStatus::PerfDataNotAvailable);
        assert_eq!(AicStatus::of_core_error(&AicError::config("x")), AicStatus::InvalidArgument);
        assert_eq!(AicStatus::of_core_error(&AicError::MissingSystemFlops("x".into())), AicStatus::MissingSystemFlops);
        assert_eq!(
            AicStatus::of_core_error(&AicError::EmpiricalNotImplemented("x".into())),
            AicStatus::EmpiricalNotImplemented
        );
    }

    #[test]
    fn panics_become_internal_errors() {
        let payload = std::panic::catch_unwind(|| panic!("boom {}", 7)).unwrap_err();
        let err = CallError::panic(payload.as_ref());
        assert_eq!(err.status, AicStatus::Internal);
        assert!(err.message.ends_with("boom 7"), "{}", err.message);
    }
}
