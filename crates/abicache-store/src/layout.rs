//! Where the cache lives and how it is laid out on disk.
//!
//! ```text
//! <root>/CACHEDIR.TAG
//! <root>/v1/entries/<key>/{<library>, manifest.json, last-used}
//! <root>/v1/tmp/<key>.<random>/          private build and trash directories
//! <root>/v1/locks/<key>.lock             per-key OS file locks
//! <root>/v1/objects/                     reserved for the build crate's object cache
//! <root>/v1/peaks/<key>                  peak memory of a compile (see `peaks.rs`)
//! <root>/v1/pch/<key>/                   precompiled headers (see `pch.rs`)
//! <root>/v1/stats.json (+ stats.lock)    counters
//! ```
//!
//! The `v1` directory makes the layout versioned: a future layout lives in
//! `v2/` and never misreads this one.

use std::ffi::OsStr;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// The version of the on-disk layout; it names the `v1` directory.
pub const LAYOUT_VERSION: u32 = 1;

/// The `format` of every manifest written. `2` records the library's
/// instruction-set requirements (`isa`, against the fixed baseline, the
/// compiler's own target included) in every manifest, `[]` when none: a
/// manifest of another format, or without `isa`, is not served by any
/// source (local store, layer, bundle, remote). Format `1` manifests (written
/// before the guard recorded requirements this way) are treated as unknown:
/// the local store rebuilds the entry, other sources skip it.
pub const MANIFEST_FORMAT: u32 = 2;

/// Contents of `CACHEDIR.TAG` (<https://bford.info/cachedir/>): backup tools skip the directory.
pub const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by abicache.\n\
# For information about cache directory tags see https://bford.info/cachedir/\n";

/// File name of an entry's manifest; an entry without it does not exist.
pub const MANIFEST_FILE: &str = "manifest.json";
/// File whose mtime is an entry's last-used time, touched on every hit
/// (a warm-load record's hit leaves one touched in the last 10 s as it is).
pub const LAST_USED_FILE: &str = "last-used";
/// File holding the stat stamp of an entry's last full verification
/// (best effort: without it, the next hit hashes the library again).
pub const STAMP_FILE: &str = "verified.json";

/// Resolves the cache root from explicit environment values (empty counts as
/// unset): `ABICACHE_DIR`, else `$XDG_CACHE_HOME/abicache` when that is an
/// absolute path (as the XDG spec requires), else `$HOME/.cache/abicache`.
///
/// Restated in Python at `python/abicache/_warm_record.py:cache_root` (the
/// warm path reads no native module), tied by
/// `tests/python/test_warm_reader.py::test_the_cache_root_is_rusts` through
/// `abicache._native.default_cache_dir`.
///
/// The rule lives in `abicache_settings::resolve_root`; this names the
/// store's error when no root applies.
pub fn resolve_root(
    abicache_dir: Option<&OsStr>,
    xdg_cache_home: Option<&OsStr>,
    home: Option<&OsStr>,
) -> Result<PathBuf> {
    abicache_settings::resolve_root(abicache_dir, xdg_cache_home, home)
        .ok_or(StoreError::NoCacheDir)
}

/// [`resolve_root`] with the values of this process's environment
/// (`abicache_settings::root_from_env`: only the three variables of the
/// root are read, so a bad value of another setting does not hide it).
///
/// Restated in Python at `python/abicache/_warm_record.py:cache_root`, tied by
/// `tests/python/test_warm_reader.py::test_the_cache_root_is_rusts` (which
/// compares it with this function through `abicache._native.default_cache_dir`).
pub fn root_from_env() -> Result<PathBuf> {
    abicache_settings::root_from_env().ok_or(StoreError::NoCacheDir)
}

/// Checks that `key` can name a directory and a lock file: 1 to 128
/// characters of `[A-Za-z0-9_-]` (so never `..`, `/` or a `.` that would
/// confuse temp-dir names).
pub fn validate_key(key: &str) -> Result<()> {
    let ok = !key.is_empty()
        && key.len() <= 128
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidKey {
            key: key.to_owned(),
        })
    }
}

/// The paths of one versioned cache root. Pure path arithmetic, except
/// [`Layout::create`].
#[derive(Clone, Debug)]
pub struct Layout {
    root: PathBuf,
    version_dir: PathBuf,
}

