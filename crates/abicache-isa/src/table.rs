//! The extensions abicache understands: for x86-64 and AArch64, each one's
//! name as Linux lists it in `/proc/cpuinfo` (the name every message and
//! manifest uses), the GCC/Clang flag that asks for it, and the macro the
//! compiler predefines when it is enabled (how the flags' requirements are
//! read back from the compiler, see [`crate::requirements_from_macros`]).
//!
//! An extension missing here is not checked: neither required nor refused.
//! Left out on purpose are extensions whose instructions run (as no-ops) on
//! CPUs without them, or that Linux does not list under the compiler's
//! name: CET shadow stacks (`-mshstk`), and `crc32` on x86-64 (part of
//! `sse4_2`, which is checked).

/// The architecture an extension belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// x86-64 (`flags` in `/proc/cpuinfo`).
    X86_64,
    /// AArch64 (`Features` in `/proc/cpuinfo`, the kernel's hwcaps).
    Aarch64,
}

/// One instruction-set extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extension {
    /// Its architecture.
    pub arch: Arch,
    /// Its name in `/proc/cpuinfo`, e.g. `avx512_bf16`.
    pub name: &'static str,
    /// The flag that enables it: `-mavx512bf16` (x86-64), or the `-march`
    /// modifier `+bf16` (AArch64).
    pub flag: &'static str,
    /// The macro GCC and Clang define when it is enabled, e.g. `__AVX512BF16__`.
    pub macro_name: &'static str,
}

const fn x86(name: &'static str, flag: &'static str, macro_name: &'static str) -> Extension {
    Extension {
        arch: Arch::X86_64,
        name,
        flag,
        macro_name,
    }
}

const fn arm(name: &'static str, flag: &'static str, macro_name: &'static str) -> Extension {
    Extension {
        arch: Arch::Aarch64,
        name,
        flag,
        macro_name,
    }
}

