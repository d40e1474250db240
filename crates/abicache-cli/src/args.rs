//! The command-line contract (other tools script against it: keep it stable).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Build, cache and load JIT-compiled PyTorch C++/CUDA extensions under a key
/// that reflects what each binary really depends on.
#[derive(Debug, Parser)]
#[command(name = "abicache", version, max_term_width = 100)]
pub struct Cli {
    /// Cache root (default: `ABICACHE_DIR`, else `$XDG_CACHE_HOME/abicache`, else `~/.cache/abicache`).
    #[arg(long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Remote cache URL for this call (`s3://BUCKET/PREFIX`, `redis://HOST:PORT/DB`, `file:///PATH`, or `none`)
    /// [default: `ABICACHE_REMOTE`, else `remote` in the config file].
    #[arg(long, global = true, value_name = "URL")]
    pub remote: Option<String>,
    /// Say which interpreter and settings were used (on stderr).
    #[arg(long, short, global = true)]
    pub verbose: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Scan sources: the files a key would hash, and the Python-ABI and stable-ABI evidence.
    Scan(ScanArgs),
    /// Compute the cache key of an extension for an environment (from the key memo when
    /// nothing it depends on changed; `--scan` always scans).
    Key(KeyArgs),
    /// Return the path of an ABI-compatible library: from the cache, or built once.
    Build(BuildArgs),
    /// List the cache's entries.
    Ls(JsonArgs),
    /// Explain a key: its ABI decisions and, on a miss, what differs from the closest entry.
    Explain(SpecArgs),
    /// Evict least recently used entries until the cache fits a size; also removes leftovers and stale key memos.
    Gc(GcArgs),
    /// Remove entries by extension name or key (a key prefix of at least 8 characters works).
    Rm(RmArgs),
    /// Show hit/miss/build counters and the cache's size (`--zero` resets the counters).
    Stats(StatsArgs),
    /// Show what a built library really imports (CPython, libtorch C++, stable C shim, CUDA, libstdc++).
    Audit(AuditArgs),
    /// Upload local entries to the remote cache (all of them when none is named).
    Push(crate::remote_cmds::PushArgs),
    /// Download entries from the remote cache into the local one (prebuilding a node's cache).
    Pull(crate::remote_cmds::PullArgs),
    /// Create an ed25519 key pair for signing uploads and trusting downloads.
    Keygen(crate::remote_cmds::KeygenArgs),
    /// Show every effective setting and where it came from (flag, environment, config file, default).
    Config(JsonArgs),
    /// Key a matrix of extensions × environments and build each distinct key once; print the coverage.
    Prebuild(crate::fleet_cmds::PrebuildArgs),
    /// Write local entries into one bundle file (zstd tar, BLAKE3 index, signed with `ABICACHE_SIGNING_KEY`).
    Export(crate::fleet_cmds::ExportArgs),
    /// Verify a bundle in full (and its signer against `ABICACHE_TRUSTED_KEYS`), then publish its entries.
    Import(crate::fleet_cmds::ImportArgs),
    /// Run a command whose Python processes build torch extensions through abicache
    /// (`torch.utils.cpp_extension.load`/`load_inline` intercepted; no code change).
    Run(crate::run_cmd::RunArgs),
    /// Print the miss report (one JSON line per cache miss) as a table.
    Misses(MissesArgs),
}

/// `abicache scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Sources to scan (`.cpp`, `.cu`, …); their local includes are followed.
    #[arg(required = true, value_name = "SOURCE")]
    pub sources: Vec<PathBuf>,
    /// Extra include directory, searched in order after the including file's directory.
    #[arg(short = 'I', value_name = "DIR")]
    pub include: Vec<PathBuf>,
    /// Macro definition (`NAME`, `NAME=VALUE`) used, with those of the scanned
    /// files, to resolve computed includes (`#include MACRO`).
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    pub define: Vec<String>,
    /// Fingerprint root: paths under it are shown relative to it [default: current directory].
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The environment whose torch, Python and CUDA headers are system headers, as
    /// `abicache key` sees them (neither: no system roots, so a local header shadowing
    /// `<torch/…>` is followed).
    #[command(flatten)]
    pub env: ScanEnvArgs,
    /// Print one JSON object instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// Where `abicache scan` takes its system include roots from (neither: none).
