//! The warm-load record: everything a later process needs to
//! take a hit of the same extension without loading this library at all,
//! as a list of checks that are all equality tests (`python/abicache/__init__.py`
//! is its reader: a warm `TorchOpsExtension.load()` then costs no native
//! call, and so no load of the native module).
//!
//! The record is written by [`Session::remember_warm_load`] after a load
//! was answered, under a name the caller derives from its own inputs (for
//! the Python package: the spec, the interpreter and torch it runs, the
//! fingerprint root and the cache directory it passes). It holds:
//! - the values of the environment variables a hit reads
//!   ([`HIT_VARIABLES`]), to be found unchanged;
//! - the key memo's dependencies of the key ([`abicache_scan::Dependencies`]:
//!   every file, directory and symlink the scan depended on), plus any file
//!   the caller names (the native module: a new abicache is a miss);
//! - the entry's [`HitRecipe`]: the checks that prove it is the entry a
//!   lookup verified, and the two writes a hit makes.
//!
//! - the instruction-set extensions the library requires (`isa`: feature
//!   and flag, usually none), which the reader compares with the CPU's
//!   `/proc/cpuinfo` flags before it loads anything; anything missing sends
//!   it to the native path, which refuses the load with the full message.
//!
//! So the record answers exactly when [`Session::build`] would answer the
//! same library as a hit from the key memo. It is written only for CPU
//! extensions without a native CPU flag: a CUDA extension's environment
//! also depends on which nvcc the search finds and on the GPUs
//! `nvidia-smi` lists, and `-march=native`'s resolution on the compiler
//! found and the CPU, which no stat check covers.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use abicache_fs::FileStamp;
use abicache_key::ExtensionSpec;
use abicache_scan::Expect;
use abicache_store::HitRecipe;
use serde::Serialize;

use super::warm_key::inputs;
use super::Session;

/// The record's format; its reader refuses any other.
pub const WARM_RECORD_FORMAT: u32 = 1;

/// The variables of the table whose values a hit of a CPU extension reads:
/// the cache root (`ABICACHE_DIR`, else `XDG_CACHE_HOME`, else `HOME`) and
/// `ABICACHE_REBUILD`. Every other variable configures what a hit never
/// does: building (compilers, jobs, PCHs), the remote, gc, lock waits after
/// a miss, probes of other interpreters, CUDA. Checking only these keeps
/// the reader's cost down (each lookup costs a warm load ~1.5 µs).
pub const HIT_VARIABLES: [&str; 4] = [
    abicache_env_vars::ABICACHE_DIR,
    abicache_env_vars::XDG_CACHE_HOME,
    abicache_env_vars::HOME,
    abicache_env_vars::ABICACHE_REBUILD,
];

/// A stamp as the reader compares it: `[path, dev, ino, size, mtime_ns, ctime_ns]`.
type StampRow = (String, u64, u64, u64, i64, i64);
/// An identity: `[path, dev, ino]`.
type IdentityRow = (String, u64, u64);

/// The record, as JSON: every path a UTF-8 string.
#[derive(Serialize)]
struct Record {
    format: u32,
    key: String,
    library: String,
    /// Every variable of [`HIT_VARIABLES`], with its value (`null`: unset).
    environ: Vec<(&'static str, Option<String>)>,
    /// `stat` (following symlinks) must give this stamp.
    stat: Vec<StampRow>,
    /// `stat` (following symlinks) must fail.
    missing: Vec<String>,
    /// `lstat` must find a directory (not a symlink) with this identity.
    directory: Vec<IdentityRow>,
    /// `stat` (following symlinks) must find this identity.
    same: Vec<IdentityRow>,
    /// The entry directory: `lstat` must give this `[path, dev, ino, mode, uid]`.
    entry: (String, u64, u64, u32, u32),
    /// `lstat` must give this stamp (the manifest, then the library).
    entry_files: Vec<StampRow>,
    /// The file whose mtime a hit sets.
    last_used: String,
    /// `[log, line, fold_at]`: the counter log, the line a hit appends, and
    /// the length past which the hit is left to the store.
    count: (String, String, u64),
    /// `[feature, flag]`: the `/proc/cpuinfo` features the library requires.
    isa: Vec<(String, String)>,
}

fn text(path: &Path) -> Option<String> {
    path.to_str().map(str::to_owned)
}

fn stamp_row(path: &Path, s: FileStamp) -> Option<StampRow> {
    Some((text(path)?, s.dev, s.ino, s.size, s.mtime_ns, s.ctime_ns))
}

impl Record {
    fn new(key: &str, recipe: HitRecipe) -> Option<Record> {
        let environ = HIT_VARIABLES
            .iter()
            // The raw value (an empty one too): the reader compares raw values.
            .map(
                |&name| match std::env::var_os(name).map(|s| s.into_string()) {
                    None => Some((name, None)),
                    Some(Ok(s)) => Some((name, Some(s))),
                    Some(Err(_)) => None, // not UTF-8: no record
                },
            )
            .collect::<Option<Vec<_>>>()?;
        Some(Record {
            format: WARM_RECORD_FORMAT,
            key: key.to_owned(),
            library: text(&recipe.library)?,
            environ,
            stat: Vec::new(),
            missing: Vec::new(),
            directory: Vec::new(),
            same: Vec::new(),
            entry: (
                text(&recipe.dir)?,
                recipe.dir_dev,
                recipe.dir_ino,
                recipe.dir_mode,
                recipe.dir_uid,
            ),
            entry_files: recipe
                .files
                .iter()
                .map(|(path, stamp)| stamp_row(path, *stamp))
                .collect::<Option<_>>()?,
            last_used: text(&recipe.last_used)?,
            count: (text(&recipe.stats_log)?, recipe.hit_line, recipe.fold_at),
            isa: recipe
                .isa
                .into_iter()
                .map(|r| (r.feature, r.flag))
                .collect(),
        })
    }

