//! A fixed loop of estimates for instruction-level profiling (callgrind, perf): the same engine
//! and argument stream as the criterion benchmark's dense group, with the measured loop in its
//! own non-inlined function so a profiler can collect exactly it.
//!
//! ```sh
//! cargo build --release -p aic-core --example profile_estimates
//! valgrind --tool=callgrind --toggle-collect=profile_estimates::measured_loop \
//!     target/release/examples/profile_estimates decode 20000
//! ```
//!
//! Arguments: the estimate (`decode`, `decode-step`, `prefill`, `mixed`, `decode-long`,
//! `static`; default `decode`), the number of calls (default 20000), and optionally a spec JSON
//! file (default: `examples/specs/qwen3-32b_h200_vllm_tp2.json`). Instructions per estimate are
//! the collected total divided by the number of calls.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;

use aic_core::{Engine, EngineSpec, StaticRun};

#[path = "support/arg_stream.rs"]
mod arg_stream;
use arg_stream::Args;

/// The estimates this loop can repeat.
#[derive(Clone, Copy)]
enum Kind {
    Decode,
    DecodeStep,
    Prefill,
    Mixed,
    DecodeLong,
    Static,
}

impl Kind {
    fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "decode" => Kind::Decode,
            "decode-step" => Kind::DecodeStep,
            "prefill" => Kind::Prefill,
            "mixed" => Kind::Mixed,
            "decode-long" => Kind::DecodeLong,
            "static" => Kind::Static,
            _ => return None,
        })
    }
}

/// The collected region: [`estimates`] called from here is what the profiler counts.
#[inline(never)]
fn measured_loop(engine: &Engine, kind: Kind, calls: u64) -> Result<f64, aic_core::AicError> {
    estimates(engine, kind, calls)
}

/// `calls` estimates of `kind` with fresh arguments each.
#[inline(never)]
fn estimates(engine: &Engine, kind: Kind, calls: u64) -> Result<f64, aic_core::AicError> {
    let mut a = Args(0x9e3779b97f4a7c15);
    let mut sum = 0.0;
    for _ in 0..calls {
        sum += match kind {
            Kind::Decode => engine.decode_latency_ms(a.next(1, 256), a.next(128, 8192), 2)?,
            Kind::DecodeStep => engine.decode_step_latency_ms(a.next(1, 256), a.next(128, 8192), a.next(2, 1024), 1.0)?,
            Kind::Prefill => engine.prefill_latency_ms(a.next(1, 8), a.next(128, 8192), 0)?,
            Kind::Mixed => {
                engine.mixed_step_latency_ms(a.next(256, 4096), a.next(1, 128), a.next(512, 8192), a.next(2, 1024), 0, 1.0, 1.0)?
            }
            Kind::DecodeLong => engine.decode_latency_ms(a.next(1, 256), a.next(128, 8192), 1024)?,
            Kind::Static => engine.run_static(&StaticRun::new(a.next(1, 16), a.next(128, 4096), 512))?.total_ms,
        };
        black_box(sum);
    }
    Ok(sum)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let kind_name = args.first().map_or("decode", String::as_str);
    let Some(kind) = Kind::parse(kind_name) else {
        eprintln!("unknown estimate {kind_name:?}: use decode, decode-step, prefill, mixed, decode-long or static");
        return ExitCode::from(2);
    };
    let calls: u64 = match args.get(1).map(|s| s.parse()) {
        None => 20_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("the number of calls must be a positive integer, got {:?}", args[1]);
            return ExitCode::from(2);
        }
    };
    let spec_path = args.get(2).map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/specs/qwen3-32b_h200_vllm_tp2.json")
    });
    let engine = match std::fs::read_to_string(&spec_path)
        .map_err(|e| format!("cannot read {}: {e}", spec_path.display()))
        .and_then(|text| EngineSpec::from_json(&text).map_err(|e| e.to_string()))
        .and_then(|spec| Engine::from_spec(spec, None).map_err(|e| e.to_string()))
    {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // Warm every table and hold index the loop touches, outside the collected region.
    if let Err(e) = estimates(&engine, kind, 1000) {
        eprintln!("estimate failed: {e}");
        return ExitCode::FAILURE;
    }
    match measured_loop(&engine, kind, calls) {
        Ok(sum) => {
            println!("{calls} {kind_name} estimates, sum {sum:.6} ms");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("estimate failed: {e}");
            ExitCode::FAILURE
        }
    }
}
