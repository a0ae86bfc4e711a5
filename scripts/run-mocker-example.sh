#!/usr/bin/env bash
# Dynamo's mocker with aic's step latencies (issue 37): builds examples/dynamo-mocker (a package
# outside the workspace: dynamo-mocker 1.6.1 compiles a vendored libzmq, about 18 minutes from
# clean on 2 cores), runs its tests, then replays one closed-loop workload through
# dynamo-mocker's offline replay (aic-backed AisCallback) and through aic-replay, and checks
# that every compared figure (TTFT, TPOT, E2E, throughput, duration, counts) agrees.
#
# Both replays run aisimulate-core 0.13.0's scheduler (the mocker's offline replay is a thin
# adapter over it) with the same configuration, and both get aic's estimate for the same step
# (the callback undoes the mocker's argument reshaping), so they agree bit for bit: the default
# relative tolerance is 0. Exits non-zero when the build, a test or the run fails, or when a
# figure disagrees.
#
# Knobs: AIC_MOCKER_ARGS (passed to the example, e.g. "--requests 1024 --concurrency 64"),
# AIC_MOCKER_REL_TOL (default 0), AIC_MOCKER_SKIP_TESTS=1 (build and run only),
# CARGO_TARGET_DIR (default examples/dynamo-mocker/target).
# The example's Cargo.lock pins the dynamo-mocker tree; it is not passed --locked, so a new
# dependency of aic-core or aic-replay is added to it rather than failing the build.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

manifest=examples/dynamo-mocker/Cargo.toml
rel_tol="${AIC_MOCKER_REL_TOL:-0}"
binary="${CARGO_TARGET_DIR:-examples/dynamo-mocker/target}/release/aic-dynamo-mocker"
started=$(date +%s.%N)
elapsed() { awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

echo "==> building examples/dynamo-mocker (release)"
cargo build --release --manifest-path "$manifest"
echo "    built after $(elapsed) s"

if [[ "${AIC_MOCKER_SKIP_TESTS:-0}" != 1 ]]; then
    echo "==> cargo test (release)"
    cargo test --release --manifest-path "$manifest"
    echo "    tested after $(elapsed) s"
fi

echo "==> replaying with dynamo-mocker and aic-replay"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run_started=$(date +%s.%N)
# shellcheck disable=SC2086 # AIC_MOCKER_ARGS is a list of words
"$binary" ${AIC_MOCKER_ARGS:-} | tee "$out"
run_s=$(awk -v a="$run_started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')

echo "==> checking agreement (relative tolerance $rel_tol)"
awk -v tol="$rel_tol" '
    $1 == "compare" {
        n++
        m = $3 + 0; r = $4 + 0
        scale = (m < 0 ? -m : m); if ((r < 0 ? -r : r) > scale) scale = (r < 0 ? -r : r)
        d = m - r; if (d < 0) d = -d
        rel = (scale > 0 ? d / scale : 0)
        if (rel > tol) { printf "    DISAGREE %s: dynamo-mocker %s, aic-replay %s (rel %.3g)\n", $2, $3, $4, rel; bad++ }
    }
    END {
        if (n == 0) { print "    no compare lines in the output"; exit 1 }
        if (bad > 0) { printf "    %d of %d figures disagree\n", bad, n; exit 1 }
        printf "    all %d figures agree\n", n
    }' "$out"

echo "==> done: example run ${run_s} s, script $(elapsed) s in total"
