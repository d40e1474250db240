//! The reader agrees with NVIDIA's `cuobjdump` on real libraries built here
//! with the pip nvcc.

use abicache_fatbin::{images_in_elf, images_in_elf_bytes, ArchVariant, DeviceImage};
use abicache_test_support::skip;

use crate::support::{built_libraries, cuobjdump, names, venv_tool};

/// Every image list equals `cuobjdump`'s: its image headers exactly, and its
/// `--list-elf --list-ptx` names, which leave the `f` off a family-specific
/// cubin's name (`x.1.sm_100.cubin` for the image whose header says `arch =
/// sm_100f`; the flag bit that marks it is read here).
#[test]
fn image_lists_equal_cuobjdump_for_every_library_built_here() {
    let libraries = match built_libraries() {
        Ok(libraries) => libraries,
        Err(why) => return skip(&why),
    };
    let Some(tool) = venv_tool("cuobjdump") else {
        return skip(
            "no cuobjdump in the checkout's `.venv` (NVIDIA's pip package nvidia-cuda-cuobjdump, \
             listed in scripts/requirements-dev.txt): install it to compare the reader with NVIDIA's tool",
        );
    };
    let mut compared = 0;
    for library in &libraries {
        let ours = images_in_elf(&library.path).unwrap();
        let bytes = std::fs::read(&library.path).unwrap();
        assert_eq!(
            images_in_elf_bytes(&bytes, &library.path).unwrap(),
            ours,
            "{}: the file and in-memory readers differ",
            library.name
        );
        let theirs = cuobjdump(&tool, &library.path);
        eprintln!(
            "{:<26} reader: {:?}\n{:<26} cuobjdump --list-elf --list-ptx: {:?}",
            library.name,
            names(&ours),
            "",
            theirs.list_lines
        );
        assert!(!ours.is_empty(), "{}: no device code found", library.name);
        assert_eq!(
            names(&ours),
            names(&theirs.headers),
            "{}: the reader and cuobjdump's image headers differ",
            library.name
        );
        let ours_as_listed: Vec<DeviceImage> = {
            let mut listed: Vec<DeviceImage> = ours
                .iter()
                .map(|image| match *image {
                    DeviceImage::Sass(mut arch) if arch.variant == ArchVariant::FamilySpecific => {
                        arch.variant = ArchVariant::Plain;
                        DeviceImage::Sass(arch)
                    }
                    other => other,
                })
                .collect();
            listed.sort();
            listed.dedup();
            listed
        };
        assert_eq!(
            names(&ours_as_listed),
            names(&theirs.listed),
            "{}: the reader and `cuobjdump --list-elf --list-ptx` differ",
            library.name
        );
        compared += 1;
    }
    assert!(compared >= 10, "only {compared} libraries were compared");
}

/// The expected lists, written out: what the reader finds is what the
/// flags asked for, in nvcc's own words.
#[test]
fn each_library_carries_the_images_its_recipe_names() {
    let libraries = match built_libraries() {
        Ok(libraries) => libraries,
        Err(why) => return skip(&why),
    };
    let expected: &[(&str, &[&str])] = &[
        ("arch_8.0", &["sm_80"]),
        ("arch_8.6", &["sm_86"]),
        ("arch_9.0a", &["sm_90a"]),
        ("arch_8.0_9.0+PTX", &["sm_80", "sm_90", "compute_90"]),
        ("arch_12.0", &["sm_120"]),
        ("family_100f", &["sm_100f", "compute_100f"]),
        ("shorthand_sm_90a", &["compute_90", "sm_90a", "compute_90a"]),
        ("gpu_code_list", &["sm_90", "compute_90", "sm_100"]),
        ("relocatable_8.0_9.0+PTX", &["sm_80", "compute_90"]),
        ("compress_all_8.6+PTX", &["sm_86", "compute_86"]),
        ("no_compress_8.6+PTX", &["sm_86", "compute_86"]),
    ];
    for library in &libraries {
        let (_, want) = expected
            .iter()
            .find(|(name, _)| *name == library.name)
            .unwrap_or_else(|| panic!("no expectation for {}", library.name));
        assert_eq!(
            names(&images_in_elf(&library.path).unwrap()),
            *want,
            "{}",
            library.name
        );
    }
}

/// nvcc's layout: the `.nvFatBinSegment` wrappers point at the fat binaries
/// in `.nv_fatbin`. With that section renamed, the reader follows the
/// wrappers instead and finds the same images.
#[test]
fn wrappers_lead_to_the_same_images_when_the_fatbin_section_is_renamed() {
    let libraries = match built_libraries() {
        Ok(libraries) => libraries,
        Err(why) => return skip(&why),
    };
    let library = libraries
        .iter()
        .find(|l| l.name == "arch_8.0_9.0+PTX")
        .unwrap();
    let bytes = std::fs::read(&library.path).unwrap();
    let direct = images_in_elf_bytes(&bytes, &library.path).unwrap();
    let renamed = rename_first(&bytes, b"\0.nv_fatbin\0", b"\0.nv_fatbiX\0");
    let via_wrappers = images_in_elf_bytes(&renamed, &library.path).unwrap();
    assert_eq!(names(&via_wrappers), names(&direct));
    // Without the wrappers either, the library carries no device code the reader can see.
    let neither = rename_first(&renamed, b"\0.nvFatBinSegment\0", b"\0.nvFatBinSegmenX\0");
    assert_eq!(images_in_elf_bytes(&neither, &library.path).unwrap(), []);
}

