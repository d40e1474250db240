//! The target a compile targets: what `-march=native` (`-mcpu=native`,
//! `-mtune=native`) resolves to on this machine, and which instruction-set
//! extensions a library's target flags require.
//!
//! - [`resolve_host_cpu`] asks the host compiler (`c++ -march=native -E -v`)
//!   for the target options its compiler proper receives (GCC's `cc1plus`
//!   line; Clang's `-cc1` line, `-target-cpu`/`-target-feature` rewritten
//!   as the `-march=`/`-m`/`-mno-` flags they stand for), keeps the `-m…`
//!   options (`-march=`, `-mtune=`, every `-m<ext>` and `-mno-<ext>`; cache
//!   sizes given as `--param` are left out) and sorts them. The answer is
//!   remembered per compiler (its path and stat stamp), CPU
//!   ([`abicache_isa::CpuFeatures::identity`]) and flags: in the process and
//!   in a file under the cache, so a warm key runs no compiler.
//! - [`isa_requirements`] compares the compiler's predefined macros
//!   (`-dM -E`) with and without the target flags
//!   ([`abicache_isa::requirements_from_macros`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use abicache_fs::FileStamp;
use abicache_isa::Requirement;

use crate::error::BuildError;
use crate::quote::shell_join;
use crate::toolchain::run_probe;
use crate::toolchain::{resolve_program, ToolchainEnv};

/// Bumped when the resolved value's form changes (remembered answers of
/// another form are ignored).
const HOST_CPU_FORMAT: &str = "host-cpu-v1";

/// The form of a remembered [`resolve_compiler_isa`] answer.
const COMPILER_ISA_FORMAT: &str = "compiler-isa-v1";

/// The largest remembered answer read back.
const MAX_ANSWER: u64 = 64 << 10;

/// What `native_flags` (each `-march=native`, `-mcpu=native` or
/// `-mtune=native`) resolve to with the host compiler (`CXX`, else `c++`)
/// on the CPU `cpu_identity` describes: sorted, space-separated `-m…`
/// options. Remembered in this process and, with `cache_dir`, in a file
/// there (only once the compiler's stamp is trusted), so an unchanged
/// compiler on the same CPU is asked once.
pub fn resolve_host_cpu(
    env: &ToolchainEnv,
    native_flags: &[String],
    cpu_identity: &str,
    cache_dir: Option<&Path>,
) -> Result<String, BuildError> {
    let compiler = host_cpu_compiler(env)?;
    let question = Question {
        format: HOST_CPU_FORMAT,
        well_formed: |v| !v.is_empty() && v.starts_with("-m"),
        compiler: &compiler,
        cpu: cpu_identity,
        flags: native_flags,
    };
    remembered(&question, cache_dir, || {
        let mut args: Vec<String> = native_flags.to_vec();
        args.extend(["-E", "-v", "-x", "c++", "/dev/null"].map(String::from));
        let output = run_compiler(&compiler, &args)?;
        let value = parse_resolved_target(&output).ok_or_else(|| BuildError::ToolProbe {
            program: compiler.clone(),
            command: command_line(&compiler, &args),
            output: output.clone(),
            status: "its output has no command line of the compiler proper (GCC's `cc1plus`, \
                     Clang's `-cc1`) to read the resolved target from"
                .into(),
            fix: "`CXX`".into(),
        })?;
        Ok(value)
    })
}

/// The instruction-set extensions the host compiler (`CXX`, else `c++`)
/// enables by itself, without flags, beyond the fixed baseline
/// ([`abicache_isa::BASELINE`]): `/proc/cpuinfo` names, sorted and
/// space-separated, empty for a plain compiler. This is the compiler's
/// effective target the key carries (`compiler_isa`), so a `CXX` wrapper
/// adding `-mavx512f`, or a compiler whose default `-march` is newer, gets
/// another key. Remembered like [`resolve_host_cpu`] (per compiler path and
/// stamp, and CPU), so a warm key runs no compiler.
pub fn resolve_compiler_isa(
    env: &ToolchainEnv,
    cpu_identity: &str,
    cache_dir: Option<&Path>,
) -> Result<String, BuildError> {
    let compiler = host_cpu_compiler(env)?;
    let question = Question {
        format: COMPILER_ISA_FORMAT,
        well_formed: |v| {
            v.split(' ')
                .filter(|w| !w.is_empty())
                .all(|w| abicache_isa::EXTENSIONS.iter().any(|e| e.name == w))
        },
        compiler: &compiler,
        cpu: cpu_identity,
        flags: &[],
    };
    remembered(&question, cache_dir, || {
        let dump = macros(&compiler, &[])?;
        let names: Vec<&str> = abicache_isa::beyond_baseline(&dump).into_iter().collect();
        Ok(names.join(" "))
    })
}

