//! The memory term of the job count: how much memory a build may use, how
//! much one compile of each unit needs, and how many compiles fit.
//!
//! - **Usable memory** ([`usable_memory`]) is the smaller of the kernel's
//!   `MemAvailable` (`/proc/meminfo`) and the headroom of this process's
//!   memory cgroup and each of its ancestors: `memory.max` minus
//!   `memory.current` (cgroup v2) or `memory.limit_in_bytes` minus
//!   `memory.usage_in_bytes` (v1). The cgroup's usage counts its page cache,
//!   which the kernel reclaims before it kills anything, so its
//!   `inactive_file` pages (`memory.stat`) are counted as free, as
//!   container runtimes do.
//! - **Peak per job** is the peak resident memory the same unit with the
//!   same flags had when it was last compiled (from `wait4`'s rusage,
//!   recorded in the store's [`abicache_store::PeakRecords`]); until a unit
//!   was measured, [`DEFAULT_PEAK_NVCC`] or [`DEFAULT_PEAK_CXX`].
//! - **Jobs** are `usable / peak` (the largest peak among the units to
//!   compile), at least 1; the build (`compile.rs`) takes the smaller of that and the
//!   cores when nobody asked for a job count.

use std::path::{Path, PathBuf};

/// The peak assumed for an `nvcc` unit never measured: 4 GiB. CUDA device
/// compiles of CUTLASS-style kernels take 3–8 GB per job (the reports on
/// DGX Spark and GH200 that made builds lock up); a plain kernel takes far
/// less, and is measured after its first compile.
pub const DEFAULT_PEAK_NVCC: u64 = 4 << 30;

/// The peak assumed for a C++ unit never measured: 1.5 GiB. A unit
/// including `torch/extension.h` peaks at ~470 MB here (g++ 12, `-O3`);
/// template-heavy host code (CUTLASS host side, pybind11 with many
/// bindings) reaches 1–1.5 GB, and guessing high only costs parallelism
/// until the first measurement.
pub const DEFAULT_PEAK_CXX: u64 = 3 << 29;

/// Memory a build may use now, and where the bound came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsableMemory {
    /// Bytes.
    pub bytes: u64,
    /// What set it.
    pub source: MemorySource,
}

/// Where [`UsableMemory`] came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemorySource {
    /// The kernel's `MemAvailable`.
    MemAvailable,
    /// The headroom of this memory cgroup directory.
    Cgroup(PathBuf),
}

impl std::fmt::Display for MemorySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemorySource::MemAvailable => f.write_str("MemAvailable"),
            MemorySource::Cgroup(dir) => write!(f, "cgroup {}", dir.display()),
        }
    }
}

/// The memory this process may use now: the smaller of `MemAvailable` and
/// its memory cgroups' headroom (see the module docs). `None` when neither
/// can be read (not Linux, no `/proc`).
pub fn usable_memory() -> Option<UsableMemory> {
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| meminfo_available(&text))
        .map(|bytes| UsableMemory {
            bytes,
            source: MemorySource::MemAvailable,
        });
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|text| cgroup_headroom(&text, Path::new("/sys/fs/cgroup")));
    [available, cgroup]
        .into_iter()
        .flatten()
        .min_by_key(|m| m.bytes)
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub fn meminfo_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The smallest headroom of the memory cgroups named in `proc_self_cgroup`
/// (the text of `/proc/self/cgroup`) and their ancestors, below the cgroup
/// mount `root` (`/sys/fs/cgroup`): v2 (`0::/path`, mounted at `root` or
/// `root/unified`) and v1 (a line whose controllers include `memory`,
/// mounted at `root/memory`). A cgroup without a limit has no headroom term.
pub fn cgroup_headroom(proc_self_cgroup: &str, root: &Path) -> Option<UsableMemory> {
    let mut best: Option<UsableMemory> = None;
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (mount, files) = if id == "0" && controllers.is_empty() {
            let v2 = [root.to_path_buf(), root.join("unified")]
                .into_iter()
                .find(|m| m.join("cgroup.controllers").is_file());
            let Some(mount) = v2 else { continue };
            (mount, V2_FILES)
        } else if controllers.split(',').any(|c| c == "memory") {
            (root.join("memory"), V1_FILES)
        } else {
            continue;
        };
        let mut dir = mount.join(path.trim_start_matches('/'));
        loop {
            if let Some(bytes) = headroom(&dir, files) {
                if best.as_ref().is_none_or(|b| bytes < b.bytes) {
                    best = Some(UsableMemory {
                        bytes,
                        source: MemorySource::Cgroup(dir.clone()),
                    });
                }
            }
            if dir == mount || !dir.pop() || !dir.starts_with(&mount) {
                break;
            }
        }
    }
    best
}

