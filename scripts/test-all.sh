#!/usr/bin/env bash
# Installs what the tests need from this repo's own files, then runs every test:
#   1. pip wheel .             -> builds the wheel once: the Rust extension aic._aic (maturin, the
#                                 PEP 517 backend, fetched by pip) with the cargo feature `replay`
#                                 (aic.replay, aic-compile replay; pyproject.toml turns it on for
#                                 every install), plus the shipped data;
#   2. pip install WHEEL[test] -> into the main virtual environment, with pytest;
#   3. cargo test --workspace  -> the Rust tests, the C ABI test program included;
#   4. cargo test -p aic-core --features embed-python --test embed_python
#                              -> AicEngineBuilder through the installed aic package, with
#                                 AIC_REQUIRE_PYTHON=1 so the builder tests cannot skip;
#   5. pytest tests/python     -> data checksums, the native surface, the front end and the
#                                 parity run over every golden case, against the installed wheel;
#                                 the Dynamo export's test installs Dynamo 1.6.1 from PyPI into a
#                                 throwaway venv in the scratch folder and replays the exports;
#   6. the same wheel in a fresh, throwaway virtual environment: pytest tests/wheel_smoke from a
#      temporary folder outside the source tree (imports, shipped data, console script, goldens).
#
# The deployment-file tests run `shellcheck` on every generated script: when it is missing, this
# script installs it with `apt-get install -y shellcheck` (only when running as root with
# apt-get available; otherwise install it yourself), and AIC_REQUIRE_SHELLCHECK=1 makes those
# tests fail instead of skip when it is still missing.
#
# Uses the active virtual environment if there is one, else creates/reuses .venv in the repo.
# Environment knobs: PYTHON (interpreter used to create .venv, default python3),
# AIC_VENV (venv folder, default .venv), PYTEST_ARGS (extra pytest arguments).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$(pwd)"

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
venv_dir="$("${py}" -c 'import sys; print(sys.prefix)')"

# Scratch space (the wheel, the throwaway venv, the smoke run) outside the source tree.
work="$(mktemp -d "${TMPDIR:-/tmp}/aic-test-all.XXXXXX")"
trap 'rm -rf "${work}"' EXIT

step "building the aic wheel (Rust extension with the replay, release)"
"${py}" -m pip wheel --quiet --no-deps --wheel-dir "${work}/wheel" .
wheels=("${work}"/wheel/aic-*.whl)
if [ "${#wheels[@]}" -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
    echo "expected exactly one aic wheel in ${work}/wheel, found: ${wheels[*]}" >&2
    exit 1
fi
wheel="${wheels[0]}"
echo "built $(basename "${wheel}")"

step "installing the wheel and its test extra into ${venv_dir}"
# --force-reinstall: a rebuilt wheel keeps its version number, which pip would take as installed.
"${py}" -m pip install --quiet --force-reinstall --no-deps "${wheel}"
"${py}" -m pip install --quiet "${wheel}[test]"

# Every cargo step builds and runs against this venv's Python: pyo3 resolves it through
# PYO3_PYTHON (the same value for every step, so they share one build), and its libpython
# comes first on the loader's path for the binaries that link it.
export PYO3_PYTHON="${PYO3_PYTHON:-${py}}"
python_libdir="$("${py}" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')"
cargo_env=(env)
if [ -n "${python_libdir}" ] && [ -d "${python_libdir}" ]; then
    cargo_env+=("LD_LIBRARY_PATH=${python_libdir}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}")
fi

# Every suite runs even if an earlier one fails, so one CI run reports every failure; the
# script exits non-zero if any failed.
failed=()

step "cargo test --workspace"
"${cargo_env[@]}" cargo test --workspace --no-fail-fast || failed+=("cargo test")

step "cargo test -p aic-core --features embed-python (AicEngineBuilder through the installed aic)"
# The embedded interpreter ignores an activated venv; VIRTUAL_ENV tells the builder which
# site-packages holds aic. AIC_REQUIRE_PYTHON=1 turns a failed `import aic._aic` into a failure.
"${cargo_env[@]}" AIC_REQUIRE_PYTHON=1 VIRTUAL_ENV="${venv_dir}" \
    cargo test -p aic-core --features embed-python --test embed_python \
    || failed+=("cargo test embed-python")

if ! command -v shellcheck >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] \
        && command -v apt-get >/dev/null 2>&1; then
    step "installing shellcheck (apt-get; the deployment-file tests need it)"
    apt-get update -qq && apt-get install -y -qq shellcheck >/dev/null \
        || echo "could not install shellcheck; the deployment-file tests will fail" >&2
fi

step "pytest tests/python"
# Run from the repo root against the installed package. Exit code 5 (no tests collected) is a
# failure: this suite always has tests, so collecting none means something is broken.
# -rs lists the reason for every skipped test, so nothing is skipped silently.
# shellcheck disable=SC2086
# AIC_REQUIRE_REPLAY=1: the wheel above has the replay, so its tests may not skip.
# AIC_REQUIRE_DYNAMO=1: a failed install of Dynamo 1.6.1 (test_dynamo_export.py, into the venv
# AIC_DYNAMO_VENV names) fails those tests instead of skipping them.
# AIC_REQUIRE_SHELLCHECK=1: the generated scripts are always shellchecked here.
AIC_REQUIRE_REPLAY=1 AIC_REQUIRE_DYNAMO=1 AIC_REQUIRE_SHELLCHECK=1 AIC_DYNAMO_VENV="${work}/dynamo-venv" \
    "${py}" -m pytest tests/python -q -rs ${PYTEST_ARGS:-} || failed+=("pytest")

step "wheel smoke test in a fresh virtual environment, outside the source tree"
smoke_ok=1
"${py}" -m venv "${work}/smoke-venv" || smoke_ok=0
if [ "${smoke_ok}" -eq 1 ]; then
    "${work}/smoke-venv/bin/python" -m pip install --quiet "${wheel}[test]" || smoke_ok=0
fi
if [ "${smoke_ok}" -eq 1 ]; then
    mkdir "${work}/smoke"
    cp tests/wheel_smoke/*.py "${work}/smoke/"
    (
        cd "${work}/smoke"
        env -u PYTHONPATH -u AIC_SYSTEMS_PATH -u VIRTUAL_ENV \
            AIC_GOLDENS="${repo}/goldens" AIC_SOURCE_TREE="${repo}" \
            "${work}/smoke-venv/bin/python" -m pytest -q -rs -p no:cacheprovider .
    ) || smoke_ok=0
fi
[ "${smoke_ok}" -eq 1 ] || failed+=("wheel smoke")

step "quick Python benchmark (a smoke run: its numbers are not checked)"
"${py}" scripts/bench_python.py --quick || failed+=("python bench smoke")

step "fuzz smoke (cargo-fuzz, 45 s per target)"
bash scripts/fuzz-smoke.sh || failed+=("fuzz smoke")

if [ "${#failed[@]}" -ne 0 ]; then
    step "FAILED: ${failed[*]}"
    exit 1
fi
step "all tests passed"
