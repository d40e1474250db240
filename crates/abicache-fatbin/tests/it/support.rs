//! Real CUDA libraries built with the venv's pip nvcc, and NVIDIA's own
//! `cuobjdump` listing of their device code.
//!
//! nvcc takes seconds per library, and nextest runs every test in its own
//! process, so the libraries are built once into a cache under cargo's
//! test tmpdir (keyed by the source, the flags and the nvcc binary) while
//! holding an `flock`, and every test that needs them reuses them.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

use abicache_fatbin::{DeviceImage, SmArch};

/// A tiny kernel and a host launcher (no torch).
pub const KERNEL_CU: &str = r#"
__global__ void muladd(float* a, const float* b, float c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * c + b[i];
}
extern "C" void launch(float* a, const float* b, float c, int n) {
  muladd<<<(n + 255) / 256, 256>>>(a, b, c, n);
}
"#;

/// One library to build: a name, the nvcc arch flags, and how to link it.
pub struct Recipe {
    /// Names the output file (`<name>.so` or `<name>.o`).
    pub name: &'static str,
    /// The arch flags, which [`abicache_fatbin::expected_images`] reads too.
    pub arch_flags: Vec<String>,
    /// Other nvcc flags (compression); not arch flags.
    pub other_flags: Vec<&'static str>,
    /// A relocatable-device-code object (`-rdc=true -c`) instead of a shared library.
    pub relocatable_object: bool,
}

fn strings(flags: &[&str]) -> Vec<String> {
    flags.iter().map(|f| f.to_string()).collect()
}

/// The libraries the agreement, fuzz and flag tests use.
pub fn recipes() -> Vec<Recipe> {
    let arch_list = |list: &str| abicache_key::gencode_flags(list).expect("a valid arch list");
    let shared = |name, arch_flags| Recipe {
        name,
        arch_flags,
        other_flags: Vec::new(),
        relocatable_object: false,
    };
    vec![
        shared("arch_8.0", arch_list("8.0")),
        shared("arch_8.6", arch_list("8.6")),
        shared("arch_9.0a", arch_list("9.0a")),
        shared("arch_8.0_9.0+PTX", arch_list("8.0 9.0+PTX")),
        shared("arch_12.0", arch_list("12.0")),
        shared(
            "family_100f",
            strings(&["-gencode", "arch=compute_100f,code=[sm_100f,compute_100f]"]),
        ),
        shared("shorthand_sm_90a", strings(&["-arch=sm_90a"])),
        shared(
            "gpu_code_list",
            strings(&[
                "--gpu-architecture=compute_90",
                "--gpu-code=sm_90,sm_100,compute_90",
            ]),
        ),
        Recipe {
            name: "relocatable_8.0_9.0+PTX",
            arch_flags: strings(&[
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90,code=compute_90",
            ]),
            other_flags: Vec::new(),
            relocatable_object: true,
        },
        Recipe {
            name: "compress_all_8.6+PTX",
            arch_flags: arch_list("8.6+PTX"),
            other_flags: vec!["-Xfatbin", "-compress-all"],
            relocatable_object: false,
        },
        Recipe {
            name: "no_compress_8.6+PTX",
            arch_flags: arch_list("8.6+PTX"),
            other_flags: vec!["--no-compress"],
            relocatable_object: false,
        },
    ]
}

/// A library built from a [`Recipe`].
pub struct Built {
    /// The recipe's name.
    pub name: &'static str,
    /// The library or object.
    pub path: PathBuf,
    /// The recipe's arch flags.
    pub arch_flags: Vec<String>,
}

/// The directories of NVIDIA's pip wheels in the checkout's `.venv`
/// (`site-packages/nvidia`, possibly several for an overlay venv).
fn nvidia_dirs() -> Vec<PathBuf> {
    let python = abicache_test_support::repo_root().join(".venv/bin/python");
    let Ok(output) = Command::new(&python)
        .args(["-c", "import nvidia; print('\\n'.join(nvidia.__path__))"])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(PathBuf::from)
        .collect()
}

/// `<site-packages>/nvidia/*/bin/<tool>` from the checkout's `.venv`.
pub fn venv_tool(tool: &str) -> Option<PathBuf> {
    for dir in nvidia_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path().join("bin").join(tool))
            .filter(|p| p.is_file())
            .collect();
        found.sort();
        if let Some(path) = found.pop() {
            return Some(path);
        }
    }
    None
}

