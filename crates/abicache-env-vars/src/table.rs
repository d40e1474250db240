//! The table: one [`EnvVar`] per variable, in the order the documentation
//! lists them, and the reference page generated from it.

use crate::names::*;

/// What an empty (or all-blank) value means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Empty {
    /// The variable counts as unset: its default applies.
    Unset,
    /// The value is used as it is (`PATH`: an empty entry is the current
    /// directory, as the shell treats it).
    AsIs,
}

/// The format of a variable's value, as documented and as its reader parses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueFormat {
    /// A file or directory path.
    Path,
    /// Directories separated by `:`.
    PathList,
    /// A program name looked up on `PATH`, or a path.
    Program,
    /// A number of seconds, fractions allowed.
    Seconds,
    /// A size: bytes, or a number with `K`/`M`/`G`/`T` (powers of 1024, also
    /// written `Ki`/`KiB`…) or `KB`/`MB`/`GB`/`TB` (powers of 1000).
    Size,
    /// A whole number of at least 1.
    Count,
    /// `1` or empty.
    Flag,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A remote-cache URL.
    Url,
    /// CUDA architectures such as `8.0 9.0+PTX`.
    ArchList,
    /// ed25519 public keys (hex, or files of them), comma or space separated.
    PublicKeys,
    /// An ed25519 secret key (hex, or a file holding it).
    SecretKey,
    /// Free text passed on as it is.
    Text,
}

impl ValueFormat {
    /// A short description for tables (`abicache config`, the reference page).
    pub fn describe(&self) -> String {
        match self {
            ValueFormat::Path => "path".into(),
            ValueFormat::PathList => "paths separated by `:`".into(),
            ValueFormat::Program => "program name or path".into(),
            ValueFormat::Seconds => "seconds".into(),
            ValueFormat::Size => "size (`10G`, `500Mi`, `1.5GiB`, bytes)".into(),
            ValueFormat::Count => "whole number ≥ 1".into(),
            ValueFormat::Flag => "`1` or `0`".into(),
            ValueFormat::Choice(words) => words
                .iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(" or "),
            ValueFormat::Url => "URL".into(),
            ValueFormat::ArchList => "architecture list".into(),
            ValueFormat::PublicKeys => "public keys".into(),
            ValueFormat::SecretKey => "secret key".into(),
            ValueFormat::Text => "text".into(),
        }
    }
}

/// One environment variable abicache reads.
#[derive(Debug, Clone, Copy)]
pub struct EnvVar {
    /// The variable's name.
    pub name: &'static str,
    /// What applies when it is unset (Markdown, as the reference page shows it).
    pub default: &'static str,
    /// The format of its value.
    pub format: ValueFormat,
    /// What an empty value means.
    pub empty: Empty,
    /// The key that sets the same thing in the config file, if any (the
    /// variable wins over it).
    pub config_key: Option<&'static str>,
    /// Its value is a secret: `abicache config` shows only whether it is set.
    pub secret: bool,
    /// What it does (Markdown).
    pub meaning: &'static str,
}

impl EnvVar {
    const fn new(name: &'static str, default: &'static str, format: ValueFormat) -> EnvVar {
        EnvVar {
            name,
            default,
            format,
            empty: Empty::Unset,
            config_key: None,
            secret: false,
            meaning: "",
        }
    }

    const fn meaning(mut self, meaning: &'static str) -> EnvVar {
        self.meaning = meaning;
        self
    }

    const fn config_key(mut self, key: &'static str) -> EnvVar {
        self.config_key = Some(key);
        self
    }

    const fn secret(mut self) -> EnvVar {
        self.secret = true;
        self
    }

    const fn empty_as_is(mut self) -> EnvVar {
        self.empty = Empty::AsIs;
        self
    }
}

/// The command that writes [`reference_page`] to where the documentation
/// site has it (run from the repository root).
pub const REFERENCE_PAGE_COMMAND: &str =
    "cargo run -p abicache-env-vars --example env_vars_page > docs/reference/env-vars.md";

/// Where [`REFERENCE_PAGE_COMMAND`] writes the page, from the repository root.
pub const REFERENCE_PAGE_PATH: &str = "docs/reference/env-vars.md";

