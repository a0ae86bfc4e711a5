//! The rayon pool aic's parallel work runs on, and what happens to it across `fork`.
//!
//! rayon's pools are threads, and a forked child inherits none of them: in the child, a
//! parallel call on a pool its parent started waits forever for workers that do not exist.
//! Python programs fork after using aic all the time (`multiprocessing`'s default start method
//! on Linux: a notebook runs one sweep, then maps estimates over a process pool). Every parallel
//! section of aic runs through [`install`]: in the process that first ran one, on whatever pool
//! the caller is in (rayon's global pool, or a pool the caller installed, so callers keep
//! choosing the thread count); in a process forked from it, on a pool of that process's own,
//! started on first use. [`per_process`] does the same for pools aic keeps itself.

use std::sync::{Arc, Mutex, OnceLock};

/// The process that ran aic's first parallel section (whose pools are real threads).
static FIRST_PROCESS: OnceLock<u32> = OnceLock::new();

/// Runs `f`, whose parallel iterators and joins then use a pool that has threads in this
/// process (see the module doc).
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let pid = std::process::id();
    if *FIRST_PROCESS.get_or_init(|| pid) == pid {
        return f();
    }
    static FORKED: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);
    let pool = per_process(&FORKED, || rayon::ThreadPoolBuilder::new().build())
        .or_else(|_| per_process(&FORKED, || rayon::ThreadPoolBuilder::new().num_threads(1).build()));
    match pool {
        Ok(pool) => pool.install(f),
        // No thread can be started at all: the caller's thread does the work alone.
        Err(_) => match rayon::ThreadPoolBuilder::new().num_threads(1).use_current_thread().build() {
            Ok(pool) => pool.install(f),
            Err(_) => f(),
        },
    }
}

/// The pool kept in `slot` if this process made it, else a new one from `make` (kept there):
/// a pool inherited from the parent of a `fork` has no threads.
pub fn per_process(
    slot: &Mutex<Option<(u32, Arc<rayon::ThreadPool>)>>,
    make: impl FnOnce() -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError>,
) -> Result<Arc<rayon::ThreadPool>, rayon::ThreadPoolBuildError> {
    let pid = std::process::id();
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, pool)) = slot.as_ref() {
        if *owner == pid {
            return Ok(pool.clone());
        }
    }
    let pool = Arc::new(make()?);
    *slot = Some((pid, pool.clone()));
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn sections_run_in_the_callers_pool_in_the_first_process() {
        let sum: u64 = install(|| (1..=100u64).into_par_iter().sum());
        assert_eq!(sum, 5050);
        // a pool the caller installed stays the one in use
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let threads = pool.install(|| install(rayon::current_num_threads));
        assert_eq!(threads, 3);
    }

    #[test]
    fn a_kept_pool_is_reused_by_its_process() {
        static SLOT: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);
        let a = per_process(&SLOT, || rayon::ThreadPoolBuilder::new().num_threads(2).build()).unwrap();
        let b = per_process(&SLOT, || unreachable!("the kept pool is reused")).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        // a slot written by another process (a fork's parent) is replaced
        *SLOT.lock().unwrap() = Some((std::process::id().wrapping_add(1), a.clone()));
        let c = per_process(&SLOT, || rayon::ThreadPoolBuilder::new().num_threads(2).build()).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
    }
}
