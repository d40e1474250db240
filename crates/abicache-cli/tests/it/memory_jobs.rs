//! The job count bounded by memory, in a real memory cgroup (root only):
//! a build in a cgroup whose limit leaves room for one unmeasured C++
//! compile runs one job and says memory set it; once its units were
//! measured the same build runs two; a compile the out-of-memory killer
//! kills is retried alone, then reported as such. `abicache stats` shows
//! the largest recorded peak.
//!
//! Where no cgroup can be made (not root, no memory controller) the test
//! says so and returns: the rule itself is unit-tested in
//! `abicache_build::memory` and `compile_threads`.

use std::path::{Path, PathBuf};

use crate::common::*;

/// Two units that do not include torch, each peaking at ~220 MB in
/// `cc1plus` (g++ 12, `-O2`: `<regex>` and `<map>` instantiations).
const UNIT: &str = r#"#include <regex>
#include <map>
int NAME(const char* s) {
    std::regex r("a+b");
    std::map<int, int> m;
    m[1] = 2;
    return std::regex_match(s, r) + m[1];
}
"#;

/// A memory cgroup made for one test, removed when dropped.
struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// A child of this process's memory cgroup limited to `limit` bytes, or
    /// why none could be made (only root may make one).
    fn new(limit: u64) -> Result<Cgroup, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let name = format!("abicache-test-{}", std::process::id());
        for line in own.lines() {
            let mut f = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let (mount, v2) = if controllers.split(',').any(|c| c == "memory") {
                (PathBuf::from("/sys/fs/cgroup/memory"), false)
            } else if id == "0" && Path::new("/sys/fs/cgroup/cgroup.controllers").is_file() {
                (PathBuf::from("/sys/fs/cgroup"), true)
            } else {
                continue;
            };
            let dir = mount.join(path.trim_start_matches('/')).join(&name);
            std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
            let cgroup = Cgroup { dir };
            let file = if v2 {
                "memory.max"
            } else {
                "memory.limit_in_bytes"
            };
            std::fs::write(cgroup.dir.join(file), limit.to_string())
                .map_err(|e| format!("{file}: {e}"))?;
            return Ok(cgroup);
        }
        Err("no memory cgroup in /proc/self/cgroup".into())
    }

    /// `abicache ARGS` (as [`Cache::cmd`] runs it) started inside this cgroup.
    fn abicache(&self, cache: &Cache, args: &[&std::ffi::OsStr]) -> std::process::Output {
        let inner = cache.cmd(args);
        let procs = self.dir.join("cgroup.procs");
        let mut command = std::process::Command::new("sh");
        command
            .arg("-c")
            .arg(format!(
                "echo $$ > '{}' && exec \"$0\" \"$@\"",
                procs.display()
            ))
            .arg(inner.get_program())
            .args(inner.get_args());
        for (name, value) in inner.get_envs() {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        if let Some(dir) = inner.get_current_dir() {
            command.current_dir(dir);
        }
        command.output().expect("run abicache in the cgroup")
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn project(dir: &Path, flags: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    for name in ["a", "b"] {
        std::fs::write(dir.join(format!("{name}.cpp")), UNIT.replace("NAME", name)).unwrap();
    }
    let spec = dir.join("abicache.toml");
    std::fs::write(
        &spec,
        format!(
            "[[extension]]\nname = \"memory_jobs\"\nsources = [\"a.cpp\", \"b.cpp\"]\n\
             extra_cflags = [{flags}]\n"
        ),
    )
    .unwrap();
    spec
}

fn build_args<'a>(spec: &'a Path, python: &'a Path) -> Vec<&'a std::ffi::OsStr> {
    vec![
        "build".as_ref(),
        spec.as_os_str(),
        "--python".as_ref(),
        python.as_os_str(),
    ]
}

#[test]
fn memory_sets_the_job_count_in_a_cgroup_and_a_killed_compile_is_retried_alone() {
    // 2 GiB: room for one unmeasured C++ unit (1.5 GiB assumed), not two.
    let cgroup = match Cgroup::new(2 << 30) {
        Ok(cgroup) => cgroup,
        Err(why) => {
            eprintln!("SKIPPED: no memory cgroup could be made here ({why})");
            return;
        }
    };
    let cache = Cache::new();
    let python = python();
    let work = tempfile::tempdir().unwrap();
    let spec = project(&work.path().join("p"), "\"-O2\"");

    let cold = cgroup.abicache(&cache, &build_args(&spec, &python));
    assert_success(&cold);
    let err = stderr(&cold);
    eprintln!("cold build in a 2 GiB cgroup:\n{err}");
    assert!(
        err.contains("1 job (memory: ")
            && err.contains("by cgroup")
            && err.contains("~1.5 GiB per c++ unit, not measured yet"),
        "the progress line says memory set the count:\n{err}"
    );
    let stats = cache.stats();
    let peak = stats["largest_peak_rss"].as_u64().expect("a recorded peak");
    assert!(
        (50 << 20..1 << 30).contains(&peak),
        "cc1plus of these units peaks at ~220 MB, recorded {peak}"
    );
    let human = stdout(&cache.run(["stats"]));
    assert!(human.contains("largest compile RSS"), "{human}");

    // Both units edited: same units and flags, so the measured peaks apply
    // and two compiles fit.
    for name in ["a", "b"] {
        let path = work.path().join("p").join(format!("{name}.cpp"));
        let text =
            std::fs::read_to_string(&path).unwrap() + "int edited_" + name + "() { return 1; }\n";
        std::fs::write(path, text).unwrap();
    }
    let measured = cgroup.abicache(&cache, &build_args(&spec, &python));
    assert_success(&measured);
    let err = stderr(&measured);
    assert!(
        !err.contains("jobs (memory:") && !err.contains("job (memory:"),
        "measured units fit twice in 2 GiB: the cores set the count:\n{err}"
    );
    drop(cgroup);

    // 150 MB: each compile is killed by the cgroup's out-of-memory killer,
    // also when retried alone.
    let cgroup = Cgroup::new(150 << 20).expect("a second cgroup");
    let spec = project(&work.path().join("q"), "\"-O2\", \"-DOTHER\"");
    let mut args = build_args(&spec, &python);
    args.push("--jobs".as_ref());
    args.push("2".as_ref());
    let killed = cgroup.abicache(&cache, &args);
    assert_exit(&killed, 1);
    let err = stderr(&killed);
    eprintln!("build in a 150 MB cgroup:\n{err}");
    assert!(
        err.contains("was killed")
            && err.contains("most likely by the out-of-memory killer")
            && err.contains("after it was killed with 2 running and retried alone")
            && err.contains("raise the memory limit"),
        "the error says what happened and what to do:\n{err}"
    );
}
