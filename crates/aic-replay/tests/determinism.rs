//! The same replay gives the same report bit for bit: twice in a row, in thread pools of
//! different sizes, and on two threads at once; a different seed gives a different report.

mod common;

use aic_replay::{Arrival, Distribution, Lengths, Replay, ReplayOptions, Role, Workload};

fn replay(seed: u64) -> Replay {
    let workload = Workload::Generated {
        requests: 120,
        arrival: Arrival::OpenLoop { rate_rps: 6.0 },
        isl: Lengths::Distributed(Distribution::Normal { mean: 1500.0, std: 600.0 }),
        osl: Lengths::Distributed(Distribution::Uniform { min: 20, max: 200 }),
        seed,
    };
    let options = ReplayOptions { timeline: true, per_request: true, ..ReplayOptions::default() };
    Replay::aggregated(common::role(Role::Aggregated), 2, workload).with_options(options)
}

fn report_json(replay: &Replay) -> String {
    serde_json::to_string(&replay.run().unwrap().report).unwrap()
}

#[test]
fn same_seed_same_report_whatever_the_threads() {
    let r = replay(7);
    let first = report_json(&r);
    assert_eq!(first, report_json(&r), "a second run differs");
    for threads in [1, 4] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        assert_eq!(first, pool.install(|| report_json(&r)), "differs in a {threads}-thread pool");
    }
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| report_json(&r));
        let b = s.spawn(|| report_json(&r));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!((a.as_str(), b.as_str()), (first.as_str(), first.as_str()), "differs when run concurrently");
    // The report is not trivially constant.
    assert_ne!(first, report_json(&replay(8)), "another seed gives the same report");
}

#[test]
fn the_memo_does_not_change_the_report() {
    let with_memo = replay(11);
    let mut without = replay(11);
    without.options.timing = aic_replay::TimingSource::AicNoMemo;
    let (a, b) = (with_memo.run().unwrap(), without.run().unwrap());
    assert_eq!(serde_json::to_string(&a.report).unwrap(), serde_json::to_string(&b.report).unwrap());
    let (ta, tb) = (a.stats.timing[0].stats, b.stats.timing[0].stats);
    assert_eq!(ta.calls, tb.calls);
    assert_eq!(tb.engine_calls, tb.calls);
    assert!(ta.engine_calls < ta.calls);
}
