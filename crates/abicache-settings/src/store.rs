//! What the local store is told: its root, the bounded lock wait, the size
//! bounds, gc's grace and the machine's precompiled-header slots.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::Duration;

use abicache_env_vars::{
    ABICACHE_DIR, ABICACHE_GC_GRACE, ABICACHE_LEASE_TIMEOUT, ABICACHE_LOCK_TIMEOUT,
    ABICACHE_MAX_SIZE, ABICACHE_PCH_JOBS, ABICACHE_PCH_MAX_SIZE, ABICACHE_SHARED, HOME,
    XDG_CACHE_HOME,
};

use crate::error::{Result, SettingsError};
use crate::Vars;

/// The bounded wait for a key's lock when `ABICACHE_LOCK_TIMEOUT` is not set.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(600);

/// How long after its last use an entry or object is never evicted, when
/// `ABICACHE_GC_GRACE` is not set: long enough for a caller to load the
/// path a hit returned, or for a build to link the objects it counted.
pub const DEFAULT_GC_GRACE: Duration = Duration::from_secs(60);

/// How long a lease of a shared cache stays valid without being refreshed,
/// when `ABICACHE_LEASE_TIMEOUT` is not set.
pub const DEFAULT_LEASE_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether the store runs in shared mode (`ABICACHE_SHARED`, config key `shared`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SharedSetting {
    /// Shared mode when the cache root is on a network or cluster
    /// filesystem (detected by `statfs`); the default.
    #[default]
    Auto,
    /// Shared mode whatever the filesystem.
    On,
    /// Never shared mode (one machine's cache, locks and stat stamps trusted).
    Off,
}

impl SharedSetting {
    /// Parses `auto`, `on` or `off` (any case; also `1`/`0`, `true`/`false`);
    /// `None` or blank gives [`SharedSetting::Auto`]. Anything else is an
    /// error naming `ABICACHE_SHARED` and the accepted values.
    pub fn parse(value: Option<&str>) -> Result<SharedSetting> {
        let Some(text) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(SharedSetting::Auto);
        };
        match text.to_ascii_lowercase().as_str() {
            "auto" => Ok(SharedSetting::Auto),
            "on" | "1" | "true" | "yes" => Ok(SharedSetting::On),
            "off" | "0" | "false" | "no" => Ok(SharedSetting::Off),
            _ => Err(SettingsError::BadValue {
                name: ABICACHE_SHARED,
                value: text.to_owned(),
                expected: "`auto`, `on` or `off`",
            }),
        }
    }

    /// The value as `ABICACHE_SHARED` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SharedSetting::Auto => "auto",
            SharedSetting::On => "on",
            SharedSetting::Off => "off",
        }
    }
}

/// Background PCH compiles at once per user and machine when `ABICACHE_PCH_JOBS` is unset.
pub const DEFAULT_PCH_JOBS: u32 = 1;

/// The runtime directory variable of the XDG spec; the machine's PCH slots
/// live under it when it is absolute. Read here (not a documented setting
/// of abicache's own, so not in `ENV_VARS`).
pub(crate) const XDG_RUNTIME_DIR: &str = "XDG_RUNTIME_DIR";

/// The store's settings, every value parsed and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct StoreSettings {
    /// The cache root: `--cache-dir`, else `ABICACHE_DIR`, else
    /// `$XDG_CACHE_HOME/abicache` (absolute only), else `~/.cache/abicache`;
    /// `None` when none of those is set (opening the default store then
    /// fails, naming them).
    pub root: Option<PathBuf>,
    /// The bounded wait for a key's lock (`ABICACHE_LOCK_TIMEOUT`).
    pub lock_timeout: Duration,
    /// The size collected to after each publish (`ABICACHE_MAX_SIZE`); `None`: no bound.
    pub max_size: Option<u64>,
    /// Bytes of precompiled headers kept (`ABICACHE_PCH_MAX_SIZE`); `None`:
    /// the store's default (a quarter of `max_size`, else 2 GiB).
    pub pch_max_size: Option<u64>,
    /// How long after its last use gc spares an entry or object (`ABICACHE_GC_GRACE`).
    pub gc_grace: Duration,
    /// Background PCH compiles at once per user and machine (`ABICACHE_PCH_JOBS`).
    pub pch_jobs: u32,
    /// `$XDG_RUNTIME_DIR` when absolute: where the machine's PCH slots live.
    pub runtime_dir: Option<PathBuf>,
    /// Shared mode (`ABICACHE_SHARED`, else the config key `shared`, else `auto`).
    pub shared: SharedSetting,
    /// How long a lease of a shared cache stays valid unrefreshed (`ABICACHE_LEASE_TIMEOUT`).
    pub lease_timeout: Duration,
}

impl Default for StoreSettings {
    /// Every documented default, no root: what an empty environment gives
    /// (apart from the root, which needs `HOME` at least).
    fn default() -> Self {
        StoreSettings {
            root: None,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            max_size: None,
            pch_max_size: None,
            gc_grace: DEFAULT_GC_GRACE,
            pch_jobs: DEFAULT_PCH_JOBS,
            runtime_dir: None,
            shared: SharedSetting::Auto,
            lease_timeout: DEFAULT_LEASE_TIMEOUT,
        }
    }
}

