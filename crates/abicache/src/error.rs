//! The one error type of the façade, gathering every crate's errors.

use std::path::PathBuf;

use abicache_audit::AuditError;
use abicache_build::BuildError;
use abicache_key::KeyError;
use abicache_scan::ScanError;
use abicache_store::StoreError;

/// Anything that can go wrong between a spec and a loaded library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the sources failed (missing source, unreadable file).
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// The spec, environment or ABI rules refused the request.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The compiler or linker failed, or the toolchain is missing.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The cache could not be used (permissions, lock time-out, I/O).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A library could not be inspected.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// A setting (variable or config-file key) has a value that cannot be
    /// used: refused before any work, naming it (bad input, exit 2).
    #[error(transparent)]
    Settings(#[from] abicache_settings::SettingsError),
    /// The built library imports what its key says it must not.
    #[error("{message}")]
    AuditRefused {
        /// The full, user-facing explanation (symbols, cause, fixes).
        message: String,
    },
    /// The environment has no `torch_dir`, so there is nothing to build against.
    #[error(
        "the environment has no `torch_dir`, so there is nothing to build against: \
         use `--python PATH` for an interpreter with torch, or add `torch_dir` to the environment file"
    )]
    NoTorchDir,
    /// A TVM-FFI module and an environment that does not say where `libtvm_ffi.so` is.
    #[error(
        "extension `{name}` is a TVM-FFI module but the environment has no `tvm_ffi_lib_dir` \
         (the directory of `libtvm_ffi.so`) to link it against: install `apache-tvm-ffi` in this \
         interpreter, or add `tvm_ffi_lib_dir` to the environment file"
    )]
    NoTvmFfiLib {
        /// The extension.
        name: String,
    },
    /// The environment's `torch_dir` is not an installed torch package.
    #[error(
        "`torch_dir` `{}` {problem}, so there is nothing to build against: point `torch_dir` \
         in the environment file at an installed torch package (its `site-packages/torch`), \
         or use `--python PATH` for an interpreter with torch",
        path.display()
    )]
    TorchDirUnusable {
        /// The `torch_dir` given.
        path: PathBuf,
        /// What is wrong with it.
        problem: TorchDirProblem,
    },
    /// An environment variable has a value abicache cannot use.
    #[error("`{name}={value}` {problem}")]
    InvalidVariable {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it and what to set instead.
        problem: &'static str,
    },
    /// The linker's output path has no file name to publish it under.
    #[error("built library `{}` has no file name", path.display())]
    LibraryWithoutFileName {
        /// The library's path.
        path: PathBuf,
    },
    /// A library requires instruction-set extensions this CPU lacks (the
    /// guard before a load, and `abicache import`), or the guard's
    /// variable is invalid.
    #[error(transparent)]
    Isa(#[from] abicache_isa::IsaError),
    /// A CUDA library whose device code no visible GPU can run (the GPU
    /// guard before a load, unless `ABICACHE_GPU_CHECK=0`).
    #[error(transparent)]
    GpuRefused(#[from] crate::gpu_refusal::GpuRefusal),
    /// A CUDA library's device code cannot be read (a corrupt fat binary).
    #[error("cannot read the device code of the built library: {0}")]
    DeviceCode(#[from] abicache_fatbin::Error),
    /// At publish: the device code a built CUDA library carries differs
    /// from what its nvcc flags ask for (a flag the arch parser did not
    /// see, `NVCC_APPEND_FLAGS`, a stale object).
    #[error(
        "refusing to publish `{name}`: its library carries device code for {found}, but its \
         nvcc flags ask for {expected}; a flag abicache did not see (`NVCC_APPEND_FLAGS`, a \
         wrapper script) or a stale object changed it. Remove that flag, or name the \
         architectures in `cuda_archs` / `TORCH_CUDA_ARCH_LIST`, then rebuild"
    )]
    DeviceImagesMismatch {
        /// The extension.
        name: String,
        /// The images found, `, `-joined.
        found: String,
        /// The images the flags ask for, `, `-joined.
        expected: String,
    },
    /// A spec with `-march=native` is keyed for another CPU than the one
    /// it would be compiled on.
    #[error(
        "extension `{name}` is compiled with `{flag}`, which this machine's compiler resolves \
         to `{here}`, but the environment keys it for `host_cpu` `{keyed}`: a library for \
         another CPU cannot be built here with `{flag}`. Build it on that machine, remove \
         `host_cpu` from the environment file to build for this one, or replace `{flag}` by \
         explicit flags (e.g. `-march=znver3`)"
    )]
    HostCpuElsewhere {
        /// The extension.
        name: String,
        /// The native flag.
        flag: String,
        /// The `host_cpu` of the key.
        keyed: String,
        /// What the flag resolves to here.
        here: String,
    },
    /// Offline mode (`ABICACHE_OFFLINE=1`, `--offline`): no source holds
    /// the key and nothing was compiled (exit 3, `abicache.CacheMiss`).
    #[error("{0}")]
    CacheMiss(Box<crate::misses::CacheMiss>),
    /// An I/O error with its path already named.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What is wrong with a `torch_dir` ([`Error::TorchDirUnusable`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TorchDirProblem {
    /// It is missing or not a directory.
    #[error("does not exist or is not a directory")]
    NotADirectory,
    /// It has no `include/torch`.
    #[error("has no `{}`", expected.display())]
    NoHeaders {
        /// The directory torch's headers would be in.
        expected: PathBuf,
    },
}

