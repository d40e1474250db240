//! The warm key: a key remembered per input digest with the
//! dependencies of the scan behind it ([`KeyMemo`]), so a warm key or a
//! warm hit costs one `stat` per dependency instead of a scan.
//!
//! The input digest covers everything the key is computed from besides the
//! files: the spec, the completed environment, the fingerprint root, the
//! current directory when a path is relative, and the code that computes
//! keys ([`crate::key_code::KEY_CODE_ROOTS`]); the scan's
//! dependencies cover the files. A memo is therefore answered only when a
//! full scan would give the same key (tested in `tests/it/warm_key.rs`).

use std::path::Path;

use abicache_key::{Environment, ExtensionSpec, Payload};
use abicache_scan::KeyMemo;
use abicache_store::Store;

use super::Session;
use crate::key_code::KEY_CODE_FINGERPRINT;

/// The key memos, under the store's `v1/`.
const KEY_MEMO_DIR: &str = "key-memo";

/// The digest of everything a key depends on besides the scanned files;
/// `None` when something cannot be encoded (then nothing is remembered).
pub(super) fn inputs(spec: &ExtensionSpec, env: &Environment, root: &Path) -> Option<[u8; 32]> {
    let mut h = abicache_fs::FieldHasher::new();
    let mut field = |bytes: &[u8]| {
        h.field(bytes);
    };
    field(KEY_CODE_FINGERPRINT.as_bytes());
    field(abicache_scan::SCANNER_FINGERPRINT.as_bytes());
    field(&serde_json::to_vec(spec).ok()?);
    field(&serde_json::to_vec(env).ok()?);
    field(root.as_os_str().as_encoded_bytes());
    let relative = !root.is_absolute()
        || spec.sources.iter().any(|p| !p.is_absolute())
        || spec.extra_include_paths.iter().any(|p| !p.is_absolute());
    if relative {
        field(std::env::current_dir().ok()?.as_os_str().as_encoded_bytes());
    }
    Some(*h.finalize().as_bytes())
}

/// What a memo remembers: the key, a newline, then the payload's text (so
/// `abicache key` can print the payload without a scan).
pub(super) fn memo_value(key: &str, payload: &Payload) -> String {
    let mut value = String::with_capacity(key.len() + 1 + payload.text_len());
    value.push_str(key);
    value.push('\n');
    payload.write_text(&mut value);
    value
}

/// A memo's value split into the key and the payload's text.
pub(super) fn memo_parts(value: &str) -> (&str, &str) {
    value.split_once('\n').unwrap_or((value, ""))
}

/// A key answered from the key memo, without a scan: what
/// [`Session::remembered_key`] returns.
#[derive(Debug, Clone)]
pub struct RememberedKey {
    /// 32 lower-case hex digits.
    pub key: String,
    /// The payload the key is the hash of (its key checked against `key`).
    pub payload: Payload,
}

/// The key memos of `store` (`v1/key-memo/`): what `abicache gc` cleans
/// with [`KeyMemo::remove_stale`].
pub fn key_memos(store: &Store) -> KeyMemo {
    KeyMemo::new(store.layout().version_dir().join(KEY_MEMO_DIR))
}

impl Session {
    /// The key memos of this session's cache, when the cache opens.
    pub(super) fn key_memo(&self) -> Option<KeyMemo> {
        Some(key_memos(self.store().ok()?))
    }

    /// The remembered key of `spec` in `env` (completed), when every file
    /// and directory its scan depended on is unchanged.
    pub(super) fn memo_key(
        &self,
        spec: &ExtensionSpec,
        env: &Environment,
        root: &Path,
    ) -> Option<String> {
        self.memo_entry(spec, env, root).map(|(key, _)| key)
    }

    /// [`Session::memo_key`] with the remembered payload's text.
    pub(super) fn memo_entry(
        &self,
        spec: &ExtensionSpec,
        env: &Environment,
        root: &Path,
    ) -> Option<(String, String)> {
        // A memo this session is still writing is waited for.
        self.settle();
        let value = self.key_memo()?.get(&inputs(spec, env, root)?)?;
        let (key, payload) = memo_parts(&value);
        Some((key.to_owned(), payload.to_owned()))
    }

    /// The key and payload of `spec` from the key memo, when every file
    /// and directory its scan depended on is unchanged and the remembered
    /// payload hashes to the remembered key; `Ok(None)` when a scan is
    /// needed ([`Session::prepare`] gives the full report). Exactly what a
    /// scan would give (the memo's guarantee), at one `stat` per dependency.
    ///
    /// # Errors
    /// An invalid spec or an environment that cannot be completed, as
    /// [`Session::prepare`].
    pub fn remembered_key(
        &self,
        spec: &ExtensionSpec,
        root: &Path,
    ) -> crate::Result<Option<RememberedKey>> {
        self.validate_spec(spec)?;
        let env = self.complete_env(spec)?;
        self.settle();
        let Some(value) = self
            .key_memo()
            .and_then(|memo| memo.get(&inputs(spec, &env, root)?))
        else {
            return Ok(None);
        };
        let (key, text) = memo_parts(&value);
        Ok(Payload::parse(text)
            .ok()
            .filter(|payload| payload.key() == key)
            .map(|payload| RememberedKey {
                key: key.to_owned(),
                payload,
            }))
    }

    /// The key of `spec` (what [`Session::prepare`] computes), answered
    /// from the key memo when nothing it depends on changed (one `stat` per
    /// file and directory the scan looked at), else by a scan through the
    /// stat cache, which remembers it.
    ///
    /// # Errors
    /// As [`Session::prepare`].
    pub fn key(&self, spec: &ExtensionSpec, root: &Path) -> crate::Result<String> {
        self.validate_spec(spec)?;
        let env = self.complete_env(spec)?;
        if let Some(key) = self.memo_key(spec, &env, root) {
            return Ok(key);
        }
        Ok(self.prepare(spec, root)?.keyed.key)
    }
}
