//! Engine handles for the C ABI.
//!
//! A C caller holds an engine as a plain 64-bit handle, never as a pointer into Rust memory, so
//! a stale, forged or twice-freed handle is detected and reported instead of being dereferenced.
//! The handle packs a slot index (low 32 bits, stored plus one so that 0 is never a handle) and
//! the slot's generation (high 32 bits). Freeing an engine empties its slot and bumps the slot's
//! generation, so every handle issued for it before reads as freed from then on, even after the
//! slot is reused for a new engine.
//!
//! Cost per estimate: one uncontended read lock of the slot table plus one `Arc` clone and drop
//! (a few atomic operations, tens of nanoseconds next to microseconds of estimating). The lock is
//! released before the estimate runs, so estimates on one engine run in parallel, and freeing an
//! engine while another thread is estimating with it is safe: the engine is dropped when the
//! last running estimate finishes.

use std::sync::{Arc, PoisonError, RwLock};

/// Why a handle does not name a live entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HandleError {
    /// The handle is 0 (a zero-initialised handle: no engine was ever stored in it).
    Zero,
    /// This registry never issued the handle (a forged, corrupted or uninitialised value).
    Unknown,
    /// The handle was issued, but its entry has been removed since (use after free, double free).
    Freed,
}

/// One slot of the table: the current generation and the entry, if the slot is in use.
struct Slot<T> {
    generation: u32,
    entry: Option<Arc<T>>,
}

/// The table behind a [`Registry`].
struct Slots<T> {
    slots: Vec<Slot<T>>,
    /// Indices of empty slots that can be reused.
    vacant: Vec<u32>,
}

/// Thread-safe table of shared entries addressed by generation-tagged `u64` handles.
pub(super) struct Registry<T> {
    table: RwLock<Slots<T>>,
}

/// Index and generation of a handle, or `None` for 0 (the handle never issued).
fn split(handle: u64) -> Option<(usize, u32)> {
    let index_plus_one = (handle & u64::from(u32::MAX)) as u32;
    let generation = (handle >> 32) as u32;
    (index_plus_one != 0).then(|| ((index_plus_one - 1) as usize, generation))
}

fn join(index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | (u64::from(index) + 1)
}

impl<T> Registry<T> {
    /// An empty registry.
    pub(super) const fn new() -> Self {
        Registry { table: RwLock::new(Slots { slots: Vec::new(), vacant: Vec::new() }) }
    }

    /// Stores `entry` and returns its handle (never 0), or `None` if all 2^32 − 1 slots are in
    /// use or retired.
    pub(super) fn insert(&self, entry: T) -> Option<u64> {
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(index) = table.vacant.pop() {
            let slot = &mut table.slots[index as usize];
            slot.entry = Some(Arc::new(entry));
            return Some(join(index, slot.generation));
        }
        // Index u32::MAX would not fit the handle's `index + 1` field.
        let index = u32::try_from(table.slots.len()).ok().filter(|&i| i < u32::MAX)?;
        table.slots.push(Slot { generation: 1, entry: Some(Arc::new(entry)) });
        Some(join(index, 1))
    }

    /// The entry a handle names.
    pub(super) fn get(&self, handle: u64) -> Result<Arc<T>, HandleError> {
        let (index, generation) = split(handle).ok_or(HandleError::Zero)?;
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        let slot = table.slots.get(index).ok_or(HandleError::Unknown)?;
        match (&slot.entry, generation.cmp(&slot.generation)) {
            (Some(entry), std::cmp::Ordering::Equal) => Ok(Arc::clone(entry)),
            (_, std::cmp::Ordering::Greater) => Err(HandleError::Unknown),
            _ => Err(HandleError::Freed),
        }
    }

    /// Removes the entry a handle names. The entry itself is dropped after the table is
    /// unlocked, once no running call holds it any more.
    pub(super) fn remove(&self, handle: u64) -> Result<(), HandleError> {
        let (index, generation) = split(handle).ok_or(HandleError::Zero)?;
        let removed = {
            let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
            let slot = table.slots.get_mut(index).ok_or(HandleError::Unknown)?;
            if generation > slot.generation {
                return Err(HandleError::Unknown);
            }
            if generation < slot.generation || slot.entry.is_none() {
                return Err(HandleError::Freed);
            }
            let removed = slot.entry.take();
            // A slot whose generation cannot grow any more is retired rather than reused, so
            // no old handle can ever name a new entry.
            if slot.generation < u32::MAX {
                slot.generation += 1;
                table.vacant.push(index as u32);
            }
            removed
        };
        drop(removed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_entries_come_back_by_handle() {
        let registry = Registry::new();
        let a = registry.insert("a".to_string()).unwrap();
        let b = registry.insert("b".to_string()).unwrap();
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(*registry.get(a).unwrap(), "a");
        assert_eq!(*registry.get(b).unwrap(), "b");
    }

    #[test]
    fn zero_and_forged_handles_are_rejected() {
        let registry = Registry::new();
        let a = registry.insert(1_u8).unwrap();
        assert_eq!(registry.get(0).unwrap_err(), HandleError::Zero);
        assert_eq!(registry.remove(0).unwrap_err(), HandleError::Zero);
        // A slot that does not exist, and a generation that was never reached.
        assert_eq!(registry.get(a + 1).unwrap_err(), HandleError::Unknown);
        assert_eq!(registry.get(a + (1 << 32)).unwrap_err(), HandleError::Unknown);
        assert_eq!(registry.remove(a + (1 << 32)).unwrap_err(), HandleError::Unknown);
        assert_eq!(registry.get(u64::MAX).unwrap_err(), HandleError::Unknown);
    }

    #[test]
    fn freed_handles_stay_freed_after_the_slot_is_reused() {
        let registry = Registry::new();
        let old = registry.insert("old").unwrap();
        registry.remove(old).unwrap();
        assert_eq!(registry.get(old).unwrap_err(), HandleError::Freed);
        assert_eq!(registry.remove(old).unwrap_err(), HandleError::Freed);
        let new = registry.insert("new").unwrap();
        assert_ne!(new, old, "a reused slot gets a new generation");
        assert_eq!(*registry.get(new).unwrap(), "new");
        assert_eq!(registry.get(old).unwrap_err(), HandleError::Freed);
        assert_eq!(registry.remove(old).unwrap_err(), HandleError::Freed);
        assert_eq!(*registry.get(new).unwrap(), "new");
    }

    #[test]
    fn an_entry_outlives_its_removal_while_a_call_holds_it() {
        let registry = Registry::new();
        let handle = registry.insert(vec![1, 2, 3]).unwrap();
        let held = registry.get(handle).unwrap();
        registry.remove(handle).unwrap();
        assert_eq!(*held, vec![1, 2, 3]);
        assert_eq!(Arc::strong_count(&held), 1);
    }

    #[test]
    fn a_slot_at_the_last_generation_is_retired() {
        let registry = Registry::new();
        let first = registry.insert(0_u32).unwrap();
        registry.table.write().unwrap().slots[0].generation = u32::MAX;
        let last = join(0, u32::MAX);
        registry.remove(last).unwrap();
        assert_eq!(registry.get(last).unwrap_err(), HandleError::Freed);
        assert_eq!(registry.get(first).unwrap_err(), HandleError::Freed);
        let next = registry.insert(1_u32).unwrap();
        assert_eq!(split(next).unwrap().0, 1, "the retired slot 0 is not reused");
    }
}
