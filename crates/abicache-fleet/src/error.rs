//! The error type of the fleet tools: their own failures, and the load
//! pipeline's ([`abicache::Error`]) wrapped unchanged.

use std::path::PathBuf;

use abicache::gate::{Refusal, Refused};
use abicache::ErrorKind;

/// Anything that can go wrong in a prebuild, a matrix, a probe, an export
/// or an import.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A failure of the load pipeline (scan, key, build, store, audit, a
    /// variable, an I/O error), with its own message and [`ErrorKind`].
    #[error(transparent)]
    Core(#[from] abicache::Error),
    /// Probing a Python interpreter failed.
    #[error("could not probe the Python interpreter `{python}`: {message}")]
    Probe {
        /// The interpreter given with `--python`.
        python: PathBuf,
        /// What went wrong and what to do.
        message: String,
    },

    /// The environments of `prebuild --matrix` could not be created.
    #[error(transparent)]
    Matrix(#[from] MatrixError),
    /// A prebuild names an extension that none of its spec files defines.
    #[error(
        "no extension named `{name}` in the given spec files (they define {}); \
         name one of those, or none to prebuild them all",
        quoted_list(available)
    )]
    UnknownExtension {
        /// The name asked for.
        name: String,
        /// The extensions the spec files define.
        available: Vec<String>,
    },
    /// A prebuild without any environment (interpreter, environment file
    /// or matrix) to key and build for.
    #[error(
        "no environment to prebuild for: name an interpreter with torch, an environment \
         file, or a `python=… torch=…` matrix"
    )]
    NoFleetEnvironment,
    /// A prebuild plan (`abicache run --record`, `prebuild --plan`) could not
    /// be written, read or laid out.
    #[error("prebuild plan `{}`: {message}", path.display())]
    Plan {
        /// The plan file, directory or source file at fault.
        path: PathBuf,
        /// What went wrong and what to do.
        message: String,
    },
    /// A prebuild whose spec files define no extension.
    #[error("no extension to prebuild: the spec files define none")]
    NoFleetExtension,
    /// An export or import target names no local entry.
    #[error("no local entry named or keyed `{target}`; see `abicache ls`")]
    NoSuchEntry {
        /// The name, key or key prefix given.
        target: String,
    },
    /// An entry selected for export was corrupt or removed before it was read.
    #[error(
        "the entry `{name}` ({key}) is corrupt or was removed while exporting; \
         rebuild it and export again"
    )]
    EntryVanished {
        /// The extension's name.
        name: String,
        /// The entry's key.
        key: String,
    },
    /// A signed export (`ABICACHE_SIGNING_KEY` set) selected an entry whose
    /// provenance names no trusted signer: signing it would vouch for code
    /// that no trusted key vouched for. Nothing was written or removed.
    #[error(
        "refusing to sign the entry `{name}` ({key}): {provenance}, so signing it would vouch \
         for code no trusted key vouched for; nothing was written, and the entry stays in the \
         cache. Rebuild it locally (`abicache rm {key}`, then build it again) and export again, \
         or export it unsigned (without `ABICACHE_SIGNING_KEY`)"
    )]
    UnsignableEntry {
        /// The extension's name.
        name: String,
        /// The entry's key.
        key: String,
        /// Where it came from and who signed it (`it was pulled from bundle `…` unsigned`).
        provenance: String,
    },
    /// A cache wheel's distribution is not `NAME==VERSION`.
    #[error(
        "`{text}` is not a distribution for a cache wheel: {problem}; give it as \
         `NAME==VERSION`, e.g. `mykernels-cache==1.2.0`"
    )]
    InvalidDistribution {
        /// What was given.
        text: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A library changed between its lookup and its export.
    #[error("the library `{}` changed while exporting; rebuild it and export again", path.display())]
    LibraryChanged {
        /// The library.
        path: PathBuf,
    },
    /// A cache wheel (or one of its files) would reach 4 GiB, which needs
    /// zip64, which is not written.
    #[error(
        "a cache wheel and each of its files must stay under 4 GiB (zip64 is not written): \
         export fewer entries per wheel"
    )]
    WheelTooLarge,
    /// An outside entry (a bundle's, or the bundle's index) failed one of
    /// the gate's checks ([`abicache::gate`]); nothing was imported.
    #[error(transparent)]
    Refused(Refused),
    /// A file or directory could not be created, written or renamed.
    #[error("cannot {action} `{}`: {source}", path.display())]
    FileIo {
        /// What was being done (`write the bundle`).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The lower crates' errors (and I/O errors) become [`Error::Core`], as
/// the load pipeline wraps them.
macro_rules! through_core {
    ($($from:ty),* $(,)?) => {$(
        impl From<$from> for Error {
            fn from(e: $from) -> Self {
                Error::Core(e.into())
            }
        }
    )*};
}

through_core!(
    abicache::scan::ScanError,
    abicache::key::KeyError,
    abicache::build::BuildError,
    abicache::store::StoreError,
    abicache::audit::AuditError,
    abicache::isa::IsaError,
    std::io::Error,
);

impl Error {
    /// Which class this error belongs to: a wrapped [`abicache::Error`]'s
    /// own, [`ErrorKind::Input`] for every other.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Core(e) => e.kind(),
            Error::Refused(refused) if matches!(refused.refusal, Refusal::Isa { .. }) => {
                ErrorKind::Abi
            }
            _ => ErrorKind::Input,
        }
    }

    /// The process exit code of the command line, as
    /// [`abicache::Error::exit_code`] gives it: 2 for every fleet error
    /// but a wrapped one's own.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Core(e) => e.exit_code(),
            _ => 2,
        }
    }
}

