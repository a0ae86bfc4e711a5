//! Quantisation-mode vocabularies of the wire format, with their bytes per element and the
//! FLOPS entry of the system description that their compute dtype selects.

use serde::{Deserialize, Serialize};

/// Which `*_tc_flops` entry of the system YAML a compute dtype reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlopsKey {
    /// `bfloat16_tc_flops`
    Bfloat16,
    /// `int8_tc_flops`
    Int8,
    /// `fp8_tc_flops`
    Fp8,
    /// `fp4_tc_flops`
    Fp4,
}

impl FlopsKey {
    /// The YAML key name, e.g. `fp8_tc_flops`.
    pub fn yaml_key(self) -> &'static str {
        match self {
            FlopsKey::Bfloat16 => "bfloat16_tc_flops",
            FlopsKey::Int8 => "int8_tc_flops",
            FlopsKey::Fp8 => "fp8_tc_flops",
            FlopsKey::Fp4 => "fp4_tc_flops",
        }
    }

    /// The compute dtype as the missing-FLOPS message spells it (`Fp8`, `Fp4`, ...).
    pub fn dtype_label(self) -> &'static str {
        match self {
            FlopsKey::Bfloat16 => "Bfloat16",
            FlopsKey::Int8 => "Int8",
            FlopsKey::Fp8 => "Fp8",
            FlopsKey::Fp4 => "Fp4",
        }
    }
}

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(#[doc = $text] #[serde(rename = $text)] $variant),+
        }
        impl $name {
            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            /// Parses the wire spelling.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum!(
    /// GEMM (and embedding) quantisation mode.
    GemmQuant {
        Bfloat16 => "bfloat16",
        Int8Wo => "int8_wo",
        Int4Wo => "int4_wo",
        Fp8 => "fp8",
        Fp8Static => "fp8_static",
        Sq => "sq",
        Fp8Block => "fp8_block",
        Fp8Ootb => "fp8_ootb",
        Nvfp4 => "nvfp4",
        Nvfp4Wo => "nvfp4_wo",
        W4a16Nvfp4 => "w4a16_nvfp4",
    }
);

wire_enum!(
    /// Routed-expert (MoE) quantisation mode.
    MoeQuant {
        Bfloat16 => "bfloat16",
        Fp8 => "fp8",
        Int4Wo => "int4_wo",
        Fp8Block => "fp8_block",
        W4afp8 => "w4afp8",
        Nvfp4 => "nvfp4",
        Nvfp4Wo => "nvfp4_wo",
        W4a16Mxfp4 => "w4a16_mxfp4",
        W4a8Mxfp4Mxfp8 => "w4a8_mxfp4_mxfp8",
        W4a8Mxfp4Mxfp8Trtllm => "w4a8_mxfp4_mxfp8_trtllm",
        W4a16Mxfp4Cutlass => "w4a16_mxfp4_cutlass",
        W4a16Nvfp4 => "w4a16_nvfp4",
    }
);

wire_enum!(
    /// FMHA (attention math) quantisation mode.
    FmhaQuant {
        Bfloat16 => "bfloat16",
        Fp8 => "fp8",
        Fp8Block => "fp8_block",
    }
);

wire_enum!(
    /// KV-cache dtype.
    KvQuant {
        Bfloat16 => "bfloat16",
        Int8 => "int8",
        Fp8 => "fp8",
    }
);

wire_enum!(
    /// Communication payload dtype.
    CommQuant {
        Half => "half",
        Int8 => "int8",
        Fp8 => "fp8",
    }
);

impl GemmQuant {
    /// Bytes per element (activations and weights alike in the SOL memory term).
    pub fn bytes_per_elem(self) -> f64 {
        match self {
            GemmQuant::Bfloat16 => 2.0,
            GemmQuant::Int8Wo
            | GemmQuant::Fp8
            | GemmQuant::Fp8Static
            | GemmQuant::Fp8Block
            | GemmQuant::Fp8Ootb
            | GemmQuant::Sq => 1.0,
            GemmQuant::Int4Wo => 0.5,
            GemmQuant::Nvfp4 | GemmQuant::Nvfp4Wo | GemmQuant::W4a16Nvfp4 => 9.0 / 16.0,
        }
    }