/// What a remembered answer depends on.
struct Question<'a> {
    format: &'static str,
    /// Whether a value read back has this answer's form.
    well_formed: fn(&str) -> bool,
    compiler: &'a Path,
    cpu: &'a str,
    flags: &'a [String],
}

/// The answer to `question`: remembered in this process and, with
/// `cache_dir`, in a file there (only once the compiler's stamp is
/// trusted); else `compute`d and remembered.
fn remembered(
    question: &Question<'_>,
    cache_dir: Option<&Path>,
    compute: impl FnOnce() -> Result<String, BuildError>,
) -> Result<String, BuildError> {
    static ANSWERS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    let stamp = std::fs::metadata(question.compiler)
        .ok()
        .and_then(|m| FileStamp::trusted(&m, SystemTime::now()));
    let digest = stamp.map(|s| answer_digest(question, s));
    if let Some(digest) = &digest {
        let answers = ANSWERS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, value)) = answers.iter().find(|(d, _)| d == digest) {
            return Ok(value.clone());
        }
        drop(answers);
        if let Some(value) =
            cache_dir.and_then(|dir| read_answer(&dir.join(digest), question.well_formed))
        {
            ANSWERS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((digest.clone(), value.clone()));
            return Ok(value);
        }
    }
    let value = compute()?;
    if let Some(digest) = digest {
        if let Some(dir) = cache_dir {
            // Best effort: a cache that cannot be written only costs the next key a probe.
            let _ = write_answer(dir, &digest, &value);
        }
        ANSWERS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((digest, value.clone()));
    }
    Ok(value)
}

/// The compiler [`resolve_host_cpu`] asks: `CXX` (a name searched on
/// `PATH`, or a path), else `c++` on `PATH`.
pub fn host_cpu_compiler(env: &ToolchainEnv) -> Result<PathBuf, BuildError> {
    let (wanted, looked_for) = match &env.cxx {
        Some(cxx) => (cxx.as_str(), format!("`CXX={cxx}` (no such executable)")),
        None => ("c++", "`c++` on `PATH` (`CXX` is not set)".to_string()),
    };
    resolve_program(wanted, env.path.as_deref()).ok_or(BuildError::CompilerNotFound { looked_for })
}

/// The name of a remembered answer: a BLAKE3 of everything it depends on.
fn answer_digest(question: &Question<'_>, stamp: FileStamp) -> String {
    let Question {
        format,
        well_formed: _,
        compiler,
        cpu,
        flags,
    } = question;
    let mut h = abicache_fs::FieldHasher::new();
    let mut field = |bytes: &[u8]| {
        h.field(bytes);
    };
    field(format.as_bytes());
    field(compiler.as_os_str().as_encoded_bytes());
    for n in [stamp.dev, stamp.ino, stamp.size] {
        field(&n.to_le_bytes());
    }
    for n in [stamp.mtime_ns, stamp.ctime_ns] {
        field(&n.to_le_bytes());
    }
    field(cpu.as_bytes());
    for f in flags.iter() {
        field(f.as_bytes());
    }
    h.finalize().to_hex()[..32].to_string()
}

/// A remembered answer, when it is this user's, written by no one else, and well formed.
fn read_answer(path: &Path, well_formed: fn(&str) -> bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    let uid = rustix::process::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return None;
    }
    let bytes = abicache_fs::read_bounded(path, abicache_fs::Follow::No, MAX_ANSWER).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let value = text.strip_suffix('\n')?;
    (!value.contains('\n') && well_formed(value)).then(|| value.to_owned())
}

