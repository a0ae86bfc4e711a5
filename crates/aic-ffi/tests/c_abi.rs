//! Builds the C program `tests/c/aic_abi_test.c` against `include/aic.h` and the `libaic`
//! shared library cargo built for this test run, then runs it: golden-case estimates through
//! the C ABI, plus every kind of misuse the ABI promises to report (see the program's header).
//!
//! The library is the `cdylib` of this crate, which cargo builds next to this test binary (in
//! `target/<profile>/deps`) with the same features. The program finds it through an rpath.
//! With the default feature `python` the library also links libpython (through pyo3), so the
//! folder of the libpython that pyo3 linked is passed to the linker and put on the program's
//! `LD_LIBRARY_PATH`; the program never starts an interpreter. Needs a C compiler: `$CC`, else
//! `cc`.

use std::path::{Path, PathBuf};
use std::process::Command;

use aic::capi::AicStatus;
use aic_core::{Engine, EngineSpec, LatencyModel};
use serde_json::Value;

const CASE: &str = "dense/Qwen3-32B/h200_sxm/vllm/tp2-pp1-dp1";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example_spec() -> PathBuf {
    repo().join("crates/aic-core/examples/specs/qwen3-32b_h200_vllm_tp2.json")
}

fn systems_dir() -> PathBuf {
    repo().join("data/systems")
}

/// The folder holding this crate's cdylib for the current build.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let deps = exe.parent().expect("the test binary sits in target/<profile>/deps").to_path_buf();
    let name = format!("{}aic{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    for dir in [deps.clone(), deps.parent().map(Path::to_path_buf).unwrap_or_default()] {
        if dir.join(&name).is_file() {
            return dir;
        }
    }
    panic!(
        "{name} is neither in {} nor its parent: cargo should build the aic-ffi cdylib for its tests",
        deps.display()
    );
}

/// Folders the program needs at run time besides the library's own: libpython's, when the
/// library was built with the Python module.
fn python_library_dirs() -> Vec<String> {
    if !cfg!(feature = "python") {
        return Vec::new();
    }
    pyo3_build_config::get().lib_dir.iter().cloned().collect()
}

/// Runs a program built by [`compile_against_library`]. An executable's runpath does not reach
/// the libraries its libraries need, so libpython's folder goes on `LD_LIBRARY_PATH`.
fn program_command(path: &Path) -> Command {
    let mut command = Command::new(path);
    let mut dirs = python_library_dirs();
    if !dirs.is_empty() {
        dirs.extend(std::env::var("LD_LIBRARY_PATH").ok().filter(|p| !p.is_empty()));
        command.env("LD_LIBRARY_PATH", dirs.join(":"));
    }
    command
}

fn compiler() -> String {
    std::env::var("CC").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "cc".to_string())
}

fn run(command: &mut Command, what: &str) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("cannot start {what} ({command:?}): {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{what} failed ({}):\n{command:?}\n{text}", output.status);
    text
}

/// Compiles one C file against `include/aic.h` and links it to the library of this build;
/// returns the program's path.
fn compile_against_library(source: &Path, program: &Path) -> PathBuf {
    let lib_dir = library_dir();
    let mut cc = Command::new(compiler());
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1", "-pthread", "-I"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("include"))
        .arg(source)
        .arg("-o")
        .arg(program)
        .arg("-L")
        .arg(&lib_dir)
        .args(["-laic", "-lm"])
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()));
    for dir in python_library_dirs() {
        cc.arg(format!("-Wl,-rpath-link,{dir}"));
    }
    run(&mut cc, &format!("compiling {} (C compiler: $CC, else cc)", source.display()));
    program.to_path_buf()
}

