//! Spec decoding: any bytes handed to `EngineSpec::from_bytes` (binary wire form or JSON) must
//! decode or give an error, never panic, overflow the stack or allocate without bound. A spec
//! that decodes must survive a round trip through the binary form unchanged, and its op
//! numbers are either valid or rejected with an error.

#![no_main]

use aic_core::EngineSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = EngineSpec::from_bytes(data) else {
        return;
    };
    let encoded = spec.to_bytes();
    let again =
        EngineSpec::from_bytes(&encoded).expect("a decoded spec re-encodes to a decodable spec");
    assert_eq!(
        again.to_bytes(),
        encoded,
        "binary round trip changed the spec"
    );
    let _ = spec.to_json();
    for op in spec.context_ops.iter().chain(&spec.generation_ops) {
        let _ = op.check_numbers();
    }
});
