//! Invalid workloads and deployments get typed errors that name the field or the trace line.

mod common;

use std::io::Write;

use aic_core::ErrorClass;
use aic_replay::{
    run_json, Arrival, KvOverrides, Lengths, Replay, ReplayError, Role, RoleBuilder, SchedulerOverrides, Workload,
};

fn agg(workload: Workload) -> Result<aic_replay::ReplayOutcome, ReplayError> {
    Replay::aggregated(common::role(Role::Aggregated), 1, workload).run()
}

fn trace_file(lines: &[&str]) -> tempfile_path::TempTrace {
    tempfile_path::TempTrace::new(lines)
}

/// A trace file in the target directory, removed on drop.
mod tempfile_path {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub struct TempTrace(pub PathBuf);

    impl TempTrace {
        pub fn new(lines: &[&str]) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
            let path = dir.join(format!("trace-{}-{}.jsonl", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
            let mut f = std::fs::File::create(&path).unwrap();
            for l in lines {
                writeln!(f, "{l}").unwrap();
            }
            TempTrace(path)
        }

        pub fn workload(&self) -> Workload {
            Workload::Trace { path: self.0.clone(), block_size: 512, concurrency: None, speedup: None }
        }
    }

    impl Drop for TempTrace {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[test]
fn zero_requests_and_zero_output_are_named() {
    let err = agg(common::closed_loop(0, 1, Lengths::Fixed(100), Lengths::Fixed(10), 0)).unwrap_err();
    assert!(matches!(&err, ReplayError::InvalidWorkload { field, .. } if field == "workload.requests"), "{err}");
    let err = agg(common::closed_loop(4, 1, Lengths::Fixed(100), Lengths::Fixed(0), 0)).unwrap_err();
    assert!(matches!(&err, ReplayError::InvalidWorkload { field, .. } if field == "workload.osl"), "{err}");
    let err = agg(common::closed_loop(4, 0, Lengths::Fixed(100), Lengths::Fixed(1), 0)).unwrap_err();
    assert!(err.to_string().contains("concurrency"), "{err}");
    let open = Workload::Generated {
        requests: 4,
        arrival: Arrival::OpenLoop { rate_rps: -1.0 },
        isl: Lengths::Fixed(10),
        osl: Lengths::Fixed(10),
        seed: 0,
    };
    assert!(agg(open).unwrap_err().to_string().contains("rate_rps"));
    assert_eq!(agg(common::closed_loop(0, 1, Lengths::Fixed(1), Lengths::Fixed(1), 0)).unwrap_err().class(), ErrorClass::Value);
}

#[test]
fn trace_lines_that_do_not_parse_name_line_and_field() {
    let good = r#"{"timestamp": 0, "input_length": 600, "output_length": 8, "hash_ids": [1, 2]}"#;
    let cases: [(&str, &str); 6] = [
        (r#"{"timestamp": 5, "input_length": "many", "output_length": 8, "hash_ids": [1]}"#, "input_length"),
        (r#"{"timestamp": 5, "input_length": 100, "hash_ids": [1]}"#, "output_length"),
        (r#"{"timestamp": 5, "input_length": 100, "output_length": 0, "hash_ids": [1]}"#, "output_length"),
        (r#"{"timestamp": 5, "input_length": 100, "output_length": 3}"#, "hash_ids"),
        (r#"{"timestamp": 5, "input_length": 2000, "output_length": 3, "hash_ids": [1]}"#, "input_length"),
        (r#"{"timestamp": "soon", "input_length": 10, "output_length": 3, "hash_ids": [1]}"#, "timestamp"),
    ];
    for (bad, want_field) in cases {
        let file = trace_file(&[good, "", bad]);
        match agg(file.workload()).unwrap_err() {
            ReplayError::TraceLine { line, field, .. } => assert_eq!((line, field.as_str()), (3, want_field), "{bad}"),
            other => panic!("{bad}: {other}"),
        }
    }
    let file = trace_file(&[good, "not json"]);
    let err = agg(file.workload()).unwrap_err();
    assert!(matches!(err, ReplayError::TraceLine { line: 2, .. }), "{err}");
    let empty = trace_file(&[""]);
    assert!(agg(empty.workload()).unwrap_err().to_string().contains("holds no request"));
}

#[test]
fn a_request_longer_than_the_kv_cache_is_refused() {
    let kv = KvOverrides { num_gpu_blocks: Some(64), ..Default::default() };
    let role = RoleBuilder::new(Role::Aggregated, common::engine()).kv(kv).build().unwrap();
    assert_eq!(role.kv.capacity_tokens, 64 * 16);
    let workload = common::closed_loop(2, 1, Lengths::Fixed(1000), Lengths::Fixed(100), 0);
    let err = Replay::aggregated(role, 1, workload).run().unwrap_err();
    match &err {
        ReplayError::SequenceExceedsKvCapacity { request, tokens, capacity_tokens, .. } => {
            assert_eq!((request.as_str(), *tokens, *capacity_tokens), ("0", 1100, 1024));
        }
        other => panic!("{other}"),
    }
}

#[test]
fn bad_deployments_are_named() {
    let workload = || common::closed_loop(2, 1, Lengths::Fixed(100), Lengths::Fixed(10), 0);
    let err = Replay::aggregated(common::role(Role::Aggregated), 0, workload()).run().unwrap_err();
    assert!(matches!(&err, ReplayError::InvalidDeployment { field, .. } if field == "agg.workers"), "{err}");
    // A role built for prefill cannot serve an aggregated deployment.
    let err = Replay::aggregated(common::role(Role::Prefill), 1, workload()).run().unwrap_err();
    assert!(err.to_string().contains("Role::Aggregated"), "{err}");
    // No model facts and no explicit capacity: the memory model cannot size the KV cache.
    let err = RoleBuilder::new(Role::Aggregated, common::engine()).build().unwrap_err();
    assert!(matches!(&err, ReplayError::InvalidDeployment { field, .. } if field == "agg.facts"), "{err}");
    let zero = SchedulerOverrides { max_num_seqs: Some(0), ..Default::default() };
    let err = RoleBuilder::new(Role::Aggregated, common::engine()).facts(common::facts()).scheduler(zero).build().unwrap_err();
    assert!(err.to_string().contains("max_num_seqs"), "{err}");
    let fraction = KvOverrides { gpu_memory_fraction: Some(1.5), ..Default::default() };
    let err = RoleBuilder::new(Role::Aggregated, common::engine()).facts(common::facts()).kv(fraction).build().unwrap_err();
    assert!(err.to_string().contains("gpu_memory_fraction"), "{err}");
}

#[test]
fn json_errors_and_aic_errors_keep_their_class() {
    let err = run_json("{\"mode\": 3}", None).unwrap_err();
    assert!(matches!(err, ReplayError::RequestJson(_)), "{err}");
    assert_eq!(err.class(), ErrorClass::Value);
    let missing = serde_json::json!({
        "mode": {"kind": "agg", "engine": {"spec": {"path": "no/such/spec.json"}}},
        "workload": {"kind": "generated", "requests": 1, "arrival": {"closed_loop": {"concurrency": 1}}, "isl": 10, "osl": 2},
    });
    let err = run_json(&missing.to_string(), Some(&common::systems())).unwrap_err();
    assert!(matches!(err, ReplayError::Aic(_)), "{err}");
    assert!(err.to_string().contains("no/such/spec.json"), "{err}");
}
