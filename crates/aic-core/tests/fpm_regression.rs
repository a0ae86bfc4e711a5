//! Forward-pass perf model without an engine: the regression fallback examples, options and
//! input validation of spec 42 §2, §6, §7, §9, §10, §12.

use aic_core::fpm::regression::{fit_nonnegative_linear, hinge_knots, RegressionFit};
use aic_core::fpm::{ForwardPassPerfModel, FpmOptions, WorkloadKind};
use aic_core::ErrorClass;
use serde_json::{json, Value};

#[track_caller]
fn close(ours: f64, reference: f64) {
    let rel = if reference == 0.0 { ours.abs() } else { ((ours - reference) / reference).abs() };
    assert!(rel <= 1e-9, "{ours} vs {reference} (rel {rel:.3e})");
}

fn prefill(tokens: u32) -> Value {
    json!({"scheduled_requests": {"num_prefill_requests": 1, "sum_prefill_tokens": tokens}})
}

fn decode(batch: u32, kv: u32) -> Value {
    json!({"scheduled_requests": {"num_decode_requests": batch, "sum_decode_kv_tokens": kv}})
}

fn with_wall(mut v: Value, ms: f64) -> Value {
    v["wall_time"] = json!(ms / 1000.0);
    v
}

fn tune_one(m: &ForwardPassPerfModel, rank: Value, ms: f64) {
    m.tune_with_fpms(&json!([[with_wall(rank, ms)]]).to_string()).unwrap();
}

fn est(m: &ForwardPassPerfModel, rank: &Value) -> Option<f64> {
    m.estimate_forward_pass_time_ms(&rank.to_string()).unwrap()
}

fn err(r: aic_core::fpm::Result<impl std::fmt::Debug>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.class(), ErrorClass::Value, "{e}");
    e.to_string()
}

#[test]
fn regression_prefill_then_decode() {
    let m = ForwardPassPerfModel::from_regression(None).unwrap();
    assert_eq!(
        m.diagnostics(),
        r#"{"source":"fallback_regression","readiness":"insufficient_data","retained_observations":0,"correction_ready_buckets":0,"last_warning":null}"#
    );
    let q = prefill(1500);
    let samples = [(512, 20.0), (1024, 31.0), (2048, 55.0), (4096, 101.0), (8192, 205.0), (256, 15.0), (3000, 80.0)];
    let expected = [None, None, None, None, Some(42.05735467069892), Some(42.11921699944062), Some(42.2896087311764)];
    for ((tokens, ms), want) in samples.into_iter().zip(expected) {
        tune_one(&m, prefill(tokens), ms);
        match want {
            None => assert_eq!(est(&m, &q), None),
            Some(v) => close(est(&m, &q).unwrap(), v),
        }
        match m.regression_fit(WorkloadKind::Prefill) {
            Some(RegressionFit::Linear { intercept, slopes }) => {
                close(intercept, 5.916666666666657);
                close(slopes[0], 0.024093792002688175);
            }
            Some(RegressionFit::Hinge { intercept, slope, hinge_slope, knot }) if tokens == 256 => {
                close(intercept, 8.894151130458429);
                close(slope, 0.022150043912654786);
                close(hinge_slope, 0.0033537742729915325);
                close(knot, 3792.382821528738);
            }
            Some(RegressionFit::Hinge { intercept, slope, hinge_slope, knot }) => {
                close(intercept, 9.989945651400118);
                close(slope, 0.01956032675033116);
                close(hinge_slope, 0.004305813177807056);
                close(knot, 812.7493386077176);
            }
            None => assert!(want.is_none()),
        }
    }
    assert_eq!(m.diagnostics_report().readiness, aic_core::fpm::Readiness::Ready);

    let q = decode(24, 36000);
    let samples = [(8, 8000, 10.0), (16, 32000, 12.5), (32, 32000, 13.0), (64, 192000, 20.0), (128, 64000, 18.0), (4, 32000, 11.0)];
    let expected = [None, None, None, None, Some(12.46737375570798), Some(12.3650074244855)];
    let coeffs = [
        (10.063107816351094, [0.04359977741263686, 3.771864670704448e-05]),
        (9.92263021858089, [0.0450372191223804, 3.781899852687445e-05]),
    ];
    for (i, ((b, kv, ms), want)) in samples.into_iter().zip(expected).enumerate() {
        tune_one(&m, decode(b, kv), ms);
        match want {
            None => assert_eq!(est(&m, &q), None),
            Some(v) => {
                close(est(&m, &q).unwrap(), v);
                let Some(RegressionFit::Linear { intercept, slopes }) = m.regression_fit(WorkloadKind::Decode) else {
                    panic!("linear decode fit")
                };
                let (a, bs) = coeffs[i - 4];
                close(intercept, a);
                close(slopes[0], bs[0]);
                close(slopes[1], bs[1]);
            }
        }
    }
    assert_eq!(
        m.diagnostics(),
        r#"{"source":"fallback_regression","readiness":"ready","retained_observations":13,"correction_ready_buckets":0,"last_warning":null}"#
    );
    assert_eq!(m.min_correction_factor(), None);
    assert_eq!(m.max_correction_factor(), None);
    assert_eq!(m.avg_correction_factor(), None);
    // Kinds without a fit answer None; empty iterations 0.0.
    assert_eq!(est(&m, &json!({"scheduled_requests": {"num_prefill_requests": 1, "sum_prefill_tokens": 10, "num_decode_requests": 1}})), None);
    assert_eq!(est(&m, &json!({})), Some(0.0));
}

