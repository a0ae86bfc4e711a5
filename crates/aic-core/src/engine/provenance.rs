//! Provenance tiers of empirical estimates (spec 20 §0.6, §17.1; spec 40 §12): every
//! utilisation-transfer estimate notes how far its reference data is from the query, and a
//! compute call reports the worst tier noted while it ran.
//!
//! The engine is shared between threads, so nothing here is shared mutable state: the tier of
//! the call in progress accumulates in a thread-local byte (a call runs on one thread; the
//! batch API merges its workers' tiers explicitly), and the tier of the last finished call is
//! kept per thread too. SILICON and SOL answers never note anything, so their only cost is
//! saving and restoring that byte around each public call (no allocation, no lock).

use std::cell::Cell;

use super::Engine;

/// How far an empirical estimate's reference data is from the query, best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ProvenanceTier {
    /// The op's own table slice.
    Empirical = 1,
    /// Another shape of the same quant (head size, MoE shape, capped GPU count).
    Xshape = 2,
    /// Another quant with the same (bytes, compute) profile.
    Xquant = 3,
    /// Another quant profile, rescaled by utilisation levels.
    Xprofile = 4,
    /// Another op's utilisation.
    Xop = 5,
}

impl ProvenanceTier {
    /// The tier as the reference spells it (`"empirical"`, `"xshape"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ProvenanceTier::Empirical => "empirical",
            ProvenanceTier::Xshape => "xshape",
            ProvenanceTier::Xquant => "xquant",
            ProvenanceTier::Xprofile => "xprofile",
            ProvenanceTier::Xop => "xop",
        }
    }

    /// Parses a tier name as [`ProvenanceTier::as_str`] spells it.
    pub fn parse(text: &str) -> Option<ProvenanceTier> {
        [
            ProvenanceTier::Empirical,
            ProvenanceTier::Xshape,
            ProvenanceTier::Xquant,
            ProvenanceTier::Xprofile,
            ProvenanceTier::Xop,
        ]
        .into_iter()
        .find(|t| t.as_str() == text)
    }

    /// The tier of a byte code (0 = none).
    pub fn from_code(code: u8) -> Option<ProvenanceTier> {
        match code {
            1 => Some(ProvenanceTier::Empirical),
            2 => Some(ProvenanceTier::Xshape),
            3 => Some(ProvenanceTier::Xquant),
            4 => Some(ProvenanceTier::Xprofile),
            5 => Some(ProvenanceTier::Xop),
            _ => None,
        }
    }

    /// The byte code of an optional tier (0 = none), ordered like the tiers.
    pub fn code(tier: Option<ProvenanceTier>) -> u8 {
        tier.map_or(0, |t| t as u8)
    }
}

impl std::fmt::Display for ProvenanceTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

thread_local! {
    /// Worst tier noted by the call in progress on this thread (0 = none).
    static NOTED: Cell<u8> = const { Cell::new(0) };
    /// Worst tier of the last finished call on this thread (0 = none).
    static LAST: Cell<u8> = const { Cell::new(0) };
}

/// Notes that an empirical estimate of `tier` answered (called by the ops' empirical paths).
pub(crate) fn note(tier: ProvenanceTier) {
    NOTED.with(|n| n.set(n.get().max(tier as u8)));
}

/// One compute call in progress on this thread. Starting it sets the accumulator aside;
/// dropping it (on any return path, `?` included) records what the call noted as this
/// thread's last call and folds it into the enclosing call, if any, so a call nested in
/// another (a public method calling another, a batch point) also counts for the outer one.
pub(crate) struct CallScope {
    outer: u8,
}

impl CallScope {
    /// Starts a call: the tiers it notes are collected from a fresh start.
    pub(crate) fn start() -> CallScope {
        CallScope {
            outer: NOTED.with(|n| n.replace(0)),
        }
    }