impl Layout {
    /// The layout under `root` (nothing is touched on disk).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let version_dir = root.join(format!("v{LAYOUT_VERSION}"));
        Layout { root, version_dir }
    }

    /// The cache root.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `<root>/v1`.
    pub fn version_dir(&self) -> &Path {
        &self.version_dir
    }
    /// `<root>/v1/entries`.
    pub fn entries_dir(&self) -> PathBuf {
        self.version_dir.join("entries")
    }
    /// `<root>/v1/entries/<key>` (the key is not validated here).
    pub fn entry_dir(&self, key: &str) -> PathBuf {
        self.entries_dir().join(key)
    }
    /// `<root>/v1/tmp`: private temporary directories on the same filesystem as the entries.
    pub fn tmp_dir(&self) -> PathBuf {
        self.version_dir.join("tmp")
    }
    /// `<root>/v1/matrix-envs`: the throwaway `run.*` directories of
    /// `prebuild --matrix`, each locked by its run ([`MATRIX_RUN_LOCK`]).
    pub fn matrix_envs_dir(&self) -> PathBuf {
        self.version_dir.join("matrix-envs")
    }
    /// `<root>/v1/locks`.
    pub fn locks_dir(&self) -> PathBuf {
        self.version_dir.join("locks")
    }
    /// `<root>/v1/locks/<key>.lock`.
    pub fn lock_path(&self, key: &str) -> PathBuf {
        self.locks_dir().join(format!("{key}.lock"))
    }
    /// `<root>/v1/objects`: reserved for the object cache of the build crate;
    /// this crate creates it and never looks inside.
    pub fn objects_dir(&self) -> PathBuf {
        self.version_dir.join("objects")
    }
    /// `<root>/v1/warm`: descriptions of warm hits for processes that take
    /// them without this crate (see [`crate::HitRecipe`]).
    pub fn warm_dir(&self) -> PathBuf {
        self.version_dir.join("warm")
    }
    /// `<root>/v1/stats.json`.
    pub fn stats_path(&self) -> PathBuf {
        self.version_dir.join("stats.json")
    }
    /// `<root>/v1/stats.log`: counted events appended since `stats.json`
    /// was last written, one JSON line each.
    pub fn stats_log_path(&self) -> PathBuf {
        self.version_dir.join("stats.log")
    }
    /// `<root>/v1/stats.lock`, guarding the fold of `stats.log` into `stats.json`.
    pub fn stats_lock_path(&self) -> PathBuf {
        self.version_dir.join("stats.lock")
    }

    /// Creates the layout (directories owner-only, mode 0o700) and
    /// `CACHEDIR.TAG`, and refuses the whole root when the root, `v1` or any
    /// directory of the layout (`entries`, `tmp`, `locks`, `objects`) is a
    /// symlink, owned by another user, or writable by group or others, and
    /// when a directory on the root's real path from `/` down is writable by
    /// group or others without the sticky bit.
    /// `CACHEDIR.TAG` is best effort: a read-only or full cache still opens.
    ///
    /// Restated in Python at `python/abicache/_warm_record.py:check_record`
    /// (for the root, `v1`, `v1/warm`, `v1/entries` and the record; its
    /// ancestor walk restates `check_ancestors`), tied by
    /// `tests/python/test_warm_reader.py::test_a_cache_directory_others_can_write_is_refused`,
    /// `tests/python/test_warm_reader.py::test_a_record_others_can_write_or_not_json_is_refused`
    /// and `tests/python/test_warm_record.py::test_a_foreign_writable_record_dir_is_ignored`.
    pub fn create(&self) -> Result<()> {
        // The root itself may be reached through a symlink the user chose
        // (`ABICACHE_DIR=~/link`); nothing under it may be one.
        create_dir_0700(&self.root)?;
        check_private(&self.root, &fs_err::metadata(&self.root)?)?;
        check_ancestors(&self.root)?;
        ensure_private_dir(&self.version_dir)?;
        for dir in [
            self.entries_dir(),
            self.tmp_dir(),
            self.locks_dir(),
            self.objects_dir(),
        ] {
            ensure_private_dir(&dir)?;
        }
        let tag = self.root.join("CACHEDIR.TAG");
        if std::fs::symlink_metadata(&tag).is_err() {
            // Best effort: a concurrent writer writes the same bytes, and a
            // read-only or full cache serves hits without it.
            let _ =
                crate::private_file::write_atomic(&tag, CACHEDIR_TAG.as_bytes(), &self.tmp_dir());
        }
        Ok(())
    }
}

