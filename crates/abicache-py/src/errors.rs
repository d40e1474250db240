//! Rust errors → Python exceptions: the `abicache.Error` hierarchy, and
//! Python's own `OSError` subclasses for I/O errors (as polars does).

use abicache::build::BuildError as CompileFailure;
use abicache::scan::ScanError;
use abicache::store::StoreError;
use abicache::{Error as CoreError, ErrorKind};
use pyo3::exceptions::{
    PyFileExistsError, PyFileNotFoundError, PyOSError, PyPermissionError, PyRuntimeError,
};
use pyo3::prelude::*;

pyo3::create_exception!(
    abicache,
    Error,
    PyRuntimeError,
    "Base class of every abicache error (a `RuntimeError`, as torch.utils.cpp_extension raises); its message says what happened and what to do."
);
pyo3::create_exception!(
    abicache,
    BuildError,
    Error,
    "A compile, link or audit failure; `.output` and `.command` hold the compiler's output and the exact command (None when no compiler ran)."
);
pyo3::create_exception!(
    abicache,
    AbiError,
    Error,
    "An ABI refusal: a non-stable header under a stable target, a torch below (or unparseable against) the stable target, or a library that requires instruction-set extensions this CPU lacks (`ABICACHE_ISA_CHECK=0` loads it anyway)."
);
pyo3::create_exception!(
    abicache,
    LockTimeout,
    Error,
    "Waiting for another process building the same key timed out (`ABICACHE_LOCK_TIMEOUT`)."
);

pyo3::create_exception!(
    abicache,
    CacheMiss,
    Error,
    "Offline mode (`ABICACHE_OFFLINE=1`): no cache source holds the key and nothing was compiled. The message names the extension, the key, the closest cached entry with the fields that differ, and the command that would build it; `.extension`, `.key`, `.closest_key` (None when the cache holds no entry of the extension), `.differs` (each differing field as `abicache explain` prints it) and `.command` hold them."
);

/// The I/O error at the bottom of `e`, when `e` is one and nothing more.
fn io_source(e: &CoreError) -> Option<&std::io::Error> {
    match e {
        CoreError::Io(io)
        | CoreError::Scan(ScanError::Unreadable { source: io, .. })
        | CoreError::Store(StoreError::Io(io) | StoreError::IoAt { source: io, .. })
        | CoreError::Build(CompileFailure::Io(io))
        | CoreError::Key(abicache::key::KeyError::Io(io))
        | CoreError::Audit(abicache::audit::AuditError::Io { source: io, .. }) => Some(io),
        _ => None,
    }
}

/// Python's `OSError` subclass for `io`, carrying its errno and `message`.
fn os_error(io: &std::io::Error, message: String) -> PyErr {
    let args = (abicache::os_errno(io), message);
    match io.kind() {
        std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(args),
        std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(args),
        std::io::ErrorKind::AlreadyExists => PyFileExistsError::new_err(args),
        _ => PyOSError::new_err(args),
    }
}

/// Converts a fleet error into the Python exception a caller catches: a
/// wrapped load-pipeline error as [`to_py`] converts it, a file that could
/// not be written as its `OSError`, any other as `abicache.Error`.
pub fn fleet_to_py(py: Python<'_>, e: abicache_fleet::Error) -> PyErr {
    match e {
        abicache_fleet::Error::Core(core) => to_py(py, core),
        abicache_fleet::Error::FileIo { ref source, .. } => os_error(source, e.to_string()),
        other => Error::new_err(other.to_string()),
    }
}

/// Converts a façade error into the Python exception a caller catches.
pub fn to_py(py: Python<'_>, e: CoreError) -> PyErr {
    let message = e.to_string();
    if let CoreError::Scan(ScanError::MissingSource { path }) = &e {
        return PyFileNotFoundError::new_err((2, message, path.display().to_string()));
    }
    if let Some(io) = io_source(&e) {
        return os_error(io, message);
    }
    match e.kind() {
        ErrorKind::Build => {
            let err = BuildError::new_err(message);
            let (output, command) = match &e {
                CoreError::Build(
                    CompileFailure::Compile {
                        output, command, ..
                    }
                    | CompileFailure::Link {
                        output, command, ..
                    },
                ) => (Some(output.clone()), Some(command.clone())),
                _ => (None, None),
            };
            let value = err.value(py);
            // Setting attributes on a fresh exception instance cannot fail.
            let _ = value.setattr("output", output);
            let _ = value.setattr("command", command);
            err
        }
        ErrorKind::Abi => AbiError::new_err(message),
        ErrorKind::LockTimeout => LockTimeout::new_err(message),
        ErrorKind::Input => Error::new_err(message),
        ErrorKind::Interrupted => pyo3::exceptions::PyKeyboardInterrupt::new_err(message),
        ErrorKind::CacheMiss => {
            let err = CacheMiss::new_err(message);
            if let CoreError::CacheMiss(miss) = &e {
                let value = err.value(py);
                let differs: Vec<String> = miss
                    .closest
                    .iter()
                    .flat_map(|c| c.changes.iter().map(ToString::to_string))
                    .collect();
                // Setting attributes on a fresh exception instance cannot fail.
                let _ = value.setattr("extension", &miss.extension);
                let _ = value.setattr("key", &miss.key);
                let _ = value.setattr("closest_key", miss.closest.as_ref().map(|c| &c.key));
                let _ = value.setattr("differs", differs);
                let _ = value.setattr("command", &miss.command);
            }
            err
        }
    }
}
