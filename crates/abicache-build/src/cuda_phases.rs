//! CUDA units compiled through nvcc's own phase split, so that each
//! architecture's device code is its own cached step.
//!
//! `nvcc --dryrun --keep --keep-dir <private dir>` with the unit's real flags
//! lists the commands nvcc would run (`#$ ` lines): environment assignments,
//! the host preprocess and `cudafe++`, then per architecture a device
//! preprocess (`-D__CUDA_ARCH__=800`), `cicc` and `ptxas`, then `fatbinary`
//! and the host compile that embeds the fat binary. [`compile_split`] runs
//! them itself, in that order and environment. Each architecture's `cicc` and
//! `ptxas` form one device step keyed ([`DeviceStep::key`]) by the BLAKE3 of
//! the preprocessed device source, the nvcc release and the `cicc` and
//! `ptxas` identities, the architecture and the step's flags with the private
//! paths replaced by their role. A step whose key is in the object cache
//! (`<key>.cudev`, verified by size and BLAKE3 like unit objects) has its
//! outputs (`.ptx`, `.cubin`, the host stub `cicc` writes) put in place and
//! `cicc`/`ptxas` are skipped. A step the object cache lacks is first asked
//! of the build's [`DeviceStepSource`] (the remote's objects), which
//! publishes it into the object cache; the check above then applies to it.
//!
//! Two things name the checkout in a step's outputs: the module id
//! `cudafe++` derives from the source's absolute path (it appears in the
//! names of internal-linkage device entities) and that path itself. A step
//! whose outputs contain either records it, and is reused only where it is
//! the same; steps without them are reused across checkouts.
//!
//! Whatever this module does not recognise compiles in one step, as before
//! ([`one_shot_reason`] and the parse's reasons): relocatable device code,
//! device debug, a launcher, or a command nvcc's dryrun shows that is not one
//! of the above.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use abicache_store::{ObjectCache, ObjectCheck};

use crate::error::BuildError;
use crate::quote::shell_join;
use crate::run::Cancel;

/// Bump when a device step's key inputs or its stored form change.
pub const DEVICE_STEP_FORMAT: u32 = 1;

/// The file-name suffix of a device step in the object cache.
pub const DEVICE_STEP_SUFFIX: &str = ".cudev";

const BUNDLE_MAGIC: &[u8] = b"abicache-device-step 1\n";

/// Where a build finds the device steps its object cache lacks (in abicache,
/// the remote's objects), and whom it tells about the steps it compiled.
/// Called from the build's compile threads.
pub trait DeviceStepSource: Send + Sync {
    /// Asked when `cache` holds no verified `name` (`<key>.cudev`): publishes
    /// the step into `cache` (verified as the source verifies unit objects)
    /// and returns `true`, or returns `false` and the step is compiled.
    /// Whatever it publishes is checked again by `cache` before use.
    fn fetch(&self, name: &str, cache: &ObjectCache) -> bool;
    /// Told after a step was compiled and published into the object cache as
    /// `name`.
    fn compiled(&self, name: &str);
}

/// The object cache a split compile reuses and publishes device steps in,
/// and the source it asks on a miss.
pub(crate) struct StepCache<'a> {
    pub cache: &'a ObjectCache,
    pub source: Option<&'a dyn DeviceStepSource>,
}

/// Where one device step's outputs came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepOrigin {
    /// `cicc` and `ptxas` ran.
    Compiled,
    /// The object cache had it.
    ObjectCache,
    /// The object cache lacked it; the [`DeviceStepSource`] supplied it.
    Remote,
}
const KEEP_TOKEN: &str = "@@ABICACHE_KEEP_DIR@@";

/// Why `flags` (a `.cu` unit's nvcc flags) compile in one step, or `None`
/// when nvcc's phases may be split.
pub(crate) fn one_shot_reason(flags: &[String], launcher: Option<&Path>) -> Option<String> {
    if let Some(launcher) = launcher {
        return Some(format!(
            "launcher `{}`",
            launcher.file_name().unwrap_or_default().to_string_lossy()
        ));
    }
    let mut previous = "";
    for flag in flags {
        let f = flag.as_str();
        let rdc_value = match f.split_once('=') {
            Some(("-rdc" | "--relocatable-device-code", v)) => Some(v),
            _ if matches!(previous, "-rdc" | "--relocatable-device-code") => Some(f),
            _ => None,
        };
        if rdc_value.is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Some("relocatable device code, -rdc=true".into());
        }
        if matches!(
            f,
            "-dc" | "--device-c" | "-dw" | "--device-w" | "-dlink" | "--device-link"
        ) {
            return Some(format!("relocatable device code, {f}"));
        }
        if matches!(f, "-G" | "--device-debug") {
            return Some(format!("device debug, {f}"));
        }
        previous = f;
    }
    None
}