    /// The worst tier noted since [`CallScope::start`].
    fn noted(&self) -> Option<ProvenanceTier> {
        ProvenanceTier::from_code(NOTED.with(Cell::get))
    }
}

impl Drop for CallScope {
    fn drop(&mut self) {
        let inner = NOTED.with(|n| {
            let inner = n.get();
            n.set(self.outer.max(inner));
            inner
        });
        LAST.with(|l| l.set(inner));
    }
}

/// Runs `f` as one compute call and returns its result with the worst tier it noted (also
/// recorded as this thread's last call).
pub fn with_provenance<R>(f: impl FnOnce() -> R) -> (R, Option<ProvenanceTier>) {
    let call = CallScope::start();
    let result = f();
    let tier = call.noted();
    drop(call);
    (result, tier)
}

/// The worst tier of the last compute call that finished **on the calling thread** (through
/// any engine); `None` when it noted no empirical estimate or no call has run here.
pub fn last_provenance() -> Option<ProvenanceTier> {
    ProvenanceTier::from_code(LAST.with(Cell::get))
}

impl Engine {
    /// Runs `f` (any compute calls on this engine) and returns its result with the worst
    /// provenance tier noted meanwhile: `None` when every answer came from a table or an
    /// analytic formula. Calls made meanwhile on other threads do not affect it.
    pub fn with_provenance<R>(&self, f: impl FnOnce(&Engine) -> R) -> (R, Option<ProvenanceTier>) {
        with_provenance(|| f(self))
    }

    /// The worst provenance tier of the last compute call that finished **on the calling
    /// thread** (spec 40 §9 `last_provenance()`): every public compute method resets it. It is
    /// per thread, not per engine: with several engines on one thread it describes whichever
    /// was called last. Use [`Engine::with_provenance`] to tie a tier to one call.
    pub fn last_provenance(&self) -> Option<ProvenanceTier> {
        last_provenance()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_order_and_names() {
        use ProvenanceTier::*;
        assert!(Empirical < Xshape && Xshape < Xquant && Xquant < Xprofile && Xprofile < Xop);
        for t in [Empirical, Xshape, Xquant, Xprofile, Xop] {
            assert_eq!(ProvenanceTier::parse(t.as_str()), Some(t));
            assert_eq!(
                ProvenanceTier::from_code(ProvenanceTier::code(Some(t))),
                Some(t)
            );
        }
        assert_eq!(ProvenanceTier::parse("silicon"), None);
        assert_eq!(ProvenanceTier::code(None), 0);
        assert_eq!(Xquant.to_string(), "xquant");
    }

    #[test]
    fn calls_reset_and_nested_calls_merge() {
        let ((), t) = with_provenance(|| {
            note(ProvenanceTier::Xshape);
            note(ProvenanceTier::Empirical);
        });
        assert_eq!(t, Some(ProvenanceTier::Xshape));
        assert_eq!(last_provenance(), Some(ProvenanceTier::Xshape));
        // the next call starts fresh
        let ((), t) = with_provenance(|| ());
        assert_eq!(t, None);
        assert_eq!(last_provenance(), None);
        // an inner call reports its own tiers and also counts for the outer one
        let (inner, outer) = with_provenance(|| {
            note(ProvenanceTier::Empirical);
            let ((), inner) = with_provenance(|| note(ProvenanceTier::Xprofile));
            inner
        });
        assert_eq!(inner, Some(ProvenanceTier::Xprofile));
        assert_eq!(outer, Some(ProvenanceTier::Xprofile));
        assert_eq!(last_provenance(), Some(ProvenanceTier::Xprofile));
    }

    #[test]
    fn threads_do_not_share_their_tiers() {
        let ((), t) = with_provenance(|| note(ProvenanceTier::Xquant));
        assert_eq!(t, Some(ProvenanceTier::Xquant));
        let other = std::thread::spawn(last_provenance).join().unwrap();
        assert_eq!(other, None);
        assert_eq!(last_provenance(), Some(ProvenanceTier::Xquant));
    }
}