/// Every extension understood, x86-64 first.
pub const EXTENSIONS: &[Extension] = &[
    x86("mmx", "-mmmx", "__MMX__"),
    x86("sse", "-msse", "__SSE__"),
    x86("sse2", "-msse2", "__SSE2__"),
    x86("pni", "-msse3", "__SSE3__"),
    x86("ssse3", "-mssse3", "__SSSE3__"),
    x86("sse4_1", "-msse4.1", "__SSE4_1__"),
    x86("sse4_2", "-msse4.2", "__SSE4_2__"),
    x86("sse4a", "-msse4a", "__SSE4A__"),
    x86("popcnt", "-mpopcnt", "__POPCNT__"),
    x86("abm", "-mabm", "__ABM__"),
    x86("abm", "-mlzcnt", "__LZCNT__"),
    x86("lahf_lm", "-msahf", "__LAHF_SAHF__"),
    x86("cx16", "-mcx16", "__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16"),
    x86("movbe", "-mmovbe", "__MOVBE__"),
    x86("bmi1", "-mbmi", "__BMI__"),
    x86("bmi2", "-mbmi2", "__BMI2__"),
    x86("tbm", "-mtbm", "__TBM__"),
    x86("adx", "-madx", "__ADX__"),
    x86("aes", "-maes", "__AES__"),
    x86("pclmulqdq", "-mpclmul", "__PCLMUL__"),
    x86("sha_ni", "-msha", "__SHA__"),
    x86("rdrand", "-mrdrnd", "__RDRND__"),
    x86("rdseed", "-mrdseed", "__RDSEED__"),
    x86("rdpid", "-mrdpid", "__RDPID__"),
    x86("fsgsbase", "-mfsgsbase", "__FSGSBASE__"),
    x86("xsave", "-mxsave", "__XSAVE__"),
    x86("xsaveopt", "-mxsaveopt", "__XSAVEOPT__"),
    x86("xsavec", "-mxsavec", "__XSAVEC__"),
    x86("xsaves", "-mxsaves", "__XSAVES__"),
    x86("clflushopt", "-mclflushopt", "__CLFLUSHOPT__"),
    x86("clwb", "-mclwb", "__CLWB__"),
    x86("clzero", "-mclzero", "__CLZERO__"),
    x86("3dnowprefetch", "-mprfchw", "__PRFCHW__"),
    x86("movdiri", "-mmovdiri", "__MOVDIRI__"),
    x86("movdir64b", "-mmovdir64b", "__MOVDIR64B__"),
    x86("serialize", "-mserialize", "__SERIALIZE__"),
    x86("waitpkg", "-mwaitpkg", "__WAITPKG__"),
    x86("pku", "-mpku", "__PKU__"),
    x86("rtm", "-mrtm", "__RTM__"),
    x86("fma4", "-mfma4", "__FMA4__"),
    x86("xop", "-mxop", "__XOP__"),
    x86("avx", "-mavx", "__AVX__"),
    x86("avx2", "-mavx2", "__AVX2__"),
    x86("fma", "-mfma", "__FMA__"),
    x86("f16c", "-mf16c", "__F16C__"),
    x86("gfni", "-mgfni", "__GFNI__"),
    x86("vaes", "-mvaes", "__VAES__"),
    x86("vpclmulqdq", "-mvpclmulqdq", "__VPCLMULQDQ__"),
    x86("avx_vnni", "-mavxvnni", "__AVXVNNI__"),
    x86("avx_ifma", "-mavxifma", "__AVXIFMA__"),
    x86("avx_vnni_int8", "-mavxvnniint8", "__AVXVNNIINT8__"),
    x86("avx_ne_convert", "-mavxneconvert", "__AVXNECONVERT__"),
    x86("avx512f", "-mavx512f", "__AVX512F__"),
    x86("avx512cd", "-mavx512cd", "__AVX512CD__"),
    x86("avx512dq", "-mavx512dq", "__AVX512DQ__"),
    x86("avx512bw", "-mavx512bw", "__AVX512BW__"),
    x86("avx512vl", "-mavx512vl", "__AVX512VL__"),
    x86("avx512ifma", "-mavx512ifma", "__AVX512IFMA__"),
    x86("avx512vbmi", "-mavx512vbmi", "__AVX512VBMI__"),
    x86("avx512_vbmi2", "-mavx512vbmi2", "__AVX512VBMI2__"),
    x86("avx512_vnni", "-mavx512vnni", "__AVX512VNNI__"),
    x86("avx512_bitalg", "-mavx512bitalg", "__AVX512BITALG__"),
    x86(
        "avx512_vpopcntdq",
        "-mavx512vpopcntdq",
        "__AVX512VPOPCNTDQ__",
    ),
    x86("avx512_bf16", "-mavx512bf16", "__AVX512BF16__"),
    x86("avx512_fp16", "-mavx512fp16", "__AVX512FP16__"),
    x86(
        "avx512_vp2intersect",
        "-mavx512vp2intersect",
        "__AVX512VP2INTERSECT__",
    ),
    x86("avx512er", "-mavx512er", "__AVX512ER__"),
    x86("avx512pf", "-mavx512pf", "__AVX512PF__"),
    x86("avx512_4vnniw", "-mavx5124vnniw", "__AVX5124VNNIW__"),
    x86("avx512_4fmaps", "-mavx5124fmaps", "__AVX5124FMAPS__"),
    x86("amx_tile", "-mamx-tile", "__AMX_TILE__"),
    x86("amx_int8", "-mamx-int8", "__AMX_INT8__"),
    x86("amx_bf16", "-mamx-bf16", "__AMX_BF16__"),
    x86("amx_fp16", "-mamx-fp16", "__AMX_FP16__"),
    arm("fp", "+fp", "__ARM_FP"),
    arm("asimd", "+simd", "__ARM_NEON"),
    arm("crc32", "+crc", "__ARM_FEATURE_CRC32"),
    arm("atomics", "+lse", "__ARM_FEATURE_ATOMICS"),
    arm("aes", "+aes", "__ARM_FEATURE_AES"),
    arm("sha2", "+sha2", "__ARM_FEATURE_SHA2"),
    arm("sha3", "+sha3", "__ARM_FEATURE_SHA3"),
    arm("sha512", "+sha3", "__ARM_FEATURE_SHA512"),
    arm("sm3", "+sm4", "__ARM_FEATURE_SM3"),
    arm("sm4", "+sm4", "__ARM_FEATURE_SM4"),
    arm("asimdrdm", "+rdma", "__ARM_FEATURE_QRDMX"),
    arm("asimddp", "+dotprod", "__ARM_FEATURE_DOTPROD"),
    arm("fphp", "+fp16", "__ARM_FEATURE_FP16_SCALAR_ARITHMETIC"),
    arm("asimdhp", "+fp16", "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC"),
    arm("asimdfhm", "+fp16fml", "__ARM_FEATURE_FP16_FML"),
    arm("fcma", "+fcma", "__ARM_FEATURE_COMPLEX"),
    arm("jscvt", "+jscvt", "__ARM_FEATURE_JCVT"),
    arm("frint", "+frintts", "__ARM_FEATURE_FRINT"),
    arm("rng", "+rng", "__ARM_FEATURE_RNG"),
    arm("i8mm", "+i8mm", "__ARM_FEATURE_MATMUL_INT8"),
    arm("bf16", "+bf16", "__ARM_FEATURE_BF16_VECTOR_ARITHMETIC"),
    arm("bf16", "+bf16", "__ARM_FEATURE_BF16_SCALAR_ARITHMETIC"),
    arm("sve", "+sve", "__ARM_FEATURE_SVE"),
    arm("sve2", "+sve2", "__ARM_FEATURE_SVE2"),
    arm("sveaes", "+sve2-aes", "__ARM_FEATURE_SVE2_AES"),
    arm("svebitperm", "+sve2-bitperm", "__ARM_FEATURE_SVE2_BITPERM"),
    arm("svesha3", "+sve2-sha3", "__ARM_FEATURE_SVE2_SHA3"),
    arm("svesm4", "+sve2-sm4", "__ARM_FEATURE_SVE2_SM4"),
    arm("svei8mm", "+i8mm", "__ARM_FEATURE_SVE_MATMUL_INT8"),
    arm("svef32mm", "+f32mm", "__ARM_FEATURE_SVE_MATMUL_FP32"),
    arm("svef64mm", "+f64mm", "__ARM_FEATURE_SVE_MATMUL_FP64"),
    arm("svebf16", "+bf16", "__ARM_FEATURE_SVE_BF16"),
    arm("sme", "+sme", "__ARM_FEATURE_SME"),
];