/// One command of the split, in nvcc's order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Phase {
    /// Run as nvcc would (host preprocess, `cudafe++`, `fatbinary`, host compile).
    Run(Vec<String>),
    /// One architecture's device step.
    Device(DeviceStep),
}

/// One architecture's device code: its preprocess, `cicc` and the `ptxas`
/// runs that assemble `cicc`'s PTX.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeviceStep {
    /// `sm_80`, `sm_90a`, `sm_80+sm_86`, or `compute_90` when only PTX is kept.
    pub label: String,
    preprocess: Vec<String>,
    /// The preprocessed device source (`.cpp1.ii`) the preprocess writes.
    ii: String,
    cicc: Vec<String>,
    ptxas: Vec<Vec<String>>,
}

/// The commands of one unit's compile, and the environment nvcc gives them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Phases {
    env: Vec<(String, String)>,
    /// The phases in order.
    pub phases: Vec<Phase>,
}

/// Splits a `#$ ` command line into words as a POSIX shell would (single
/// and double quotes, backslashes), or `None` for what it does not handle.
fn split_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => w.push(c),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            c @ ('"' | '\\' | '$' | '`') => w.push(c),
                            c => {
                                w.push('\\');
                                w.push(c);
                            }
                        },
                        c => w.push(c),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).push(chars.next()?),
            '|' | '&' | ';' | '<' | '>' | '`' | '(' | ')' => return None,
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Some(words)
}

/// `word` with `$NAME` and `${NAME}` replaced from `vars`; `None` when it
/// names a variable nvcc did not assign.
fn expand(word: &str, vars: &[(String, String)]) -> Option<String> {
    let mut out = String::new();
    let mut rest = word;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced.find('}')?;
            (&braced[..end], &braced[end + 1..])
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        let value = vars.iter().rev().find(|(n, _)| n == name)?;
        out.push_str(&value.1);
        rest = tail;
    }
    out.push_str(rest);
    Some(out)
}

/// The assignment `NAME=value` of a `#$ ` line, if it is one.
fn assignment(line: &str) -> Option<(String, String)> {
    let (name, value) = line.split_once('=')?;
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return None;
    }
    let value = split_words(value).unwrap_or_default().join(" ");
    Some((name.to_string(), value))
}

fn program(argv: &[String]) -> &str {
    Path::new(&argv[0])
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
}

/// The word after `flag` in `argv`, or the value of `flag=value`.
fn value_of<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    argv.iter().enumerate().find_map(|(i, w)| {
        if w == flag {
            argv.get(i + 1).map(String::as_str)
        } else {
            w.strip_prefix(flag).and_then(|v| v.strip_prefix('='))
        }
    })
}

