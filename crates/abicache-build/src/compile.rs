//! Parallel compile through a per-unit object cache, then one link.
//!
//! Each unit's object is stored as `<objects_dir>/<key>.o`, where the key is the BLAKE3 of
//! the compiler identity, the compile argv (without the output path, the launcher and nvcc
//! scheduling flags), the unit's scanned files and hashes, and the plan's ABI fields. An
//! existing object is reused only once the object cache ([`abicache_store::ObjectCache`])
//! has verified it against the size and BLAKE3 recorded when it was published (a stat
//! stamp spares the re-hash); a corrupt one is discarded, with a warning, and compiled
//! again. A new object is compiled to a temporary name in `objects_dir`, fsynced, recorded
//! and renamed into place, so a reader never sees a partial object. When the link fails
//! because an object vanished or changed meanwhile (a concurrent gc), the objects are
//! checked again, the bad ones compiled again, and the link retried once.
//!
//! A unit listed in a [`ReadyPch`] of [`BuildOptions::pch`] is compiled against that
//! precompiled header (see [`crate::pch`]); when GCC rejects it, the unit is compiled
//! again without it and the PCH is reported in [`BuildReport::pch_rejected`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use serde::Serialize;

use abicache_store::{ObjectCache, ObjectCheck, PeakRecords};

use crate::cuda_phases::{DeviceStepSource, StepOrigin};
use crate::error::{BuildError, KilledCompile};
use crate::flags::{compile_command, link_argv, unit_kind, BuildPlan, CompileCommand, UnitKind};
use crate::launch_dir::LaunchDir;
use crate::pch::{PCH_HEADER, PCH_REJECTED_MARKER};
use crate::progress::Progress;
use crate::quote::shell_join;
use crate::run::Cancel;
use crate::toolchain::Toolchain;

/// Bump when the object key's inputs change, so old objects are never misread.
pub const OBJECT_KEY_FORMAT: u32 = 2;

/// How to run a build.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BuildOptions {
    /// Parallel compile jobs asked for; `None` means one per CPU core. A
    /// request over [`crate::job_limit`] runs at the cap, with a line in
    /// [`BuildReport::jobs_capped`].
    pub jobs: Option<usize>,
    /// The setting that asked for `jobs` (`MAX_JOBS`, `ABICACHE_JOBS`,
    /// `jobs`, the `--jobs` option or Python argument), named in that line;
    /// `None` names it `jobs`.
    pub jobs_setting: Option<&'static str>,
    /// Seconds the previous build of this extension took, shown as an estimate.
    pub previous_seconds: Option<f64>,
    /// Verified precompiled headers to compile the listed units against.
    pub pch: Vec<ReadyPch>,
    /// Set it to stop the build: running compilers are stopped, the build
    /// returns [`BuildError::Cancelled`].
    pub cancel: Cancel,
    /// The memory to plan the job count for; `None` reads it now
    /// ([`crate::memory::usable_memory`]). Only used when `jobs` is `None`.
    pub usable_memory: Option<crate::memory::UsableMemory>,
}

/// A published precompiled header and the units that may use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyPch {
    /// The PCH's key ([`crate::PchRequest::key`]).
    pub key: String,
    /// The directory holding [`PCH_HEADER`] and its `.gch`.
    pub dir: PathBuf,
    /// Display paths of the units to compile against it.
    pub units: Vec<String>,
}

impl BuildOptions {
    /// Options with `jobs` read from `MAX_JOBS` (an error when it is set but not a
    /// positive whole number).
    pub fn from_env() -> Result<BuildOptions, BuildError> {
        let request = crate::jobs::jobs_from_env(false)?;
        Ok(BuildOptions {
            jobs: request.map(|r| r.jobs),
            jobs_setting: request.map(|r| r.setting),
            ..BuildOptions::default()
        })
    }
}

