//! The specs' worked examples (spec documents 11-lookup, 20-operators, 40-engine) as
//! tests, SILICON mode, dense-family ops only (Gemm, Embedding, Elementwise, CustomAllReduce,
//! Nccl, P2P, ContextAttention, GenerationAttention, Overlap, Fallback).
//!
//! Engines are built from the golden cases (`goldens/*.json`: `resolved.engine` +
//! `spec_ops`), once per case id. Tolerance: where the spec prints ≥ 10 significant digits,
//! 1e-9 relative; otherwise half a unit of the last printed digit. Each test names the
//! example id(s) it checks.

#[path = "spec_examples/common.rs"]
mod common;
#[path = "spec_examples/engine.rs"]
mod engine;
#[path = "spec_examples/lookup.rs"]
mod lookup;
#[path = "spec_examples/operators.rs"]
mod operators;
