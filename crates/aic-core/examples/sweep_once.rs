//! Runs the native deployment sweep (`serving::sweep::sweep_json`) from a request file, `REPEAT`
//! times in one fresh process, and prints each call's wall time: the first call pays the table
//! loads and lookup builds, the later ones only the sweep. For profiling a sweep without Python:
//!
//! `cargo run --release -p aic-core --example sweep_once -- REQUEST.json SYSTEMS_ROOT [REPEAT]`
//!
//! `REQUEST.json` is the text `aic.serving_sweep.sweep` hands to `aic._aic.serving_sweep` (wrap
//! that function to write its first argument to a file).
fn main() -> aic_core::serving::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: sweep_once REQUEST.json SYSTEMS_ROOT [REPEAT]");
        std::process::exit(2);
    }
    let request = std::fs::read_to_string(&args[1])
        .map_err(|e| aic_core::AicError::InvalidConfig(format!("cannot read {}: {e}", args[1])))?;
    let root = std::path::PathBuf::from(&args[2]);
    let repeat: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    for _ in 0..repeat {
        let start = std::time::Instant::now();
        let out = aic_core::serving::sweep::sweep_json(&request, Some(&root))?;
        eprintln!("sweep {:.2} ms ({} bytes of result)", start.elapsed().as_secs_f64() * 1e3, out.len());
    }
    Ok(())
}