/// Builds every recipe nvcc accepts (once per machine and nvcc, shared by
/// the tests); `Err` says why there is no nvcc. Recipes this nvcc refuses
/// (a family-specific arch before CUDA 12.9) are left out and named on stderr.
pub fn built_libraries() -> Result<Vec<Built>, String> {
    let nvcc = venv_tool("nvcc").ok_or(
        "no pip nvcc in the checkout's `.venv` (nvidia-cuda-nvcc, from scripts/requirements-dev.txt); run scripts/setup-venv.sh",
    )?;
    let meta = std::fs::metadata(&nvcc).map_err(|e| e.to_string())?;
    let mut hasher = DefaultHasher::new();
    (KERNEL_CU, nvcc.to_string_lossy().as_ref(), meta.len()).hash(&mut hasher);
    meta.modified().ok().hash(&mut hasher);
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("abicache-fatbin-libraries")
        .join(format!("{:016x}", hasher.finish()));
    std::fs::create_dir_all(&cache).unwrap();
    let lock = std::fs::File::create(cache.join(".lock")).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let source = cache.join("kernel.cu");
    std::fs::write(&source, KERNEL_CU).unwrap();
    let mut built = Vec::new();
    for recipe in recipes() {
        let ext = if recipe.relocatable_object { "o" } else { "so" };
        let path = cache.join(format!("{}.{ext}", recipe.name));
        let refused = cache.join(format!("{}.refused", recipe.name));
        if refused.exists() {
            continue;
        }
        if !path.exists() {
            // Built under another name and renamed: a killed run leaves no half library.
            let partial = cache.join(format!(".partial-{}.{ext}", recipe.name));
            let mut command = Command::new(&nvcc);
            if recipe.relocatable_object {
                command.args(["-rdc=true", "-c"]);
            } else {
                command.arg("-shared");
            }
            let output = command
                .args(["-Xcompiler", "-fPIC"])
                .args(&recipe.arch_flags)
                .args(&recipe.other_flags)
                .arg(&source)
                .arg("-o")
                .arg(&partial)
                .output()
                .map_err(|e| format!("cannot run `{}`: {e}", nvcc.display()))?;
            if !output.status.success() {
                let stderr = String::from_utf8_lossy(&output.stderr);
                if stderr.contains("Unsupported gpu architecture") {
                    eprintln!("this nvcc refuses {}: {stderr}", recipe.name);
                    std::fs::write(&refused, stderr.as_bytes()).unwrap();
                    continue;
                }
                panic!("nvcc failed for {}:\n{stderr}", recipe.name);
            }
            std::fs::rename(&partial, &path).unwrap();
        }
        built.push(Built {
            name: recipe.name,
            path,
            arch_flags: recipe.arch_flags,
        });
    }
    Ok(built)
}

/// What NVIDIA's `cuobjdump` says a file carries.
pub struct CuobjdumpView {
    /// From the image headers of `cuobjdump <file>`: `Fatbin elf code:` /
    /// `Fatbin ptx code:` followed by `arch = sm_90a`; sorted, deduplicated.
    pub headers: Vec<DeviceImage>,
    /// The raw lines of `cuobjdump --list-elf --list-ptx <file>`.
    pub list_lines: Vec<String>,
    /// From those lines' file names (`x.1.sm_90a.cubin`, `x.1.sm_90.ptx`); sorted, deduplicated.
    pub listed: Vec<DeviceImage>,
}

/// Runs `cuobjdump` on `path`.
pub fn cuobjdump(cuobjdump: &Path, path: &Path) -> CuobjdumpView {
    let run = |args: &[&str]| {
        let output = Command::new(cuobjdump)
            .args(args)
            .arg(path)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cuobjdump {args:?} {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let mut headers = Vec::new();
    let mut kind: Option<String> = None;
    for line in run(&[]).lines() {
        if let Some(rest) = line.strip_prefix("Fatbin ") {
            kind = rest.strip_suffix(" code:").map(str::to_string);
        } else if let (Some(k), Some(arch)) = (&kind, line.strip_prefix("arch = ")) {
            let number = arch.trim().strip_prefix("sm_").expect("arch = sm_XY");
            let arch = parse_arch(number);
            match k.as_str() {
                "elf" => headers.push(DeviceImage::Sass(arch)),
                "ptx" => headers.push(DeviceImage::Ptx(arch)),
                _ => {} // nvvm (LTO IR): neither SASS nor PTX
            }
            kind = None;
        }
    }
    headers.sort();
    headers.dedup();
    let list_lines: Vec<String> = run(&["--list-elf", "--list-ptx"])
        .lines()
        .map(str::to_string)
        .collect();
    let mut listed = Vec::new();
    for line in &list_lines {
        let name = line.rsplit(' ').next().unwrap_or_default();
        if let Some(stem) = name.strip_suffix(".cubin") {
            let number = stem.rsplit(".sm_").next().unwrap();
            listed.push(DeviceImage::Sass(parse_arch(number)));
        } else if let Some(stem) = name.strip_suffix(".ptx") {
            let number = stem.rsplit(".sm_").next().unwrap();
            listed.push(DeviceImage::Ptx(parse_arch(number)));
        }
    }
    listed.sort();
    listed.dedup();
    CuobjdumpView {
        headers,
        list_lines,
        listed,
    }
}

fn parse_arch(number: &str) -> SmArch {
    match format!("sm_{number}").parse() {
        Ok(DeviceImage::Sass(arch)) => arch,
        other => panic!("cuobjdump named `{number}`, not an architecture: {other:?}"),
    }
}

/// The images' display names, for readable assertions.
pub fn names(images: &[DeviceImage]) -> Vec<String> {
    images.iter().map(ToString::to_string).collect()
}
