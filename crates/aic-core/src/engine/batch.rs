//! Many estimates in one call (issue 6): a simulator that prices a whole trace, or a planner
//! that sweeps a grid of shapes, hands over columns of arguments and gets a column of
//! latencies back, split across cores with rayon. Every estimate is a pure function of the
//! engine and its arguments, so the output is identical for any thread count and any split.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::provenance::{self, ProvenanceTier};
use super::Engine;
use crate::error::{AicError, Result};

/// Which estimate a batch call computes for each point `(a, b, c)` of its three columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    /// [`Engine::prefill_latency_ms`]`(batch_size = a, isl = b, prefix = c)`.
    Prefill,
    /// [`Engine::decode_latency_ms`]`(batch_size = a, isl = b, osl = c)`.
    Decode,
    /// [`Engine::decode_step_latency_ms`]`(gen_tokens = a, isl = b, osl = c, gen_scale = 1)`.
    DecodeStep,
}

impl BatchKind {
    /// Parses `"prefill"`, `"decode"` or `"decode_step"`.
    pub fn parse(text: &str) -> Result<BatchKind> {
        match text {
            "prefill" => Ok(BatchKind::Prefill),
            "decode" => Ok(BatchKind::Decode),
            "decode_step" => Ok(BatchKind::DecodeStep),
            other => Err(AicError::value(format!(
                "unknown batch estimate kind \"{other}\"; expected \"prefill\", \"decode\" or \"decode_step\""
            ))),
        }
    }

    fn estimate(self, engine: &Engine, a: u32, b: u32, c: u32) -> Result<f64> {
        match self {
            BatchKind::Prefill => engine.prefill_latency_ms(a, b, c),
            BatchKind::Decode => engine.decode_latency_ms(a, b, c),
            BatchKind::DecodeStep => engine.decode_step_latency_ms(a, b, c, 1.0),
        }
    }
}

/// Points per rayon task: large enough that scheduling costs nothing next to the estimates,
/// small enough that two cores stay balanced on a few thousand points.
const CHUNK: usize = 256;

/// The most worker threads one batch call may ask for: four per core, and never fewer than 64.
pub fn max_batch_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    (4 * cores).max(64)
}

/// The pool of `threads` workers: kept between calls (the last size asked for), so a caller
/// passing `threads` on every call does not start that many OS threads each time; sizes above
/// [`max_batch_threads`] are refused.
fn worker_pool(threads: usize) -> Result<Arc<rayon::ThreadPool>> {
    let limit = max_batch_threads();
    if threads > limit {
        return Err(AicError::value(format!(
            "threads must be at most {limit} (four per core of this machine, at least 64), got \
             {threads}; pass None to use every core"
        )));
    }
    // The last size asked for, kept per process (a pool inherited through `fork` has no threads).
    static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);
    static SIZE: Mutex<usize> = Mutex::new(0);
    let mut size = SIZE.lock().unwrap_or_else(|e| e.into_inner());
    if *size != threads {
        *POOL.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *size = threads;
    }
    crate::parallel::per_process(&POOL, || rayon::ThreadPoolBuilder::new().num_threads(threads).build())
        .map_err(|e| AicError::value(format!("cannot start {threads} worker threads: {e}")))
}

impl Engine {
    /// Estimates every point `(a[i], b[i], c[i])` (meaning per [`BatchKind`]) into `out[i]`.
    ///
    /// `threads`: `None` uses rayon's global pool (all cores, or `RAYON_NUM_THREADS`);
    /// `Some(1)` runs on the calling thread; `Some(n)` runs on a pool of `n` threads kept for
    /// the next call of the same size (`n` at most [`max_batch_threads`]). The values do not depend on the choice. The columns and `out` must
    /// have the same length. On failure `out` is partly written and the error names the first
    /// failing point (the lowest index, whatever the thread count).
    pub fn estimate_batch_into(
        &self,
        kind: BatchKind,
        a: &[u32],
        b: &[u32],
        c: &[u32],
        threads: Option<usize>,
        out: &mut [f64],
    ) -> Result<()> {
        let _call = provenance::CallScope::start();
        let n = out.len();
        if a.len() != n || b.len() != n || c.len() != n {
            return Err(AicError::value(format!(
                "batch columns must have equal lengths, got {}, {}, {} and an output of {n}",
                a.len(),
                b.len(),
                c.len()
            )));
        }
        // Chunks may run on worker threads: each reports its worst provenance tier here.
        let worst_tier = AtomicU8::new(0);
        let run_chunk = |(chunk, slot): (usize, &mut [f64])| -> std::result::Result<(), (usize, AicError)> {
            let (result, tier) = provenance::with_provenance(|| {
                let start = chunk * CHUNK;
                for (j, value) in slot.iter_mut().enumerate() {
                    let i = start + j;
                    *value = kind.estimate(self, a[i], b[i], c[i]).map_err(|e| (i, e))?;
                }
                Ok(())
            });
            worst_tier.fetch_max(ProvenanceTier::code(tier), Ordering::Relaxed);
            result
        };
        // Every chunk runs to its own first error; the lowest failing index is reported, so
        // the error does not depend on scheduling.
        let first_error = |results: Vec<std::result::Result<(), (usize, AicError)>>| {
            results.into_iter().filter_map(std::result::Result::err).min_by_key(|(i, _)| *i)
        };
        let failure = match threads {
            Some(0) => return Err(AicError::value("threads must be at least 1 (or None for all cores)")),
            Some(1) => first_error(out.chunks_mut(CHUNK).enumerate().map(run_chunk).collect()),
            None => crate::parallel::install(|| {
                first_error(out.par_chunks_mut(CHUNK).enumerate().map(run_chunk).collect())
            }),
            Some(t) => {
                let pool = worker_pool(t)?;
                pool.install(|| first_error(out.par_chunks_mut(CHUNK).enumerate().map(run_chunk).collect()))
            }
        };
        if let Some(tier) = ProvenanceTier::from_code(worst_tier.load(Ordering::Relaxed)) {
            provenance::note(tier);
        }
        match failure {
            None => Ok(()),
            Some((index, e)) => Err(AicError::BatchPoint { index, point: [a[index], b[index], c[index]], source: Box::new(e) }),
        }
    }

    /// As [`Engine::estimate_batch_into`], returning a new vector.
    pub fn estimate_batch(&self, kind: BatchKind, a: &[u32], b: &[u32], c: &[u32], threads: Option<usize>) -> Result<Vec<f64>> {
        let mut out = vec![0.0; a.len()];
        self.estimate_batch_into(kind, a, b, c, threads, &mut out)?;
        Ok(out)
    }
}
