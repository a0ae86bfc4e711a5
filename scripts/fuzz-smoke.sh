#!/usr/bin/env bash
# Short fuzzing run of every cargo-fuzz target in fuzz/ (issue 8), for CI: builds the targets
# (AddressSanitizer, debug assertions), seeds each corpus from the repository's own files, runs
# each target for a bounded time and prints executions per target. Any crash, panic escaping
# aic-core, timeout or out-of-memory fails the script, with the input saved under
# fuzz/artifacts/<target>/ and the command to replay it printed by cargo-fuzz.
#
# Longer runs and what each target checks: docs/fuzzing.md.
#
# Knobs: AIC_FUZZ_SECONDS (per target, default 45), AIC_FUZZ_TARGETS (space-separated subset).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${AIC_FUZZ_SECONDS:-45}"
targets="${AIC_FUZZ_TARGETS:-spec_decode system_yaml parquet_table engine_args spec_json fpm_json}"

# cargo-fuzz passes nightly-only flags (-Zsanitizer=address, -Cpasses=sancov-module); the one
# stable toolchain accepts them when bootstrapping is allowed.
export RUSTC_BOOTSTRAP=1
export CARGO_TERM_COLOR=never
export CARGO_TERM_PROGRESS_WHEN=never

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "==> installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

echo "==> seeding corpora from the repository"
seed() {  # seed TARGET FILE...
    mkdir -p "fuzz/corpus/$1"
    local target="$1"
    shift
    for file in "$@"; do
        cp "${file}" "fuzz/corpus/${target}/$(echo "${file}" | tr '/' '_')"
    done
}
seed spec_decode crates/aic-core/examples/specs/*.json fuzz/seeds/spec_decode/*
seed system_yaml data/systems/*.yaml
# The small shipped tables (custom all-reduce, NCCL, ...), plus the corrupt files the
# catalogue tests keep as regressions.
mapfile -t small_tables < <(find data/systems/data -name '*.parquet' -size -6k | sort)
seed parquet_table "${small_tables[@]}" crates/aic-core/tests/error_catalogue/*.parquet
# Past crashes, so every run replays them first.
seed engine_args fuzz/seeds/engine_args/*
# Spec JSON of every golden family and FPM records, iterations and options.
seed spec_json crates/aic-core/examples/specs/*.json fuzz/seeds/spec_json/*
seed fpm_json fuzz/seeds/fpm_json/*

echo "==> building the fuzz targets"
cargo fuzz build --debug-assertions

summary=()
status=0
for target in ${targets}; do
    echo "==> fuzzing ${target} for ${seconds}s"
    log="$(mktemp)"
    if cargo fuzz run --debug-assertions "${target}" "fuzz/corpus/${target}" -- \
        -max_total_time="${seconds}" -timeout=30 -rss_limit_mb=2048 -max_len=16384 \
        -print_final_stats=1 >"${log}" 2>&1; then
        result="no crash"
    else
        result="FAILED"
        status=1
        tail -n 60 "${log}"
    fi
    runs="$(grep -Eo 'Done [0-9]+ runs' "${log}" | grep -Eo '[0-9]+' | tail -n 1 || true)"
    caught="$(grep -c 'reader panic #' "${log}" || true)"
    line="${target}: ${runs:-?} executions in ${seconds}s, ${result}"
    if [ "${target}" = "parquet_table" ]; then
        line="${line} (parquet-reader panics caught by aic-core: at least $(( caught > 0 ? (1 << (caught - 1)) : 0 )))"
    fi
    summary+=("${line}")
    rm -f "${log}"
done

echo
echo "==> fuzz summary"
printf '  %s\n' "${summary[@]}"
exit "${status}"