/// Broad classes of [`Error`], for exit codes and Python exception types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A compile, link or audit failure: exit code 1, `abicache.BuildError`.
    Build,
    /// An ABI refusal (stable-header violation, runtime floor, a library
    /// this CPU or no visible GPU can run): exit 2, `abicache.AbiError`.
    Abi,
    /// Waiting for another builder timed out: exit 1 (the input was fine; try
    /// again later), `abicache.LockTimeout`.
    LockTimeout,
    /// Bad input or environment: exit 2, `abicache.Error` (or an OS error).
    Input,
    /// The build was cancelled (Ctrl-C): exit 130, `KeyboardInterrupt`.
    Interrupted,
    /// Offline mode refused to compile a key no source holds: exit 3,
    /// `abicache.CacheMiss`.
    CacheMiss,
}

impl Error {
    /// Which class this error belongs to.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Build(
                BuildError::Compile { .. } | BuildError::OutOfMemory(_) | BuildError::Link { .. },
            ) => ErrorKind::Build,
            Error::Build(BuildError::Cancelled) => ErrorKind::Interrupted,
            Error::AuditRefused { .. } => ErrorKind::Build,
            Error::Key(k) if k.is_abi_refusal() => ErrorKind::Abi,
            Error::Isa(abicache_isa::IsaError::Unsupported { .. }) => ErrorKind::Abi,
            Error::GpuRefused(_) => ErrorKind::Abi,
            Error::DeviceImagesMismatch { .. } => ErrorKind::Build,
            Error::Store(s) if s.is_lock_timeout() => ErrorKind::LockTimeout,
            Error::CacheMiss(_) => ErrorKind::CacheMiss,
            _ => ErrorKind::Input,
        }
    }

    /// The process exit code of the command line: 1 for a failed build or a
    /// lock time-out (nothing wrong with the request), 2 for bad input or an
    /// ABI refusal, 3 for a cache miss under offline mode, 130 for an
    /// interrupted build.
    pub fn exit_code(&self) -> i32 {
        match self.kind() {
            ErrorKind::Build | ErrorKind::LockTimeout => 1,
            ErrorKind::Abi | ErrorKind::Input => 2,
            ErrorKind::CacheMiss => 3,
            ErrorKind::Interrupted => 130,
        }
    }
}

/// The errno behind `io`: its own, else that of an I/O error it wraps, else
/// the errno its kind was decoded from (`fs_err` wraps the OS error to name
/// the path and hides it, `raw_os_error` included); never 0, so a caller
/// reporting it (Python's `OSError.errno`) never shows `[Errno 0]`.
pub fn os_errno(io: &std::io::Error) -> i32 {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(io);
    while let Some(e) = current {
        current = match e.downcast_ref::<std::io::Error>() {
            Some(inner) => {
                if let Some(code) = inner.raw_os_error() {
                    return code;
                }
                inner
                    .get_ref()
                    .map(|r| r as &(dyn std::error::Error + 'static))
            }
            None => e.source(),
        };
    }
    // `fs_err` keeps the OS error to itself; its kind was decoded from the
    // errno, so map it back (the inverse of std's `decode_error_kind`).
    use std::io::ErrorKind as K;
    match io.kind() {
        K::NotFound => libc::ENOENT,
        K::PermissionDenied => libc::EACCES,
        K::AlreadyExists => libc::EEXIST,
        K::NotADirectory => libc::ENOTDIR,
        K::IsADirectory => libc::EISDIR,
        K::DirectoryNotEmpty => libc::ENOTEMPTY,
        K::ReadOnlyFilesystem => libc::EROFS,
        K::StorageFull => libc::ENOSPC,
        K::QuotaExceeded => libc::EDQUOT,
        K::FileTooLarge => libc::EFBIG,
        K::CrossesDevices => libc::EXDEV,
        K::TooManyLinks => libc::EMLINK,
        K::ResourceBusy => libc::EBUSY,
        K::ExecutableFileBusy => libc::ETXTBSY,
        K::StaleNetworkFileHandle => libc::ESTALE,
        K::InvalidFilename => libc::ENAMETOOLONG,
        K::NotSeekable => libc::ESPIPE,
        K::ArgumentListTooLong => libc::E2BIG,
        K::Deadlock => libc::EDEADLK,
        K::Interrupted => libc::EINTR,
        K::WouldBlock => libc::EAGAIN,
        K::TimedOut => libc::ETIMEDOUT,
        K::BrokenPipe => libc::EPIPE,
        K::OutOfMemory => libc::ENOMEM,
        K::Unsupported => libc::EOPNOTSUPP,
        K::InvalidInput => libc::EINVAL,
        _ => libc::EIO,
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::os_errno;

    /// `fs_err` errors used to reach Python as `[Errno 0]`: the OS error
    /// they wrap was not looked for.
    #[test]
    fn errno_of_a_wrapped_fs_err_error_is_the_os_errors_not_0() {
        let missing = fs_err::File::open("/nonexistent/abicache-errno-test").unwrap_err();
        assert_eq!(missing.raw_os_error(), None, "fs_err hides the errno");
        assert_eq!(os_errno(&missing), libc::ENOENT);
        let not_dir = fs_err::read_dir("/proc/self/status").unwrap_err();
        assert_eq!(os_errno(&not_dir), libc::ENOTDIR);
        let is_dir = fs_err::read("/proc/self").unwrap_err();
        assert_eq!(os_errno(&is_dir), libc::EISDIR);
        let plain = std::io::Error::from_raw_os_error(libc::EEXIST);
        assert_eq!(os_errno(&plain), libc::EEXIST);
        let made_up = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        assert_eq!(os_errno(&made_up), libc::ENOENT);
    }
}