/// Parses nvcc's `--dryrun` output (its stderr) into [`Phases`], or says
/// why the unit must compile in one step.
pub(crate) fn parse_dryrun(text: &str) -> Result<Phases, String> {
    let mut env = Vec::new();
    let mut phases: Vec<Phase> = Vec::new();
    for line in text.lines() {
        let Some(line) = line.strip_prefix("#$ ") else {
            continue;
        };
        if let Some(pair) = assignment(line) {
            env.push(pair);
            continue;
        }
        let words =
            split_words(line).ok_or_else(|| format!("nvcc's step `{line}` could not be parsed"))?;
        let argv: Vec<String> = words
            .iter()
            .map(|w| expand(w, &env))
            .collect::<Option<_>>()
            .ok_or_else(|| format!("nvcc's step `{line}` names an unknown variable"))?;
        if argv.is_empty() {
            continue;
        }
        match program(&argv) {
            "cicc" => {
                let step = phases
                    .iter_mut()
                    .find_map(|p| match p {
                        Phase::Device(s) if s.cicc.is_empty() && argv.contains(&s.ii) => Some(s),
                        _ => None,
                    })
                    .ok_or("a cicc step without its device preprocess")?;
                value_of(&argv, "-o").ok_or("a cicc step without an output")?;
                step.cicc = argv;
            }
            "ptxas" => {
                let step = phases
                    .iter_mut()
                    .find_map(|p| match p {
                        Phase::Device(s)
                            if value_of(&s.cicc, "-o")
                                .is_some_and(|ptx| argv.iter().any(|w| w == ptx)) =>
                        {
                            Some(s)
                        }
                        _ => None,
                    })
                    .ok_or("a ptxas step without its cicc step")?;
                step.ptxas.push(argv);
            }
            "cudafe++" | "fatbinary" => phases.push(Phase::Run(argv)),
            _ if argv.iter().any(|w| w == "-E") => {
                let ii = value_of(&argv, "-o")
                    .ok_or("a preprocess step without an output")?
                    .to_string();
                if argv.iter().any(|w| w.starts_with("-D__CUDA_ARCH__=")) {
                    phases.push(Phase::Device(DeviceStep {
                        label: String::new(),
                        preprocess: argv,
                        ii,
                        cicc: Vec::new(),
                        ptxas: Vec::new(),
                    }));
                } else {
                    phases.push(Phase::Run(argv));
                }
            }
            _ if argv.iter().any(|w| w == "-c")
                && phases
                    .iter()
                    .any(|p| matches!(p, Phase::Run(a) if program(a) == "fatbinary")) =>
            {
                phases.push(Phase::Run(argv));
            }
            other => return Err(format!("nvcc runs `{other}`, which is not split")),
        }
    }
    let mut devices = 0;
    for phase in &mut phases {
        if let Phase::Device(step) = phase {
            if step.cicc.is_empty() {
                return Err("a device preprocess without its cicc step".into());
            }
            devices += 1;
            let sms: Vec<&str> = step
                .ptxas
                .iter()
                .filter_map(|p| value_of(p, "-arch"))
                .collect();
            step.label = if sms.is_empty() {
                value_of(&step.cicc, "-arch")
                    .unwrap_or("device")
                    .to_string()
            } else {
                sms.join("+")
            };
        }
    }
    if devices == 0 {
        return Err("nvcc's dryrun shows no device step".into());
    }
    Ok(Phases { env, phases })
}

/// What the split compile of one unit did.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SplitOutcome {
    /// `(architecture label, where it came from)` per device step, in nvcc's order.
    pub steps: Vec<(String, StepOrigin)>,
    /// The largest peak resident memory of the phases.
    pub peak_rss: Option<u64>,
}

/// A failed phase, as the caller reports it.
pub(crate) struct PhaseFailure {
    pub command: String,
    pub output: String,
    pub status: std::process::ExitStatus,
}

/// Runs `phases` in `dir` (the compile directory), reusing and publishing
/// device steps in `steps.cache` (asking `steps.source` on a miss). `keep`
/// is the private keep directory the dryrun named; `nvcc_release` is part
/// of each step's key.
pub(crate) fn compile_split(
    phases: &Phases,
    keep: &Path,
    dir: &Path,
    steps_cache: &StepCache<'_>,
    nvcc_release: &str,
    cancel: &Cancel,
) -> Result<Result<SplitOutcome, PhaseFailure>, BuildError> {
    let mut outcome = SplitOutcome::default();
    let mut run = |argv: &[String]| -> Result<Option<PhaseFailure>, BuildError> {
        let out = crate::run::run_env(argv, dir, &phases.env, cancel)?;
        outcome.peak_rss = outcome.peak_rss.max(out.peak_rss);
        Ok((!out.status.success()).then(|| PhaseFailure {
            command: shell_join(argv),
            output: out.combined(),
            status: out.status,
        }))
    };
    let mut steps = Vec::new();
    for phase in &phases.phases {
        match phase {
            Phase::Run(argv) => {
                if let Some(failure) = run(argv)? {
                    return Ok(Err(failure));
                }
            }
            Phase::Device(step) => {
                if let Some(failure) = run(&step.preprocess)? {
                    return Ok(Err(failure));
                }
                let key = step.key(keep, dir, nvcc_release, &phases.env)?;
                let name = format!("{key}{DEVICE_STEP_SUFFIX}");
                let needs = Locators::read(step, keep, dir);
                let cache = steps_cache.cache;
                let reuse = |origin| {
                    (cache.check(&name) == ObjectCheck::Verified
                        && restore(&cache.path(&name), step, keep, &needs).unwrap_or(false))
                    .then_some(origin)
                };
                let fetched = || {
                    let source = steps_cache.source?;
                    source
                        .fetch(&name, cache)
                        .then(|| reuse(StepOrigin::Remote))
                        .flatten()
                };
                if let Some(origin) = reuse(StepOrigin::ObjectCache).or_else(fetched) {
                    steps.push((step.label.clone(), origin));
                    continue;
                }
                for argv in std::iter::once(&step.cicc).chain(&step.ptxas) {
                    if let Some(failure) = run(argv)? {
                        return Ok(Err(failure));
                    }
                }
                if store(cache, &name, step, keep, dir, &needs)? {
                    if let Some(source) = steps_cache.source {
                        source.compiled(&name);
                    }
                }
                steps.push((step.label.clone(), StepOrigin::Compiled));
            }
        }
    }
    outcome.steps = steps;
    Ok(Ok(outcome))
}