/// What a successful build did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BuildReport {
    /// The linked library, `<out_dir>/<name>.so`.
    pub library: PathBuf,
    /// Units in the plan.
    pub units_total: usize,
    /// Display paths of the units that were compiled (not reused), in plan order.
    pub units_compiled: Vec<String>,
    /// Units whose object was reused from the object cache.
    pub units_cached: usize,
    /// Display paths of the compiled units that were compiled against a PCH.
    pub pch_units: Vec<String>,
    /// Keys of PCHs the compiler rejected (their units were compiled without them).
    pub pch_rejected: Vec<String>,
    /// Wall-clock seconds of the whole build (compile and link).
    pub seconds: f64,
    /// The toolchain, as [`Toolchain::describe`] gives it.
    pub toolchain: BTreeMap<String, String>,
    /// Things the user should know that did not stop the build (corrupt
    /// cached objects that were discarded and compiled again).
    pub warnings: Vec<String>,
    /// The line saying the jobs asked for were over [`crate::job_limit`] and
    /// how many ran instead; `None` when they were not.
    pub jobs_capped: Option<String>,
    /// The device steps of the CUDA units compiled in this build, per
    /// architecture (`sm_90`): how many were reused from the object cache
    /// and how many compiled (see `docs/building.md`, "CUDA device code per architecture").
    pub device_steps: BTreeMap<String, DeviceSteps>,
    /// One line per compiled CUDA unit that compiled in one step, saying
    /// why: `kernel.cu: compiled in one step (relocatable device code, -rdc=true)`.
    pub one_shot: Vec<String>,
}

/// Device steps of one architecture in one build.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeviceSteps {
    /// Steps whose PTX and cubin came from the object cache.
    pub reused: usize,
    /// Of `reused`, the steps the object cache lacked and the build's
    /// [`DeviceStepSource`] (the remote's objects) supplied.
    pub from_remote: usize,
    /// Steps `cicc` and `ptxas` ran for.
    pub compiled: usize,
}

/// What compiling one unit did besides publishing its object.
#[derive(Debug, Default)]
struct UnitDone {
    /// `(architecture, where it came from)` per device step of a split CUDA compile.
    device_steps: Vec<(String, StepOrigin)>,
    /// Why a CUDA unit compiled in one step.
    one_shot: Option<String>,
}

/// One entry of `compile_commands.json`.
#[derive(Debug, Serialize)]
struct CompileCommandEntry {
    directory: String,
    arguments: Vec<String>,
    file: String,
    output: String,
}

/// A unit ready to run: its command (writing the final object path) and its key.
struct Job<'a> {
    index: usize,
    display: String,
    command: CompileCommand,
    /// The object's file name in the object cache, `<key>.o`.
    name: String,
    object: PathBuf,
    pch: Option<&'a ReadyPch>,
    /// Where it runs when its launcher sends it to another machine.
    launch: Option<&'a LaunchDir>,
    /// Its record in the peak-memory records ([`abicache_store::peak_key`]).
    peak_key: String,
    /// Which compiler runs it (sets the peak assumed before it is measured).
    kind: UnitKind,
    /// nvcc's release, for the keys of a CUDA unit's device steps.
    nvcc_release: String,
    /// Asked for the device steps the object cache lacks.
    device_step_source: Option<&'a dyn DeviceStepSource>,
}

/// How a compiled unit used its PCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PchUse {
    None,
    Used,
    Rejected,
}

enum Event {
    Done {
        index: usize,
        seconds: f64,
        pch: PchUse,
        unit: UnitDone,
    },
    Failed(BuildError),
}

/// Builds `plan` into `<out_dir>/<name>.so`, reusing and filling the object cache in
/// `objects_dir`, and writes `<out_dir>/compile_commands.json`.
///
/// Units are compiled on `opts.jobs` threads; on the first failure no new unit starts,
/// running ones are waited for, and the first error is returned. `progress` is called on
/// the calling thread only.
pub fn build(
    plan: &BuildPlan,
    toolchain: &Toolchain,
    objects_dir: &Path,
    out_dir: &Path,
    opts: &BuildOptions,
    progress: &dyn Fn(Progress),
) -> Result<BuildReport, BuildError> {
    build_with_device_steps(plan, toolchain, objects_dir, out_dir, opts, None, progress)
}

