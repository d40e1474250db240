//! The GPUs of this machine, as CUDA would see them, and the guard that
//! compares them with a library's device code before it is loaded.
//!
//! One source of truth for both uses:
//! - the default arch list ([`default_cuda_archs`], [`visible_gpu_archs`]):
//!   the command line's and the Python package's (`abicache.visible_cuda_archs`);
//! - the GPU guard ([`check_device_code`]): a CUDA library whose images no
//!   visible GPU can run is refused before `dlopen`, with the fix, instead of
//!   dying at its first kernel launch ("no kernel image is available").
//!
//! The GPUs come from NVML (`dlopen("libnvidia-ml.so.1")`: no CUDA context,
//! no process), else from `nvidia-smi --query-gpu=index,name,compute_cap,uuid`,
//! asked once per process ([`machine_gpus`]). `CUDA_VISIBLE_DEVICES` is then
//! applied as CUDA reads it ([`visible_among`]), at each call: unset, every
//! GPU; empty, none; else a comma-separated list of indices (in NVML's and
//! `nvidia-smi`'s order, the PCI bus order; `CUDA_DEVICE_ORDER` is not
//! read) or `GPU-…` UUID prefixes, up to the first entry that names no GPU.
//! A `MIG-…` entry keeps every GPU (its parent is not looked up).
//!
//! Restated in Python in `python/abicache/_gpu.py` (the warm-load path,
//! which must not load the native module), tied by
//! `tests/python/test_gpu_guard.py`.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

use abicache_fatbin::{best_image, Capability, DeviceImage, Runs};

use crate::env_vars::{var, ABICACHE_GPU_CHECK, CUDA_VISIBLE_DEVICES, TORCH_CUDA_ARCH_LIST};

/// Set by tests only: `1` skips NVML, so an `nvidia-smi` stub on `PATH`
/// stands in for the GPUs even on a machine that has some.
const TEST_ONLY_NO_NVML: &str = "ABICACHE_TEST_ONLY_NO_NVML";

/// One GPU of this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// Its index in NVML's (and `nvidia-smi`'s) order.
    pub index: u32,
    /// Its product name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Its compute capability (`9.0`).
    pub capability: Capability,
    /// Its UUID (`GPU-…`); empty when unknown.
    pub uuid: String,
}

/// `TORCH_CUDA_ARCH_LIST` when set (not blank), else the compute
/// capabilities of the visible GPUs ([`visible_gpu_archs`]), else `None`.
pub fn default_cuda_archs() -> Option<String> {
    var(TORCH_CUDA_ARCH_LIST).or_else(visible_gpu_archs)
}

