//! The names, as constants, so a typo is a compile error.

/// Root of the cache.
pub const ABICACHE_DIR: &str = "ABICACHE_DIR";
/// Base of the default cache root (`$XDG_CACHE_HOME/abicache`), when absolute.
pub const XDG_CACHE_HOME: &str = "XDG_CACHE_HOME";
/// Home directory: base of the default cache root and config file.
pub const HOME: &str = "HOME";
/// Read-only cache roots consulted after the local cache, never written.
pub const ABICACHE_READONLY_DIRS: &str = "ABICACHE_READONLY_DIRS";
/// Parallel compile jobs when a compiler launcher is set (before `MAX_JOBS`).
pub const ABICACHE_JOBS: &str = "ABICACHE_JOBS";
/// Seconds to wait for a key's lock.
pub const ABICACHE_LOCK_TIMEOUT: &str = "ABICACHE_LOCK_TIMEOUT";
/// Size bound applied by an automatic gc after each publish.
pub const ABICACHE_MAX_SIZE: &str = "ABICACHE_MAX_SIZE";
/// Seconds after its last use during which gc never evicts an entry or object.
pub const ABICACHE_GC_GRACE: &str = "ABICACHE_GC_GRACE";
/// Compiler launcher (`ccache`, `sccache`) prepended to compile commands.
pub const ABICACHE_COMPILER_LAUNCHER: &str = "ABICACHE_COMPILER_LAUNCHER";
/// Forces a rebuild from the Python package (`1`).
pub const ABICACHE_REBUILD: &str = "ABICACHE_REBUILD";
/// Precompiled headers: `0` off, `auto` (default) on.
pub const ABICACHE_PCH: &str = "ABICACHE_PCH";
/// Bytes of precompiled headers a cache keeps.
pub const ABICACHE_PCH_MAX_SIZE: &str = "ABICACHE_PCH_MAX_SIZE";
/// Background precompiled-header compiles at once, per user and machine.
pub const ABICACHE_PCH_JOBS: &str = "ABICACHE_PCH_JOBS";
/// Interception of torch's `load`/`load_inline` in every Python process: `1` or `verbose`.
pub const ABICACHE_INTERCEPT: &str = "ABICACHE_INTERCEPT";
/// The prebuild plan directory every load of the run is recorded into (`abicache run --record`).
pub const ABICACHE_RECORD: &str = "ABICACHE_RECORD";
/// Python's module search path, which `abicache run` extends.
pub const PYTHONPATH: &str = "PYTHONPATH";
/// Seconds an interpreter probe (`--python`) may take.
pub const ABICACHE_PROBE_TIMEOUT: &str = "ABICACHE_PROBE_TIMEOUT";
/// The instruction-set guard before a load: `1` (default) on, `0` off.
pub const ABICACHE_ISA_CHECK: &str = "ABICACHE_ISA_CHECK";
/// Offline mode: `1` a cache miss never compiles (it is an error), `warn`
/// reports each miss and builds it.
pub const ABICACHE_OFFLINE: &str = "ABICACHE_OFFLINE";
/// A file every cache miss appends one JSON line to.
pub const ABICACHE_MISS_REPORT: &str = "ABICACHE_MISS_REPORT";
/// The GPU guard before a load: `1` (default) on, `0` off.
pub const ABICACHE_GPU_CHECK: &str = "ABICACHE_GPU_CHECK";
/// The GPUs CUDA may use (indices or UUIDs); the GPU guard checks those.
pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
/// Flags nvcc appends to its command line (read by nvcc itself).
pub const NVCC_APPEND_FLAGS: &str = "NVCC_APPEND_FLAGS";
/// Flags nvcc prepends to its command line (read by nvcc itself).
pub const NVCC_PREPEND_FLAGS: &str = "NVCC_PREPEND_FLAGS";
/// Parallel compile jobs.
pub const MAX_JOBS: &str = "MAX_JOBS";
/// Host C++ compiler.
pub const CXX: &str = "CXX";
/// Host C compiler, passed to nvcc as `-ccbin`.
pub const CC: &str = "CC";
/// CUDA toolkit root.
pub const CUDA_HOME: &str = "CUDA_HOME";
/// CUDA toolkit root (alternative name).
pub const CUDA_PATH: &str = "CUDA_PATH";
/// Directories searched for the compilers, nvcc and `python3`.
pub const PATH: &str = "PATH";
/// CUDA architectures to build for.
pub const TORCH_CUDA_ARCH_LIST: &str = "TORCH_CUDA_ARCH_LIST";
/// CUDA architectures of a TVM-FFI module (`abicache.tvm_ffi`), as TVM-FFI reads it.
pub const TVM_FFI_CUDA_ARCH_LIST: &str = "TVM_FFI_CUDA_ARCH_LIST";
/// The active virtual environment: the command line's default interpreter.
pub const VIRTUAL_ENV: &str = "VIRTUAL_ENV";
/// Remote cache URL.
pub const ABICACHE_REMOTE: &str = "ABICACHE_REMOTE";
/// `read-write` or `read-only`.
pub const ABICACHE_REMOTE_MODE: &str = "ABICACHE_REMOTE_MODE";
/// Seconds one remote operation may take.
pub const ABICACHE_REMOTE_TIMEOUT: &str = "ABICACHE_REMOTE_TIMEOUT";
/// Compiled objects through the remote cache: `1` (default) or `0`.
pub const ABICACHE_REMOTE_OBJECTS: &str = "ABICACHE_REMOTE_OBJECTS";
/// Largest remote entry a download reads.
pub const ABICACHE_REMOTE_MAX_SIZE: &str = "ABICACHE_REMOTE_MAX_SIZE";
/// Public keys whose signatures make a remote entry trusted.
pub const ABICACHE_TRUSTED_KEYS: &str = "ABICACHE_TRUSTED_KEYS";
/// Secret key that uploads are signed with.
pub const ABICACHE_SIGNING_KEY: &str = "ABICACHE_SIGNING_KEY";
/// Path of the config file.
pub const ABICACHE_CONFIG: &str = "ABICACHE_CONFIG";
/// Base of the default config file.
pub const XDG_CONFIG_HOME: &str = "XDG_CONFIG_HOME";
/// S3 endpoint of an `s3://` remote.
pub const AWS_ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";
/// S3 access key.
pub const AWS_ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
/// S3 secret key.
pub const AWS_SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
/// S3 region.
pub const AWS_REGION: &str = "AWS_REGION";
/// S3 region, read when `AWS_REGION` is unset.
pub const AWS_DEFAULT_REGION: &str = "AWS_DEFAULT_REGION";
/// Disables colour in progress output (<https://no-color.org>).
pub const NO_COLOR: &str = "NO_COLOR";
/// Terminal type: `dumb` turns the progress bar into plain lines.
pub const TERM: &str = "TERM";
