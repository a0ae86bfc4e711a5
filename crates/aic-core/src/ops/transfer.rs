//! The transfer policy (spec 20 §0.4, spec 51 §6.2): which empirical transfer kinds
//! (`xshape`, `xquant`, `xprofile`, `xop`) may fill a gap in HYBRID / EMPIRICAL. It exists so
//! the engine configuration's `transfer_policy` reaches every rung of the op ladders: a rung
//! whose kind is disabled is skipped, and an op left without an allowed source raises
//! `EmpiricalNotImplemented` (the sweeps skip that point).

use crate::error::{AicError, Result};

use super::empirical::ProvenanceTier;

/// The transfer kinds, in the spec's order, with their bits.
const KINDS: [(&str, u8); 4] = [("xop", 1 << 3), ("xprofile", 1 << 2), ("xquant", 1 << 1), ("xshape", 1 << 0)];

/// The presets of spec 51 §6.2 (the planning layer resolves them to kind lists before they
/// reach the engine; a spec written by hand may still name one).
const PRESETS: [(&str, u8); 4] = [("aggressive", 0b1111), ("balanced", 0b0011), ("conservative", 0b0001), ("off", 0)];

/// A set of enabled transfer kinds (a bit set; `Copy`, carried in every op [`super::Shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransferKinds(u8);

impl Default for TransferKinds {
    /// All kinds enabled: the spec's default when no policy is given.
    fn default() -> Self {
        TransferKinds::ALL
    }
}

impl TransferKinds {
    /// Every transfer kind enabled (no policy given).
    pub const ALL: TransferKinds = TransferKinds(0b1111);
    /// No transfer kind enabled (`off`): only an op's own slice answers.
    pub const NONE: TransferKinds = TransferKinds(0);

    /// The set of an engine configuration's `transfer_policy`: `None` enables every kind; a
    /// list enables the union of the kinds and presets it names, case-insensitive (an empty
    /// list enables none). An unknown name is a config error naming it and listing the valid
    /// kinds and presets.
    pub fn from_policy(policy: Option<&[String]>) -> Result<TransferKinds> {
        let Some(names) = policy else { return Ok(TransferKinds::ALL) };
        let mut bits = 0u8;
        for name in names {
            let token = name.trim().to_ascii_lowercase();
            let bit = KINDS.iter().chain(PRESETS.iter()).find(|(k, _)| *k == token).map(|(_, b)| *b).ok_or_else(|| {
                let list = |t: &[(&str, u8)]| t.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ");
                AicError::config(format!(
                    "engine.transfer_policy: unknown transfer kind/preset '{token}'; valid kinds: {}; presets: {}",
                    list(&KINDS),
                    list(&PRESETS)
                ))
            })?;
            bits |= bit;
        }
        Ok(TransferKinds(bits))
    }

    /// Whether an estimate of `tier` may answer: the own-slice tier always, a transfer tier
    /// when its kind is enabled.
    pub fn allows(self, tier: ProvenanceTier) -> bool {
        let bit = match tier {
            ProvenanceTier::Empirical => return true,
            ProvenanceTier::Xshape => 1 << 0,
            ProvenanceTier::Xquant => 1 << 1,
            ProvenanceTier::Xprofile => 1 << 2,
            ProvenanceTier::Xop => 1 << 3,
        };
        self.0 & bit != 0
    }

    /// The enabled kinds' names, in the spec's alphabetical order.
    pub fn names(self) -> Vec<&'static str> {
        KINDS.iter().filter(|(_, b)| self.0 & b != 0).map(|(k, _)| *k).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(names: &[&str]) -> Result<TransferKinds> {
        let v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        TransferKinds::from_policy(Some(&v))
    }

    #[test]
    fn absent_policy_enables_every_kind() {
        let all = TransferKinds::from_policy(None).unwrap();
        assert_eq!(all, TransferKinds::ALL);
        assert_eq!(all.names(), vec!["xop", "xprofile", "xquant", "xshape"]);
        for t in [ProvenanceTier::Empirical, ProvenanceTier::Xshape, ProvenanceTier::Xquant, ProvenanceTier::Xprofile, ProvenanceTier::Xop] {
            assert!(all.allows(t));
        }
    }

    #[test]
    fn a_list_enables_exactly_its_kinds() {
        let k = policy(&["xshape", "xquant"]).unwrap();
        assert!(k.allows(ProvenanceTier::Xshape) && k.allows(ProvenanceTier::Xquant));
        assert!(!k.allows(ProvenanceTier::Xprofile) && !k.allows(ProvenanceTier::Xop));
        assert!(k.allows(ProvenanceTier::Empirical));
        assert_eq!(k.names(), vec!["xquant", "xshape"]);
    }

    #[test]
    fn an_empty_list_is_off() {
        let off = policy(&[]).unwrap();
        assert_eq!(off, TransferKinds::NONE);
        assert!(off.allows(ProvenanceTier::Empirical));
        assert!(!off.allows(ProvenanceTier::Xshape));
    }

    #[test]
    fn presets_are_the_planning_layers() {
        assert_eq!(policy(&["aggressive"]).unwrap(), TransferKinds::ALL);
        assert_eq!(policy(&[" Balanced "]).unwrap().names(), vec!["xquant", "xshape"]);
        assert_eq!(policy(&["conservative"]).unwrap().names(), vec!["xshape"]);
        assert_eq!(policy(&["off"]).unwrap(), TransferKinds::NONE);
        assert_eq!(policy(&["conservative", "XOP"]).unwrap().names(), vec!["xop", "xshape"]);
    }

    #[test]
    fn an_unknown_kind_names_itself_and_the_valid_ones() {
        let err = policy(&["xshape", "bogus"]).unwrap_err();
        assert!(matches!(err, AicError::InvalidConfig(_)));
        assert!(
            err.to_string().contains(
                "engine.transfer_policy: unknown transfer kind/preset 'bogus'; valid kinds: xop, xprofile, xquant, \
                 xshape; presets: aggressive, balanced, conservative, off"
            ),
            "{err}"
        );
    }
}