/// [`build`], asking `device_steps` (the remote's objects) for each CUDA
/// device step the object cache lacks before compiling it, and telling it
/// the steps compiled (see [`DeviceStepSource`]).
pub fn build_with_device_steps(
    plan: &BuildPlan,
    toolchain: &Toolchain,
    objects_dir: &Path,
    out_dir: &Path,
    opts: &BuildOptions,
    device_steps: Option<&dyn DeviceStepSource>,
    progress: &dyn Fn(Progress),
) -> Result<BuildReport, BuildError> {
    let started = Instant::now();
    if plan.sources.is_empty() {
        return Err(BuildError::NoSources {
            name: plan.name.clone(),
        });
    }
    fs_err::create_dir_all(objects_dir)?;
    fs_err::create_dir_all(out_dir)?;
    let objects_dir = std::path::absolute(objects_dir)?;
    let out_dir = std::path::absolute(out_dir)?;
    // Compiles a launcher sends elsewhere run in a private directory, with
    // relative paths (see `launch_dir.rs`); removed when the build ends.
    let launch = match toolchain.launcher.as_deref() {
        Some(launcher) if crate::toolchain::launcher_distributes(launcher) => Some(
            LaunchDir::new(&plan.compile_dir(&objects_dir), &objects_dir).map_err(|error| {
                BuildError::LaunchDir {
                    launcher: launcher.display().to_string(),
                    error,
                }
            })?,
        ),
        _ => None,
    };
    let mut jobs = plan_jobs(plan, toolchain, &objects_dir, opts, launch.as_ref())?;
    for job in &mut jobs {
        job.device_step_source = device_steps;
    }
    write_compile_commands(&out_dir, &jobs)?;

    // Records are staged in the objects directory itself (same filesystem;
    // dot-names, which gc treats as temporary files).
    let cache = ObjectCache::new(&objects_dir, &objects_dir);
    let mut warnings = Vec::new();
    // Checking an object also marks it used, so gc spares it while we link.
    let (cached, to_compile) = check_objects(&cache, jobs.iter(), &mut warnings);
    let peaks = PeakRecords::new(&objects_dir);
    let threads = compile_threads(&to_compile, opts, &peaks);
    progress(Progress::Started {
        name: plan.name.clone(),
        total: jobs.len(),
        cached: cached.len(),
        estimate: opts.previous_seconds,
        memory_bound: threads.2.clone(),
    });
    let compile = |to_compile: &[&Job<'_>], cached: usize, threads: usize| {
        compile_all(&cache, &jobs, to_compile, cached, threads, opts, progress)
    };
    let mut compiled = match compile(&to_compile, cached.len(), threads.0) {
        Err(error) if threads.0 > 1 && killed_by_memory(&error) => {
            // Retried once with one job: the units published meanwhile are
            // cached now, the rest compile alone.
            warnings.push(format!(
                "{}; compiling the rest one at a time",
                memory_kill_summary(&error, threads.0)
            ));
            let (cached, left) = check_objects(&cache, jobs.iter(), &mut warnings);
            compile(&left, cached.len(), 1)
                .map_err(|error| out_of_memory(error, 1, Some(threads.0)))?
        }
        result => result.map_err(|error| out_of_memory(error, threads.0, None))?,
    };

    progress(Progress::Linking);
    let library = out_dir.join(format!("{}.so", plan.name));
    let relinked = Linker {
        plan,
        toolchain,
        jobs: &jobs,
        cache: &cache,
        cancel: &opts.cancel,
    }
    .link_repairing(&library, &mut warnings)?;
    for index in relinked {
        compiled.units[index] = true;
    }
    let seconds = started.elapsed().as_secs_f64();
    progress(Progress::Finished { seconds });
    let displays = |flags: &[bool]| -> Vec<String> {
        jobs.iter()
            .filter(|j| flags[j.index])
            .map(|j| j.display.clone())
            .collect()
    };
    Ok(BuildReport {
        library,
        units_total: jobs.len(),
        units_compiled: displays(&compiled.units),
        units_cached: cached.len(),
        pch_units: displays(&compiled.pch_used),
        pch_rejected: compiled.pch_rejected,
        seconds,
        toolchain: toolchain.describe(),
        warnings,
        jobs_capped: threads.1,
        device_steps: compiled.device_steps,
        one_shot: compiled.one_shot,
    })
}

