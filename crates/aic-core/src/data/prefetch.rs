//! Loading a perf database's tables in the background while the caller does other work.
//!
//! A deployment sweep knows its database (system, backend, version) before it compiles a single
//! layout, but the engines that read the tables are only built once every layout is compiled,
//! in the front end, one after the other. [`prefetch_tables`] opens the database and loads the
//! tables every engine reads (GEMM and the communication tables) on a background thread, so
//! the load overlaps the compile instead of following it. The tables land in the database's
//! own once-only slots: an engine built meanwhile waits for, or reuses, exactly the table it
//! would have loaded itself (an error is kept there too, and reported by the engine's build
//! as it would have been). Nothing is loaded twice, and a prefetch nobody uses costs only the
//! background thread's time.

use std::path::Path;
use std::sync::{Condvar, Mutex};

use crate::data::sources::strict_provenance_from_env;
use crate::data::tables::PerfDatabase;
use crate::spec::Backend;

/// Starts loading the GEMM and communication tables of the database an engine with this
/// identity opens (provenance strictness from the environment, as the engine does). Returns
/// false when no background load was started (the database cannot be opened, or no thread
/// could be spawned); the caller then simply goes on, and the engine loads what it needs.
pub fn prefetch_tables(
    systems_root: &Path,
    system: &str,
    backend: Backend,
    version: &str,
    enable_shared_layer: bool,
) -> bool {
    let strict = strict_provenance_from_env();
    let Ok(db) = PerfDatabase::open_with_provenance(systems_root, system, backend, version, enable_shared_layer, strict)
    else {
        return false;
    };
    let running = Running::start();
    std::thread::Builder::new()
        .name("aic-prefetch".into())
        .spawn(move || {
            let _running = running;
            // Results (tables or errors) stay in the database; a panic stays in this thread.
            let _ = db.gemm();
            let _ = db.custom_allreduce();
            let _ = db.nccl();
        })
        .is_ok()
}

/// Prefetch threads still loading, and their end.
static RUNNING: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// One running prefetch; its drop (the thread's end, a panic included) counts it out.
struct Running;

impl Running {
    fn start() -> Running {
        wait_before_fork();
        *RUNNING.0.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Running
    }
}

/// Makes `fork` wait for running prefetches (once per process, on the first prefetch): a
/// child forked while a prefetch thread fills a table's once-only slot would find that slot
/// taken forever, and nothing else stops a caller from forking then (a sweep whose compile
/// raised after its prefetch started, say). A prefetch ends within one table load.
#[cfg(unix)]
fn wait_before_fork() {
    extern "C" {
        fn pthread_atfork(
            prepare: Option<extern "C" fn()>,
            parent: Option<extern "C" fn()>,
            child: Option<extern "C" fn()>,
        ) -> std::ffi::c_int;
    }
    extern "C" fn prepare() {
        wait_for_prefetches();
    }
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a handler with the C library; `prepare` takes no arguments, only
    // waits on a Rust condition variable and never unwinds across the C frame
    // (`wait_for_prefetches` recovers poisoned locks instead of panicking).
    REGISTERED.call_once(|| unsafe {
        pthread_atfork(Some(prepare), None, None);
    });
}

#[cfg(not(unix))]
fn wait_before_fork() {}

impl Drop for Running {
    fn drop(&mut self) {
        let mut n = RUNNING.0.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.saturating_sub(1);
        RUNNING.1.notify_all();
    }
}

/// Waits until no prefetch is loading. The sweep calls it before it returns, and `fork` before
/// it forks (see `wait_before_fork`), so no loading thread holds a table's once-only slot when
/// the caller goes on: a process forked then (as Python's `multiprocessing` does) would find
/// that slot taken forever.
pub fn wait_for_prefetches() {
    let mut n = RUNNING.0.lock().unwrap_or_else(|e| e.into_inner());
    while *n > 0 {
        n = RUNNING.1.wait(n).unwrap_or_else(|e| e.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems")
    }

    #[test]
    fn a_prefetched_table_is_the_one_the_database_lends() {
        assert!(prefetch_tables(&root(), "h100_sxm", Backend::Sglang, "0.5.14", true));
        let db = PerfDatabase::open_with_provenance(&root(), "h100_sxm", Backend::Sglang, "0.5.14", true, strict_provenance_from_env())
            .unwrap();
        // waits for the background load if it is still running; the same table afterwards
        let gemm = db.gemm().unwrap().clone();
        assert!(std::sync::Arc::ptr_eq(&gemm, db.gemm().unwrap()));
        assert!(gemm.quant("bfloat16").is_some());
    }

    #[test]
    fn waiting_returns_once_every_prefetch_has_ended() {
        assert!(prefetch_tables(&root(), "h200_sxm", Backend::Vllm, "0.24.0", true));
        // returns (other tests may start prefetches meanwhile; each one ends)
        wait_for_prefetches();
    }

    #[test]
    fn an_unknown_database_starts_nothing() {
        assert!(!prefetch_tables(&root(), "no_such_system", Backend::Sglang, "0.5.14", true));
    }
}