/// The extension whose macro is `macro_name`.
pub fn by_macro(macro_name: &str) -> Option<&'static Extension> {
    EXTENSIONS.iter().find(|e| e.macro_name == macro_name)
}

/// The extension a flag asks for: `-mavx512bf16` → `avx512_bf16` (x86-64
/// `-m` flags only; AArch64 extensions are asked for inside `-march`).
pub fn by_flag(flag: &str) -> Option<&'static Extension> {
    EXTENSIONS
        .iter()
        .find(|e| e.arch == Arch::X86_64 && e.flag == flag)
}

/// The list of understood flags in `docs/key.md` ("Understood flags"): one line per architecture.
pub fn understood_flags(arch: Arch) -> String {
    let mut flags: Vec<&str> = Vec::new();
    for e in EXTENSIONS.iter().filter(|e| e.arch == arch) {
        if !flags.contains(&e.flag) {
            flags.push(e.flag);
        }
    }
    flags.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macros_are_unique_and_flags_name_their_extension() {
        for (i, e) in EXTENSIONS.iter().enumerate() {
            assert!(
                EXTENSIONS[..i].iter().all(|o| o.macro_name != e.macro_name),
                "{} listed twice",
                e.macro_name
            );
        }
        assert_eq!(by_flag("-mavx512bf16").unwrap().name, "avx512_bf16");
        assert_eq!(by_flag("-mamx-tile").unwrap().name, "amx_tile");
        assert_eq!(by_flag("-mavx512fp16").unwrap().name, "avx512_fp16");
        assert_eq!(by_flag("-msse4.2").unwrap().name, "sse4_2");
        assert_eq!(by_macro("__ARM_FEATURE_SVE2").unwrap().name, "sve2");
    }
}