/// A host-only library carries no device code: `[]`, not an error.
#[test]
fn a_library_without_device_code_has_no_images() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("host.c");
    std::fs::write(&source, "int add(int a, int b) { return a + b; }\n").unwrap();
    let library = dir.path().join("libhost.so");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(images_in_elf(&library).unwrap(), []);
}

/// `bytes` with the first occurrence of `from` replaced by `to` (same length).
pub fn rename_first(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .unwrap_or_else(|| panic!("{:?} not found", String::from_utf8_lossy(from)));
    let mut out = bytes.to_vec();
    out[at..at + to.len()].copy_from_slice(to);
    out
}

/// `<site-packages>/torch/lib` of the checkout's `.venv`.
fn torch_lib_dir() -> Option<std::path::PathBuf> {
    let python = abicache_test_support::repo_root().join(".venv/bin/python");
    let output = std::process::Command::new(python)
        .args([
            "-c",
            "import importlib.util; print(importlib.util.find_spec('torch').submodule_search_locations[0])",
        ])
        .output()
        .ok()?;
    let dir = std::path::PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join("lib");
    dir.is_dir().then_some(dir)
}

/// PyTorch's own CUDA libraries, built by NVIDIA's toolchain elsewhere: the
/// small ones agree with `cuobjdump`; the 500 MB `libtorch_cuda.so` (whose
/// `cuobjdump` takes most of a minute) is read in well under a second, and
/// carries SASS for every architecture of torch's arch list.
#[test]
fn torchs_own_cuda_libraries_agree_with_cuobjdump_and_read_fast() {
    let Some(lib) = torch_lib_dir() else {
        return skip("no torch in the checkout's `.venv`; run scripts/setup-venv.sh");
    };
    let Some(tool) = venv_tool("cuobjdump") else {
        return skip("no cuobjdump in the checkout's `.venv` (nvidia-cuda-cuobjdump, scripts/requirements-dev.txt)");
    };
    for name in ["libtorch_cuda_linalg.so", "libtorch_nvshmem.so"] {
        let path = lib.join(name);
        let ours = images_in_elf(&path).unwrap();
        assert!(!ours.is_empty(), "{name}");
        assert_eq!(
            names(&ours),
            names(&cuobjdump(&tool, &path).headers),
            "{name}"
        );
    }
    assert_eq!(images_in_elf(&lib.join("libc10_cuda.so")).unwrap(), []);

    let path = lib.join("libtorch_cuda.so");
    let started = std::time::Instant::now();
    let images = names(&images_in_elf(&path).unwrap());
    let took = started.elapsed();
    eprintln!("libtorch_cuda.so: {images:?} in {took:.1?}");
    for arch in ["sm_80", "sm_86", "sm_90", "sm_100", "sm_120"] {
        assert!(
            images.iter().any(|i| i == arch),
            "{arch} missing from {images:?}"
        );
    }
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
}

/// Wrappers that all point at one fat binary: it is read once, and the
/// images are that fat binary's.
#[test]
fn wrappers_pointing_at_one_fat_binary_read_it_once() {
    let libraries = match built_libraries() {
        Ok(libraries) => libraries,
        Err(why) => return skip(&why),
    };
    let library = libraries
        .iter()
        .find(|l| l.name == "arch_8.0_9.0+PTX")
        .unwrap();
    let bytes = std::fs::read(&library.path).unwrap();
    let mut renamed = rename_first(&bytes, b"\0.nv_fatbin\0", b"\0.nv_fatbiX\0");
    let file = object::File::parse(&*renamed).unwrap();
    let (offset, size) = object::ObjectSection::file_range(
        &object::Object::section_by_name(&file, ".nvFatBinSegment").unwrap(),
    )
    .unwrap();
    let (offset, size) = (offset as usize, size as usize);
    assert_eq!(
        size, 48,
        "two wrappers: the device-linked fat binary and the kernel's"
    );
    // The second wrapper now points where the first does.
    let first: [u8; 8] = renamed[offset + 8..offset + 16].try_into().unwrap();
    renamed[offset + 32..offset + 40].copy_from_slice(&first);
    let images = names(&images_in_elf_bytes(&renamed, &library.path).unwrap());
    // The device-linked fat binary holds the SASS only.
    assert_eq!(images, ["sm_80", "sm_90"]);
}
