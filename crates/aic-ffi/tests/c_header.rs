//! The checked-in C header `include/aic.h` must be exactly what cbindgen generates from
//! `src/capi.rs` with `cbindgen.toml` today, so a change to the C ABI cannot ship with a stale
//! header. `AIC_UPDATE_HEADER=1` rewrites the header instead of comparing.

use std::path::Path;

const REGENERATE: &str = "AIC_UPDATE_HEADER=1 cargo test -p aic-ffi --test c_header";

fn generated_header() -> String {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml is readable and valid");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen parses src/lib.rs and its modules");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

#[test]
fn checked_in_header_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/aic.h");
    let fresh = generated_header();
    if std::env::var_os("AIC_UPDATE_HEADER").is_some_and(|v| v != "0") {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != fresh {
        let line = current
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| current.lines().count().min(fresh.lines().count()) + 1, |i| i + 1);
        panic!(
            "crates/aic-ffi/include/aic.h is stale or missing: it differs from what cbindgen generates from src/capi.rs \
             from line {line} on.\n  checked in: {:?}\n  generated:  {:?}\nRegenerate it with:\n  {REGENERATE}",
            current.lines().nth(line - 1).unwrap_or("<end of file>"),
            fresh.lines().nth(line - 1).unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn header_declares_the_whole_c_api() {
    let header = generated_header();
    for item in [
        "aic_engine_from_spec_file",
        "aic_engine_from_spec_bytes",
        "aic_engine_free",
        "aic_prefill_ms",
        "aic_decode_ms",
        "aic_decode_step_ms",
        "aic_mixed_step_ms",
        "aic_last_error_message",
        "aic_last_error_length",
        "aic_last_error_copy",
        "aic_status_name",
        "aic_version",
        "AIC_STATUS_OK = 0",
        "AIC_STATUS_FREED_HANDLE = 4",
        "typedef int32_t AicStatus;",
        "typedef struct AicEngineHandle",
    ] {
        assert!(header.contains(item), "the generated header lacks {item:?}:\n{header}");
    }
    for python_item in ["PyInit", "PyObject", "PyModule"] {
        assert!(!header.contains(python_item), "Python items leaked into the C header:\n{header}");
    }
}