/// How many of `to_compile` run at once, the line saying a request was
/// capped, and the line saying memory set the count: `opts.jobs` under
/// [`crate::job_limit`] (the launcher's cap when every unit to compile goes
/// through a launcher); when nobody asked, one per core or as many as fit
/// in memory ([`crate::memory`]), whichever is fewer; at most one per unit.
fn compile_threads(
    to_compile: &[&Job<'_>],
    opts: &BuildOptions,
    peaks: &PeakRecords,
) -> (usize, Option<String>, Option<String>) {
    let launcher =
        !to_compile.is_empty() && to_compile.iter().all(|j| j.command.launcher.is_some());
    let limit = crate::jobs::job_limit(crate::jobs::local_cores(), launcher);
    let request = opts.jobs.map(|jobs| crate::jobs::JobRequest {
        jobs,
        setting: opts.jobs_setting.unwrap_or("jobs"),
    });
    let units = to_compile.len().max(1);
    let (jobs, capped) = crate::jobs::capped_jobs(request, limit);
    let jobs = jobs.clamp(1, units);
    if request.is_some() || jobs == 1 {
        return (jobs, capped, None);
    }
    let usable = opts
        .usable_memory
        .clone()
        .or_else(crate::memory::usable_memory);
    let Some(usable) = usable else {
        return (jobs, capped, None);
    };
    let Some((per_job, compiler, measured)) = to_compile
        .iter()
        .map(|job| match peaks.get(&job.peak_key) {
            Some(bytes) => (bytes, job.kind, true),
            None => (default_peak(job.kind), job.kind, false),
        })
        .max_by_key(|(bytes, ..)| *bytes)
    else {
        return (jobs, capped, None);
    };
    let fit = crate::memory::jobs_that_fit(usable.bytes, per_job);
    if fit >= jobs {
        return (jobs, capped, None);
    }
    let compiler = match compiler {
        UnitKind::Cuda => "nvcc",
        UnitKind::Host => "c++",
    };
    let line = format!(
        "{fit} job{} (memory: {} free by {}, ~{} per {compiler} unit{})",
        if fit == 1 { "" } else { "s" },
        crate::memory::gib(usable.bytes),
        usable.source,
        crate::memory::gib(per_job),
        if measured {
            ", measured"
        } else {
            ", not measured yet"
        },
    );
    (fit, capped, Some(line))
}

/// The peak memory assumed for a unit of `kind` that was never measured.
fn default_peak(kind: UnitKind) -> u64 {
    match kind {
        UnitKind::Cuda => crate::memory::DEFAULT_PEAK_NVCC,
        UnitKind::Host => crate::memory::DEFAULT_PEAK_CXX,
    }
}

/// One job per unit of `plan`, in order: its command writing its object
/// into the object cache `objects_dir` under its key, and its PCH if any.
fn plan_jobs<'a>(
    plan: &BuildPlan,
    toolchain: &Toolchain,
    objects_dir: &Path,
    opts: &'a BuildOptions,
    launch: Option<&'a LaunchDir>,
) -> Result<Vec<Job<'a>>, BuildError> {
    let mut jobs = Vec::with_capacity(plan.sources.len());
    for (index, unit) in plan.sources.iter().enumerate() {
        let mut command = compile_command(plan, toolchain, unit, Path::new(""))?;
        let key = object_key(plan, toolchain, unit, &command);
        let name = format!("{key}.o");
        let object = objects_dir.join(&name);
        command.output = object.clone();
        command.dir = plan.compile_dir(objects_dir);
        let display = unit.display();
        let pch = opts.pch.iter().find(|p| p.units.contains(&display));
        let launch = launch.filter(|_| command.launcher.is_some());
        let peak_key = abicache_store::peak_key(&command.key_argv());
        let kind = unit_kind(&unit.source);
        let nvcc_release = toolchain
            .nvcc
            .as_ref()
            .map(|n| n.tool.version.clone())
            .unwrap_or_default();
        jobs.push(Job {
            index,
            display,
            command,
            name,
            object,
            pch,
            launch,
            peak_key,
            kind,
            nvcc_release,
            device_step_source: None,
        });
    }
    Ok(jobs)
}