/// The lock file inside a `v1/matrix-envs/run.*` directory, held by the run
/// that created it for as long as it lives; gc removes a run directory whose
/// lock is free.
pub const MATRIX_RUN_LOCK: &str = ".run.lock";

/// Creates `dir` (and missing parents) with mode 0o700 when absent, and checks it is a directory.
pub(crate) fn create_dir_0700(dir: &Path) -> Result<()> {
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(StoreError::io_at("create directory", dir)(e)),
    }
    if !dir.is_dir() {
        return Err(StoreError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    Ok(())
}

/// Creates `dir` owner-only if absent, then refuses it when it is a
/// symlink, owned by another uid or writable by group or others.
pub(crate) fn ensure_private_dir(dir: &Path) -> Result<()> {
    create_dir_0700(dir)?;
    check_private(dir, &fs_err::symlink_metadata(dir)?)
}

/// Refuses `dir` (with `meta`) when it is a symlink, owned by another uid
/// or writable by group or others, naming the fix.
///
/// Restated in Python at `python/abicache/_warm_record.py:check_record`,
/// tied by `tests/python/test_warm_reader.py::test_a_cache_directory_others_can_write_is_refused`
/// and `tests/python/test_warm_record.py::test_a_foreign_writable_record_dir_is_ignored`
/// (see `Layout::create`).
fn check_private(dir: &Path, meta: &std::fs::Metadata) -> Result<()> {
    match insecurity(meta, current_uid()?) {
        None => Ok(()),
        Some(Insecurity::Symlink) => Err(StoreError::NotADirectory {
            path: dir.to_owned(),
        }),
        Some(Insecurity::Owner { owner, uid }) => Err(StoreError::ForeignOwner {
            path: dir.to_owned(),
            owner,
            uid,
        }),
        Some(Insecurity::Mode(mode)) => Err(StoreError::InsecureMode {
            path: dir.to_owned(),
            mode,
        }),
    }
}

/// Why a directory (or file) of the cache cannot be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Insecurity {
    /// It is a symbolic link (it could point anywhere).
    Symlink,
    /// It belongs to another user.
    Owner { owner: u32, uid: u32 },
    /// Group or others may write it.
    Mode(u32),
}

impl std::fmt::Display for Insecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Insecurity::Symlink => write!(f, "it is a symbolic link"),
            Insecurity::Owner { owner, uid } => {
                write!(
                    f,
                    "it is owned by uid {owner}, not by uid {uid} (this process)"
                )
            }
            Insecurity::Mode(mode) => {
                write!(f, "its mode {mode:04o} lets other users write it")
            }
        }
    }
}

/// Whether a library owned by `owner` may be loaded by a process whose
/// effective uid is `uid`: one of its own always; root's only from a
/// read-only layer (`layer`: an installed cache wheel's, an image's), where
/// root put it and only root could change it. The own cache serves only
/// the user's own files. The one owner rule for a library abicache loads
/// (also for every file and directory of a layer).
///
/// Restated in Python at `python/abicache/_warm_record.py:trusted_owner` (the
/// warm path and `_native_path.open_checked` both call it), tied by
/// `tests/python/test_intercept_and_owner_rules.py::test_the_library_owner_rule_is_rusts`
/// through `abicache._native.library_owner_trusted`.
pub fn trusted_owner(owner: u32, uid: u32, layer: bool) -> bool {
    owner == uid || (layer && owner == 0)
}

