//! Where the remote is and how it is used: `--remote`, environment
//! variables, then the config file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::{RemoteError, Result};
use crate::sign::{PublicKey, SecretKey};
use crate::{
    ABICACHE_CONFIG, ABICACHE_REMOTE, ABICACHE_REMOTE_MAX_SIZE, ABICACHE_REMOTE_MODE,
    ABICACHE_REMOTE_TIMEOUT, ABICACHE_SIGNING_KEY, ABICACHE_TRUSTED_KEYS,
};

/// Seconds one remote operation may take when `ABICACHE_REMOTE_TIMEOUT` is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest remote object downloaded when `ABICACHE_REMOTE_MAX_SIZE` is unset (4 GiB).
pub const DEFAULT_MAX_SIZE: u64 = 4 << 30;

/// Whether entries are uploaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Download and upload (the default).
    ReadWrite,
    /// Download only.
    ReadOnly,
}

/// Everything needed to use a remote cache.
#[derive(Clone, Debug)]
pub struct RemoteConfig {
    /// `s3://BUCKET/PREFIX`, `redis://HOST:PORT/DB` or `file:///PATH`.
    pub url: String,
    /// Whether uploads are allowed.
    pub mode: Mode,
    /// The bound on each remote operation.
    pub timeout: Duration,
    /// When not empty, only entries signed by one of these keys are used.
    pub trusted_keys: Vec<PublicKey>,
    /// When set, uploads are signed with it.
    pub signing_key: Option<SecretKey>,
    /// The largest object a download reads (header and library); a larger
    /// one is refused after at most this many bytes.
    pub max_size: u64,
}

/// The config file's fields (`~/.config/abicache/config.toml`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    remote: Option<String>,
    remote_mode: Option<String>,
    remote_timeout: Option<f64>,
    #[serde(default)]
    trusted_keys: Vec<String>,
    signing_key: Option<String>,
    /// Read-only cache layers (`ABICACHE_READONLY_DIRS`).
    #[serde(default)]
    readonly_dirs: Vec<PathBuf>,
}

/// The config file: `ABICACHE_CONFIG`, else `$XDG_CONFIG_HOME/abicache/config.toml`,
/// else `~/.config/abicache/config.toml`; `None` when none of those variables is set.
pub fn config_path() -> Option<PathBuf> {
    config_path_with(&abicache_env_vars::var)
}

fn config_path_with(var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |name| var(name).filter(|v| !v.is_empty());
    if let Some(path) = set(ABICACHE_CONFIG) {
        return Some(PathBuf::from(path));
    }
    if let Some(dir) = set(abicache_env_vars::XDG_CONFIG_HOME) {
        return Some(Path::new(&dir).join("abicache/config.toml"));
    }
    set(abicache_env_vars::HOME).map(|home| Path::new(&home).join(".config/abicache/config.toml"))
}

impl RemoteConfig {
    /// The remote configured for this process: `override_url` (`--remote`),
    /// else `ABICACHE_REMOTE`, else `remote` in the config file; `None` when
    /// none is set, or when the URL is `none` or `off`. The mode, time-out and
    /// keys come from their variables, else from the config file.
    pub fn resolve(override_url: Option<&str>) -> Result<Option<RemoteConfig>> {
        Self::resolve_with(override_url, &abicache_env_vars::var)
    }