/// The strings that name the checkout in a step's outputs: the module id
/// `cudafe++` wrote and the source's absolute path `cicc` is given.
#[derive(Debug, Default)]
struct Locators {
    module_id: Option<String>,
    source_path: Option<String>,
}

impl Locators {
    fn read(step: &DeviceStep, _keep: &Path, dir: &Path) -> Locators {
        let module_id = value_of(&step.cicc, "--module_id_file_name")
            .and_then(|p| std::fs::read_to_string(dir.join(p)).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let source_path = value_of(&step.cicc, "--orig_src_path_name").map(str::to_string);
        Locators {
            module_id,
            source_path,
        }
    }
}

/// The outputs of `step` that later phases read, `(role, path)`: `cicc`'s
/// PTX (`fatbinary` embeds it when the PTX is kept) and host stub (the host
/// compile includes it), and each `ptxas` run's cubin. `cicc`'s other
/// outputs (`--gen_c_file_name`, `--gen_device_file_name`) are read by no
/// later phase; they are neither stored nor restored (the `.gpu` file holds
/// the checkout's module id, which would tie the step to one checkout).
fn outputs(step: &DeviceStep) -> Vec<(String, String)> {
    const CICC_OUTPUTS: [&str; 2] = ["-o", "--stub_file_name"];
    let mut out: Vec<(String, String)> = CICC_OUTPUTS
        .iter()
        .filter_map(|flag| value_of(&step.cicc, flag).map(|p| (format!("cicc{flag}"), p.into())))
        .collect();
    for (i, ptxas) in step.ptxas.iter().enumerate() {
        if let Some(cubin) = value_of(ptxas, "-o") {
            out.push((format!("ptxas{i}-o"), cubin.into()));
        }
    }
    out
}

/// `argv` as it enters the key: the program by name only, paths in the keep
/// directory by their role (the flag before them), the source's absolute
/// path left out (see [`Locators`]).
fn normalised(argv: &[String], keep: &str) -> Vec<String> {
    let mut out = vec![program(argv).to_string()];
    let mut previous = "";
    for word in &argv[1..] {
        out.push(if previous == "--orig_src_path_name" {
            "@source".into()
        } else if word.starts_with(keep) {
            format!(
                "@{}",
                if previous.starts_with('-') {
                    previous
                } else {
                    "input"
                }
            )
        } else {
            word.clone()
        });
        previous = word;
    }
    out
}

/// What `program --version` says, once per program path.
fn identity(program: &Path, env: &[(String, String)]) -> Result<String, BuildError> {
    static SEEN: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(known) = seen.lock().expect("not poisoned").get(program) {
        return Ok(known.clone());
    }
    let meta = fs_err::metadata(program)?;
    let argv = vec![program.display().to_string(), "--version".to_string()];
    let out = crate::run::run_env(&argv, Path::new("/"), env, &Cancel::new())?;
    // `cicc` has no `--version`: its size stands for it, with nvcc's release.
    let version = if out.status.success() {
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    } else {
        String::new()
    };
    let id = format!("{version}\nsize={}", meta.len());
    seen.lock()
        .expect("not poisoned")
        .insert(program.to_path_buf(), id.clone());
    Ok(id)
}

/// Where `name` (a program as the dryrun names it) is found on the `PATH`
/// nvcc gives its steps.
fn locate(name: &str, env: &[(String, String)]) -> PathBuf {
    if name.contains('/') {
        return PathBuf::from(name);
    }
    let path = env
        .iter()
        .rev()
        .find(|(n, _)| n == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

impl DeviceStep {
    /// The step's key: BLAKE3 over the format, nvcc's release, the `cicc`
    /// and `ptxas` identities, the architecture, the preprocessed device
    /// source's bytes and the normalised `cicc` and `ptxas` command lines.
    fn key(
        &self,
        keep: &Path,
        dir: &Path,
        nvcc_release: &str,
        env: &[(String, String)],
    ) -> Result<String, BuildError> {
        let keep = keep.display().to_string();
        let mut h = abicache_fs::FieldHasher::new();
        h.named("format", &DEVICE_STEP_FORMAT.to_string());
        h.named("nvcc_release", nvcc_release);
        h.named("cicc", &identity(&locate(&self.cicc[0], env), env)?);
        if let Some(ptxas) = self.ptxas.first() {
            h.named("ptxas", &identity(&locate(&ptxas[0], env), env)?);
        }
        h.named("arch", &self.label);
        let ii = fs_err::read(dir.join(&self.ii))?;
        h.named("device_source", &blake3::hash(&ii).to_hex());
        for word in normalised(&self.cicc, &keep) {
            h.named("cicc_arg", &word);
        }
        for ptxas in &self.ptxas {
            h.named("ptxas_run", "");
            for word in normalised(ptxas, &keep) {
                h.named("ptxas_arg", &word);
            }
        }
        Ok(h.finalize().to_hex().to_string())
    }
}

fn replace_bytes(data: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return data.to_vec();
    }
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(data[i]);
            i += 1;
        }
    }
    out
}

