//! The instruction-set rules on real AArch64 text: GCC 12's predefined
//! macros and `/proc/cpuinfo` as captured on an emulated Arm machine
//! (`tests/fixtures/aarch64/README.md` says how), read here on any host.

use abicache_isa::{beyond_baseline, check_on, requirements_from_macros, CpuFeatures};

const DEFAULT: &str = include_str!("../fixtures/aarch64/gcc12-dM.txt");
const SVE2: &str = include_str!("../fixtures/aarch64/gcc12-march-armv8-a+sve2-dM.txt");
const CORTEX_A72: &str = include_str!("../fixtures/aarch64/cpuinfo-qemu-cortex-a72.txt");
const NEOVERSE_N1: &str = include_str!("../fixtures/aarch64/cpuinfo-qemu-neoverse-n1.txt");

#[test]
fn gccs_default_aarch64_target_is_the_baseline() {
    assert!(
        beyond_baseline(DEFAULT).is_empty(),
        "{:?}",
        beyond_baseline(DEFAULT)
    );
}

#[test]
fn plus_sve2_requires_sve2_and_what_it_implies_and_a_cortex_a72_is_refused() {
    let flag = "-march=armv8-a+sve2".to_owned();
    let required = requirements_from_macros(DEFAULT, SVE2, std::slice::from_ref(&flag), &[], "c++");
    let features: Vec<&str> = required.iter().map(|r| r.feature.as_str()).collect();
    assert_eq!(features, ["asimdhp", "fphp", "sve", "sve2"]);
    assert!(required.iter().all(|r| r.flag == flag), "{required:?}");

    let a72 = CpuFeatures::from_cpuinfo(CORTEX_A72);
    assert!(a72.has("asimd") && a72.has("crc32") && !a72.has("sve2"));
    let err = check_on(&required, &a72, "extension `sve2_probe`")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("built with -march=armv8-a+sve2; this CPU lacks asimdhp, fphp, sve, sve2"),
        "{err}"
    );
    // A Neoverse N1 has half precision but no SVE: only those are named.
    let n1 = CpuFeatures::from_cpuinfo(NEOVERSE_N1);
    let err = check_on(&required, &n1, "x").unwrap_err().to_string();
    assert!(err.contains("this CPU lacks sve, sve2."), "{err}");
}

#[test]
fn the_cpu_identity_tells_emulated_models_apart() {
    let a72 = CpuFeatures::from_cpuinfo(CORTEX_A72);
    let n1 = CpuFeatures::from_cpuinfo(NEOVERSE_N1);
    assert!(
        a72.identity().contains("CPU part=0xd08"),
        "{}",
        a72.identity()
    );
    assert!(
        n1.identity().contains("CPU part=0xd0c"),
        "{}",
        n1.identity()
    );
    assert_ne!(a72.identity(), n1.identity());
}
