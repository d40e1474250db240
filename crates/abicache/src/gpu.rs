//! The CUDA architectures to build for when neither the extension nor the
//! environment names them: the one rule for the command line and the Python
//! package (`abicache.visible_cuda_archs`).

use std::sync::OnceLock;

use crate::env_vars::{var, TORCH_CUDA_ARCH_LIST};

/// `TORCH_CUDA_ARCH_LIST` when set (not blank), else the compute
/// capabilities of the GPUs `nvidia-smi` lists ([`visible_gpu_archs`]),
/// else `None`.
pub fn default_cuda_archs() -> Option<String> {
    var(TORCH_CUDA_ARCH_LIST).or_else(visible_gpu_archs)
}

/// The compute capabilities of the GPUs `nvidia-smi` lists, sorted and
/// deduplicated (`8.6 9.0`); `None` when it is absent, fails or lists none.
/// Asked once per process: the GPUs of a machine do not change while it runs.
pub fn visible_gpu_archs() -> Option<String> {
    static ARCHS: OnceLock<Option<String>> = OnceLock::new();
    ARCHS
        .get_or_init(|| {
            let output = std::process::Command::new("nvidia-smi")
                .args(["--query-gpu=compute_cap", "--format=csv,noheader"])
                .output()
                .ok()?;
            output
                .status
                .success()
                .then(|| arch_list(&String::from_utf8_lossy(&output.stdout)))
                .flatten()
        })
        .clone()
}

/// `nvidia-smi --query-gpu=compute_cap --format=csv,noheader` output (one
/// capability a line) as an arch list.
fn arch_list(csv: &str) -> Option<String> {
    let mut caps: Vec<&str> = csv
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    caps.sort_unstable();
    caps.dedup();
    (!caps.is_empty()).then(|| caps.join(" "))
}

#[cfg(test)]
mod tests {
    use super::arch_list;

    #[test]
    fn capabilities_are_sorted_and_deduplicated() {
        assert_eq!(arch_list("9.0\n8.6\n9.0\n").as_deref(), Some("8.6 9.0"));
        assert_eq!(arch_list(" 8.0 \n\n").as_deref(), Some("8.0"));
        assert_eq!(arch_list(""), None);
    }
}
