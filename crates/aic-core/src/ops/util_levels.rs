//! Utilisation levels of the (bytes per element, compute multiplier) quant profiles, used to
//! rescale a measured utilisation from one quant profile to another (spec 20, empirical
//! transfers). The tables are public (`gemm_quant_util_levels()` / `moe_quant_util_levels()`
//! in Python) so callers can see the factors a cross-quant estimate used.

/// GEMM levels `(bytes_per_elem, compute_multiplier, level)`, in the reference's order.
pub const GEMM_UTIL_LEVELS: [(f64, f64, f64); 9] = [
    (2.0, 1.0, 0.70),
    (1.0, 1.0, 0.55),
    (0.5625, 1.0, 0.45),
    (0.5, 1.0, 0.45),
    (1.0, 2.0, 0.45),
    (0.5, 2.0, 0.35),
    (1.0, 4.0, 0.30),
    (0.5, 4.0, 0.30),
    (0.5625, 4.0, 0.30),
];

/// GEMM level of a profile the table does not list.
pub const GEMM_UTIL_DEFAULT: f64 = 0.45;

/// MoE levels `(bytes_per_elem, compute_multiplier, level)`, in the reference's order. The
/// reference lists the 0.5625-byte 1× profile twice (two of its quant modes share it, with
/// the same level); the list keeps both rows and a lookup takes the first.
pub const MOE_UTIL_LEVELS: [(f64, f64, f64); 10] = [
    (2.0, 1.0, 0.53),
    (1.0, 1.0, 0.45),
    (0.5625, 1.0, 0.07),
    (0.5, 1.0, 0.07),
    (0.5625, 1.0, 0.07),
    (1.0, 2.0, 0.40),
    (0.5, 2.0, 0.15),
    (1.0, 4.0, 0.30),
    (0.5, 4.0, 0.23),
    (0.5625, 4.0, 0.23),
];

/// MoE level of a profile the table does not list.
pub const MOE_UTIL_DEFAULT: f64 = 0.30;

/// The level of `(bytes, compute)` in `table` (first match), else `default`.
pub fn util_level(table: &[(f64, f64, f64)], bytes: f64, compute: f64, default: f64) -> f64 {
    table
        .iter()
        .find(|(b, c, _)| *b == bytes && *c == compute)
        .map_or(default, |row| row.2)
}

/// The GEMM level of a quant mode's profile (the cross-profile rescale of spec 20 §1.3).
pub(crate) fn gemm_util_level(q: crate::spec::GemmQuant) -> f64 {
    util_level(&GEMM_UTIL_LEVELS, q.bytes_per_elem(), q.compute_multiplier(), GEMM_UTIL_DEFAULT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_take_the_first_row_and_fall_back_to_the_default() {
        assert_eq!(util_level(&GEMM_UTIL_LEVELS, 2.0, 1.0, GEMM_UTIL_DEFAULT), 0.70);
        assert_eq!(util_level(&GEMM_UTIL_LEVELS, 0.25, 8.0, GEMM_UTIL_DEFAULT), 0.45);
        assert_eq!(util_level(&MOE_UTIL_LEVELS, 0.5625, 1.0, MOE_UTIL_DEFAULT), 0.07);
        assert_eq!(util_level(&MOE_UTIL_LEVELS, 3.0, 1.0, MOE_UTIL_DEFAULT), 0.30);
    }
}
