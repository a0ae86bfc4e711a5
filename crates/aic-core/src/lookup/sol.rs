//! Speed-of-light (roofline) latencies of each table family, as the lookups use them for
//! load-time clamps, ragged rescales and utilisation holds (spec 11 §2.2, §4.3, §5.2).

/// GEMM SOL in ms: `max(2mnk / FLOPS, bytes·(mn + mk + nk) / mem_bw) · 1000`.
#[inline]
pub fn gemm_sol_ms(m: f64, n: f64, k: f64, flops: f64, bytes_per_elem: f64, mem_bw: f64) -> f64 {
    let math = 2.0 * m * n * k / flops;
    let mem = bytes_per_elem * (m * n + m * k + n * k) / mem_bw;
    math.max(mem) * 1000.0
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
    (ops / p.flops).max(bytes / p.mem_bw) * 1000.0
}

/// Generation-attention SOL at a table coordinate `(heads n, batch b, KV position s)`.
#[inline]
pub fn generation_attention_sol_ms(p: &AttentionSolParams, n: f64, b: f64, s: f64) -> f64 {
    let h = p.head;
    let kv_len = if p.window > 0.0 { (s - 1.0).min(p.window) } else { s - 1.0 };
    let ops = 2.0 * b * n * h * 2.0 * kv_len;
    let bytes = b * (n * h * 2.0 + 2.0 * p.n_kv(n) * kv_len * h * p.kv_bytes + n * h * 2.0);
    (ops / p.flops).max(bytes / p.mem_bw) * 1000.0
}