impl StoreSettings {
    /// The store settings of this process's environment (no flags, no
    /// config file: its one config key, `shared`, applies through
    /// `Settings::resolve`). A value that cannot be
    /// used is an error naming its variable.
    pub fn from_env() -> Result<StoreSettings> {
        Self::from_vars(&crate::process_var, None)
    }

    /// The store settings read through `var`, with `--cache-dir` (`cache_dir`) first.
    pub(crate) fn from_vars(var: Vars<'_>, cache_dir: Option<PathBuf>) -> Result<StoreSettings> {
        let get = |name| crate::set(var, name);
        let root = match cache_dir {
            Some(dir) => Some(dir),
            None => resolve_root(
                get(ABICACHE_DIR).as_deref(),
                get(XDG_CACHE_HOME).as_deref(),
                get(HOME).as_deref(),
            ),
        };
        let size_example = |name| match name {
            ABICACHE_PCH_MAX_SIZE => "a size such as `2G`, `500M` or `1.5GiB`",
            _ => "a size such as `10G`, `500M` or `1.5GiB`",
        };
        let size = |name| -> Result<Option<u64>> {
            let Some(value) = get(name) else {
                return Ok(None);
            };
            let text = value.to_string_lossy();
            abicache_env_vars::parse_size(&text)
                .map(Some)
                .ok_or_else(|| SettingsError::BadValue {
                    name,
                    value: text.into_owned(),
                    expected: size_example(name),
                })
        };
        Ok(StoreSettings {
            root,
            lock_timeout: parse_seconds(
                ABICACHE_LOCK_TIMEOUT,
                get(ABICACHE_LOCK_TIMEOUT).as_deref(),
                DEFAULT_LOCK_TIMEOUT,
            )?,
            max_size: size(ABICACHE_MAX_SIZE)?,
            pch_max_size: size(ABICACHE_PCH_MAX_SIZE)?,
            gc_grace: parse_seconds(
                ABICACHE_GC_GRACE,
                get(ABICACHE_GC_GRACE).as_deref(),
                DEFAULT_GC_GRACE,
            )?,
            pch_jobs: parse_pch_jobs(get(ABICACHE_PCH_JOBS).as_deref())?,
            runtime_dir: get(XDG_RUNTIME_DIR)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute()),
            shared: SharedSetting::parse(
                get(ABICACHE_SHARED)
                    .as_deref()
                    .map(|v| v.to_string_lossy())
                    .as_deref(),
            )?,
            lease_timeout: parse_seconds(
                ABICACHE_LEASE_TIMEOUT,
                get(ABICACHE_LEASE_TIMEOUT).as_deref(),
                DEFAULT_LEASE_TIMEOUT,
            )?,
        })
    }
}

/// The cache root from explicit environment values (empty counts as
/// unset): `ABICACHE_DIR`, else `$XDG_CACHE_HOME/abicache` when that is an
/// absolute path (as the XDG spec requires), else `$HOME/.cache/abicache`;
/// `None` when none applies.
///
/// Restated in Python at `python/abicache/_warm_record.py:cache_root` (the
/// warm path reads no native module), tied by
/// `tests/python/test_warm_reader.py::test_the_cache_root_is_rusts` through
/// `abicache._native.default_cache_dir`.
pub fn resolve_root(
    abicache_dir: Option<&OsStr>,
    xdg_cache_home: Option<&OsStr>,
    home: Option<&OsStr>,
) -> Option<PathBuf> {
    let set = |v: Option<&OsStr>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(abicache_dir) {
        return Some(dir);
    }
    if let Some(xdg) = set(xdg_cache_home).filter(|p| p.is_absolute()) {
        return Some(xdg.join("abicache"));
    }
    set(home).map(|home| home.join(".cache").join("abicache"))
}

/// [`resolve_root`] of this process's `ABICACHE_DIR`, `XDG_CACHE_HOME` and
/// `HOME` (only those: `abicache config` and the Python package's
/// `default_cache_dir` show the root whatever the other settings hold).
pub fn root_from_env() -> Option<PathBuf> {
    let get = |name| crate::set(&crate::process_var, name);
    resolve_root(
        get(ABICACHE_DIR).as_deref(),
        get(XDG_CACHE_HOME).as_deref(),
        get(HOME).as_deref(),
    )
}

/// A non-negative number of seconds (`600`, `0.5`) given in `name`; `None`
/// or empty gives `default`. Anything else is an error naming `name`.
pub fn parse_seconds(
    name: &'static str,
    value: Option<&OsStr>,
    default: Duration,
) -> Result<Duration> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(default);
    };
    let text = value.to_string_lossy();
    abicache_env_vars::parse_seconds(&text).ok_or_else(|| SettingsError::BadValue {
        name,
        value: text.into_owned(),
        expected: "a non-negative number of seconds",
    })
}

/// `ABICACHE_PCH_JOBS`: a whole number ≥ 1; unset or empty gives [`DEFAULT_PCH_JOBS`].
pub fn parse_pch_jobs(value: Option<&OsStr>) -> Result<u32> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(DEFAULT_PCH_JOBS);
    };
    let text = value.to_string_lossy();
    match text.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(SettingsError::BadValue {
            name: ABICACHE_PCH_JOBS,
            value: text.into_owned(),
            expected: "a whole number of at least 1",
        }),
    }
}
