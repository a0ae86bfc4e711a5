#!/usr/bin/env bash
# Installs what the tests need from this repo's own files, then runs every test:
#   1. pip install '.[test]'  -> builds the Rust extension aic._aic with maturin (the PEP 517
#      backend, fetched by pip) and installs the wheel, shipped data included, plus pytest;
#   2. cargo test --workspace -> the Rust tests;
#   3. pytest tests/python    -> data checksums, the native surface, the front end and the
#      parity run over every golden case, against the installed wheel.
#
# Uses the active virtual environment if there is one, else creates/reuses .venv in the repo.
# Environment knobs: PYTHON (interpreter used to create .venv, default python3),
# AIC_VENV (venv folder, default .venv), PYTEST_ARGS (extra pytest arguments).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CARGO_TERM_COLOR=never
export CARGO_TERM_PROGRESS_WHEN=never
export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_NO_INPUT=1
export PYTHONUNBUFFERED=1

started=$SECONDS
step() {
    echo
    echo "==> $* [$(( SECONDS - started ))s]"
}

if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "${VIRTUAL_ENV}/bin/python" ]; then
    py="${VIRTUAL_ENV}/bin/python"
else
    venv="${AIC_VENV:-.venv}"
    if [ ! -x "${venv}/bin/python" ]; then
        step "creating virtual environment ${venv}"
        "${PYTHON:-python3}" -m venv "${venv}"
    fi
    py="$(cd "${venv}/bin" && pwd)/python"
fi

step "installing the aic package and its test extra (builds the Rust extension)"
"${py}" -m pip install --quiet '.[test]'

# Both suites run even if the first one fails, so one CI run reports every failure; the
# script exits non-zero if either failed.
failed=()

step "cargo test --workspace"
cargo test --workspace --no-fail-fast || failed+=("cargo test")

step "pytest tests/python"
# Run from the repo root against the installed package. Exit code 5 (no tests collected) is a
# failure: this suite always has tests, so collecting none means something is broken.
# -rs lists the reason for every skipped test, so nothing is skipped silently.
# shellcheck disable=SC2086
"${py}" -m pytest tests/python -q -rs ${PYTEST_ARGS:-} || failed+=("pytest")

if [ "${#failed[@]}" -ne 0 ]; then
    step "FAILED: ${failed[*]}"
    exit 1
fi
step "all tests passed"
