//! `expected_images`: what nvcc arch flags ask for, checked against what
//! the pip nvcc really builds.

use abicache_fatbin::{expected_images, images_in_elf, Error};
use abicache_test_support::skip;

use crate::support::{built_libraries, names};

fn expect(flags: &[&str]) -> Vec<String> {
    let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    names(&expected_images(&flags).unwrap_or_else(|e| panic!("{flags:?}: {e}")))
}

fn refuse(flags: &[&str]) -> Error {
    let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    expected_images(&flags).expect_err("the flags should be refused")
}

#[test]
fn the_arch_lists_gencode_flags_ask_for_sass_per_arch_and_ptx_per_plus_ptx() {
    let flags = abicache_key::gencode_flags("8.0 9.0+PTX").unwrap();
    assert_eq!(
        names(&expected_images(&flags).unwrap()),
        ["sm_80", "sm_90", "compute_90"]
    );
    let flags = abicache_key::gencode_flags("9.0a 10.0f+PTX 12.0").unwrap();
    assert_eq!(
        names(&expected_images(&flags).unwrap()),
        ["sm_90a", "sm_100f", "compute_100f", "sm_120"]
    );
}

#[test]
fn user_arch_flags_in_every_spelling() {
    let table: &[(&[&str], &[&str])] = &[
        (&["-arch=sm_90a"], &["compute_90", "sm_90a", "compute_90a"]),
        (&["-arch", "sm_80"], &["sm_80", "compute_80"]),
        (&["-arch=compute_90"], &["compute_90"]),
        (
            &[
                "--gpu-architecture=compute_90",
                "--gpu-code=sm_90,compute_90",
            ],
            &["sm_90", "compute_90"],
        ),
        (
            &["--gpu-architecture", "compute_80", "--gpu-code", "sm_86"],
            &["sm_86"],
        ),
        (&["-arch=compute_80", "-code=sm_80,lto_80"], &["sm_80"]),
        (
            &["-gencode=arch=compute_100f,code=[sm_100f,compute_100f]"],
            &["sm_100f", "compute_100f"],
        ),
        (
            &["-gencode", "arch=compute_80,code=\"sm_80,compute_80\""],
            &["sm_80", "compute_80"],
        ),
        (
            &["--generate-code=arch=compute_120,code=sm_120"],
            &["sm_120"],
        ),
        (
            &["--generate-code", "arch=compute_90a,code=sm_90a"],
            &["sm_90a"],
        ),
        // `-arch` adds to the `-gencode`s; the last `-arch` counts.
        (
            &[
                "-arch=sm_70",
                "-gencode=arch=compute_80,code=sm_80",
                "-arch=sm_90",
            ],
            &["sm_80", "sm_90", "compute_90"],
        ),
        // Other flags, and other tools' options, are not arch flags.
        (
            &[
                "-O3",
                "-Xcompiler",
                "-arch=x86",
                "--use_fast_math",
                "-gencode=arch=compute_86,code=sm_86",
            ],
            &["sm_86"],
        ),
        (&["-O3", "-std=c++17"], &[]),
    ];
    for (flags, want) in table {
        assert_eq!(expect(flags), *want, "{flags:?}");
    }
}

#[test]
fn flags_nvcc_refuses_or_that_leave_the_choice_to_nvcc_are_errors_naming_the_flag() {
    for flags in [
        &["-arch=native"][..],
        &["-arch", "all"],
        &["--gpu-architecture=all-major"],
    ] {
        let error = refuse(flags);
        assert!(matches!(error, Error::ArchChosenByNvcc { .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.contains(flags.last().unwrap()), "{message}");
        assert!(message.contains("TORCH_CUDA_ARCH_LIST"), "{message}");
    }
    let cases: &[(&[&str], &str)] = &[
        (&["-code=sm_80"], "-code=sm_80"),
        (&["-arch=sm_80", "-code=sm_80"], "-arch=sm_80 -code=sm_80"),
        (
            &["-gencode=arch=sm_80,code=sm_80"],
            "`sm_80` is not a virtual architecture",
        ),
        (&["-gencode=arch=compute_80"], "arch=compute_XY,code="),
        (
            &["-gencode=arch=compute_80,code=gfx90a"],
            "`gfx90a` is not a code",
        ),
        (&["-arch=sm_8"], "`sm_8` is not a GPU architecture"),
        (&["-gencode"], "needs a value"),
    ];
    for (flags, needle) in cases {
        let error = refuse(flags);
        assert!(
            matches!(error, Error::BadFlag { .. }),
            "{flags:?}: {error:?}"
        );
        assert!(error.to_string().contains(needle), "{flags:?}: {error}");
    }
}

/// For every library built here, the images nvcc put in it are exactly
/// those its arch flags ask for.
#[test]
fn expected_images_equal_what_nvcc_builds() {
    let libraries = match built_libraries() {
        Ok(libraries) => libraries,
        Err(why) => return skip(&why),
    };
    for library in &libraries {
        assert_eq!(
            names(&expected_images(&library.arch_flags).unwrap()),
            names(&images_in_elf(&library.path).unwrap()),
            "{}: {:?}",
            library.name,
            library.arch_flags
        );
    }
}
