//! The reference's numeric conventions (spec 50 §0): Python's float floor division, pandas'
//! `round(3)` and Python's `round(x, 3)`. Each differs from the obvious Rust call in some
//! cases the goldens hit.

/// Python's `a // b` for floats: the floor of the exact quotient of the two binary64 values
/// (CPython's `float_floor_div`). `64 // 1.28` is 49.0 while `(64 / 1.28).floor()` is 50.0.
pub fn py_floordiv(a: f64, b: f64) -> f64 {
    let mut m = a % b; // fmod: exact
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        m += b;
        div -= 1.0;
    }
    let _ = m;
    if div != 0.0 {
        let mut floordiv = div.floor();
        if div - floordiv > 0.5 {
            floordiv += 1.0;
        }
        floordiv
    } else {
        0.0_f64.copysign(a / b)
    }
}

/// pandas `DataFrame.round(3)` on one float (numpy `around`): `rint(x · 1000) / 1000`,
/// ties to even on the scaled binary value.
pub fn round3(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    (x * 1000.0).round_ties_even() / 1000.0
}

/// Python's `round(x, 3)`: correctly rounded to 3 decimals of the exact binary value, ties to
/// even (`format!` rounds the exact expansion).
pub fn py_round3(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.3}").parse().unwrap_or(x)
}

/// Python's `str(float)`: the shortest repr, with `.0` on integral values.
pub fn py_float_str(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_division_is_pythons() {
        // spec 50 §0: 64 // 1.28 = 49.0 while 64 / 1.28 = 50.0.
        assert_eq!(64.0 / 1.28, 50.0);
        assert_eq!(py_floordiv(64.0, 1.28), 49.0);
        assert_eq!(py_floordiv(8.0, 8.0), 1.0);
        assert_eq!(py_floordiv(7.0, 2.0), 3.0);
        assert_eq!(py_floordiv(-7.0, 2.0), -4.0);
    }

    #[test]
    fn rounding() {
        assert_eq!(round3(113.3494964745582), 113.349);
        assert_eq!(round3(0.0005), 0.0); // 0.5 after scaling: ties to even
        assert_eq!(py_round3(0.906028), 0.906);
        assert_eq!(py_float_str(0.5), "0.5");
        assert_eq!(py_float_str(1.0), "1.0");
    }
}
