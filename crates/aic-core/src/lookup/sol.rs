//! Speed-of-light (roofline) latencies of each table family, as the lookups use them for
//! load-time clamps, ragged rescales and utilisation holds (spec 11 §2.2, §4.3, §5.2).
//!
//! Every formula yields a [`Roofline`]: its compute and memory terms. The scalar SOL the
//! lookups need is [`Roofline::ms`] (the larger term, in ms) — the same arithmetic as a plain
//! `max(math, mem) · 1000` — and the SOL decomposition (spec 20 §0.7) reads both terms of the
//! very same evaluation, so no formula exists twice.

/// The two terms of one roofline evaluation, in seconds: time at the compute peak and time at
/// the memory bandwidth. The SOL latency is the larger of the two.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Roofline {
    /// Operations over FLOPS, s.
    pub math_s: f64,
    /// Bytes over memory bandwidth, s.
    pub mem_s: f64,
}

impl Roofline {
    /// `ops / flops` and `bytes / mem_bw`.
    #[inline]
    pub fn new(ops: f64, flops: f64, bytes: f64, mem_bw: f64) -> Roofline {
        Roofline { math_s: ops / flops, mem_s: bytes / mem_bw }
    }

    /// The SOL latency in ms: `max(math, mem) · 1000`.
    #[inline]
    pub fn ms(self) -> f64 {
        self.math_s.max(self.mem_s) * 1000.0
    }
}

/// GEMM roofline: `2mnk / FLOPS` and `bytes·(mn + mk + nk) / mem_bw` (spec 20 §1.2).
#[inline]
pub fn gemm_roofline(m: f64, n: f64, k: f64, flops: f64, bytes_per_elem: f64, mem_bw: f64) -> Roofline {
    Roofline::new(2.0 * m * n * k, flops, bytes_per_elem * (m * n + m * k + n * k), mem_bw)
}

/// GEMM SOL in ms: `max(2mnk / FLOPS, bytes·(mn + mk + nk) / mem_bw) · 1000`.
#[inline]
pub fn gemm_sol_ms(m: f64, n: f64, k: f64, flops: f64, bytes_per_elem: f64, mem_bw: f64) -> f64 {
    gemm_roofline(m, n, k, flops, bytes_per_elem, mem_bw).ms()
}

/// Constants of one attention slice needed by its SOL.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionSolParams {
    /// Head size.
    pub head: f64,
    /// Sliding window (0 = full attention).
    pub window: f64,
    /// KV heads of a GQA slice; 0 for an MHA slice (then each coordinate's own head count).
    pub n_kv_lookup: f64,
    /// KV-cache bytes per element.
    pub kv_bytes: f64,
    /// FLOPS of the attention math dtype.
    pub flops: f64,
    /// Memory bandwidth, bytes/s.
    pub mem_bw: f64,
}

impl AttentionSolParams {
    #[inline]
    fn n_kv(&self, n: f64) -> f64 {
        if self.n_kv_lookup == 0.0 {
            n
        } else {
            self.n_kv_lookup
        }
    }
}

/// Context-attention SOL at a table coordinate `(heads n, sequence s, batch b)`, prefix 0.
#[inline]
pub fn context_attention_sol_ms(p: &AttentionSolParams, n: f64, s: f64, b: f64) -> f64 {
    let h = p.head;
    let ops = if p.window > 0.0 && s > p.window {
        2.0 * b * s * p.window * n * h * 2.0
    } else {
        2.0 * b * s * s * n * h * 2.0 / 2.0
    };
    let bytes = 2.0 * b * (2.0 * n * s * h) + p.kv_bytes * b * (2.0 * p.n_kv(n) * s * h);
    Roofline::new(ops, p.flops, bytes, p.mem_bw).ms()
}

/// Generation-attention roofline at `(heads n, batch b, KV position s)` with `n_kv` KV heads
/// (spec 20 §5 step 2): the table layer passes the slice's KV heads, SOL mode the op's own.
#[inline]
pub fn generation_attention_roofline(p: &AttentionSolParams, n: f64, n_kv: f64, b: f64, s: f64) -> Roofline {
    let h = p.head;
    let kv_len = if p.window > 0.0 { (s - 1.0).min(p.window) } else { s - 1.0 };
    let ops = 2.0 * b * n * h * 2.0 * kv_len;
    let bytes = b * (n * h * 2.0 + 2.0 * n_kv * kv_len * h * p.kv_bytes + n * h * 2.0);
    Roofline::new(ops, p.flops, bytes, p.mem_bw)
}

/// Generation-attention SOL at a table coordinate `(heads n, batch b, KV position s)`.
#[inline]
pub fn generation_attention_sol_ms(p: &AttentionSolParams, n: f64, b: f64, s: f64) -> f64 {
    generation_attention_roofline(p, n, p.n_kv(n), b, s).ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scalar SOL is exactly `max(math, mem)` of the terms, in ms (spec 20 §1.4 G6).
    #[test]
    fn gemm_terms_and_scalar_agree() {
        let r = gemm_roofline(1024.0, 5120.0, 5120.0, 989e12, 2.0, 4.8e12);
        assert!((r.math_s * 1000.0 - 0.05428421).abs() < 1e-8, "{r:?}");
        assert!((r.mem_s * 1000.0 - 0.01529173).abs() < 1e-8, "{r:?}");
        assert_eq!(gemm_sol_ms(1024.0, 5120.0, 5120.0, 989e12, 2.0, 4.8e12), (r.math_s.max(r.mem_s)) * 1000.0);
    }
}
