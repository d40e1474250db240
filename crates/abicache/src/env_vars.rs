//! Every environment variable abicache reads, in one documented list.
//!
//! The README's table is checked against [`ENV_VARS`] by a test, so a
//! variable cannot be added here without being documented there.

/// One environment variable abicache reads.
#[derive(Debug, Clone, Copy)]
pub struct EnvVar {
    /// The variable's name.
    pub name: &'static str,
    /// What applies when it is unset.
    pub default: &'static str,
    /// What it does.
    pub meaning: &'static str,
}

pub use abicache_store::env::{
    ABICACHE_DIR, ABICACHE_GC_GRACE, ABICACHE_LOCK_TIMEOUT, ABICACHE_MAX_SIZE, XDG_CACHE_HOME,
};

/// Compiler launcher (`ccache`, `sccache`) prepended to compile commands.
pub const ABICACHE_COMPILER_LAUNCHER: &str = "ABICACHE_COMPILER_LAUNCHER";
/// Forces a rebuild from the Python package (`1`).
pub const ABICACHE_REBUILD: &str = "ABICACHE_REBUILD";
/// Precompiled headers: `0` off, `auto` (default) on.
pub const ABICACHE_PCH: &str = "ABICACHE_PCH";
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
/// CUDA architectures to build for.
pub const TORCH_CUDA_ARCH_LIST: &str = "TORCH_CUDA_ARCH_LIST";

pub use abicache_remote::{
    ABICACHE_CONFIG, ABICACHE_REMOTE, ABICACHE_REMOTE_MODE, ABICACHE_REMOTE_TIMEOUT,
    ABICACHE_SIGNING_KEY, ABICACHE_TRUSTED_KEYS,
};
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

/// All variables, in the order the README documents them.
pub const ENV_VARS: &[EnvVar] = &[
    EnvVar {
        name: ABICACHE_DIR,
        default: "`$XDG_CACHE_HOME/abicache`, else `~/.cache/abicache`",
        meaning: "Root of the cache (entries, objects, locks, stats).",
    },
    EnvVar {
        name: XDG_CACHE_HOME,
        default: "`~/.cache`",
        meaning: "Base of the default cache root when `ABICACHE_DIR` is unset.",
    },
    EnvVar {
        name: ABICACHE_LOCK_TIMEOUT,
        default: "`600`",
        meaning: "Seconds to wait for another process building the same key before giving up with an error naming its pid.",
    },
    EnvVar {
        name: ABICACHE_MAX_SIZE,
        default: "unset (no bound)",
        meaning: "Size bound (`10G`, `500M`) applied by an automatic least-recently-used `gc` after each publish.",
    },
    EnvVar {
        name: ABICACHE_GC_GRACE,
        default: "`60`",
        meaning: "Seconds after its last use during which `gc` never evicts an entry or a compiled object, so a path a hit returned stays loadable and a starting build keeps the objects it counted.",
    },
    EnvVar {
        name: ABICACHE_COMPILER_LAUNCHER,
        default: "unset",
        meaning: "Compiler launcher (`ccache`, `sccache`) put in front of every compile command.",
    },
    EnvVar {
        name: ABICACHE_REBUILD,
        default: "unset",
        meaning: "`1` makes the Python package rebuild instead of using a cached entry.",
    },
    EnvVar {
        name: ABICACHE_PCH,
        default: "`auto`",
        meaning: "`0` turns precompiled headers off; `auto` uses ready ones and builds a missing one in the background after the build that needed it (see \"Building\").",
    },
    EnvVar {
        name: MAX_JOBS,
        default: "number of cores",
        meaning: "Translation units compiled in parallel.",
    },
    EnvVar {
        name: CXX,
        default: "`c++` on `PATH`",
        meaning: "Host C++ compiler.",
    },
    EnvVar {
        name: CC,
        default: "unset",
        meaning: "Host C compiler, passed to nvcc as `-ccbin` (as torch does).",
    },
    EnvVar {
        name: CUDA_HOME,
        default: "unset",
        meaning: "CUDA toolkit root searched for `bin/nvcc`, before `PATH` and NVIDIA's pip wheels.",
    },
    EnvVar {
        name: CUDA_PATH,
        default: "unset",
        meaning: "Same as `CUDA_HOME` when that is unset.",
    },
    EnvVar {
        name: TORCH_CUDA_ARCH_LIST,
        default: "the visible GPUs' capabilities",
        meaning: "CUDA architectures (`8.0 9.0+PTX`) when an extension sets no `cuda_archs`.",
    },
    EnvVar {
        name: ABICACHE_REMOTE,
        default: "unset (no remote)",
        meaning: "Remote cache URL: `s3://BUCKET/PREFIX`, `redis://HOST:PORT/DB` or `file:///PATH` (`none` turns a configured one off); see \"Remote cache\".",
    },
    EnvVar {
        name: ABICACHE_REMOTE_MODE,
        default: "`read-write`",
        meaning: "`read-only` downloads but never uploads.",
    },
    EnvVar {
        name: ABICACHE_REMOTE_TIMEOUT,
        default: "`10`",
        meaning: "Seconds one remote operation may take before it counts as a failure (a warning and a local build).",
    },
    EnvVar {
        name: ABICACHE_TRUSTED_KEYS,
        default: "unset (entries are not checked for a signature)",
        meaning: "ed25519 public keys (hex, or files of them; comma or space separated): only remote entries signed by one of them are used.",
    },
    EnvVar {
        name: ABICACHE_SIGNING_KEY,
        default: "unset (uploads are unsigned)",
        meaning: "ed25519 secret key (hex, or a file holding it, as `abicache keygen` writes) that uploads are signed with.",
    },
    EnvVar {
        name: ABICACHE_CONFIG,
        default: "`$XDG_CONFIG_HOME/abicache/config.toml`, else `~/.config/abicache/config.toml`",
        meaning: "Config file with `remote`, `remote_mode`, `remote_timeout`, `trusted_keys`, `signing_key` (the variables above win).",
    },
    EnvVar {
        name: XDG_CONFIG_HOME,
        default: "`~/.config`",
        meaning: "Base of the default config file when `ABICACHE_CONFIG` is unset.",
    },
    EnvVar {
        name: AWS_ENDPOINT_URL,
        default: "AWS's endpoint for the region",
        meaning: "S3 endpoint (MinIO, Ceph, moto) of an `s3://` remote.",
    },
    EnvVar {
        name: AWS_ACCESS_KEY_ID,
        default: "unset (AWS's other credential sources)",
        meaning: "S3 access key of an `s3://` remote.",
    },
    EnvVar {
        name: AWS_SECRET_ACCESS_KEY,
        default: "unset (AWS's other credential sources)",
        meaning: "S3 secret key of an `s3://` remote.",
    },
    EnvVar {
        name: AWS_REGION,
        default: "`us-east-1`",
        meaning: "S3 region of an `s3://` remote (`AWS_DEFAULT_REGION` works too).",
    },
];