/// Writes an answer owner-only (directory 0700, file 0600), through a
/// temporary file and a rename.
fn write_answer(dir: &Path, name: &str, value: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if !dir.is_dir() {
        std::fs::DirBuilder::new().mode(0o700).create(dir)?;
    }
    let temp = dir.join(format!(".{name}.{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)?;
    file.write_all(format!("{value}\n").as_bytes())?;
    drop(file);
    fs_err::rename(&temp, dir.join(name))
}

/// The resolved target in a compiler's `-E -v` output: the `-m…` options of
/// the compiler proper's command line (GCC: the line run from `cc1`/
/// `cc1plus`; Clang: the `-cc1` line, whose `-target-cpu X`, `-tune-cpu X`
/// and `-target-feature ±f` become `-march=X`, `-mtune=X`, `-mf`/`-mno-f`),
/// sorted and space-separated. `None` when there is no such line or it has
/// no such option.
pub fn parse_resolved_target(output: &str) -> Option<String> {
    let mut options: Vec<String> = Vec::new();
    for line in output.lines() {
        let words: Vec<&str> = line
            .split_whitespace()
            .map(|w| w.trim_matches('"'))
            .collect();
        let Some(first) = words.first() else { continue };
        let program = Path::new(first)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        if words.get(1) == Some(&"-cc1") {
            let mut i = 2;
            while i + 1 < words.len() {
                let value = words[i + 1];
                let option = match words[i] {
                    "-target-cpu" => Some(format!("-march={value}")),
                    "-tune-cpu" => Some(format!("-mtune={value}")),
                    "-target-feature" => match value.split_at_checked(1) {
                        Some(("+", f)) => Some(format!("-m{f}")),
                        Some(("-", f)) => Some(format!("-mno-{f}")),
                        _ => None,
                    },
                    _ => None,
                };
                match option {
                    Some(o) => {
                        options.push(o);
                        i += 2;
                    }
                    None => i += 1,
                }
            }
        } else if program.starts_with("cc1") {
            options.extend(
                words[1..]
                    .iter()
                    .filter(|w| w.starts_with("-m"))
                    .map(|w| w.to_string()),
            );
        } else {
            continue;
        }
        break;
    }
    options.sort();
    options.dedup();
    (!options.is_empty()).then(|| options.join(" "))
}

/// The extensions a library compiled by `cxx` with `target_flags` (see
/// [`abicache_isa::flags::target_flags`]) requires beyond the fixed
/// baseline ([`abicache_isa::BASELINE`]: `x86-64`, `armv8-a`), what the
/// compiler enables by itself included (attributed to ``the default target
/// of `cxx` ``). Runs `cxx -dM -E` once without the flags, once with all of
/// them and, when there are several, once with each, to say which flag
/// required what.
pub fn isa_requirements(
    cxx: &Path,
    target_flags: &[String],
) -> Result<Vec<Requirement>, BuildError> {
    let default = macros(cxx, &[])?;
    let all = match target_flags.is_empty() {
        true => default.clone(),
        false => macros(cxx, target_flags)?,
    };
    let mut per_flag = Vec::new();
    if target_flags.len() > 1 {
        for flag in target_flags {
            per_flag.push((flag.clone(), macros(cxx, std::slice::from_ref(flag))?));
        }
    }
    Ok(abicache_isa::requirements_from_macros(
        &default,
        &all,
        target_flags,
        &per_flag,
        &format!("the default target of `{}`", cxx.display()),
    ))
}

/// `cxx <flags> -dM -E -x c++ /dev/null`: the predefined macros.
fn macros(cxx: &Path, flags: &[String]) -> Result<String, BuildError> {
    let mut args: Vec<String> = flags.to_vec();
    args.extend(["-dM", "-E", "-x", "c++", "/dev/null"].map(String::from));
    run_compiler(cxx, &args)
}

fn command_line(program: &Path, args: &[String]) -> String {
    shell_join(std::iter::once(program.display().to_string()).chain(args.iter().cloned()))
}

/// Runs the compiler probe `program args…` (see [`run_probe`]).
fn run_compiler(program: &Path, args: &[String]) -> Result<String, BuildError> {
    run_probe(program, args, "CXX")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcc_and_clang_resolutions_are_read_the_same_way() {
        let gcc = "Using built-in specs.\n \
            /usr/lib/gcc/x86_64-linux-gnu/12/cc1plus -E -quiet -v -imultiarch x86_64-linux-gnu \
            -D_GNU_SOURCE /dev/null -march=znver3 -mmmx -mno-amx-tile -mavx512bf16 \
            --param l1-cache-size=48 --param l2-cache-size=1024 -mtune=znver3 \
            -fasynchronous-unwind-tables -dumpbase null\n";
        assert_eq!(
            parse_resolved_target(gcc).unwrap(),
            "-march=znver3 -mavx512bf16 -mmmx -mno-amx-tile -mtune=znver3"
        );
        let clang = "clang version 18.1.8\n \"/usr/lib/llvm-18/bin/clang\" \"-cc1\" \"-triple\" \
            \"x86_64-pc-linux-gnu\" \"-E\" \"-target-cpu\" \"znver3\" \"-target-feature\" \"+avx2\" \
            \"-target-feature\" \"-avx512fp16\" \"-tune-cpu\" \"znver3\" \"-x\" \"c++\" \"/dev/null\"\n";
        assert_eq!(
            parse_resolved_target(clang).unwrap(),
            "-march=znver3 -mavx2 -mno-avx512fp16 -mtune=znver3"
        );
        assert_eq!(parse_resolved_target("no compiler line here\n"), None);
    }

    #[test]
    fn gccs_aarch64_native_cpu_is_its_mcpu_option() {
        // GCC 12 on AArch64, `-mcpu=native` on emulated CPUs (scripts/aarch64-check.sh).
        let output = |cpu: &str| {
            format!(
                "COLLECT_GCC_OPTIONS= '-E' '-v' '-shared-libgcc' '-mlittle-endian' '-mabi=lp64' \
                 '-mcpu={cpu}'\n /usr/lib/gcc/aarch64-linux-gnu/12/cc1plus -E -quiet -v -imultiarch \
                 aarch64-linux-gnu -D_GNU_SOURCE /dev/null -mlittle-endian -mabi=lp64 -mcpu={cpu} \
                 -fasynchronous-unwind-tables -dumpbase null\n"
            )
        };
        assert_eq!(
            parse_resolved_target(&output("cortex-a72+crypto")).unwrap(),
            "-mabi=lp64 -mcpu=cortex-a72+crypto -mlittle-endian"
        );
        assert_eq!(
            parse_resolved_target(&output("ares+crypto+noprofile")).unwrap(),
            "-mabi=lp64 -mcpu=ares+crypto+noprofile -mlittle-endian",
            "a Neoverse N1"
        );
    }

    #[test]
    fn remembered_answers_are_owner_only_and_others_are_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("host-cpu");
        write_answer(&dir, "abc", "-march=znver3 -mtune=znver3").unwrap();
        let path = dir.join("abc");
        assert_eq!(
            read_answer(&path, |v| v.starts_with("-m")).as_deref(),
            Some("-march=znver3 -mtune=znver3")
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(&path)), (0o700, 0o600));
        // Writable by others, or not an answer: ignored.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(read_answer(&path, |v| v.starts_with("-m")), None);
        std::fs::write(dir.join("junk"), "native\n").unwrap();
        assert_eq!(
            read_answer(&dir.join("junk"), |v| v.starts_with("-m")),
            None
        );
    }

    #[test]
    fn a_native_flag_resolves_to_the_cpu_this_compiler_sees() {
        // The real host compiler, when there is one (this project's CI has GCC).
        let env = ToolchainEnv::from_process();
        let resolved =
            resolve_host_cpu(&env, &["-march=native".to_owned()], "test-cpu", None).unwrap();
        assert!(
            resolved.contains("-march=") && !resolved.contains("native"),
            "{resolved}"
        );
        assert!(
            resolved.split(' ').all(|o| o.starts_with("-m")),
            "{resolved}"
        );
        let cxx = resolve_program("c++", env.path.as_deref()).unwrap();
        let required = isa_requirements(&cxx, &["-mavx512bf16".to_owned()]);
        #[cfg(target_arch = "x86_64")]
        {
            let required = required.unwrap();
            assert!(
                required
                    .iter()
                    .any(|r| r.feature == "avx512_bf16" && r.flag == "-mavx512bf16"),
                "{required:?}"
            );
            assert!(
                required.iter().any(|r| r.feature == "avx512f"),
                "implied: {required:?}"
            );
        }
        let _ = required;
        // What -march=native requires, this very CPU has: a hypervisor that
        // hides a flag from /proc/cpuinfo (`rdseed` on this project's
        // machines) must not make a machine refuse its own build.
        let native = isa_requirements(&cxx, &["-march=native".to_owned()]).unwrap();
        assert!(!native.is_empty());
        abicache_isa::check(&native, "`-march=native` here").unwrap();
    }
}
