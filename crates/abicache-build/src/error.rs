//! The one error type of this crate.

use std::path::PathBuf;
use std::process::ExitStatus;

/// Everything that can go wrong while finding a toolchain, compiling or linking.
///
/// Every message says what happened and what to do; compiler failures carry the
/// compiler's own output and the exact command (shell-quoted) that was run.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No host C++ compiler was found.
    #[error(
        "no C++ compiler found: looked for {looked_for}.\n\
         Install a C++ compiler (e.g. `apt install g++`) or set `CXX` to the compiler's path."
    )]
    CompilerNotFound {
        /// What was searched, e.g. "`c++` on `PATH`" or "`CXX=/opt/gcc` (not found)".
        looked_for: String,
    },

    /// No `nvcc` was found although CUDA sources are to be built.
    #[error(
        "no CUDA compiler (`nvcc`) found; looked in:\n{}\n\
         Set `CUDA_HOME` to a CUDA toolkit, put `nvcc` on `PATH`, or install NVIDIA's \
         compiler wheel next to torch (`pip install nvidia-cuda-nvcc`).",
        searched.iter().map(|s| format!("  - {s}")).collect::<Vec<_>>().join("\n")
    )]
    NvccNotFound {
        /// Every place that was searched, in order.
        searched: Vec<String>,
    },

    /// The compiler launcher named by `ABICACHE_COMPILER_LAUNCHER` was not found.
    #[error(
        "compiler launcher `{launcher}` (from `ABICACHE_COMPILER_LAUNCHER`) was not found on `PATH`.\n\
         Install it, give its full path, or unset `ABICACHE_COMPILER_LAUNCHER`."
    )]
    LauncherNotFound {
        /// The value of `ABICACHE_COMPILER_LAUNCHER`.
        launcher: String,
    },

    /// The private directory compiles sent to other machines run in (distcc,
    /// icecream) could not be made.
    #[error(
        "could not make the private directory that `{launcher}` compiles run in: {error}.\n\
         Set `TMPDIR` to a directory you can write, or unset `ABICACHE_COMPILER_LAUNCHER`."
    )]
    LaunchDir {
        /// The launcher.
        launcher: String,
        /// What failed (it names the path).
        error: std::io::Error,
    },

    /// A tool was found but asking it for its version failed.
    #[error(
        "`{}` did not report its version ({status}).\ncommand: {command}\noutput:\n{output}\n\
         Check that the tool runs, or point {fix} at a working one.",
        program.display()
    )]
    ToolProbe {
        /// The tool that was run.
        program: PathBuf,
        /// The shell-quoted command.
        command: String,
        /// Its stdout and stderr.
        output: String,
        /// How it ended, or why it did not start.
        status: String,
        /// The environment variable that selects the tool.
        fix: String,
    },

    /// `ABICACHE_JOBS` is set to something that is not a positive integer.
    #[error(
        "`ABICACHE_JOBS={value}` is not a positive whole number.\n\
         Set `ABICACHE_JOBS` to the number of parallel compile jobs a compiler launcher \
         may run at once (e.g. `ABICACHE_JOBS=64` for a distcc farm), or unset it."
    )]
    Jobs {
        /// The value found.
        value: String,
    },
    /// `MAX_JOBS` is set to something that is not a positive integer.
    #[error(
        "`MAX_JOBS={value}` is not a positive whole number.\n\
         Set `MAX_JOBS` to the number of parallel compile jobs (e.g. `MAX_JOBS=4`), \
         or unset it to use one job per CPU core."
    )]
    MaxJobs {
        /// The rejected value.
        value: String,
    },

    /// A plan without any source.
    #[error(
        "extension `{name}` has no sources to compile; give at least one `.cpp` or `.cu` file."
    )]
    NoSources {
        /// The extension name.
        name: String,
    },

    /// A CUDA source, but the toolchain has no `nvcc`.
    #[error(
        "`{unit}` is a CUDA source but the toolchain was discovered without `nvcc`.\n\
         Discover the toolchain with CUDA enabled (set `CUDA_HOME` or install `nvidia-cuda-nvcc`)."
    )]
    CudaSourceWithoutNvcc {
        /// The CUDA source's display path.
        unit: String,
    },

    /// The build was cancelled ([`crate::Cancel`], e.g. Ctrl-C from Python):
    /// its compilers were stopped and nothing was published.
    #[error("the build was interrupted; its compilers were stopped and nothing was published")]
    Cancelled,

    /// A program could not be started at all.
    #[error("could not run `{program}`: {error}\ncommand: {command}")]
    Spawn {
        /// The program that was started.
        program: String,
        /// The shell-quoted command.
        command: String,
        /// The operating system's reason.
        error: std::io::Error,
    },

    /// The compiler rejected a source.
    #[error(
        "failed to compile `{unit}` ({status})\n\ncommand (run in `{}`):\n  {command}\n\n\
         compiler output:\n{}",
        dir.display(),
        indent(output)
    )]
    Compile {
        /// The source's display path (not named `source`: thiserror reserves that name).
        unit: String,
        /// The directory the compiler ran in (paths in the command are relative to it).
        dir: PathBuf,
        /// The exact command, shell-quoted.
        command: String,
        /// The compiler's stdout followed by its stderr.
        output: String,
        /// How the compiler ended.
        status: ExitStatus,
    },

    /// The kernel killed a compile (most likely out of memory), and it was
    /// killed again when retried alone (or was already alone).
    #[error("{0}")]
    OutOfMemory(Box<KilledCompile>),

    /// The link step failed.
    #[error(
        "failed to link `{library}` ({status})\n\ncommand:\n  {command}\n\nlinker output:\n{}",
        indent(output)
    )]
    Link {
        /// The library being linked.
        library: String,
        /// The exact command, shell-quoted.
        command: String,
        /// The linker's stdout followed by its stderr.
        output: String,
        /// How the linker ended.
        status: ExitStatus,
    },

    /// The object cache could not record or publish an object.
    #[error(transparent)]
    ObjectCache(#[from] abicache_store::StoreError),

    /// A file system operation failed; the message names the path (`fs-err`).
    #[error(transparent)]
    Io(#[from] std::io::Error),

    /// `compile_commands.json` could not be serialised.
    #[error("could not write `compile_commands.json`: {0}")]
    Json(#[from] serde_json::Error),
}

fn indent(text: &str) -> String {
    let text = text.trim_end();
    if text.is_empty() {
        return "  (no output)".to_string();
    }
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A compile the kernel killed, most likely out of memory
/// ([`BuildError::OutOfMemory`]).
#[derive(Debug)]
pub struct KilledCompile {
    /// The source's display path.
    pub unit: String,
    /// The directory the compiler ran in.
    pub dir: PathBuf,
    /// The exact command, shell-quoted.
    pub command: String,
    /// The compiler's stdout followed by its stderr.
    pub output: String,
    /// How the compiler ended.
    pub status: ExitStatus,
    /// Compiles running when it was killed the last time.
    pub jobs: usize,
    /// The compiles running the first time, when it was then retried alone.
    pub retried_after: Option<usize>,
    /// The usable memory after it was killed, and what bounded it.
    pub usable: String,
}

impl std::fmt::Display for KilledCompile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = if self.jobs == 1 { "" } else { "s" };
        write!(
            f,
            "compiling `{}` was killed ({}), most likely by the out-of-memory killer, with {} \
             compile{plural} running",
            self.unit, self.status, self.jobs
        )?;
        if let Some(first) = self.retried_after {
            write!(
                f,
                " (after it was killed with {first} running and retried alone)"
            )?;
        }
        write!(
            f,
            "; {} of memory is usable now. Free memory, raise the memory limit (the cgroup's \
             `memory.max`, the job's memory request), or compile this unit with less \
             optimisation\n\ncommand (run in `{}`):\n  {}\n\ncompiler output:\n{}",
            self.usable,
            self.dir.display(),
            self.command,
            indent(&self.output)
        )
    }
}
