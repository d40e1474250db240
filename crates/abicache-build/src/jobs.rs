//! How many compilers a build runs at once: what the environment asks for
//! (`MAX_JOBS`, `ABICACHE_JOBS` with a launcher, or the caller's `--jobs`),
//! capped at a multiple of this machine's cores.
//!
//! The cap ([`job_limit`]) is [`JOBS_PER_CORE`] jobs per core without a
//! launcher: a compile is CPU-bound (a `torch/extension.h` unit: ~19 s of one
//! core and ~470 MB here), so a second job per core only covers its disk
//! waits, and more only add memory. With a compiler launcher for every unit
//! it is [`JOBS_PER_CORE_WITH_LAUNCHER`]: distcc compiles elsewhere and
//! ccache or sccache answer from their (possibly remote) cache, and what
//! stays here is preprocessing (~0.7–1.2 s and ~37 MB for the same unit, a
//! sixteenth of its compile or less), so 16 per core keep the local cores
//! busy feeding the farm without queueing on them. A request over the cap
//! runs at the cap, with one warning line naming the setting, the
//! value, the cap and the cores. This module is the one place the job count
//! is decided; a memory bound would be one more term of [`job_limit`].

use crate::error::BuildError;

/// Parallel compile jobs per local core, at most, without a launcher.
pub const JOBS_PER_CORE: usize = 2;

/// Parallel compile jobs per local core, at most, when every unit goes
/// through a compiler launcher (distcc, sccache, ccache).
pub const JOBS_PER_CORE_WITH_LAUNCHER: usize = 16;

/// A number of parallel compile jobs asked for, and the setting that asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobRequest {
    /// The number asked for (at least 1).
    pub jobs: usize,
    /// Where it came from: `ABICACHE_JOBS`, `MAX_JOBS` or `jobs` (`--jobs`).
    pub setting: &'static str,
}

/// The most parallel compile jobs a build runs on this machine, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimit {
    /// The cap: `cores` times the per-core factor.
    pub jobs: usize,
    /// The cores this process may run on (its CPU affinity and cgroup quota).
    pub cores: usize,
    /// The per-core factor: [`JOBS_PER_CORE`] or [`JOBS_PER_CORE_WITH_LAUNCHER`].
    pub per_core: usize,
}

/// The cores this process may use (`std::thread::available_parallelism`, which
/// honours CPU affinity and cgroup quotas), at least 1.
pub fn local_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The job cap on `cores` cores; `launcher`: every unit goes through a
/// compiler launcher (see the module docs for the factors and why).
pub fn job_limit(cores: usize, launcher: bool) -> JobLimit {
    let cores = cores.max(1);
    let per_core = if launcher {
        JOBS_PER_CORE_WITH_LAUNCHER
    } else {
        JOBS_PER_CORE
    };
    JobLimit {
        jobs: cores * per_core,
        cores,
        per_core,
    }
}

/// The jobs to run for `request` (none: one per core) under `limit`, and the
/// warning line when the request was over the cap.
pub fn capped_jobs(request: Option<JobRequest>, limit: JobLimit) -> (usize, Option<String>) {
    let Some(request) = request else {
        return (limit.cores.min(limit.jobs), None);
    };
    if request.jobs <= limit.jobs {
        return (request.jobs.max(1), None);
    }
    let launcher = if limit.per_core == JOBS_PER_CORE_WITH_LAUNCHER {
        " with a compiler launcher"
    } else {
        ""
    };
    let cores = match limit.cores {
        1 => "1 core".to_string(),
        n => format!("{n} cores"),
    };
    let warning = format!(
        "`{}={}` asks for more parallel compile jobs than this machine can run: capped at {} \
         ({} per core{launcher}, {cores}); set it to {} or less",
        request.setting, request.jobs, limit.jobs, limit.per_core, limit.jobs
    );
    (limit.jobs, Some(warning))
}