/// What the compile phase did, per unit index.
struct Compiled {
    /// Units compiled in this build.
    units: Vec<bool>,
    /// Units compiled against their PCH.
    pch_used: Vec<bool>,
    /// Keys of the PCHs the compiler rejected.
    pch_rejected: Vec<String>,
    /// Device steps per architecture.
    device_steps: BTreeMap<String, DeviceSteps>,
    /// Lines saying why CUDA units compiled in one step.
    one_shot: Vec<String>,
}

/// Compiles `to_compile` on `threads` threads ([`compile_threads`]);
/// on the first failure no new unit starts, running ones are waited for,
/// and the first error is returned. `progress` is called on this thread.
fn compile_all(
    cache: &ObjectCache,
    jobs: &[Job<'_>],
    to_compile: &[&Job<'_>],
    cached: usize,
    threads: usize,
    opts: &BuildOptions,
    progress: &dyn Fn(Progress),
) -> Result<Compiled, BuildError> {
    let total = jobs.len();
    let mut out = Compiled {
        units: vec![false; total],
        pch_used: vec![false; total],
        pch_rejected: Vec::new(),
        device_steps: BTreeMap::new(),
        one_shot: Vec::new(),
    };
    let mut first_error = None;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<Event>();
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || loop {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Some(job) = to_compile.get(next.fetch_add(1, Ordering::SeqCst)) else {
                    break;
                };
                let t = Instant::now();
                let event = match compile_with_pch(cache, job, &opts.cancel) {
                    Ok((pch, unit)) => Event::Done {
                        index: job.index,
                        seconds: t.elapsed().as_secs_f64(),
                        pch,
                        unit,
                    },
                    Err(e) => {
                        stop.store(true, Ordering::SeqCst);
                        Event::Failed(e)
                    }
                };
                if tx.send(event).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut done = cached;
        for event in rx {
            match event {
                Event::Done {
                    index,
                    seconds,
                    pch,
                    unit,
                } => {
                    done += 1;
                    for (arch, origin) in unit.device_steps {
                        let steps = out.device_steps.entry(arch).or_default();
                        match origin {
                            StepOrigin::Compiled => steps.compiled += 1,
                            StepOrigin::ObjectCache => steps.reused += 1,
                            StepOrigin::Remote => {
                                steps.reused += 1;
                                steps.from_remote += 1;
                            }
                        }
                    }
                    if let Some(reason) = unit.one_shot {
                        out.one_shot.push(format!(
                            "{}: compiled in one step ({reason})",
                            jobs[index].display
                        ));
                    }
                    out.units[index] = true;
                    out.pch_used[index] = pch == PchUse::Used;
                    if let (PchUse::Rejected, Some(ready)) = (pch, jobs[index].pch) {
                        if !out.pch_rejected.contains(&ready.key) {
                            out.pch_rejected.push(ready.key.clone());
                        }
                    }
                    if first_error.is_none() {
                        let source = jobs[index].display.clone();
                        progress(Progress::UnitDone {
                            done,
                            total,
                            source,
                            seconds,
                        });
                    }
                }
                Event::Failed(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
    });
    match first_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// True when `error` is a compile the kernel killed: the compiler got
/// `SIGKILL`, or its driver says a child did (`g++`: "Killed signal
/// terminated program cc1plus"; `nvcc`: "'cicc' died due to signal 9").
/// Nothing else sends a compiler `SIGKILL` during a build but the
/// out-of-memory killer (a cancelled build gets `SIGINT` first and ends as
/// [`BuildError::Cancelled`]).
fn killed_by_memory(error: &BuildError) -> bool {
    use std::os::unix::process::ExitStatusExt;
    let BuildError::Compile { output, status, .. } = error else {
        return false;
    };
    status.signal() == Some(libc::SIGKILL)
        || output.contains("Killed signal terminated program")
        || output.contains("died due to signal 9")
}

/// What happened, for the warning before the retry.
fn memory_kill_summary(error: &BuildError, jobs: usize) -> String {
    let unit = match error {
        BuildError::Compile { unit, .. } => unit.as_str(),
        _ => "a unit",
    };
    format!(
        "compiling `{unit}` was killed, most likely by the out-of-memory killer, while {jobs} \
         compiles ran at once"
    )
}

/// `error` as [`BuildError::OutOfMemory`] when the kernel killed the compile
/// ([`killed_by_memory`]) while `jobs` compiles ran (`retried_after`: the
/// compiles running the first time, when this was the retry); other errors
/// unchanged.
fn out_of_memory(error: BuildError, jobs: usize, retried_after: Option<usize>) -> BuildError {
    if !killed_by_memory(&error) {
        return error;
    }
    let BuildError::Compile {
        unit,
        dir,
        command,
        output,
        status,
    } = error
    else {
        return error;
    };
    let usable = crate::memory::usable_memory().map_or_else(
        || "unknown".to_string(),
        |m| format!("{} by {}", crate::memory::gib(m.bytes), m.source),
    );
    BuildError::OutOfMemory(Box::new(KilledCompile {
        unit,
        dir,
        command,
        output,
        status,
        jobs,
        retried_after,
        usable,
    }))
}

/// Links the objects of `jobs` into one library.
struct Linker<'a, 'p> {
    plan: &'a BuildPlan,
    toolchain: &'a Toolchain,
    jobs: &'a [Job<'p>],
    cache: &'a ObjectCache,
    cancel: &'a Cancel,
}

impl Linker<'_, '_> {
    /// Links `library`; when that fails because an object was removed or
    /// damaged since it was checked, compiles those units again and links
    /// once more. Returns the indices of the units compiled again.
    fn link_repairing(
        &self,
        library: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<usize>, BuildError> {
        let Err(error) = link(self.plan, self.toolchain, self.jobs, library, self.cancel) else {
            return Ok(Vec::new());
        };
        let (_, bad) = check_objects(self.cache, self.jobs.iter(), warnings);
        if bad.is_empty() {
            return Err(error);
        }
        for job in &bad {
            compile_one(self.cache, job, &job.command, self.cancel)?;
        }
        link(self.plan, self.toolchain, self.jobs, library, self.cancel)?;
        Ok(bad.iter().map(|job| job.index).collect())
    }
}

/// Splits `jobs` into those whose object the cache verified and those to
/// compile; warnings about discarded objects go to `warnings`.
fn check_objects<'a, 'p>(
    cache: &ObjectCache,
    jobs: impl Iterator<Item = &'a Job<'p>>,
    warnings: &mut Vec<String>,
) -> (Vec<&'a Job<'p>>, Vec<&'a Job<'p>>) {
    let (mut cached, mut to_compile) = (Vec::new(), Vec::new());
    for job in jobs {
        match cache.check(&job.name) {
            ObjectCheck::Verified => cached.push(job),
            ObjectCheck::Missing => to_compile.push(job),
            ObjectCheck::Discarded(warning) => {
                warnings.push(warning);
                to_compile.push(job);
            }
        }
    }
    (cached, to_compile)
}

/// The object key of `unit`: BLAKE3 over the compiler identity, the key argv, the unit's
/// files and the plan's ABI fields, each field length-prefixed so no two inputs collide.
pub(crate) fn object_key(
    plan: &BuildPlan,
    toolchain: &Toolchain,
    unit: &crate::Unit,
    command: &CompileCommand,
) -> String {
    let mut h = abicache_fs::FieldHasher::new();
    let mut field = |name: &str, value: &str| {
        h.named(name, value);
    };
    field("format", &OBJECT_KEY_FORMAT.to_string());
    field("cxx", &toolchain.cxx.path.display().to_string());
    field("cxx_version", &toolchain.cxx.version);
    if unit_kind(&unit.source) == UnitKind::Cuda {
        if let Some(nvcc) = &toolchain.nvcc {
            field("nvcc", &nvcc.tool.path.display().to_string());
            field("nvcc_version", &nvcc.tool.version);
        }
        // nvcc reads these itself: an arch they add or remove changes the
        // object's device code (the publish check refuses such a library,
        // and its object must not outlive the variable). Only when set, so
        // every other object key stays as it was.
        for name in [
            abicache_env_vars::NVCC_APPEND_FLAGS,
            abicache_env_vars::NVCC_PREPEND_FLAGS,
        ] {
            if let Some(value) = std::env::var_os(name) {
                field(name, &value.to_string_lossy());
            }
        }
    }
    for arg in command.key_argv() {
        if !unit.uses_extension_name && arg.starts_with("-DTORCH_EXTENSION_NAME=") {
            continue;
        }
        field("arg", &arg);
    }
    for (path, hash) in &unit.files {
        field("file", path);
        field("hash", hash);
    }
    field("abi", &plan.abi_fields);
    h.finalize().to_hex().to_string()
}

static TEMP_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Compiles `job` against its PCH when it has one; when the compiler rejects the PCH
/// (the `#error` of its stub header fired), or the PCH vanished before the compile
/// read it, compiles it again without.
fn compile_with_pch(
    cache: &ObjectCache,
    job: &Job,
    cancel: &Cancel,
) -> Result<(PchUse, UnitDone), BuildError> {
    let Some(ready) = job.pch else {
        return compile_one(cache, job, &job.command, cancel).map(|done| (PchUse::None, done));
    };
    let mut with_pch = job.command.clone();
    with_pch.unkeyed_flags.extend([
        "-include".to_string(),
        ready.dir.join(PCH_HEADER).display().to_string(),
        "-Winvalid-pch".to_string(),
    ]);
    match compile_one(cache, job, &with_pch, cancel) {
        Ok(done) => Ok((PchUse::Used, done)),
        Err(BuildError::Compile { output, .. }) if output.contains(PCH_REJECTED_MARKER) => {
            compile_one(cache, job, &job.command, cancel).map(|done| (PchUse::Rejected, done))
        }
        // The PCH was removed (gc, another build dropping it) after it was resolved:
        // the `-include` failed, not the unit. Rejected too: compiled without it.
        Err(BuildError::Compile { .. }) if !ready.dir.join(PCH_HEADER).is_file() => {
            compile_one(cache, job, &job.command, cancel).map(|done| (PchUse::Rejected, done))
        }
        Err(e) => Err(e),
    }
}

/// Compiles `command` (one of `job`'s forms) into a temporary object and publishes it
/// into the cache.
fn compile_one(
    cache: &ObjectCache,
    job: &Job,
    command: &CompileCommand,
    cancel: &Cancel,
) -> Result<UnitDone, BuildError> {
    let dir = job.object.parent().unwrap_or(Path::new("."));
    let stem = job
        .object
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("object");
    let temp = dir.join(format!(
        ".{stem}.{}-{}.tmp.o",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::SeqCst)
    ));
    let mut command = command.clone();
    command.output = temp.clone();
    let (argv, dir) = match job.launch {
        Some(launch) => (launch.argv(&command), launch.path().to_path_buf()),
        None => (command.argv(), command.dir.clone()),
    };
    let mut done = UnitDone::default();
    let result = match job.kind {
        UnitKind::Cuda if job.launch.is_none() => {
            compile_cuda(cache, job, &command, &argv, &dir, cancel, &mut done)
        }
        _ => crate::run::run(&argv, &dir, cancel).map(|out| Ran::from_captured(out, &argv)),
    };
    if let Ok(Some(peak)) = result.as_ref().map(|ran| ran.peak_rss) {
        // Failed compiles too: one killed for memory had at least this peak.
        PeakRecords::new(cache.dir()).record(&job.peak_key, peak);
    }
    let outcome = match result.map(|ran| ran.failure) {
        Ok(None) => cache
            .publish(&job.name, &temp)
            .map(|_| done)
            .map_err(BuildError::from),
        Ok(Some(failure)) => Err(BuildError::Compile {
            unit: job.display.clone(),
            dir,
            command: failure.command,
            output: failure.output,
            status: failure.status,
        }),
        Err(e) => Err(e),
    };
    if outcome.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    outcome
}

/// How a compile ended: its peak memory, and the failing command if it failed.
struct Ran {
    peak_rss: Option<u64>,
    failure: Option<crate::cuda_phases::PhaseFailure>,
}

impl Ran {
    fn from_captured(out: crate::run::Captured, argv: &[String]) -> Ran {
        Ran {
            peak_rss: out.peak_rss,
            failure: (!out.status.success()).then(|| crate::cuda_phases::PhaseFailure {
                command: shell_join(argv),
                output: out.combined(),
                status: out.status,
            }),
        }
    }
}

/// Compiles a CUDA unit through nvcc's phase split ([`crate::cuda_phases`])
/// when it can be split, else in one step (`argv` in `dir`) with the
/// reason in `done`.
fn compile_cuda(
    cache: &ObjectCache,
    job: &Job,
    command: &CompileCommand,
    argv: &[String],
    dir: &Path,
    cancel: &Cancel,
    done: &mut UnitDone,
) -> Result<Ran, BuildError> {
    use crate::cuda_phases::{compile_split, one_shot_reason, parse_dryrun};
    let one_shot = |done: &mut UnitDone, reason: String| {
        done.one_shot = Some(reason);
        crate::run::run(argv, dir, cancel).map(|out| Ran::from_captured(out, argv))
    };
    if let Some(reason) = one_shot_reason(&command.flags, command.launcher.as_deref()) {
        return one_shot(done, reason);
    }
    let keep = KeepDir::new(cache.dir())?;
    // The phases run one after another here: nvcc's scheduling flags
    // (`--threads`) would only add shell redirections to the listing.
    let mut dryrun = CompileCommand {
        flags: crate::flags::strip_scheduling_flags(&command.flags),
        ..command.clone()
    }
    .argv();
    dryrun.extend([
        "--dryrun".to_string(),
        "--keep".to_string(),
        "--keep-dir".to_string(),
        keep.0.display().to_string(),
    ]);
    let listed = crate::run::run(&dryrun, dir, cancel)?;
    if !listed.status.success() {
        return one_shot(done, "nvcc --dryrun failed".into());
    }
    let phases = match parse_dryrun(&String::from_utf8_lossy(&listed.stderr)) {
        Ok(phases) => phases,
        Err(reason) => return one_shot(done, reason),
    };
    let steps = crate::cuda_phases::StepCache {
        cache,
        source: job.device_step_source,
    };
    match compile_split(&phases, &keep.0, dir, &steps, &job.nvcc_release, cancel)? {
        Ok(outcome) => {
            done.device_steps = outcome.steps;
            Ok(Ran {
                peak_rss: outcome.peak_rss,
                failure: None,
            })
        }
        Err(failure) => Ok(Ran {
            peak_rss: None,
            failure: Some(failure),
        }),
    }
}

/// nvcc's private keep directory for one split compile, a dot-name in the
/// object cache (gc treats it as temporary); removed when dropped.
struct KeepDir(PathBuf);

impl KeepDir {
    fn new(objects: &Path) -> Result<KeepDir, BuildError> {
        let dir = objects.join(format!(
            ".cudev-keep-{}-{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        fs_err::create_dir_all(&dir)?;
        Ok(KeepDir(dir))
    }
}

impl Drop for KeepDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Links all objects into a temporary library and renames it to `library`.
fn link(
    plan: &BuildPlan,
    toolchain: &Toolchain,
    jobs: &[Job],
    library: &Path,
    cancel: &Cancel,
) -> Result<(), BuildError> {
    let objects: Vec<PathBuf> = jobs.iter().map(|j| j.object.clone()).collect();
    let dir = library.parent().unwrap_or(Path::new("."));
    let temp = dir.join(format!(".{}.{}.tmp.so", plan.name, std::process::id()));
    let argv = link_argv(plan, toolchain, &objects, &temp);
    let out = crate::run::run(&argv, dir, cancel)?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&temp);
        return Err(BuildError::Link {
            library: library.display().to_string(),
            command: shell_join(&argv),
            output: out.combined(),
            status: out.status,
        });
    }
    fs_err::rename(&temp, library)?;
    Ok(())
}

fn write_compile_commands(out_dir: &Path, jobs: &[Job]) -> Result<(), BuildError> {
    let entries: Vec<CompileCommandEntry> = jobs
        .iter()
        .map(|j| CompileCommandEntry {
            directory: j.command.dir.display().to_string(),
            arguments: j.command.argv(),
            file: j.command.source.display().to_string(),
            output: j.object.display().to_string(),
        })
        .collect();
    let path = out_dir.join("compile_commands.json");
    fs_err::write(&path, serde_json::to_string_pretty(&entries)? + "\n")?;
    Ok(())
}
