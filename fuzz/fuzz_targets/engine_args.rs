//! Estimate arguments: every estimate of the checked-in example engine (Qwen3-32B, h200_sxm,
//! vLLM 0.24.0, TP 2, shipped tables) at any arguments is a finite, non-negative time or a
//! typed error; no argument panics, overflows or yields NaN. The `osl` of the summed decode and
//! of the static run is cut to 256 so one input stays fast (their cost grows with `osl / stride`).

#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use aic_core::{Engine, EngineSpec, StaticRun};
use libfuzzer_sys::fuzz_target;

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let spec = root.join("crates/aic-core/examples/specs/qwen3-32b_h200_vllm_tp2.json");
        let spec = EngineSpec::from_bytes(&std::fs::read(spec).expect("example spec"))
            .expect("spec decodes");
        Engine::from_spec(spec, Some(&root.join("data/systems"))).expect("example engine builds")
    })
}

fn word(data: &[u8], i: usize) -> u32 {
    let mut b = [0u8; 4];
    for (j, slot) in b.iter_mut().enumerate() {
        *slot = data.get(i * 4 + j).copied().unwrap_or(0);
    }
    u32::from_le_bytes(b)
}

fn scale(data: &[u8], i: usize) -> f64 {
    let mut b = [0u8; 8];
    for (j, slot) in b.iter_mut().enumerate() {
        *slot = data.get(32 + i * 8 + j).copied().unwrap_or(0);
    }
    f64::from_le_bytes(b)
}

fn check(what: &str, r: aic_core::Result<f64>) {
    if let Ok(v) = r {
        assert!(v.is_finite() && v >= 0.0, "{what} returned {v}");
    }
}

fuzz_target!(|data: &[u8]| {
    let e = engine();
    let (a, b, c, d, p) = (
        word(data, 0),
        word(data, 1),
        word(data, 2),
        word(data, 3),
        word(data, 4),
    );
    let (s1, s2) = (scale(data, 0), scale(data, 1));
    check("prefill", e.prefill_latency_ms(a, b, p));
    check("decode", e.decode_latency_ms(a, b, c % 256));
    check("decode_step", e.decode_step_latency_ms(a, b, c, s2));
    check("mixed_step", e.mixed_step_latency_ms(a, d, b, c, p, s1, s2));
    let run = StaticRun {
        prefix: p,
        seq_scale: s1,
        gen_scale: s2,
        beam_width: d % 8,
        stride: d >> 3,
        ..StaticRun::new(a, b, c % 256)
    };
    if let Ok(r) = e.run_static(&run) {
        assert!(
            r.total_ms.is_finite() && r.total_ms >= 0.0,
            "run_static returned {r:?}"
        );
    }
});
