//! System descriptions: any text parsed as a system YAML must give a `SystemSpec` or an error,
//! never a panic. A description that parses has usable physics: the values every formula
//! divides by are positive, so bandwidth lookups and memory-op times are not NaN.

#![no_main]

use std::path::Path;

use aic_core::data::system::SystemSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(system) = SystemSpec::from_yaml_str(Path::new("systems"), "fuzzed", &text) else {
        return;
    };
    for gpus in [1, 2, 8, 9, 72, 1024] {
        let bw = system.p2p_bw(gpus);
        assert!(
            bw > 0.0 && !bw.is_nan(),
            "p2p bandwidth {bw} for {gpus} GPUs"
        );
    }
    let ms = system.mem_op_ms(1.0e6);
    assert!(!ms.is_nan() && ms >= 0.0, "memory-op time {ms}");
    let _ = system.data_dir_label();
});