    /// [`RemoteConfig::resolve`] with variables read through `var` (for tests).
    pub fn resolve_with(
        override_url: Option<&str>,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<RemoteConfig>> {
        let file = match config_path_with(var) {
            Some(path) => read_config(&path)?,
            None => ConfigFile::default(),
        };
        let env = |name| var(name).filter(|v: &String| !v.trim().is_empty());
        let url = override_url
            .map(str::to_owned)
            .or_else(|| env(ABICACHE_REMOTE))
            .or(file.remote.clone());
        let Some(url) = url.map(|u| u.trim().to_owned()) else {
            return Ok(None);
        };
        if url.is_empty() || url == "none" || url == "off" {
            return Ok(None);
        }
        let mode = match env(ABICACHE_REMOTE_MODE).or(file.remote_mode.clone()) {
            None => Mode::ReadWrite,
            Some(value) => match value.trim() {
                "read-write" | "rw" => Mode::ReadWrite,
                "read-only" | "ro" => Mode::ReadOnly,
                _ => {
                    return Err(RemoteError::InvalidSetting {
                        name: ABICACHE_REMOTE_MODE,
                        value,
                        reason: "expected `read-write` or `read-only`".into(),
                    })
                }
            },
        };
        let timeout = match env(ABICACHE_REMOTE_TIMEOUT) {
            Some(value) => parse_timeout(&value)?,
            None => file
                .remote_timeout
                .map(|s| parse_timeout(&s.to_string()))
                .transpose()?
                .unwrap_or(DEFAULT_TIMEOUT),
        };
        let Keys { trusted, signing } = Keys::from_sources(&file, var)?;
        let max_size = match env(ABICACHE_REMOTE_MAX_SIZE) {
            Some(value) => abicache_env_vars::parse_size(&value)
                .filter(|&n| n > 0)
                .ok_or_else(|| RemoteError::InvalidSetting {
                    name: ABICACHE_REMOTE_MAX_SIZE,
                    value,
                    reason: "expected a positive size such as `4G`, `500M` or a number of bytes"
                        .into(),
                })?,
            None => DEFAULT_MAX_SIZE,
        };
        Ok(Some(RemoteConfig {
            url,
            mode,
            timeout,
            trusted_keys: trusted,
            signing_key: signing,
            max_size,
        }))
    }
}

/// The signing and trusted keys alone, for what is signed without a remote
/// (bundles): `ABICACHE_SIGNING_KEY` and `ABICACHE_TRUSTED_KEYS`, else
/// `signing_key` and `trusted_keys` in the config file.
#[derive(Clone, Debug, Default)]
pub struct Keys {
    /// When not empty, only what one of these keys signed is accepted.
    pub trusted: Vec<PublicKey>,
    /// When set, what is written is signed with it.
    pub signing: Option<SecretKey>,
}

impl Keys {
    /// The keys of this process's environment and config file.
    pub fn resolve() -> Result<Keys> {
        Self::resolve_with(&abicache_env_vars::var)
    }

    /// [`Keys::resolve`] with variables read through `var` (for tests).
    pub fn resolve_with(var: &dyn Fn(&str) -> Option<String>) -> Result<Keys> {
        let file = match config_path_with(var) {
            Some(path) => read_config(&path)?,
            None => ConfigFile::default(),
        };
        Self::from_sources(&file, var)
    }