/// The compute capabilities of the visible GPUs ([`visible_gpus`]), sorted
/// and deduplicated (`8.6 9.0`); `None` when there is none.
pub fn visible_gpu_archs() -> Option<String> {
    let mut caps: Vec<Capability> = visible_gpus().iter().map(|g| g.capability).collect();
    caps.sort_unstable();
    caps.dedup();
    (!caps.is_empty()).then(|| {
        caps.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// The GPUs CUDA would use in this process: this machine's
/// ([`machine_gpus`]) as `CUDA_VISIBLE_DEVICES` selects them.
pub fn visible_gpus() -> Vec<Gpu> {
    visible_among(
        machine_gpus(),
        std::env::var(CUDA_VISIBLE_DEVICES).ok().as_deref(),
    )
}

/// This machine's GPUs: NVML's, else `nvidia-smi`'s; empty when neither
/// answers (a CPU node). Asked once per process: the GPUs of a machine do
/// not change while it runs.
pub fn machine_gpus() -> &'static [Gpu] {
    static GPUS: OnceLock<Vec<Gpu>> = OnceLock::new();
    GPUS.get_or_init(|| {
        let skip_nvml = std::env::var(TEST_ONLY_NO_NVML).is_ok_and(|v| v == "1");
        (!skip_nvml)
            .then(nvml::gpus)
            .flatten()
            .unwrap_or_else(nvidia_smi_gpus)
    })
}

/// `gpus` as `CUDA_VISIBLE_DEVICES=visible` selects them (`None`: unset).
///
/// Restated in Python as `python/abicache/_gpu.py:visible_among`.
pub fn visible_among(gpus: &[Gpu], visible: Option<&str>) -> Vec<Gpu> {
    let Some(visible) = visible else {
        return gpus.to_vec();
    };
    let mut chosen: Vec<Gpu> = Vec::new();
    for entry in visible.split(',').map(str::trim) {
        if entry.starts_with("MIG-") {
            return gpus.to_vec();
        }
        let found = if entry.starts_with("GPU-") {
            gpus.iter()
                .find(|g| !g.uuid.is_empty() && g.uuid.starts_with(entry))
        } else {
            entry
                .parse::<u32>()
                .ok()
                .and_then(|i| gpus.iter().find(|g| g.index == i))
        };
        match found {
            Some(gpu) if !chosen.contains(gpu) => chosen.push(gpu.clone()),
            Some(_) => {}
            None => break,
        }
    }
    chosen
}

/// The GPUs `nvidia-smi` lists; empty when it is absent, fails or lists none.
fn nvidia_smi_gpus() -> Vec<Gpu> {
    let Ok(output) = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=index,name,compute_cap,uuid",
            "--format=csv,noheader",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    if !output.status.success() {
        return Vec::new();
    }
    parse_nvidia_smi(&String::from_utf8_lossy(&output.stdout))
}

/// `nvidia-smi --query-gpu=index,name,compute_cap[,uuid] --format=csv,noheader`
/// output, one GPU a line; lines that do not parse are skipped.
///
/// Restated in Python as `python/abicache/_gpu.py:parse_nvidia_smi`.
fn parse_nvidia_smi(csv: &str) -> Vec<Gpu> {
    csv.lines()
        .filter_map(|line| {
            let mut fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let uuid = match fields.last() {
                Some(last) if last.starts_with("GPU-") => fields.pop().unwrap_or_default(),
                _ => "",
            };
            let capability = fields.pop()?.parse().ok()?;
            if fields.len() < 2 {
                return None;
            }
            let index = fields[0].parse().ok()?;
            Some(Gpu {
                index,
                name: fields[1..].join(", "),
                capability,
                uuid: uuid.to_owned(),
            })
        })
        .collect()
}

/// Whether the GPU guard is on: `ABICACHE_GPU_CHECK` unset (or blank) or
/// `1` on, `0` off.
///
/// # Errors
/// Any other value, naming the variable and what to set instead.
///
/// Restated in Python as `python/abicache/_gpu.py:guard_passes` (`0` waives
/// it; any other value but unset or `1` is left to the native path).
pub fn gpu_check_enabled() -> crate::Result<bool> {
    let value = std::env::var(ABICACHE_GPU_CHECK).ok();
    match value.as_deref().map(str::trim) {
        None | Some("") | Some("1") => Ok(true),
        Some("0") => Ok(false),
        Some(_) => Err(crate::Error::InvalidVariable {
            name: ABICACHE_GPU_CHECK,
            value: value.unwrap_or_default(),
            problem: "is not `1` or `0`; unset it (the GPU guard is on by default) or set it \
                      to `0` to load CUDA libraries without comparing their device code with \
                      the visible GPUs",
        }),
    }
}

pub use crate::gpu_refusal::GpuRefusal;

/// What the guard found: every visible GPU is served (each by SASS, or by
/// PTX the driver will JIT-compile, named in `jit`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuVerdict {
    /// One line for the verbose: the GPUs that only PTX serves (the driver
    /// JIT-compiles it at load, once per process); `None` when SASS serves all.
    pub jit: Option<String>,
}

/// The guard: compares `images` (a library's, as its manifest records
/// them) with `gpus` under CUDA's compatibility rules
/// ([`abicache_fatbin::best_image`]). No image recorded (a CPU library) or
/// no GPU: nothing to check. `library` names the file in the refusal.
///
/// Restated in Python as `python/abicache/_gpu.py:guard_passes` (the
/// warm-load path), tied by `tests/python/test_gpu_guard.py`.
pub fn check_device_code(
    library: &str,
    images: &[String],
    gpus: &[Gpu],
) -> Result<GpuVerdict, GpuRefusal> {
    if images.is_empty() || gpus.is_empty() {
        return Ok(GpuVerdict::default());
    }
    let parsed: Vec<DeviceImage> = images.iter().filter_map(|i| i.parse().ok()).collect();
    let mut refused = Vec::new();
    let mut jit = Vec::new();
    for gpu in gpus {
        match best_image(&parsed, gpu.capability) {
            Runs::Sass(_) => {}
            Runs::PtxJit(image) => jit.push(format!("{} from {image}", describe(gpu))),
            Runs::No => refused.push(gpu),
        }
    }
    if refused.is_empty() {
        return Ok(GpuVerdict {
            jit: (!jit.is_empty()).then(|| {
                format!(
                    "{library}: the driver will JIT-compile PTX for {} at load",
                    jit.join(" and ")
                )
            }),
        });
    }
    let mut caps: Vec<Capability> = gpus.iter().map(|g| g.capability).collect();
    caps.sort_unstable();
    caps.dedup();
    let list = caps
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    // `+PTX` on an image's architecture helps when that PTX can be JIT-compiled
    // for every refused GPU: its capability is at most theirs.
    let lowest_refused = refused.iter().map(|g| g.capability).min();
    let ptx_helps = parsed
        .iter()
        .any(|i| lowest_refused.is_some_and(|low| i.arch().capability() <= low));
    let fix = match ptx_helps {
        true => format!("set TORCH_CUDA_ARCH_LIST=\"{list}\" or add \"+PTX\""),
        false => format!("set TORCH_CUDA_ARCH_LIST=\"{list}\""),
    };
    Err(GpuRefusal {
        library: library.to_owned(),
        images: match images.is_empty() {
            true => "no image".to_owned(),
            false => images.join(", "),
        },
        gpus: refused
            .iter()
            .map(|g| describe(g))
            .collect::<Vec<_>>()
            .join(" and "),
        fix,
    })
}

/// `GPU 0 (NVIDIA H100, 9.0)`.
fn describe(gpu: &Gpu) -> String {
    format!("GPU {} ({}, {})", gpu.index, gpu.name, gpu.capability)
}

/// The guard before a load of `library` (its path; the refusal names its
/// file) carrying `images`: off under `ABICACHE_GPU_CHECK=0`, else
/// [`check_device_code`] against the visible GPUs. With no image recorded
/// nothing is read (no NVML, no process).
pub fn guard(library: &std::path::Path, images: &[String]) -> crate::Result<GpuVerdict> {
    if images.is_empty() || !gpu_check_enabled()? {
        return Ok(GpuVerdict::default());
    }
    let name = library.file_name().map_or_else(
        || library.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(check_device_code(&name, images, &visible_gpus())?)
}

/// NVML, loaded at run time: present with the driver, absent elsewhere.
#[allow(unsafe_code)] // dlopen/dlsym and NVML's C calls; see the SAFETY comments
mod nvml {
    use super::*;

    type Init = unsafe extern "C" fn() -> c_int;
    type Count = unsafe extern "C" fn(*mut c_uint) -> c_int;
    type Handle = unsafe extern "C" fn(c_uint, *mut *mut c_void) -> c_int;
    type Cap = unsafe extern "C" fn(*mut c_void, *mut c_int, *mut c_int) -> c_int;
    type Text = unsafe extern "C" fn(*mut c_void, *mut c_char, c_uint) -> c_int;

    /// The address of `name` in `lib` as a function pointer of type `T`.
    unsafe fn symbol<T>(lib: *mut c_void, name: &CStr) -> Option<T> {
        // SAFETY: `lib` is a live handle; the caller names NVML's documented
        // signature for `name` as `T` (a function pointer, pointer-sized).
        let ptr = unsafe { libc::dlsym(lib, name.as_ptr()) };
        (!ptr.is_null()).then(|| unsafe { std::mem::transmute_copy(&ptr) })
    }

    /// The GPUs NVML lists; `None` when NVML is absent or fails (then
    /// `nvidia-smi` is asked). The library stays loaded (as CUDA keeps it).
    pub(super) fn gpus() -> Option<Vec<Gpu>> {
        // SAFETY: dlopen of a library name; every symbol is used with the
        // signature of NVML's header (nvml.h), buffers as sized there.
        unsafe {
            let lib = libc::dlopen(
                c"libnvidia-ml.so.1".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL,
            );
            if lib.is_null() {
                return None;
            }
            let init: Init = symbol(lib, c"nvmlInit_v2")?;
            let count: Count = symbol(lib, c"nvmlDeviceGetCount_v2")?;
            let handle: Handle = symbol(lib, c"nvmlDeviceGetHandleByIndex_v2")?;
            let cap: Cap = symbol(lib, c"nvmlDeviceGetCudaComputeCapability")?;
            let name: Text = symbol(lib, c"nvmlDeviceGetName")?;
            let uuid: Option<Text> = symbol(lib, c"nvmlDeviceGetUUID");
            let shutdown: Option<Init> = symbol(lib, c"nvmlShutdown");
            if init() != 0 {
                return None;
            }
            let mut n: c_uint = 0;
            let mut gpus = Vec::new();
            let ok = count(&mut n) == 0;
            for index in 0..if ok { n } else { 0 } {
                let mut device: *mut c_void = std::ptr::null_mut();
                let (mut major, mut minor) = (0, 0);
                if handle(index, &mut device) != 0 || cap(device, &mut major, &mut minor) != 0 {
                    continue;
                }
                let read = |f: Text| {
                    let mut buf = [0 as c_char; 128];
                    (f(device, buf.as_mut_ptr(), buf.len() as c_uint) == 0)
                        .then(|| CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
                };
                gpus.push(Gpu {
                    index,
                    name: read(name).unwrap_or_else(|| "unknown GPU".to_owned()),
                    capability: Capability {
                        major: major.max(0) as u32,
                        minor: minor.max(0) as u32,
                    },
                    uuid: uuid.and_then(read).unwrap_or_default(),
                });
            }
            if let Some(shutdown) = shutdown {
                shutdown();
            }
            ok.then_some(gpus)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, name: &str, cap: &str, uuid: &str) -> Gpu {
        Gpu {
            index,
            name: name.into(),
            capability: cap.parse().unwrap(),
            uuid: uuid.into(),
        }
    }

    #[test]
    fn nvidia_smi_lines_parse_with_or_without_uuid_and_commas_in_names() {
        let gpus = parse_nvidia_smi(
            "0, NVIDIA H100 80GB HBM3, 9.0, GPU-abc\n1, NVIDIA A100, PCIe, 8.0\nnot a gpu\n\n",
        );
        assert_eq!(
            gpus,
            [
                gpu(0, "NVIDIA H100 80GB HBM3", "9.0", "GPU-abc"),
                gpu(1, "NVIDIA A100, PCIe", "8.0", ""),
            ]
        );
    }

    #[test]
    fn the_refusal_names_the_images_each_gpu_refused_and_the_fix() {
        let h100 = gpu(0, "NVIDIA H100", "9.0", "");
        let images = ["sm_80".to_owned(), "sm_86".to_owned()];
        let refusal =
            check_device_code("muladd_cuda.so", &images, std::slice::from_ref(&h100)).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "muladd_cuda.so has device code for sm_80, sm_86; GPU 0 (NVIDIA H100, 9.0) can run \
             none of it; set TORCH_CUDA_ARCH_LIST=\"9.0\" or add \"+PTX\", then rebuild (or set \
             `ABICACHE_GPU_CHECK=0` to load it anyway, and fail at its first kernel launch)"
        );
        // PTX of a later architecture cannot be JIT-compiled for an earlier
        // GPU: no `+PTX` advice then.
        let a100 = gpu(1, "NVIDIA A100", "8.0", "");
        let later = check_device_code("x.so", &["sm_90".to_owned()], &[a100.clone(), h100.clone()])
            .unwrap_err();
        assert_eq!(later.gpus, "GPU 1 (NVIDIA A100, 8.0)");
        assert_eq!(later.fix, "set TORCH_CUDA_ARCH_LIST=\"8.0 9.0\"");
        // SASS for one GPU and PTX for the other: served, the JIT said.
        let both = ["sm_80".to_owned(), "compute_80".to_owned()];
        let verdict = check_device_code("x.so", &both, &[a100, h100.clone()]).unwrap();
        assert_eq!(
            verdict.jit.as_deref(),
            Some("x.so: the driver will JIT-compile PTX for GPU 0 (NVIDIA H100, 9.0) from compute_80 at load")
        );
        // No image (a CPU library) or no GPU: nothing to check.
        assert_eq!(
            check_device_code("x.so", &[], &[h100]),
            Ok(GpuVerdict::default())
        );
        assert_eq!(
            check_device_code("x.so", &both, &[]),
            Ok(GpuVerdict::default())
        );
    }

    #[test]
    fn cuda_visible_devices_selects_by_index_or_uuid_prefix_up_to_the_first_invalid() {
        let all = [
            gpu(0, "A", "8.0", "GPU-aaaa"),
            gpu(1, "B", "9.0", "GPU-bbbb"),
        ];
        assert_eq!(visible_among(&all, None), all);
        assert_eq!(visible_among(&all, Some("")), []);
        assert_eq!(visible_among(&all, Some("1")), [all[1].clone()]);
        assert_eq!(
            visible_among(&all, Some("GPU-bb,0")),
            [all[1].clone(), all[0].clone()]
        );
        assert_eq!(visible_among(&all, Some("0,7,1")), [all[0].clone()]);
        assert_eq!(visible_among(&all, Some("-1")), []);
        assert_eq!(visible_among(&all, Some("MIG-x")), all);
    }
}