#[derive(Debug, Args)]
#[group(required = false, multiple = false)]
pub struct ScanEnvArgs {
    /// An environment TOML, as for `abicache key --env`.
    #[arg(long, value_name = "ENV.toml")]
    pub env: Option<PathBuf>,
    /// A Python interpreter with torch, as for `abicache key --python`.
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
}

/// An extension spec and the environment it is for.
#[derive(Debug, Args)]
pub struct SpecArgs {
    /// The TOML spec (`[[extension]]` tables); its directory is the fingerprint root.
    #[arg(value_name = "SPEC.toml")]
    pub spec: PathBuf,
    /// Which extension of the spec (needed when it defines several).
    #[arg(long, value_name = "NAME")]
    pub extension: Option<String>,
    #[command(flatten)]
    pub env: EnvArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `abicache key`.
#[derive(Debug, Args)]
pub struct KeyArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Scan the sources even when the key memo can answer (the memo's answer is
    /// the same key and payload; a scan also rewrites the memo).
    #[arg(long)]
    pub scan: bool,
}

/// Where the environment comes from (neither: the active venv's interpreter,
/// else `python3` on `PATH`).
#[derive(Debug, Args)]
#[group(required = false, multiple = false)]
pub struct EnvArgs {
    /// An environment TOML (python_version, torch_version, …: docs/cli.md, "The environment").
    #[arg(long, value_name = "ENV.toml")]
    pub env: Option<PathBuf>,
    /// A Python interpreter with torch, probed without importing torch
    /// [default: `$VIRTUAL_ENV/bin/python`, else `python3` on `PATH`].
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
}

/// `abicache build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Build even when the key is cached; the new entry replaces the old one.
    #[arg(long)]
    pub rebuild: bool,
    /// No progress output.
    #[arg(long, short)]
    pub quiet: bool,
    /// Parallel compile jobs, at least 1 [default: `MAX_JOBS`, else the number of cores].
    #[arg(long, short, value_name = "N", value_parser = parse_jobs)]
    pub jobs: Option<usize>,
    /// Do not upload what this call builds to the remote cache (downloads still happen).
    #[arg(long)]
    pub no_upload: bool,
    /// Never compile: a key no source holds (local cache, read-only layers, cache wheels,
    /// remote) is an error naming the closest cached entry, exit code 3
    /// [default: `ABICACHE_OFFLINE`, else `offline` in the config file].
    #[arg(long)]
    pub offline: bool,
}

/// `abicache misses`.
#[derive(Debug, Args)]
pub struct MissesArgs {
    /// The miss report [default: `ABICACHE_MISS_REPORT`, else `miss_report` in the config file].
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Print the report's lines as one JSON array.
    #[arg(long)]
    pub json: bool,
}

/// Commands whose only option is `--json`.
#[derive(Debug, Args)]
pub struct JsonArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `abicache stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Reset the hit/miss/build counters to zero (like `ccache -z`), then show them.
    #[arg(long, short)]
    pub zero: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `abicache gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// Size to shrink the cache to: `10G`, `500Mi`, `1.5GiB`, `2GB`, or bytes.
    #[arg(long, value_name = "SIZE")]
    pub max_size: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `abicache rm`.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// Extension name, key, or key prefix (at least 8 characters).
    #[arg(value_name = "NAME|KEY")]
    pub target: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `abicache audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// A shared library (ELF).
    #[arg(value_name = "LIBRARY.so")]
    pub library: PathBuf,
    /// Print JSON (raw mangled names).
    #[arg(long)]
    pub json: bool,
}

/// `--jobs N`: the rule of `MAX_JOBS` (a whole number of at least 1).
fn parse_jobs(value: &str) -> Result<usize, String> {
    abicache::build::parse_max_jobs(value).map_err(|_| {
        format!("`{value}` is not a positive whole number; pass the number of parallel compile jobs (at least 1)")
    })
}