    fn from_sources(file: &ConfigFile, var: &dyn Fn(&str) -> Option<String>) -> Result<Keys> {
        let env = |name| var(name).filter(|v: &String| !v.trim().is_empty());
        let trusted = match env(ABICACHE_TRUSTED_KEYS) {
            Some(value) => parse_key_list(&value, &format!("`{ABICACHE_TRUSTED_KEYS}`"))?,
            None => file
                .trusted_keys
                .iter()
                .map(|k| read_public(k, "`trusted_keys` in the config file"))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .flatten()
                .collect(),
        };
        let signing = match env(ABICACHE_SIGNING_KEY).or_else(|| file.signing_key.clone()) {
            Some(value) => Some(read_secret(&value)?),
            None => None,
        };
        Ok(Keys { trusted, signing })
    }
}

/// The settings the config file at `path` sets, as (the environment variable
/// that overrides it, its value as text), for `abicache config`. A missing
/// file sets nothing; an unreadable or invalid one is an error naming it.
pub fn config_file_settings(path: &Path) -> Result<Vec<(&'static str, String)>> {
    let file = read_config(path)?;
    let settings = [
        (ABICACHE_REMOTE, file.remote),
        (ABICACHE_REMOTE_MODE, file.remote_mode),
        (
            ABICACHE_REMOTE_TIMEOUT,
            file.remote_timeout.map(|s| s.to_string()),
        ),
        (
            ABICACHE_TRUSTED_KEYS,
            Some(file.trusted_keys.join(", ")).filter(|k| !k.is_empty()),
        ),
        (ABICACHE_SIGNING_KEY, file.signing_key),
        (
            abicache_env_vars::ABICACHE_READONLY_DIRS,
            Some(join_paths(&file.readonly_dirs)).filter(|d| !d.is_empty()),
        ),
    ];
    Ok(settings
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect())
}

/// The read-only cache layers of this process: `ABICACHE_READONLY_DIRS`
/// (directories separated by `:`; empty items are skipped), else
/// `readonly_dirs` in the config file (a list of paths); empty when neither
/// is set. Relative paths are kept as given.
pub fn readonly_dirs() -> Result<Vec<PathBuf>> {
    readonly_dirs_with(&abicache_env_vars::var)
}

/// [`readonly_dirs`] with variables read through `var` (for tests).
pub fn readonly_dirs_with(var: &dyn Fn(&str) -> Option<String>) -> Result<Vec<PathBuf>> {
    if let Some(value) = var(abicache_env_vars::ABICACHE_READONLY_DIRS) {
        if !value.trim().is_empty() {
            return Ok(value
                .split(':')
                .filter(|d| !d.trim().is_empty())
                .map(PathBuf::from)
                .collect());
        }
    }
    Ok(match config_path_with(var) {
        Some(path) => read_config(&path)?.readonly_dirs,
        None => Vec::new(),
    })
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// The largest config file read.
const MAX_CONFIG_SIZE: u64 = 1 << 20;

fn read_config(path: &Path) -> Result<ConfigFile> {
    let config_error = |reason: String| RemoteError::Config {
        path: path.to_owned(),
        reason,
    };
    let text = match abicache_fs::read_bounded(path, abicache_fs::Follow::Yes, MAX_CONFIG_SIZE) {
        Ok(bytes) => {
            String::from_utf8(bytes).map_err(|_| config_error("it is not UTF-8".into()))?
        }
        Err(e) if e.is_not_found() => return Ok(ConfigFile::default()),
        Err(e) => return Err(config_error(e.to_string())),
    };
    toml::from_str(&text).map_err(|e| RemoteError::Config {
        path: path.to_owned(),
        reason: e.message().to_owned(),
    })
}

fn parse_timeout(value: &str) -> Result<Duration> {
    abicache_env_vars::parse_seconds(value)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| RemoteError::InvalidSetting {
            name: ABICACHE_REMOTE_TIMEOUT,
            value: value.to_owned(),
            reason: "expected a positive number of seconds".into(),
        })
}

/// Keys separated by commas or white space; an item that is not 64 hex
/// digits is read as a file of such keys (one per line, `#` comments).
fn parse_key_list(value: &str, origin: &str) -> Result<Vec<PublicKey>> {
    let mut keys = Vec::new();
    for item in value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
    {
        keys.extend(read_public(item, origin)?);
    }
    Ok(keys)
}

fn read_public(item: &str, origin: &str) -> Result<Vec<PublicKey>> {
    if looks_like_key(item) {
        return Ok(vec![PublicKey::parse(item, origin)?]);
    }
    let text = fs_err::read_to_string(item)?;
    let origin = format!("`{item}`");
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| PublicKey::parse(l, &origin))
        .collect()
}

/// 64 hex digits, or a file holding them (as `abicache keygen --out` writes).
fn read_secret(value: &str) -> Result<SecretKey> {
    let value = value.trim();
    if looks_like_key(value) {
        return SecretKey::parse(value, &format!("`{ABICACHE_SIGNING_KEY}`"));
    }
    let text = fs_err::read_to_string(value)?;
    let line = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .find(|l| !l.is_empty())
        .unwrap_or("");
    SecretKey::parse(line, &format!("`{value}`"))
}