#[test]
fn regression_eviction() {
    let opts = r#"{"bucket_count":1,"max_observations":3,"min_observations":3}"#;
    let m = ForwardPassPerfModel::from_regression(Some(opts)).unwrap();
    for (t, ms) in [(100, 10.0), (200, 20.0), (400, 35.0), (800, 70.0)] {
        tune_one(&m, prefill(t), ms);
    }
    let Some(RegressionFit::Linear { intercept, slopes }) = m.regression_fit(WorkloadKind::Prefill) else {
        panic!("linear fit")
    };
    close(intercept, 2.5);
    close(slopes[0], 0.08392857142857142);
    close(est(&m, &prefill(300)).unwrap(), 27.678571428571434);
    let d = m.diagnostics_report();
    assert_eq!((d.retained_observations, d.readiness), (3, aic_core::fpm::Readiness::Ready));
}

#[test]
fn regression_on_decode_without_fit_is_none() {
    let m = ForwardPassPerfModel::from_regression(None).unwrap();
    assert_eq!(m.estimate_forward_pass_time_ms(r#"{"scheduled_requests":{"num_decode_requests":3}}"#).unwrap(), None);
}

#[test]
fn blank_and_null_options_are_defaults() {
    for text in [None, Some(""), Some("   \n"), Some("null"), Some("{}")] {
        assert_eq!(FpmOptions::from_json(text).unwrap(), FpmOptions::default(), "{text:?}");
    }
    let m = ForwardPassPerfModel::from_regression(Some("  ")).unwrap();
    assert_eq!(m.options(), &FpmOptions::default());
    let o = FpmOptions::from_json(Some(r#"{"min_faster_correction_factor":null,"max_slower_correction_factor":null}"#)).unwrap();
    assert_eq!((o.min_faster_correction_factor, o.max_slower_correction_factor), (None, None));
    assert_eq!(o.clamp_factor(7.5), 7.5);
    assert_eq!(FpmOptions::default().clamp_factor(7.5), 2.0);
    assert_eq!(FpmOptions::default().clamp_factor(0.1), 0.5);
}

#[test]
fn option_errors() {
    let p = "invalid engine config: invalid forward pass perf options: ";
    let cases = [
        (r#"{"bucket_count":15}"#, "bucket_count must be a perfect square"),
        (r#"{"min_observations":100}"#, "min_observations must be <= max_observations"),
        (r#"{"min_faster_correction_factor":1.5}"#, "min_faster_correction_factor must be finite and in (0.0, 1.0]"),
        (r#"{"min_faster_correction_factor":0}"#, "min_faster_correction_factor must be finite and in (0.0, 1.0]"),
        (r#"{"max_slower_correction_factor":0.5}"#, "max_slower_correction_factor must be finite and >= 1.0"),
        (r#"{"max_observations":0}"#, "max_observations must be >= 1"),
        (r#"{"min_observations":0}"#, "min_observations must be >= 1"),
        (r#"{"bucket_count":0}"#, "bucket_count must be >= 1"),
        (r#"{"max_num_tokens":0}"#, "max_num_tokens must be >= 1"),
        (r#"{"max_batch_size":0}"#, "max_batch_size must be >= 1"),
        (r#"{"max_kv_tokens":0}"#, "max_kv_tokens must be >= 1"),
        // Order: max_obs before min <= max before the perfect square.
        (r#"{"max_observations":0,"bucket_count":15}"#, "max_observations must be >= 1"),
        (r#"{"min_observations":100,"bucket_count":15}"#, "min_observations must be <= max_observations"),
    ];
    for (opts, msg) in cases {
        assert_eq!(err(ForwardPassPerfModel::from_regression(Some(opts))), format!("{p}{msg}"), "{opts}");
    }
    assert!(err(ForwardPassPerfModel::from_regression(Some("{not json"))).starts_with("invalid options JSON: "));
    assert!(err(ForwardPassPerfModel::from_regression(Some(r#"{"max_observations":-1}"#))).starts_with("invalid options JSON: "));
    FpmOptions::from_json(Some(r#"{"bucket_count":1}"#)).unwrap();
    FpmOptions::from_json(Some(r#"{"bucket_count":9,"min_observations":64}"#)).unwrap();
}

#[test]
fn fpm_input_errors() {
    let m = ForwardPassPerfModel::from_regression(None).unwrap();
    let e = |t: &str| err(m.estimate_forward_pass_time_ms(t));
    assert_eq!(e(r#"{"version":2}"#), "unsupported schema version for ForwardPassMetrics: got 2, expected 1");
    assert_eq!(
        e(r#"{"scheduled_requests":{"sum_prefill_tokens":10}}"#),
        "invalid forward pass metrics: prefill token sums require num_prefill_requests > 0"
    );
    assert_eq!(
        e(r#"{"scheduled_requests":{"sum_prefill_kv_tokens":10}}"#),
        "invalid forward pass metrics: prefill token sums require num_prefill_requests > 0"
    );
    assert_eq!(
        e(r#"{"scheduled_requests":{"sum_decode_kv_tokens":10}}"#),
        "invalid forward pass metrics: decode KV token sum requires num_decode_requests > 0"
    );
    assert_eq!(e("[]"), "invalid forward pass metrics: at least one attention-DP rank metric is required");
    // Every rank is validated, even after an empty one.
    assert_eq!(e(r#"[{}, {"version":3}]"#), "unsupported schema version for ForwardPassMetrics: got 3, expected 1");
    assert!(e("{oops").starts_with("invalid FPM JSON: "));
    let neg = e(r#"{"scheduled_requests":{"num_decode_requests":-3}}"#);
    assert_eq!(neg, "invalid FPM payload: scheduled_requests.num_decode_requests: invalid value: integer `-3`, expected u32");
    // The ignored fields are accepted.
    let ok = r#"{"version":1,"worker_id":"w","dp_rank":3,"counter_id":9,"wall_time":0.5,
        "scheduled_requests":{"var_prefill_length":2.5,"var_decode_kv_tokens":1.0},
        "queued_requests":{"num_prefill_requests":4,"sum_prefill_tokens":100,"num_decode_requests":2}}"#;
    assert_eq!(m.estimate_forward_pass_time_ms(ok).unwrap(), Some(0.0));

    let t = |s: &str| err(m.tune_with_fpms(s));
    let bare = t(r#"{"scheduled_requests":{}}"#);
    assert!(bare.starts_with("invalid tuning iterations JSON: invalid type: map, expected a sequence"), "{bare}");
    assert!(t("[[{}], [").starts_with("invalid tuning iterations JSON: "));
    m.tune_with_fpms("[]").unwrap();
    assert_eq!(m.retained_observations(), 0);
}

#[test]
fn regression_ignores_iterations_without_wall_time() {
    let m = ForwardPassPerfModel::from_regression(Some(r#"{"min_observations":1}"#)).unwrap();
    m.tune_with_fpms(&json!([[prefill(100)], [with_wall(prefill(100), 0.0)], [{}]]).to_string()).unwrap();
    assert_eq!(m.retained_observations(), 0);
    // A negative wall time is not "no measurement" but a broken record: an error.
    let negative = m.tune_with_fpms(&json!([[with_wall(prefill(100), -5.0)]]).to_string()).unwrap_err();
    assert!(negative.to_string().contains("wall_time must be a finite number of seconds >= 0"), "{negative}");
    assert_eq!(m.retained_observations(), 0);
    // Ranks: the largest positive wall time is the observation; the loaded rank is the feature.
    let it = json!([[with_wall(prefill(100), 3.0), with_wall(decode(4, 40), 5.0)]]);
    m.tune_with_fpms(&it.to_string()).unwrap();
    assert_eq!(m.retained_observations(), 1);
    assert!(m.regression_fit(WorkloadKind::Prefill).is_some());
    close(est(&m, &prefill(100)).unwrap(), 5.0);
}

#[test]
fn linear_fit_rules() {
    // Intercept-only with more samples than dimensions is rejected.
    let flat: Vec<(Vec<f64>, f64)> = vec![(vec![1.0], 5.0), (vec![2.0], 5.0), (vec![3.0], 5.0)];
    let pairs: Vec<(&[f64], f64)> = flat.iter().map(|(x, y)| (x.as_slice(), *y)).collect();
    assert_eq!(fit_nonnegative_linear(&pairs, 1, 1), None);
    // Decreasing data: the negative slope is discarded, the intercept-only fit rejected.
    let down: Vec<(Vec<f64>, f64)> = vec![(vec![1.0], 5.0), (vec![2.0], 4.0), (vec![3.0], 3.0)];
    let pairs: Vec<(&[f64], f64)> = down.iter().map(|(x, y)| (x.as_slice(), *y)).collect();
    assert_eq!(fit_nonnegative_linear(&pairs, 1, 1), None);
    // Fewer samples than min_observations.
    assert_eq!(fit_nonnegative_linear(&pairs[..2], 1, 3), None);
    // One sample, one dimension: accepted (n <= D).
    assert!(fit_nonnegative_linear(&pairs[..1], 1, 1).is_some());
}

#[test]
fn hinge_candidate_knots() {
    let xs = [512.0, 1024.0, 2048.0, 4096.0, 8192.0, 256.0];
    let knots = hinge_knots(&xs);
    assert!(knots.iter().any(|k| (k - 3792.382821528738).abs() < 1e-9));
    assert!(knots.windows(2).all(|w| w[0] < w[1]));
    assert!(knots.iter().all(|k| *k > 256.0 && *k < 8192.0));
    assert!(hinge_knots(&[1.0, 2.0, 1.0, 2.0]).is_empty());
    // With a zero minimum there are no log-spaced points.
    assert_eq!(hinge_knots(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]), vec![1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn fpm_json_is_read_strictly() {
    let m = ForwardPassPerfModel::from_regression(None).unwrap();
    let e = |t: &str| err(m.estimate_forward_pass_time_ms(t));
    // counters one level too high: not an empty iteration but an error naming the field
    assert_eq!(
        e(r#"{"num_decode_requests":3,"sum_decode_kv_tokens":300}"#),
        "invalid FPM payload: unknown field \"num_decode_requests\" in the FPM record; valid fields: \
         version, worker_id, dp_rank, counter_id, wall_time, scheduled_requests, queued_requests"
    );
    assert!(e(r#"[{}, {"scheduled_requests":{"num_decode_request":3}}]"#).starts_with(
        "invalid FPM payload: rank 1: unknown field \"num_decode_request\" in scheduled_requests; valid fields: num_prefill_requests,"
    ));
    assert!(e(r#"{"queued_requests":{"sum_prefill_kv_tokens":1}}"#).contains("unknown field \"sum_prefill_kv_tokens\" in queued_requests"));
    assert_eq!(e(r#"{"scheduled_requests":[1,2]}"#), "invalid FPM payload: scheduled_requests must be a JSON object, got a list");
    assert_eq!(e("[[{}]]"), "invalid FPM payload: rank 0: the FPM record must be a JSON object, got a list");
    assert_eq!(e(r#"{"wall_time":"1"}"#), "invalid FPM payload: wall_time: invalid type: string \"1\", expected f64");
    // a negative wall time is an error, not a silently skipped sample; 0 means not measured
    assert_eq!(
        e(r#"{"wall_time":-1}"#),
        "invalid forward pass metrics: wall_time must be a finite number of seconds >= 0 (0: not measured), got -1"
    );
    let t = |s: &str| err(m.tune_with_fpms(s));
    assert_eq!(
        t(r#"[[{"wall_time":-1,"scheduled_requests":{"num_decode_requests":1}}]]"#),
        "invalid forward pass metrics: wall_time must be a finite number of seconds >= 0 (0: not measured), got -1"
    );
    assert!(t(r#"[[{}], [{"bogus":1}]]"#).starts_with("invalid tuning iterations JSON: iteration 1, rank 0: unknown field \"bogus\""));
    assert_eq!(
        t(r#"[{}]"#),
        "invalid tuning iterations JSON: iteration 0 must be a list of FPM records (one per attention-DP rank), got an object"
    );
    m.tune_with_fpms(r#"[[{"wall_time":0,"scheduled_requests":{"num_decode_requests":1,"sum_decode_kv_tokens":10}}]]"#).unwrap();
}

#[test]
fn options_json_is_read_strictly() {
    let e = |t: &str| err(ForwardPassPerfModel::from_regression(Some(t)));
    assert_eq!(
        e(r#"{"bucket_cont":4}"#),
        "invalid options JSON: unknown field \"bucket_cont\" in options; valid fields: max_observations, \
         min_observations, min_faster_correction_factor, max_slower_correction_factor, bucket_count, \
         max_num_tokens, max_batch_size, max_kv_tokens"
    );
    // a list is not read by position
    assert_eq!(e("[64, 5]"), "invalid options JSON: options must be a JSON object, got a list");
    assert_eq!(e("4"), "invalid options JSON: options must be a JSON object, got a number");
    assert_eq!(e(r#"{"bucket_count":2.5}"#), "invalid options JSON: bucket_count: invalid type: floating point `2.5`, expected usize");
    assert_eq!(
        e(r#"{"max_slower_correction_factor":"2"}"#),
        "invalid options JSON: max_slower_correction_factor: invalid type: string \"2\", expected f64"
    );
}