    /// The FLOPS entry its compute dtype selects.
    pub fn flops_key(self) -> FlopsKey {
        match self {
            GemmQuant::Bfloat16
            | GemmQuant::Int8Wo
            | GemmQuant::Int4Wo
            | GemmQuant::Nvfp4Wo
            | GemmQuant::W4a16Nvfp4 => FlopsKey::Bfloat16,
            GemmQuant::Fp8 | GemmQuant::Fp8Static | GemmQuant::Fp8Block | GemmQuant::Fp8Ootb => {
                FlopsKey::Fp8
            }
            GemmQuant::Sq => FlopsKey::Int8,
            GemmQuant::Nvfp4 => FlopsKey::Fp4,
        }
    }

    /// Compute multiplier relative to bf16 (used to classify transfer profiles).
    pub fn compute_multiplier(self) -> f64 {
        match self.flops_key() {
            FlopsKey::Bfloat16 => 1.0,
            FlopsKey::Int8 | FlopsKey::Fp8 => 2.0,
            FlopsKey::Fp4 => 4.0,
        }
    }

    /// The name of the table slice this mode reads (`fp8_static` reads the `fp8` rows).
    pub fn table_name(self) -> &'static str {
        match self {
            GemmQuant::Fp8Static => "fp8",
            other => other.as_str(),
        }
    }
}

impl MoeQuant {
    /// Bytes per element.
    pub fn bytes_per_elem(self) -> f64 {
        match self {
            MoeQuant::Bfloat16 => 2.0,
            MoeQuant::Fp8 | MoeQuant::Fp8Block => 1.0,
            MoeQuant::Int4Wo
            | MoeQuant::W4afp8
            | MoeQuant::W4a16Mxfp4
            | MoeQuant::W4a8Mxfp4Mxfp8
            | MoeQuant::W4a8Mxfp4Mxfp8Trtllm
            | MoeQuant::W4a16Mxfp4Cutlass => 0.5,
            MoeQuant::Nvfp4 | MoeQuant::Nvfp4Wo | MoeQuant::W4a16Nvfp4 => 9.0 / 16.0,
        }
    }

    /// The FLOPS entry its compute dtype selects.
    pub fn flops_key(self) -> FlopsKey {
        match self {
            MoeQuant::Bfloat16
            | MoeQuant::Int4Wo
            | MoeQuant::Nvfp4Wo
            | MoeQuant::W4a16Mxfp4
            | MoeQuant::W4a16Mxfp4Cutlass
            | MoeQuant::W4a16Nvfp4 => FlopsKey::Bfloat16,
            MoeQuant::Fp8
            | MoeQuant::Fp8Block
            | MoeQuant::W4afp8
            | MoeQuant::W4a8Mxfp4Mxfp8
            | MoeQuant::W4a8Mxfp4Mxfp8Trtllm => FlopsKey::Fp8,
            MoeQuant::Nvfp4 => FlopsKey::Fp4,
        }
    }

    /// Compute multiplier relative to bf16 (used to classify transfer profiles).
    pub fn compute_multiplier(self) -> f64 {
        match self.flops_key() {
            FlopsKey::Bfloat16 => 1.0,
            FlopsKey::Int8 | FlopsKey::Fp8 => 2.0,
            FlopsKey::Fp4 => 4.0,
        }
    }
}

impl FmhaQuant {
    /// Bytes per element.
    pub fn bytes_per_elem(self) -> f64 {
        match self {
            FmhaQuant::Bfloat16 => 2.0,
            FmhaQuant::Fp8 | FmhaQuant::Fp8Block => 1.0,
        }
    }

    /// The FLOPS entry its compute dtype selects.
    pub fn flops_key(self) -> FlopsKey {
        match self {
            FmhaQuant::Bfloat16 => FlopsKey::Bfloat16,
            FmhaQuant::Fp8 | FmhaQuant::Fp8Block => FlopsKey::Fp8,
        }
    }
}

impl KvQuant {
    /// Bytes per element.
    pub fn bytes_per_elem(self) -> f64 {
        match self {
            KvQuant::Bfloat16 => 2.0,
            KvQuant::Int8 | KvQuant::Fp8 => 1.0,
        }
    }

    /// FLOPS entry used by decode attention: fp8 KV implies fp8 math on sm >= 89 (a system
    /// without an sm, such as b60, uses bf16 math).
    pub fn decode_flops_key(self, sm_version: Option<u32>) -> FlopsKey {
        if self == KvQuant::Fp8 && sm_version.is_some_and(|sm| sm >= 89) {
            FlopsKey::Fp8
        } else {
            FlopsKey::Bfloat16
        }
    }
}

impl CommQuant {
    /// Bytes per element.
    pub fn bytes_per_elem(self) -> f64 {
        match self {
            CommQuant::Half => 2.0,
            CommQuant::Int8 | CommQuant::Fp8 => 1.0,
        }
    }
}