fn looks_like_key(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::sign::KeyPair;

    fn resolve(override_url: Option<&str>, vars: &[(&str, &str)]) -> Result<Option<RemoteConfig>> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RemoteConfig::resolve_with(override_url, &|name| vars.get(name).cloned())
    }

    #[test]
    fn readonly_dirs_come_from_the_variable_else_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "readonly_dirs = [\"/mnt/a\", \"/mnt/b\"]\n").unwrap();
        let file = file.to_str().unwrap().to_owned();
        let with = |pairs: Vec<(&'static str, String)>| {
            let vars: HashMap<&str, String> = pairs.into_iter().collect();
            readonly_dirs_with(&|name| vars.get(name).cloned()).unwrap()
        };
        let from_file = with(vec![("ABICACHE_CONFIG", file.clone())]);
        assert_eq!(
            from_file,
            [PathBuf::from("/mnt/a"), PathBuf::from("/mnt/b")]
        );
        let from_env = with(vec![
            ("ABICACHE_CONFIG", file.clone()),
            ("ABICACHE_READONLY_DIRS", "/nfs/x::/img/y".into()),
        ]);
        assert_eq!(from_env, [PathBuf::from("/nfs/x"), PathBuf::from("/img/y")]);
        let settings = config_file_settings(Path::new(&file)).unwrap();
        assert!(settings.contains(&("ABICACHE_READONLY_DIRS", "/mnt/a:/mnt/b".to_owned())));
    }

    #[test]
    fn nothing_configured_means_no_remote() {
        assert!(
            resolve(None, &[("ABICACHE_CONFIG", "/nonexistent/config.toml")])
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn flag_beats_variable_beats_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        fs_err::write(
            &file,
            "remote = \"file:///from/file\"\nremote_mode = \"read-only\"\nremote_timeout = 2.5\n",
        )
        .unwrap();
        let file = file.to_str().unwrap();
        let c = resolve(None, &[("ABICACHE_CONFIG", file)])
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.url.as_str(), c.mode, c.timeout),
            (
                "file:///from/file",
                Mode::ReadOnly,
                Duration::from_millis(2500)
            )
        );
        let vars = [
            ("ABICACHE_CONFIG", file),
            ("ABICACHE_REMOTE", "redis://h:1/0"),
            ("ABICACHE_REMOTE_MODE", "read-write"),
        ];
        let c = resolve(None, &vars).unwrap().unwrap();
        assert_eq!((c.url.as_str(), c.mode), ("redis://h:1/0", Mode::ReadWrite));
        assert_eq!(
            resolve(Some("s3://b/p"), &vars).unwrap().unwrap().url,
            "s3://b/p"
        );
        assert!(resolve(Some("none"), &vars).unwrap().is_none());
    }

    #[test]
    fn keys_from_variables_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
        let keys = dir.path().join("trusted.pub");
        fs_err::write(&keys, format!("# the CI builders\n{}\n", b.public)).unwrap();
        let secret = dir.path().join("signing.key");
        fs_err::write(&secret, a.secret.to_hex()).unwrap();
        let trusted = format!("{}, {}", a.public, keys.display());
        let vars = [
            ("ABICACHE_CONFIG", "/nonexistent"),
            ("ABICACHE_REMOTE", "file:///x"),
            ("ABICACHE_TRUSTED_KEYS", trusted.as_str()),
            ("ABICACHE_SIGNING_KEY", secret.to_str().unwrap()),
        ];
        let c = resolve(None, &vars).unwrap().unwrap();
        assert_eq!(c.trusted_keys, vec![a.public, b.public]);
        assert_eq!(c.signing_key.unwrap().public(), a.public);
    }

    #[test]
    fn bad_settings_say_what_is_accepted() {
        let base = [
            ("ABICACHE_CONFIG", "/nonexistent"),
            ("ABICACHE_REMOTE", "file:///x"),
        ];
        let mode = resolve(
            None,
            &[base[0], base[1], ("ABICACHE_REMOTE_MODE", "sometimes")],
        )
        .unwrap_err();
        let timeout =
            resolve(None, &[base[0], base[1], ("ABICACHE_REMOTE_TIMEOUT", "-1")]).unwrap_err();
        insta::assert_snapshot!(format!("{mode}\n{timeout}"), @r"
        invalid ABICACHE_REMOTE_MODE `sometimes`: expected `read-write` or `read-only`
        invalid ABICACHE_REMOTE_TIMEOUT `-1`: expected a positive number of seconds
        ");
    }
}