/// The documentation site's environment-variable reference
/// (`docs/reference/env-vars.md`), generated in full from [`ENV_VARS`]: a
/// header saying how to regenerate it, the table of [`markdown_table`], and
/// the variables that the config file can also set. A test fails when the
/// committed page differs from this.
pub fn reference_page() -> String {
    let mut out = format!(
        "<!-- Generated from ENV_VARS (crates/abicache-env-vars/src/table.rs): do not edit.\n     \
         Regenerate: {REFERENCE_PAGE_COMMAND} -->\n\n"
    );
    out.push_str(
        "# Environment variables\n\n\
         Every environment variable abicache reads, with what applies when it is unset and the \
         format of its value. An empty or all-blank value counts as unset (its default applies) \
         unless its row says otherwise. `abicache config` shows every effective setting and \
         where it came from.\n\n",
    );
    out.push_str(&markdown_table());
    out.push_str(
        "\n## Also set in the config file\n\n\
         These settings may also be given in the config file (`ABICACHE_CONFIG`); the variable \
         wins over the file's key. `abicache config` shows a secret only as set or unset.\n\n\
         | config key | variable | secret |\n|---|---|---|\n",
    );
    for var in ENV_VARS {
        if let Some(key) = var.config_key {
            let secret = if var.secret { "yes" } else { "no" };
            out.push_str(&format!("| `{key}` | `{}` | {secret} |\n", var.name));
        }
    }
    out
}

/// The table of every variable (header, separator, one row per variable),
/// as [`reference_page`] shows it.
pub fn markdown_table() -> String {
    let mut out = String::from("| variable | default | value | meaning |\n|---|---|---|---|\n");
    for var in ENV_VARS {
        let value = match var.empty {
            Empty::Unset => var.format.describe(),
            Empty::AsIs => format!("{} (empty: used as is)", var.format.describe()),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            var.name, var.default, value, var.meaning
        ));
    }
    out
}

/// The entry of `name`, if abicache reads it.
pub fn lookup(name: &str) -> Option<&'static EnvVar> {
    ENV_VARS.iter().find(|v| v.name == name)
}