/// The files of one cgroup version: limit, usage, and the `memory.stat`
/// field of reclaimable page cache.
struct CgroupFiles {
    limit: &'static str,
    usage: &'static str,
    inactive_file: &'static str,
}

const V2_FILES: &CgroupFiles = &CgroupFiles {
    limit: "memory.max",
    usage: "memory.current",
    inactive_file: "inactive_file",
};

const V1_FILES: &CgroupFiles = &CgroupFiles {
    limit: "memory.limit_in_bytes",
    usage: "memory.usage_in_bytes",
    inactive_file: "total_inactive_file",
};

/// A limit this large means "no limit" (v1 writes `PAGE_COUNTER_MAX` pages).
const NO_LIMIT: u64 = 1 << 60;

/// `limit - (usage - inactive_file)` of the cgroup `dir`; `None` without a limit.
fn headroom(dir: &Path, files: &CgroupFiles) -> Option<u64> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let limit: u64 = read(files.limit)?.trim().parse().ok()?; // "max" does not parse
    if limit >= NO_LIMIT {
        return None;
    }
    let usage: u64 = read(files.usage)?.trim().parse().ok()?;
    let reclaimable = read("memory.stat")
        .and_then(|stat| {
            stat.lines().find_map(|l| {
                let (name, value) = l.split_once(' ')?;
                (name == files.inactive_file).then(|| value.trim().parse::<u64>().ok())?
            })
        })
        .unwrap_or(0);
    Some(limit.saturating_sub(usage.saturating_sub(reclaimable)))
}

/// How many compiles needing `per_job` bytes each fit in `usable` bytes, at least 1.
pub fn jobs_that_fit(usable: u64, per_job: u64) -> usize {
    usize::try_from(usable / per_job.max(1))
        .unwrap_or(usize::MAX)
        .max(1)
}

/// `bytes` as GiB with one decimal (`7.1 GiB`).
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       24684216 kB\nMemFree: 1 kB\nMemAvailable:   23449764 kB\n";
        assert_eq!(meminfo_available(text), Some(23_449_764 * 1024));
        assert_eq!(meminfo_available("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn jobs_that_fit_are_at_least_one() {
        assert_eq!(jobs_that_fit(7 << 30, 3 << 30), 2);
        assert_eq!(jobs_that_fit(1 << 20, 4 << 30), 1);
        assert_eq!(jobs_that_fit(u64::MAX, 0), usize::MAX);
    }

    #[test]
    fn the_tightest_cgroup_of_the_hierarchy_bounds_and_page_cache_counts_as_free() {
        let root = tempfile::tempdir().unwrap();
        let v1 = root.path().join("memory");
        let parent = v1.join("jobs");
        let leaf = parent.join("build");
        std::fs::create_dir_all(&leaf).unwrap();
        let write = |dir: &Path, limit: &str, usage: &str, inactive: &str| {
            std::fs::write(dir.join("memory.limit_in_bytes"), limit).unwrap();
            std::fs::write(dir.join("memory.usage_in_bytes"), usage).unwrap();
            std::fs::write(
                dir.join("memory.stat"),
                format!("cache 5\ntotal_inactive_file {inactive}\n"),
            )
            .unwrap();
        };
        write(&v1, "9223372036854771712", "100", "0");
        write(
            &parent,
            &(8u64 << 30).to_string(),
            &(5u64 << 30).to_string(),
            "0",
        );
        write(
            &leaf,
            &(6u64 << 30).to_string(),
            &(3u64 << 30).to_string(),
            &(1u64 << 30).to_string(),
        );
        let text = "5:cpu:/\n4:memory:/jobs/build\n0::/\n";
        let found = cgroup_headroom(text, root.path()).unwrap();
        // Leaf: 6 - (3 - 1) = 4 GiB; parent: 8 - 5 = 3 GiB; root: no limit.
        assert_eq!(found.bytes, 3 << 30);
        assert_eq!(found.source, MemorySource::Cgroup(parent.clone()));
        std::fs::write(leaf.join("memory.limit_in_bytes"), (4u64 << 30).to_string()).unwrap();
        let found = cgroup_headroom(text, root.path()).unwrap();
        assert_eq!(
            (found.bytes, found.source),
            (2 << 30, MemorySource::Cgroup(leaf))
        );
    }

    #[test]
    fn cgroup_v2_max_is_no_limit() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("user.slice");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "memory\n").unwrap();
        std::fs::write(dir.join("memory.max"), "max\n").unwrap();
        std::fs::write(dir.join("memory.current"), "100\n").unwrap();
        assert_eq!(cgroup_headroom("0::/user.slice\n", root.path()), None);
        std::fs::write(dir.join("memory.max"), "1000\n").unwrap();
        let found = cgroup_headroom("0::/user.slice\n", root.path()).unwrap();
        assert_eq!(found.bytes, 900);
    }
}