    /// Adds what decides the trusted keys (`ABICACHE_TRUSTED_KEYS`, where
    /// the config file is, and its stamp or absence) to the checks.
    fn trust_inputs(&mut self) -> Option<()> {
        for name in [
            abicache_env_vars::ABICACHE_TRUSTED_KEYS,
            abicache_env_vars::ABICACHE_CONFIG,
            abicache_env_vars::XDG_CONFIG_HOME,
        ] {
            let value = match std::env::var_os(name).map(|s| s.into_string()) {
                None => None,
                Some(Ok(s)) => Some(s),
                Some(Err(_)) => return None,
            };
            self.environ.push((name, value));
        }
        if let Some(config) = abicache_remote::config_path() {
            match std::fs::metadata(&config) {
                Ok(meta) => {
                    let stamp = FileStamp::trusted(&meta, SystemTime::now())?;
                    self.check(&config, Expect::Stamp(stamp))?;
                }
                Err(_) => self.check(&config, Expect::Missing)?,
            }
        }
        Some(())
    }

    fn check(&mut self, path: &Path, expect: Expect) -> Option<()> {
        let p = text(path)?;
        match expect {
            Expect::Stamp(s) => self.stat.push(stamp_row(path, s)?),
            Expect::Missing => self.missing.push(p),
            Expect::Directory { dev, ino } => self.directory.push((p, dev, ino)),
            Expect::Same { dev, ino } => self.same.push((p, dev, ino)),
        }
        Some(())
    }
}

impl Session {
    /// Writes the warm-load record `name` (1 to 128 characters of
    /// `[A-Za-z0-9_-]`) for `spec` at `root`: see the module documentation.
    /// `also` are files whose trusted stamp the record requires too.
    ///
    /// Best effort, and only when everything can be proven: nothing is
    /// written for a CUDA extension or one with a native CPU flag, when the key memo of these inputs is
    /// missing or stale, when the entry has no trusted stamps yet (a
    /// library published less than the racy window ago is stamped by a
    /// later hit), or when a path is not UTF-8. Returns whether a record
    /// was written.
    pub fn remember_warm_load(
        &self,
        spec: &ExtensionSpec,
        root: &Path,
        name: &str,
        also: &[PathBuf],
    ) -> bool {
        self.warm_record(spec, root, also)
            .and_then(|record| serde_json::to_vec(&record).ok())
            .is_some_and(|bytes| {
                self.store()
                    .is_ok_and(|store| store.save_warm_record(name, &bytes).is_ok())
            })
    }

    fn warm_record(&self, spec: &ExtensionSpec, root: &Path, also: &[PathBuf]) -> Option<Record> {
        if self.options.rebuild
            || spec.requires_cuda()
            || !abicache_key::native_cpu_flags(spec).is_empty()
        {
            return None;
        }
        self.check(spec).ok()?;
        let env = self.complete_env(spec).ok()?;
        self.settle();
        let (value, deps) = self.key_memo()?.get_with_deps(&inputs(spec, &env, root)?)?;
        let key = super::warm_key::memo_parts(&value).0;
        let recipe = self.store().ok()?.hit_recipe(key)?;
        let pulled = recipe
            .dir
            .join(abicache_store::PROVENANCE_FILE)
            .symlink_metadata()
            .is_ok();
        let mut record = Record::new(key, recipe)?;
        if pulled {
            // A pulled entry is served only while the trusted keys that let
            // it in are the same: their variables and the config file too.
            record.trust_inputs()?;
        }
        for (path, expect) in deps.iter() {
            record.check(path, expect)?;
        }
        let now = SystemTime::now();
        for path in also {
            let stamp = FileStamp::trusted(&std::fs::metadata(path).ok()?, now)?;
            record.check(path, Expect::Stamp(stamp))?;
        }
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hit_variables_are_in_the_table() {
        for name in HIT_VARIABLES {
            assert!(abicache_env_vars::lookup(name).is_some(), "{name}");
        }
    }
}