/// Why the matrix's environments could not be created.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// The matrix string is malformed.
    #[error("invalid matrix `{matrix}`: {reason}; expected e.g. `{example}`")]
    Parse {
        /// The string as given.
        matrix: String,
        /// What is wrong with it.
        reason: String,
        /// A valid matrix.
        example: &'static str,
    },
    /// No `uv` on `PATH` and none given.
    #[error(
        "a matrix's missing environments are created with `uv`, and there is no `uv` on `PATH`: \
         install it (`pip install uv`; in a checkout of abicache, `scripts/setup-uv.sh`) or name \
         the `uv` program to use"
    )]
    NoUv,
    /// The `uv` given names no file.
    #[error("the `uv` program `{}` does not exist; name the path of the `uv` program", path.display())]
    UvMissing {
        /// The path given.
        path: PathBuf,
    },
    /// No installed interpreter has the release.
    #[error(
        "no Python {version} interpreter on this machine (searched `{pyenv}/{version}*`, \
         `uv python find {version}` and `python{version}` on `PATH`); a matrix never downloads \
         interpreters: install one (`pyenv install {version}` or `uv python install {version}`) \
         or drop {version} from the matrix's `python=`"
    )]
    NoInterpreter {
        /// The release wanted.
        version: String,
        /// pyenv's versions directory searched.
        pyenv: String,
    },
    /// uv could not be started.
    #[error("could not run `{command}`: {message}; check the `uv` given or the one on `PATH`")]
    UvRun {
        /// The command.
        command: String,
        /// The OS error.
        message: String,
    },
    /// uv failed.
    #[error("`{command}` failed ({status}):\n{output}\n{hint}")]
    UvFailed {
        /// The command.
        command: String,
        /// Its exit status.
        status: String,
        /// What uv printed.
        output: String,
        /// What to check.
        hint: String,
    },
    /// The directory for kept environments is one others could plant environments in.
    #[error(
        "the directory for kept environments `{}` {reason}: a venv found there is run (and what it builds may be \
         signed and pushed), so it must be a private directory of yours; `chmod 700` it, or \
         pass a directory of your own",
        path.display()
    )]
    KeepEnvsNotPrivate {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A file of an environment could not be read or written (path named).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// `names` quoted and joined with `, ` (`none` when empty).
fn quoted_list(names: &[String]) -> String {
    if names.is_empty() {
        return "none".to_owned();
    }
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