/// One line of the queries file per estimate of the golden case the C ABI covers, with the
/// golden value and the Rust engine's exact bits (or the expected status and message).
fn queries_file(engine: &Engine) -> String {
    let all: Value = serde_json::from_slice(&std::fs::read(repo().join("goldens/dense.json")).unwrap()).unwrap();
    let case = all["cases"].as_array().unwrap().iter().find(|c| c["id"] == CASE).unwrap();
    let mut lines = String::new();
    for q in case["queries"].as_array().unwrap() {
        let a = &q["args"];
        let u = |k: &str| a[k].as_u64().unwrap();
        let (kind, args) = match q["kind"].as_str().unwrap() {
            "prefill" => ("prefill", [u("bs"), u("isl"), u("prefix"), 0, 0]),
            "decode" => ("decode", [u("bs"), u("isl"), u("osl"), 0, 0]),
            "decode_step" => ("decode_step", [u("gen_tokens"), u("isl"), u("osl"), 0, 0]),
            "mixed_step" => ("mixed_step", [u("ctx_tokens"), u("gen_tokens"), u("isl"), u("osl"), u("prefix")]),
            _ => continue,
        };
        let [x, y, z, w, v] = args.map(|n| n as u32);
        let rust = match kind {
            "prefill" => engine.prefill_ms(x, y, z),
            "decode" => engine.decode_ms(x, y, z),
            "decode_step" => engine.decode_step_ms(x, y, z),
            _ => engine.mixed_step_ms(x, y, z, w, v),
        };
        let args = args.map(|n| n.to_string()).join(" ");
        match (q["value"].as_f64(), rust) {
            (Some(golden), Ok(ms)) => lines += &format!("ok {kind} {args} {golden:?} {:x}\n", ms.to_bits()),
            (None, Err(_)) => {
                let message = q["error"]["message"].as_str().unwrap();
                // The golden errors of this case are all ValueErrors: AIC_STATUS_INVALID_ARGUMENT.
                assert_eq!(q["error"]["class"], "ValueError", "{q}");
                let status = AicStatus::InvalidArgument as i32;
                lines += &format!("err {kind} {args} {status} {message}\n");
            }
            (golden, rust) => panic!("the Rust engine disagrees with the golden query {q}: {rust:?} vs {golden:?}"),
        }
    }
    lines
}

#[test]
fn c_program_uses_the_abi_correctly_and_safely() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c_abi");
    std::fs::create_dir_all(&work).unwrap();

    let spec_json = std::fs::read(example_spec()).unwrap();
    let engine = Engine::from_spec_bytes(&spec_json, Some(&systems_dir())).unwrap();
    let queries = work.join("queries.txt");
    std::fs::write(&queries, queries_file(&engine)).unwrap();
    let binary_spec = work.join("spec.bin");
    std::fs::write(&binary_spec, EngineSpec::from_bytes(&spec_json).unwrap().to_bytes()).unwrap();

    let program = compile_against_library(&crate_dir.join("tests/c/aic_abi_test.c"), &work.join("aic_abi_test"));

    let output = run(
        program_command(&program)
            .arg(example_spec())
            .arg(&binary_spec)
            .arg(systems_dir())
            .arg(&queries)
            // The NULL-systems-path check must resolve to the source tree's data/systems.
            .env_remove("AIC_SYSTEMS_PATH"),
        "the C ABI test program",
    );
    println!("{output}");
    assert!(output.contains(" 0 failed"), "{output}");
}

#[test]
fn header_compiles_as_c_and_cpp() {
    let header = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/aic.h");
    let c = compiler();
    let cpp = std::env::var("CXX").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "c++".to_string());
    for (tool, lang, std) in [(&c, "c", "-std=c99"), (&c, "c", "-std=c2x"), (&cpp, "c++", "-std=c++11")] {
        run(
            Command::new(tool)
                .args(["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-pedantic", std, "-x", lang])
                .arg(&header),
            &format!("compiling include/aic.h as {lang} {std} with {tool} ($CC / $CXX)"),
        );
    }
}

/// The C example of the README's "From C" section compiles against the header and runs, from
/// the repository root as the README shows it.
#[test]
fn readme_c_example_compiles_and_runs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = &readme[readme.find("## From C").expect("README has a \"## From C\" section")..];
    let start = section.find("```c\n").expect("the From C section has a ```c block") + "```c\n".len();
    let end = start + section[start..].find("```").expect("the ```c block is closed");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c_abi_readme");
    std::fs::create_dir_all(&work).unwrap();
    let source = work.join("sim.c");
    std::fs::write(&source, &section[start..end]).unwrap();
    let program = compile_against_library(&source, &work.join("sim"));
    let output = run(program_command(&program).current_dir(repo()), "the README's C example");
    let ms: f64 = output
        .trim()
        .strip_prefix("prefill ")
        .and_then(|rest| rest.strip_suffix(" ms"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected output of the README example: {output:?}"));
    let engine = Engine::from_spec_file(&example_spec(), Some(&systems_dir())).unwrap();
    let expected = engine.prefill_ms(1, 4096, 0).unwrap();
    assert_eq!(format!("{ms:.2}"), format!("{expected:.2}"), "{output}");
}