/// What makes `meta` (from `symlink_metadata`) untrustworthy for `uid`, if anything.
///
/// Restated in Python at `python/abicache/_warm_record.py:check_record`
/// (each directory and the record: no symlink, this user's, writable by no
/// one else), tied by
/// `tests/python/test_warm_reader.py::test_a_cache_directory_others_can_write_is_refused`
/// and `tests/python/test_warm_reader.py::test_a_record_others_can_write_or_not_json_is_refused`.
pub(crate) fn insecurity(meta: &std::fs::Metadata, uid: u32) -> Option<Insecurity> {
    if meta.file_type().is_symlink() {
        return Some(Insecurity::Symlink);
    }
    if meta.uid() != uid {
        return Some(Insecurity::Owner {
            owner: meta.uid(),
            uid,
        });
    }
    let mode = meta.mode() & 0o7777;
    (mode & 0o022 != 0).then_some(Insecurity::Mode(mode))
}

/// Refuses `root` when a directory on its real path, from `/` down, is
/// writable by group or others without the sticky bit: whoever can write
/// such a directory can rename the cache below it away and put another in
/// its place between a check and a load. (`/tmp`, mode 1777, is fine: there
/// only a file's owner may rename it.)
///
/// Restated in Python as the ancestor walk of
/// `python/abicache/_warm_record.py:check_record`, tied by
/// `tests/python/test_warm_reader.py::test_a_parent_others_can_write_without_the_sticky_bit_is_refused`,
/// `tests/python/test_warm_reader.py::test_a_cache_reached_through_symlinks_or_dots_is_judged_by_its_real_path`
/// and `tests/python/test_warm_record.py::test_a_cache_under_a_directory_others_can_write_is_refused`.
pub(crate) fn check_ancestors(root: &Path) -> Result<()> {
    let real = fs_err::canonicalize(root)?;
    for dir in real.ancestors().skip(1) {
        let mode = fs_err::metadata(dir)?.mode() & 0o7777;
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(StoreError::InsecureAncestor {
                root: root.to_owned(),
                dir: dir.to_owned(),
                mode,
            });
        }
    }
    Ok(())
}

/// The effective uid of this process, read from `/proc/self` (no `libc` needed).
pub(crate) fn current_uid() -> Result<u32> {
    Ok(fs_err::metadata("/proc/self")?.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_is_trusted_from_its_user_and_from_root_only_in_a_layer() {
        for layer in [false, true] {
            assert!(trusted_owner(1000, 1000, layer));
            assert!(!trusted_owner(1001, 1000, layer));
            assert!(trusted_owner(0, 0, layer));
        }
        assert!(!trusted_owner(0, 1000, false));
        assert!(trusted_owner(0, 1000, true));
    }

    fn os(s: &str) -> Option<&OsStr> {
        Some(OsStr::new(s))
    }

    #[test]
    fn root_prefers_abicache_dir_then_xdg_then_home() {
        assert_eq!(
            resolve_root(os("/a"), os("/x"), os("/h")).unwrap(),
            Path::new("/a")
        );
        assert_eq!(
            resolve_root(None, os("/x"), os("/h")).unwrap(),
            Path::new("/x/abicache")
        );
        assert_eq!(
            resolve_root(os(""), os(""), os("/h")).unwrap(),
            Path::new("/h/.cache/abicache")
        );
    }

    #[test]
    fn relative_xdg_cache_home_is_ignored_as_the_xdg_spec_says() {
        assert_eq!(
            resolve_root(None, os("rel"), os("/h")).unwrap(),
            Path::new("/h/.cache/abicache")
        );
    }

    #[test]
    fn no_root_at_all_names_abicache_dir() {
        let err = resolve_root(None, None, None).unwrap_err();
        insta::assert_snapshot!(err.to_string());
    }

    #[test]
    fn keys_are_plain_names() {
        validate_key("0123abcdef_-X").unwrap();
        for bad in ["", "..", "a/b", "a.b", &"a".repeat(129)] {
            assert!(validate_key(bad).is_err(), "{bad:?} accepted");
        }
        insta::assert_snapshot!(validate_key("../etc").unwrap_err().to_string());
    }

    #[test]
    fn layout_is_versioned() {
        let l = Layout::new("/c");
        assert_eq!(l.entry_dir("k"), Path::new("/c/v1/entries/k"));
        assert_eq!(l.lock_path("k"), Path::new("/c/v1/locks/k.lock"));
        assert_eq!(l.objects_dir(), Path::new("/c/v1/objects"));
        assert_eq!(l.stats_path(), Path::new("/c/v1/stats.json"));
    }
}
