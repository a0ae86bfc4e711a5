//! FPM JSON: any text handed to the forward-pass model as options, as one iteration's telemetry
//! or as tuning iterations must parse strictly or give an error; never panic. An estimate that
//! succeeds is a finite, non-negative time, both from the native model over the example engine
//! (Qwen3-32B, h200_sxm, vLLM 0.24.0, shipped tables) and from a regression model tuned on the
//! same input.

#![no_main]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use aic_core::fpm::{FpmOptions, ForwardPassPerfModel};
use aic_core::{Engine, EngineSpec};
use libfuzzer_sys::fuzz_target;

fn native() -> &'static ForwardPassPerfModel {
    static MODEL: OnceLock<ForwardPassPerfModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let spec = root.join("crates/aic-core/examples/specs/qwen3-32b_h200_vllm_tp2.json");
        let spec = EngineSpec::from_bytes(&std::fs::read(spec).expect("example spec"))
            .expect("spec decodes");
        let engine = Engine::from_spec(spec, Some(&root.join("data/systems"))).expect("example engine builds");
        ForwardPassPerfModel::from_engine(Arc::new(engine), None).expect("native model builds")
    })
}

fn check(what: &str, estimate: Result<Option<f64>, aic_core::fpm::FpmError>) {
    if let Ok(Some(ms)) = estimate {
        assert!(ms.is_finite() && ms >= 0.0, "{what} estimate {ms} ms");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(options) = FpmOptions::from_json(Some(text)) {
        options.validate().expect("parsed options are valid");
    }
    check("native", native().estimate_forward_pass_time_ms(text));
    let _ = native().tune_with_fpms(text);
    let regression = ForwardPassPerfModel::from_regression(Some(r#"{"min_observations": 1}"#))
        .expect("regression model builds");
    if regression.tune_with_fpms(text).is_ok() {
        // estimate each tuned iteration back
        if let Ok(serde_json::Value::Array(iterations)) = serde_json::from_str::<serde_json::Value>(text) {
            for it in iterations.iter().take(8) {
                check("regression", regression.estimate_forward_pass_time_ms(&it.to_string()));
                check("native", native().estimate_forward_pass_time_ms(&it.to_string()));
            }
        }
    }
    check("regression", regression.estimate_forward_pass_time_ms(text));
});
