//! Times the first-use loads a sweep pays for one perf database, one after the other on one
//! thread, in a fresh process (reading the system, opening the database with its reuse
//! manifest, the two attention lane orders, the GEMM table and one quant's lookup sites, the
//! attention tables, the communication tables):
//!
//! `cargo run --release -p aic-core --example load_phases -- SYSTEM BACKEND VERSION [GEMM_QUANT]`
//!
//! (e.g. `h100_sxm sglang 0.5.14 bfloat16`; `RAYON_NUM_THREADS=1` keeps the lane count on one
//! core). Prints the cumulative wall time after each step.
use std::path::Path;
use std::time::Instant;

use aic_core::data::lanes::{attention_lane_order, AttentionPhase};
use aic_core::data::system::SystemSpec;
use aic_core::data::tables::PerfDatabase;
use aic_core::spec::Backend;

fn main() -> aic_core::error::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: load_phases SYSTEM BACKEND VERSION [GEMM_QUANT]");
        std::process::exit(2);
    }
    let (system, version) = (&args[1], &args[3]);
    let backend = Backend::parse(&args[2])?;
    let quant = args.get(4).map_or("bfloat16", String::as_str);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems");
    let start = Instant::now();
    let lap = |step: &str| eprintln!("{step:>24}: {:7.2} ms", start.elapsed().as_secs_f64() * 1e3);
    let spec = SystemSpec::load(&root, system)?;
    lap("system");
    let db = PerfDatabase::open(&root, system, backend, version, true)?;
    lap("open (manifest)");
    for phase in [AttentionPhase::Context, AttentionPhase::Generation] {
        attention_lane_order(&root, &spec, backend, version, phase, true, None)?;
        lap(&format!("{} lane order", phase.label()));
    }
    let gemm = db.gemm()?;
    lap("gemm load");
    gemm.quant(quant);
    lap(&format!("gemm {quant} sites"));
    db.context_attention()?;
    lap("context attention");
    db.generation_attention()?;
    lap("generation attention");
    db.custom_allreduce()?;
    db.nccl()?;
    lap("comm");
    Ok(())
}