/// All variables, in the order the reference page documents them.
pub const ENV_VARS: &[EnvVar] = &[
    EnvVar::new(ABICACHE_DIR, "`$XDG_CACHE_HOME/abicache`, else `~/.cache/abicache`", ValueFormat::Path)
        .meaning("Root of the cache (entries, objects, locks, stats)."),
    EnvVar::new(XDG_CACHE_HOME, "`~/.cache`", ValueFormat::Path)
        .meaning("Base of the default cache root when `ABICACHE_DIR` is unset (used only when absolute)."),
    EnvVar::new(HOME, "none", ValueFormat::Path)
        .meaning("Home directory: base of the default cache root and config file."),
    EnvVar::new(ABICACHE_READONLY_DIRS, "unset (no layers)", ValueFormat::PathList)
        .config_key("readonly_dirs")
        .meaning("Read-only cache roots (populated by CI, on NFS or in an image layer) consulted in order after the local cache and never written; installed cache wheels are added after them (see [Fleet](../fleet.md))."),
    EnvVar::new(ABICACHE_LOCK_TIMEOUT, "`600`", ValueFormat::Seconds)
        .meaning("Seconds to wait for another process building the same key before giving up with an error naming its pid."),
    EnvVar::new(ABICACHE_MAX_SIZE, "unset (no bound)", ValueFormat::Size)
        .meaning("Size bound applied by an automatic least-recently-used `gc` after each publish."),
    EnvVar::new(ABICACHE_GC_GRACE, "`60`", ValueFormat::Seconds)
        .meaning("Seconds after its last use during which `gc` never evicts an entry or a compiled object, so a path a hit returned stays loadable and a starting build keeps the objects it counted."),
    EnvVar::new(ABICACHE_COMPILER_LAUNCHER, "unset", ValueFormat::Program)
        .meaning("Compiler launcher (`ccache`, `sccache`, `distcc`) put in front of every compile command (not the link); see [Building](../building.md)."),
    EnvVar::new(ABICACHE_REBUILD, "unset", ValueFormat::Flag)
        .meaning("`1` makes the Python package rebuild instead of using a cached entry; `0` or unset does not; any other value is refused with an error naming it."),
    EnvVar::new(ABICACHE_PCH, "`auto`", ValueFormat::Choice(&["auto", "0"]))
        .meaning("`0` turns precompiled headers off; `auto` uses ready ones and builds a missing one in the background once a second build has needed it (see [Building](../building.md))."),
    EnvVar::new(ABICACHE_PCH_MAX_SIZE, "a quarter of `ABICACHE_MAX_SIZE`, else `2G`", ValueFormat::Size)
        .meaning("Bytes of precompiled headers a cache keeps; the least recently used are removed first when a new one is adopted."),
    EnvVar::new(ABICACHE_PCH_JOBS, "`1`", ValueFormat::Count)
        .meaning("Background precompiled-header compiles at once for this user on this machine (lock files in `$XDG_RUNTIME_DIR/abicache/pch-slots`, else `$TMPDIR/abicache-UID/pch-slots`; in the cache's `v1/locks/pch-slots` when that directory is another user's or writable by others); one cache never runs more than one."),
    EnvVar::new(ABICACHE_INTERCEPT, "unset (off)", ValueFormat::Choice(&["1", "verbose", "0"]))
        .meaning("`1`: in every Python process with abicache installed, `torch.utils.cpp_extension.load` and `load_inline` become abicache's (calls abicache does not support go to torch's); `verbose` (any case) also prints one line per call on stderr; `0`: off. Any other value leaves interception off, with one line on stderr naming the variable and these values. Set by `abicache run` (see [Interception](../interception.md))."),
    EnvVar::new(ABICACHE_RECORD, "unset (off)", ValueFormat::Path)
        .meaning("A prebuild plan directory: every extension a Python process loads through abicache (hit or build, interception included) is added to it, with a copy of its sources; build it elsewhere with `abicache prebuild --plan`. Set by `abicache run --record PLAN` (see [Record, then prebuild](../fleet.md#record-then-prebuild))."),
    EnvVar::new(PYTHONPATH, "unset", ValueFormat::PathList)
        .meaning("`abicache run` puts the package's `sitecustomize` directory first on it for `CMD`, keeping the rest."),
    EnvVar::new(ABICACHE_PROBE_TIMEOUT, "`60`", ValueFormat::Seconds)
        .meaning("Seconds probing an interpreter (`--python`) may take before it is stopped and refused; its output is capped at 4 MiB."),
    EnvVar::new(ABICACHE_ISA_CHECK, "`1`", ValueFormat::Choice(&["1", "0"]))
        .meaning("`0` turns the instruction-set guard off: a library whose compile flags require extensions this CPU lacks (`-mavx512bf16`, `-march=native` from another machine) is then loaded anyway instead of refused with `abicache.AbiError` (see [How the key is made](../key.md))."),
    EnvVar::new(ABICACHE_OFFLINE, "unset (off)", ValueFormat::Choice(&["1", "warn", "0"]))
        .config_key("offline")
        .meaning("`1`: a cache miss never compiles: every source is looked in as usual (local cache, read-only layers, cache wheels, the remote), and a key none of them holds is an `abicache.CacheMiss` error (exit code 3) naming the extension, the key, the closest cached entry with the fields that differ, and the command that would build it; under interception torch's own compile is forbidden too. `warn`: each miss is reported on stderr (and in `ABICACHE_MISS_REPORT`), then built (staging). `0`: off. Also `--offline` (see [Production](../production.md))."),
    EnvVar::new(ABICACHE_MISS_REPORT, "unset (no report)", ValueFormat::Path)
        .config_key("miss_report")
        .meaning("A file every cache miss (offline or not) appends one JSON line to: time, extension, key, reason and what rebuilds it; `abicache misses` prints it as a table (see [Production](../production.md))."),
    EnvVar::new(ABICACHE_GPU_CHECK, "`1`", ValueFormat::Choice(&["1", "0"]))
        .meaning("`0` turns the GPU guard off: a CUDA library whose device code no visible GPU can run (built for `8.0`, loaded on a `9.0` GPU) is then loaded anyway, and fails at its first kernel launch, instead of refused with `abicache.AbiError` (see [Building](../building.md#gpus-device-code-checked-before-load))."),
    EnvVar::new(CUDA_VISIBLE_DEVICES, "unset (every GPU)", ValueFormat::Text)
        .empty_as_is()
        .meaning("The GPUs the GPU guard checks, and whose capabilities make the default arch list, as CUDA reads it: indices (in `nvidia-smi`'s order) or `GPU-…` UUID prefixes, comma separated, up to the first invalid entry; empty: no GPU (no check). A `MIG-…` entry checks every GPU."),
    EnvVar::new(NVCC_APPEND_FLAGS, "unset", ValueFormat::Text)
        .meaning("Read by nvcc itself, not by abicache's arch parser: the CUDA objects' cache keys on it (not the entry key). A CUDA library whose device code then differs from what its flags ask for (an arch added or removed) is refused at publish (see [Building](../building.md#gpus-device-code-checked-before-load))."),
    EnvVar::new(NVCC_PREPEND_FLAGS, "unset", ValueFormat::Text)
        .meaning("As `NVCC_APPEND_FLAGS`, prepended."),
    EnvVar::new(ABICACHE_JOBS, "`MAX_JOBS`", ValueFormat::Count)
        .meaning("Parallel compile jobs when `ABICACHE_COMPILER_LAUNCHER` is set; may exceed the local cores (a distcc farm), up to 16 per core (more runs at that cap, with a warning). Without a launcher, and for a CUDA extension whose launcher cannot run nvcc (distcc, icecc), `MAX_JOBS` applies (see [Building](../building.md))."),
    EnvVar::new(MAX_JOBS, "number of cores", ValueFormat::Count)
        .meaning("Translation units compiled in parallel; at most 2 per core (16 per core with a compiler launcher): more runs at that cap, with a warning."),
    EnvVar::new(CXX, "`c++` on `PATH`", ValueFormat::Program)
        .meaning("Host C++ compiler."),
    EnvVar::new(CC, "unset", ValueFormat::Program)
        .meaning("Host C compiler, passed to nvcc as `-ccbin` (as torch does)."),
    EnvVar::new(CUDA_HOME, "unset", ValueFormat::Path)
        .meaning("CUDA toolkit root searched for `bin/nvcc`, before `PATH` and NVIDIA's pip wheels."),
    EnvVar::new(CUDA_PATH, "unset", ValueFormat::Path)
        .meaning("Same as `CUDA_HOME` when that is unset."),
    EnvVar::new(PATH, "the system's", ValueFormat::PathList)
        .empty_as_is()
        .meaning("Searched for `c++`, `nvcc`, the launcher and (without `VIRTUAL_ENV`) `python3`."),
    EnvVar::new(TORCH_CUDA_ARCH_LIST, "the visible GPUs' capabilities", ValueFormat::ArchList)
        .meaning("CUDA architectures (`8.0 9.0+PTX`) when an extension sets no `cuda_archs`."),
    EnvVar::new(TVM_FFI_CUDA_ARCH_LIST, "unset", ValueFormat::ArchList)
        .meaning("CUDA architectures (`8.9 9.0a`) of a TVM-FFI module built by `abicache.tvm_ffi`, as `tvm_ffi.cpp` reads it; wins over `TORCH_CUDA_ARCH_LIST` (see [TVM-FFI modules](../tvm-ffi.md))."),
    EnvVar::new(VIRTUAL_ENV, "unset", ValueFormat::Path)
        .meaning("The active venv: the command line's interpreter is `$VIRTUAL_ENV/bin/python` unless `--python` or `--env` is given (else `python3` on `PATH`)."),
    EnvVar::new(ABICACHE_REMOTE, "unset (no remote)", ValueFormat::Url)
        .config_key("remote")
        .meaning("Remote cache URL: `s3://BUCKET/PREFIX`, `redis://HOST:PORT/DB` or `file:///PATH` (`none` turns a configured one off); see [Remote cache](../remote.md)."),
    EnvVar::new(ABICACHE_REMOTE_MODE, "`read-write`", ValueFormat::Choice(&["read-write", "read-only"]))
        .config_key("remote_mode")
        .meaning("`read-only` downloads but never uploads."),
    EnvVar::new(ABICACHE_REMOTE_TIMEOUT, "`10`", ValueFormat::Seconds)
        .config_key("remote_timeout")
        .meaning("Seconds one remote operation may take before it counts as a failure (a warning and a local build)."),
    EnvVar::new(ABICACHE_REMOTE_OBJECTS, "`1`", ValueFormat::Choice(&["1", "0"]))
        .meaning("`0` keeps compiled objects out of the remote cache; `1` downloads the objects a build lacks before it compiles and uploads the ones it compiled (see [Remote cache](../remote.md))."),
    EnvVar::new(ABICACHE_REMOTE_MAX_SIZE, "`4G`", ValueFormat::Size)
        .meaning("Largest remote entry downloaded (`8G`, `500M`); a larger one is refused after at most that many bytes (a warning and a local build)."),
    EnvVar::new(ABICACHE_TRUSTED_KEYS, "unset (entries are not checked for a signature)", ValueFormat::PublicKeys)
        .config_key("trusted_keys")
        .meaning("ed25519 public keys (hex, or files of them; comma or space separated): only remote entries signed by one of them are used."),
    EnvVar::new(ABICACHE_SIGNING_KEY, "unset (uploads are unsigned)", ValueFormat::SecretKey)
        .config_key("signing_key")
        .secret()
        .meaning("ed25519 secret key (hex, or a file holding it, as `abicache keygen` writes) that uploads are signed with."),
    EnvVar::new(ABICACHE_CONFIG, "`$XDG_CONFIG_HOME/abicache/config.toml`, else `~/.config/abicache/config.toml`", ValueFormat::Path)
        .meaning("Config file with `remote`, `remote_mode`, `remote_timeout`, `trusted_keys`, `signing_key`, `readonly_dirs`, `offline`, `miss_report` (the variables win; see the table below)."),
    EnvVar::new(XDG_CONFIG_HOME, "`~/.config`", ValueFormat::Path)
        .meaning("Base of the default config file when `ABICACHE_CONFIG` is unset."),
    EnvVar::new(AWS_ENDPOINT_URL, "AWS's endpoint for the region", ValueFormat::Url)
        .meaning("S3 endpoint (MinIO, Ceph, moto) of an `s3://` remote."),
    EnvVar::new(AWS_ACCESS_KEY_ID, "unset (AWS's other credential sources)", ValueFormat::Text)
        .meaning("S3 access key of an `s3://` remote."),
    EnvVar::new(AWS_SECRET_ACCESS_KEY, "unset (AWS's other credential sources)", ValueFormat::Text)
        .secret()
        .meaning("S3 secret key of an `s3://` remote."),
    EnvVar::new(AWS_REGION, "`AWS_DEFAULT_REGION`, else `us-east-1`", ValueFormat::Text)
        .meaning("S3 region of an `s3://` remote."),
    EnvVar::new(AWS_DEFAULT_REGION, "`us-east-1`", ValueFormat::Text)
        .meaning("S3 region of an `s3://` remote when `AWS_REGION` is unset."),
    EnvVar::new(NO_COLOR, "unset", ValueFormat::Text)
        .meaning("Any value: the progress bar is drawn without colour (<https://no-color.org>)."),
    EnvVar::new(TERM, "set by the terminal", ValueFormat::Text)
        .meaning("`dumb`: progress is printed as plain lines instead of a bar (as when stderr is not a terminal)."),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_documented() {
        for (i, var) in ENV_VARS.iter().enumerate() {
            assert!(!var.meaning.is_empty(), "`{}` has no meaning", var.name);
            assert!(
                ENV_VARS[..i].iter().all(|v| v.name != var.name),
                "`{}` listed twice",
                var.name
            );
        }
    }

    #[test]
    fn config_keys_are_unique() {
        let keys: Vec<_> = ENV_VARS.iter().filter_map(|v| v.config_key).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(keys.len(), sorted.len());
    }
}
