//! Spec JSON: any text handed to `EngineSpec::from_json` must parse and validate, or give an
//! error; never panic. A spec that loads must load again from its own JSON and binary forms, and pricing
//! its op lists on the example engine (Qwen3-32B, h200_sxm, vLLM 0.24.0, shipped tables) gives
//! finite, non-negative times or a typed error: the load-time validation is what stands between
//! hostile sizes (zero heads, zero TP, a zero `seq_split`) and the op math.

#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use aic_core::{Engine, EngineSpec};
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

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(spec) = EngineSpec::from_json(text) else {
        return;
    };
    // Its own JSON loads again (float text is not compared: serde_json's parser may round the
    // last bit), and the binary form round-trips exactly.
    let again = EngineSpec::from_json(&spec.to_json()).expect("a loaded spec re-parses from its JSON");
    assert_eq!(again.context_ops.len(), spec.context_ops.len());
    assert_eq!(again.generation_ops.len(), spec.generation_ops.len());
    let encoded = spec.to_bytes();
    let binary = EngineSpec::from_bytes(&encoded).expect("a loaded spec decodes from its binary form");
    assert_eq!(binary.to_bytes(), encoded, "binary round trip changed the spec");
    for (ops, is_context) in [(&spec.context_ops, true), (&spec.generation_ops, false)] {
        if ops.is_empty() {
            continue;
        }
        let ops_json = serde_json::to_string(ops).expect("ops serialise");
        if let Ok(results) = engine().evaluate_ops_json(&ops_json, is_context, 2, 128, 0, 1.0, None) {
            for r in results {
                assert!(
                    r.latency_ms.is_finite() && r.latency_ms >= 0.0,
                    "op {} priced at {} ms",
                    r.name,
                    r.latency_ms
                );
            }
        }
    }
});