fn contains(data: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && data.windows(needle.len()).any(|w| w == needle)
}

/// `(path, token)` pairs substituted in a step's text outputs, longest path
/// first: every output's own path by its role, then the keep directory.
fn substitutions(step: &DeviceStep, keep: &Path) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = outputs(step)
        .into_iter()
        .map(|(role, path)| (path, format!("@@ABICACHE_{role}@@")))
        .collect();
    pairs.push((step.ii.clone(), "@@ABICACHE_ii@@".into()));
    pairs.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    pairs.push((keep.display().to_string(), KEEP_TOKEN.into()));
    pairs
}

/// Publishes `step`'s outputs as `name`; `false` when nothing was stored: a
/// cubin that names the keep directory (it never has) is not stored, the
/// step compiles next time.
fn store(
    cache: &ObjectCache,
    name: &str,
    step: &DeviceStep,
    keep: &Path,
    dir: &Path,
    needs: &Locators,
) -> Result<bool, BuildError> {
    let keep_text = keep.display().to_string();
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    let mut uses_module_id = false;
    let mut uses_source_path = false;
    for (role, path) in outputs(step) {
        let Ok(mut bytes) = std::fs::read(dir.join(&path)) else {
            continue;
        };
        if let Some(id) = &needs.module_id {
            uses_module_id |= contains(&bytes, id.as_bytes());
        }
        if let Some(source) = &needs.source_path {
            uses_source_path |= contains(&bytes, source.as_bytes());
        }
        if role.starts_with("ptxas") {
            if contains(&bytes, keep_text.as_bytes()) {
                return Ok(false);
            }
        } else {
            for (from, to) in substitutions(step, keep) {
                bytes = replace_bytes(&bytes, from.as_bytes(), to.as_bytes());
            }
        }
        entries.push((role, bytes));
    }
    if uses_module_id {
        let id = needs.module_id.clone().unwrap_or_default();
        entries.push(("=module_id".into(), id.into_bytes()));
    }
    if uses_source_path {
        let source = needs.source_path.clone().unwrap_or_default();
        entries.push(("=source_path".into(), source.into_bytes()));
    }
    let mut bundle = BUNDLE_MAGIC.to_vec();
    for (role, bytes) in &entries {
        bundle.extend_from_slice(format!("{role}\n{}\n", bytes.len()).as_bytes());
        bundle.extend_from_slice(bytes);
    }
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let temp = cache.dir().join(format!(
        ".{name}.{}-{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    fs_err::write(&temp, &bundle)?;
    if let Err(e) = cache.publish(name, &temp) {
        let _ = std::fs::remove_file(&temp);
        return Err(e.into());
    }
    Ok(true)
}

/// The entries of a stored step, or `None` when it is malformed.
fn read_bundle(bytes: &[u8]) -> Option<Vec<(String, Vec<u8>)>> {
    let mut rest = bytes.strip_prefix(BUNDLE_MAGIC)?;
    let mut entries = Vec::new();
    while !rest.is_empty() {
        let line = |r: &[u8]| -> Option<(String, usize)> {
            let end = r.iter().position(|&b| b == b'\n')?;
            Some((String::from_utf8(r[..end].to_vec()).ok()?, end + 1))
        };
        let (role, used) = line(rest)?;
        rest = &rest[used..];
        let (len, used) = line(rest)?;
        rest = &rest[used..];
        let len: usize = len.parse().ok()?;
        entries.push((role, rest.get(..len)?.to_vec()));
        rest = &rest[len..];
    }
    Some(entries)
}

/// Writes a stored step's outputs into place for this compile. `false`
/// when it cannot serve it (malformed, or it names another checkout).
fn restore(
    stored: &Path,
    step: &DeviceStep,
    keep: &Path,
    needs: &Locators,
) -> Result<bool, BuildError> {
    let Some(entries) = read_bundle(&fs_err::read(stored)?) else {
        return Ok(false);
    };
    let current = |value: &Option<String>| value.clone().unwrap_or_default().into_bytes();
    for (role, bytes) in &entries {
        let needed = match role.as_str() {
            "=module_id" => current(&needs.module_id),
            "=source_path" => current(&needs.source_path),
            _ => continue,
        };
        if *bytes != needed {
            return Ok(false);
        }
    }
    let paths: HashMap<String, String> = outputs(step).into_iter().collect();
    for (role, _) in entries.iter().filter(|(r, _)| !r.starts_with('=')) {
        if !paths.contains_key(role) {
            return Ok(false);
        }
    }
    for (role, bytes) in entries.iter().filter(|(r, _)| !r.starts_with('=')) {
        let mut bytes = bytes.clone();
        if !role.starts_with("ptxas") {
            for (path, token) in substitutions(step, keep) {
                bytes = replace_bytes(&bytes, token.as_bytes(), path.as_bytes());
            }
        }
        fs_err::write(&paths[role], bytes)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRYRUN: &str = r#"#$ _NVVM_BRANCH_=nvvm
#$ _SPACE_= 
#$ CICC_PATH=/nv/bin/../nvvm/bin
#$ PATH=/nv/bin/../nvvm/bin:/nv/bin:/usr/bin
#$ INCLUDES="-I/nv/bin/../include"  
#$ gcc -D__CUDA_ARCH_LIST__=800,900 -E -x c++ -D__CUDACC__ -fPIC "-I/nv/include" -include "cuda_runtime.h" -m64 "k.cu" -o "/k/k.cpp4.ii" 
#$ cudafe++ --c++17 --gen_c_file_name "/k/k.compute_90.cudafe1.cpp" --stub_file_name "k.compute_90.cudafe1.stub.c" --gen_module_id_file --module_id_file_name "/k/k.module_id" "/k/k.cpp4.ii" 
#$ gcc -D__CUDA_ARCH__=800 -D__CUDA_ARCH_LIST__=800,900 -E -x c++ "k.cu" -o "/k/k.compute_80.cpp1.ii" 
#$ "$CICC_PATH/cicc" --c++17 --orig_src_file_name "k.cu" --orig_src_path_name "/src/k.cu" -arch compute_80 --module_id_file_name "/k/k.module_id" --gen_c_file_name "/k/k.compute_80.cudafe1.c" --stub_file_name "/k/k.compute_80.cudafe1.stub.c" --gen_device_file_name "/k/k.compute_80.cudafe1.gpu"  "/k/k.compute_80.cpp1.ii" -o "/k/k.compute_80.ptx"
#$ ptxas -arch=sm_80 -m64  "/k/k.compute_80.ptx"  -o "/k/k.compute_80.cubin" 
#$ gcc -D__CUDA_ARCH__=900 -D__CUDA_ARCH_LIST__=800,900 -E -x c++ "k.cu" -o "/k/k.compute_90.cpp1.ii" 
#$ "$CICC_PATH/cicc" --c++17 -arch compute_90 "/k/k.compute_90.cpp1.ii" -o "/k/k.compute_90.ptx"
#$ ptxas -arch=sm_90 -m64  "/k/k.compute_90.ptx"  -o "/k/k.compute_90.cubin" 
#$ fatbinary --create="/k/k.fatbin" -64 "--image3=kind=elf,sm=80,file=/k/k.compute_80.cubin" "--image3=kind=elf,sm=90,file=/k/k.compute_90.cubin" --embedded-fatbin="/k/k.fatbin.c" 
#$ gcc -D__CUDA_ARCH__=900 -c -x c++ -fPIC "/k/k.compute_90.cudafe1.cpp" -o "k.o" 
"#;

    #[test]
    fn nvccs_dryrun_splits_into_host_phases_and_one_device_step_per_architecture() {
        let phases = parse_dryrun(DRYRUN).unwrap();
        let shape: Vec<String> = phases
            .phases
            .iter()
            .map(|p| match p {
                Phase::Run(argv) => program(argv).to_string(),
                Phase::Device(s) => format!("device {} ({} ptxas)", s.label, s.ptxas.len()),
            })
            .collect();
        assert_eq!(
            shape,
            [
                "gcc",
                "cudafe++",
                "device sm_80 (1 ptxas)",
                "device sm_90 (1 ptxas)",
                "fatbinary",
                "gcc"
            ]
        );
        let Phase::Device(step) = &phases.phases[2] else {
            unreachable!()
        };
        // `$CICC_PATH` is expanded from nvcc's own assignment; quotes are removed.
        assert_eq!(step.cicc[0], "/nv/bin/../nvvm/bin/cicc");
        assert_eq!(step.ii, "/k/k.compute_80.cpp1.ii");
        assert!(phases
            .env
            .contains(&("INCLUDES".into(), "-I/nv/bin/../include".into())));
        // The key sees roles, not the private paths or the checkout's path.
        let key_words = normalised(&step.cicc, "/k");
        assert!(key_words.contains(&"@--stub_file_name".to_string()));
        assert!(key_words.contains(&"@source".to_string()));
        assert!(!key_words
            .iter()
            .any(|w| w.starts_with("/k") || w == "/src/k.cu"));
    }

    #[test]
    fn what_nvcc_runs_that_is_not_split_and_odd_flags_compile_in_one_step() {
        let with_nvlink = format!("{DRYRUN}#$ nvlink --arch=sm_80 -o x.o\n");
        assert_eq!(
            parse_dryrun(&with_nvlink).unwrap_err(),
            "nvcc runs `nvlink`, which is not split"
        );
        assert!(parse_dryrun("#$ gcc -E k.cu -o \"/k/unterminated\n").is_err());
        assert!(parse_dryrun("#$ \"$NOT_SET/cicc\" x\n").is_err());
        let flags = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            one_shot_reason(&flags(&["-O3", "-rdc=true"]), None).as_deref(),
            Some("relocatable device code, -rdc=true")
        );
        assert_eq!(
            one_shot_reason(&flags(&["--relocatable-device-code", "true"]), None).as_deref(),
            Some("relocatable device code, -rdc=true")
        );
        assert_eq!(
            one_shot_reason(&flags(&["-G"]), None).as_deref(),
            Some("device debug, -G")
        );
        assert_eq!(
            one_shot_reason(&flags(&["-O3"]), Some(Path::new("/usr/bin/sccache"))).as_deref(),
            Some("launcher `sccache`")
        );
        assert_eq!(one_shot_reason(&flags(&["-rdc=false", "-O3"]), None), None);
    }

    #[test]
    fn a_stored_step_round_trips_and_its_paths_follow_the_new_keep_dir() {
        let bundle = {
            let mut b = BUNDLE_MAGIC.to_vec();
            b.extend_from_slice(b"cicc-o\n3\nptx=module_id\n2\nid");
            b
        };
        let entries = read_bundle(&bundle).unwrap();
        assert_eq!(entries[0], ("cicc-o".to_string(), b"ptx".to_vec()));
        assert_eq!(entries[1], ("=module_id".to_string(), b"id".to_vec()));
        assert!(read_bundle(&bundle[..bundle.len() - 1]).is_none());
        assert_eq!(replace_bytes(b"a/k/x /k", b"/k", b"/q"), b"a/q/x /q");
    }
}
