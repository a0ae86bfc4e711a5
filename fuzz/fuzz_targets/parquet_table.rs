//! Perf-table loading: any bytes decoded as a parquet table must give a `RawTable` or a
//! `DataFile` error, never a panic that reaches the caller, never an abort. Every column of a
//! table that decodes can be read in every typed form (a wrong type is an error, not a crash).
//!
//! The parquet reader itself panics on some corrupt files (a division by zero in its
//! byte-array decoder, for one); `RawTable` catches those and returns a `DataFile` error. So
//! this target replaces libfuzzer-sys's abort-on-any-panic hook with one that only counts: a
//! panic that aic-core catches is not a crash, one that escapes still aborts the run (libfuzzer-
//! sys aborts when the target unwinds).

#![no_main]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

use aic_core::data::parquet::RawTable;
use aic_core::ErrorClass;
use libfuzzer_sys::fuzz_target;

static CAUGHT_PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics_instead_of_aborting() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let n = CAUGHT_PANICS.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                eprintln!("parquet_table: reader panic #{n} (caught by aic-core unless the run aborts): {info}");
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    count_panics_instead_of_aborting();
    let table = match RawTable::from_parquet_bytes(Path::new("fuzzed.parquet"), data, None) {
        Ok(t) => t,
        Err(e) => {
            assert_eq!(e.class(), ErrorClass::PerfDataNotAvailable, "{e}");
            return;
        }
    };
    let names: Vec<String> = table
        .column_names()
        .into_iter()
        .map(str::to_string)
        .collect();
    for name in &names {
        assert!(table.column(name).is_some());
        let _ = table.opt_int(name);
        let _ = table.opt_float(name);
        if let Ok(Some(codes)) = table.opt_str_codes(name) {
            for i in 0..codes.len() {
                let _ = codes.get(i);
            }
        }
    }
    for (_, values) in table.float_columns() {
        assert_eq!(values.len(), table.num_rows);
    }
});