/// The parallel compile jobs the environment asks for: with a compiler
/// launcher (`launcher`: the units may run on other machines, e.g. a distcc
/// farm) `ABICACHE_JOBS`, else `MAX_JOBS`; without one `MAX_JOBS`. `None`:
/// neither is set (one job per local core). The request is capped later, by
/// [`capped_jobs`]. A value that is not a positive whole number is an error
/// naming it.
pub fn jobs_from_env(launcher: bool) -> Result<Option<JobRequest>, BuildError> {
    jobs_from(launcher, &abicache_env_vars::var)
}

/// [`jobs_from_env`] with variables read through `var` (for tests).
pub fn jobs_from(
    launcher: bool,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<JobRequest>, BuildError> {
    use abicache_env_vars::{ABICACHE_JOBS, MAX_JOBS};
    let names: &[&'static str] = if launcher {
        &[ABICACHE_JOBS, MAX_JOBS]
    } else {
        &[MAX_JOBS]
    };
    for &setting in names {
        if let Some(value) = var(setting).filter(|v| !v.trim().is_empty()) {
            let jobs = parse_jobs(setting, &value)?;
            return Ok(Some(JobRequest { jobs, setting }));
        }
    }
    Ok(None)
}

fn parse_jobs(name: &str, value: &str) -> Result<usize, BuildError> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ if name == abicache_env_vars::MAX_JOBS => Err(BuildError::MaxJobs {
            value: value.to_string(),
        }),
        _ => Err(BuildError::Jobs {
            value: value.to_string(),
        }),
    }
}

/// Parses a `MAX_JOBS` value: a whole number of at least 1 (surrounding spaces allowed).
pub fn parse_max_jobs(value: &str) -> Result<usize, BuildError> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(BuildError::MaxJobs {
            value: value.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abicache_jobs_wins_with_a_launcher_and_a_bad_value_names_it() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let jobs = |launcher, var: &dyn Fn(&str) -> Option<String>| {
            jobs_from(launcher, var)
                .unwrap()
                .map(|r| (r.jobs, r.setting))
        };
        let both = vars(&[("ABICACHE_JOBS", "64"), ("MAX_JOBS", "3")]);
        assert_eq!(jobs(true, &both), Some((64, "ABICACHE_JOBS")));
        assert_eq!(jobs(false, &both), Some((3, "MAX_JOBS")));
        let max_only = vars(&[("MAX_JOBS", "300")]);
        assert_eq!(jobs(true, &max_only), Some((300, "MAX_JOBS")));
        assert_eq!(jobs(true, &vars(&[])), None);
        let bad = vars(&[("ABICACHE_JOBS", "0")]);
        let error = jobs_from(true, &bad).unwrap_err().to_string();
        assert!(error.contains("`ABICACHE_JOBS=0`"), "{error}");
        assert_eq!(jobs(false, &bad), None);
    }

    #[test]
    fn a_request_over_the_cap_runs_at_the_cap_with_a_line_naming_all_four_numbers() {
        let request = |jobs| {
            Some(JobRequest {
                jobs,
                setting: "MAX_JOBS",
            })
        };
        let two_cores = job_limit(2, false);
        assert_eq!(capped_jobs(None, two_cores), (2, None));
        assert_eq!(capped_jobs(request(4), two_cores), (4, None));
        let (jobs, warning) = capped_jobs(request(16), two_cores);
        assert_eq!(jobs, 4);
        assert_eq!(
            warning.as_deref(),
            Some(
                "`MAX_JOBS=16` asks for more parallel compile jobs than this machine can run: \
                 capped at 4 (2 per core, 2 cores); set it to 4 or less"
            )
        );
        let farm = job_limit(2, true);
        assert_eq!(capped_jobs(request(32), farm), (32, None));
        let (jobs, warning) = capped_jobs(request(64), farm);
        assert_eq!(jobs, 32);
        let warning = warning.unwrap();
        assert!(
            warning.contains("capped at 32 (16 per core with a compiler launcher, 2 cores)"),
            "{warning}"
        );
    }
}
