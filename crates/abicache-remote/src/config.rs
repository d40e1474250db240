//! Where the remote is and how it is used, from the resolved settings
//! (`abicache_settings::RemoteSettings`: `--remote`, the variables, then the
//! config file); this module adds only what needs the remote's own types:
//! reading the keys.

use std::time::Duration;

use abicache_settings::RemoteSettings;

use crate::error::Result;
use crate::sign::{PublicKey, SecretKey};
use crate::ABICACHE_SIGNING_KEY;

pub use abicache_settings::{RemoteMode as Mode, DEFAULT_MAX_SIZE, DEFAULT_TIMEOUT};

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

impl RemoteConfig {
    /// The remote the settings name, with its keys read; `None` when no
    /// remote is configured (or it is `none`/`off`).
    ///
    /// # Errors
    /// A key that cannot be read or parsed, naming where it was given.
    pub fn from_settings(settings: &RemoteSettings) -> Result<Option<RemoteConfig>> {
        let Some(url) = settings.url.clone() else {
            return Ok(None);
        };
        let Keys { trusted, signing } = Keys::from_settings(settings)?;
        Ok(Some(RemoteConfig {
            url,
            mode: settings.mode,
            timeout: settings.timeout,
            trusted_keys: trusted,
            signing_key: signing,
            max_size: settings.max_size,
        }))
    }
}

/// The signing and trusted keys alone, for what is signed without a remote
/// (bundles, read-only layers): `ABICACHE_SIGNING_KEY` and
/// `ABICACHE_TRUSTED_KEYS`, else `signing_key` and `trusted_keys` in the config file.
#[derive(Clone, Debug, Default)]
pub struct Keys {
    /// When not empty, only what one of these keys signed is accepted.
    pub trusted: Vec<PublicKey>,
    /// When set, what is written is signed with it.
    pub signing: Option<SecretKey>,
}

impl Keys {
    /// The keys the settings name, read: each trusted item is 64 hex
    /// digits or a file of such keys (one per line, `#` comments); the
    /// signing key is 64 hex digits or a file holding them.
    ///
    /// # Errors
    /// A key or key file that cannot be read or parsed, naming it.
    pub fn from_settings(settings: &RemoteSettings) -> Result<Keys> {
        let trusted = settings
            .trusted_keys
            .iter()
            .map(|k| read_public(k, settings.trusted_keys_origin))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        let signing = match &settings.signing_key {
            Some(value) => Some(read_secret(value)?),
            None => None,
        };
        Ok(Keys { trusted, signing })
    }
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
    use super::*;
    use crate::sign::KeyPair;

    #[test]
    fn nothing_configured_means_no_remote() {
        assert!(RemoteConfig::from_settings(&RemoteSettings::default())
            .unwrap()
            .is_none());
    }

    #[test]
    fn keys_from_hex_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
        let keys = dir.path().join("trusted.pub");
        fs_err::write(&keys, format!("# the CI builders\n{}\n", b.public)).unwrap();
        let secret = dir.path().join("signing.key");
        fs_err::write(&secret, a.secret.to_hex()).unwrap();
        let settings = RemoteSettings {
            url: Some("file:///x".into()),
            trusted_keys: vec![a.public.to_string(), keys.display().to_string()],
            signing_key: Some(secret.display().to_string()),
            ..RemoteSettings::default()
        };
        let c = RemoteConfig::from_settings(&settings).unwrap().unwrap();
        assert_eq!(c.trusted_keys, vec![a.public, b.public]);
        assert_eq!(c.signing_key.unwrap().public(), a.public);
    }

    #[test]
    fn a_bad_key_names_where_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pub");
        let settings = RemoteSettings {
            trusted_keys: vec![missing.display().to_string()],
            ..RemoteSettings::default()
        };
        let err = Keys::from_settings(&settings).unwrap_err().to_string();
        assert!(err.contains("missing.pub"), "{err}");
        let garbled = dir.path().join("garbled.pub");
        fs_err::write(&garbled, "not a key\n").unwrap();
        let settings = RemoteSettings {
            trusted_keys: vec![garbled.display().to_string()],
            ..RemoteSettings::default()
        };
        let err = Keys::from_settings(&settings).unwrap_err().to_string();
        assert!(
            err.contains("garbled.pub") && err.contains("64 hex digits"),
            "{err}"
        );
    }
}
