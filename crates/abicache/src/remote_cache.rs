//! The remote step of the pipeline: local miss → remote hit (download into
//! the key's private build directory under its lock, verify, audit, publish
//! locally) → else build, publish locally, then upload.
//!
//! Every remote failure — unreachable, timed out, refused, corrupt,
//! untrusted — is one warning line and a local build, never a failed load.

use std::sync::{Arc, OnceLock};

use abicache_remote::{Fetched, Keys, Remote, RemoteConfig, RemoteError, Upload};
use abicache_settings::RemoteSettings;
use abicache_store::{BuildGuard, Claim, EntryInfo, Event, Hit, Provenance, Store};

use crate::covering::{Coverage, CoveringAsk};
use crate::gate::{self, Refusal, Refused, Signed, Source};
use crate::prepared::Prepared;
use crate::warning::Warning;

/// A remote cache as a session uses it: the client and whether builds upload.
#[derive(Debug)]
pub struct RemoteCache {
    remote: Remote,
    upload: bool,
}

/// What [`RemoteCache::pull`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pulled {
    /// The local cache already had a verified entry.
    AlreadyLocal,
    /// The entry was downloaded, verified and published locally.
    Downloaded {
        /// Bytes downloaded.
        bytes: u64,
    },
    /// The remote has no entry for the key.
    NotThere,
    /// The remote's entry is corrupt, untrusted or too large: nothing was
    /// published, and a build of the key will build it locally.
    Rejected {
        /// The warning to show (what was wrong with the entry).
        warning: String,
    },
}

/// How the remote answered a build's lookup, which decides its upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RemoteState {
    /// No lookup was made (`rebuild`).
    NotAsked,
    /// The remote has no entry: upload.
    Missing,
    /// The remote's entry was rejected: upload over it.
    Rejected,
    /// The remote failed: do not try it again in this call.
    Unavailable,
}

/// The result of [`RemoteCache::fetch_locked`].
pub(crate) enum Fetch {
    /// A verified, audited download, published locally.
    Hit(Hit),
    /// Build locally with this guard.
    Build(BuildGuard, RemoteState),
}

impl RemoteCache {
    /// A remote cache whose builds upload (unless its mode is read-only).
    pub fn new(remote: Remote) -> Self {
        RemoteCache {
            remote,
            upload: true,
        }
    }

    /// The remote the resolved settings name (`--remote`, else
    /// `ABICACHE_REMOTE`, else the config file: see
    /// [`abicache_settings::RemoteSettings::url`]), its keys read; `None`
    /// when none is configured.
    pub fn from_settings(settings: &RemoteSettings) -> Result<Option<RemoteCache>, RemoteError> {
        match RemoteConfig::from_settings(settings)? {
            Some(config) => Ok(Some(RemoteCache::new(Remote::open(config)?))),
            None => Ok(None),
        }
    }

    /// Downloads only: builds never upload (`--no-upload`).
    pub fn without_upload(mut self) -> Self {
        self.upload = false;
        self
    }

    /// The client.
    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    /// True when builds upload: not `--no-upload` and not read-only.
    pub fn uploads(&self) -> bool {
        self.upload && self.remote.config().mode == abicache_remote::Mode::ReadWrite
    }

    /// Copies `key`'s remote entry into `store` once it passed the gate
    /// ([`crate::gate`]: payload, signature, and the audit against what its
    /// payload claims, as there is no spec to audit it against). A bad remote
    /// entry is [`Pulled::Rejected`], not an error; only a remote that
    /// cannot be reached (or a local store that fails) is an error.
    pub fn pull(&self, store: &Store, key: &str) -> Result<Pulled, RemoteError> {
        let guard = match store.lookup_or_lock(key)? {
            Claim::Hit { .. } => return Ok(Pulled::AlreadyLocal),
            Claim::Build { guard, .. } => guard,
        };
        let fetched = match self.remote.fetch(key, guard.temp_dir()) {
            Ok(Some(fetched)) => fetched,
            Ok(None) => return Ok(Pulled::NotThere),
            Err(e) if !e.is_unavailable() && !matches!(e, RemoteError::Io(_)) => {
                let _ = store.record(Event::RemoteError);
                return Ok(Pulled::Rejected {
                    warning: format!("remote cache: {e}; not pulled"),
                });
            }
            Err(e) => return Err(e),
        };
        let (signed, audit) = match self.admit_unkeyed(key, &fetched) {
            Ok(admitted) => admitted,
            Err(refused) => {
                let _ = store.record(Event::RemoteError);
                return Ok(Pulled::Rejected {
                    warning: refused.to_string(),
                });
            }
        };
        let bytes = fetched.bytes;
        self.publish_admitted(store, guard, fetched, signed, audit)?;
        Ok(Pulled::Downloaded { bytes })
    }

    /// Publishes a download that passed the gate: its manifest with the
    /// audit that admitted it, and its provenance (this remote, the signer);
    /// counted as a remote hit.
    fn publish_admitted(
        &self,
        store: &Store,
        guard: BuildGuard,
        fetched: Fetched,
        signed: Signed,
        audit: serde_json::Value,
    ) -> Result<Hit, abicache_store::StoreError> {
        let mut manifest = fetched.manifest;
        manifest.audit = Some(audit);
        let compile_seconds = manifest.compile_seconds;
        let name = manifest.library.clone();
        self.provenance(signed.signer)
            .write_into(guard.temp_dir())?;
        let published = guard.publish(&name, manifest)?;
        store.record(Event::RemoteHit {
            bytes: fetched.bytes,
            compile_seconds,
        })?;
        Ok(published.hit)
    }

    /// The gate's checks of a download with no spec at hand: [`Self::admit`],
    /// then the audit against what its payload claims; the audit as the
    /// manifest's JSON.
    fn admit_unkeyed(
        &self,
        key: &str,
        fetched: &Fetched,
    ) -> Result<(Signed, serde_json::Value), Refused> {
        self.admit(key, fetched).and_then(|signed| {
            let payload = gate::payload_for_key(key, &fetched.manifest.payload)
                .map_err(|r| self.refused(key, r))?;
            gate::audit_against_payload(&fetched.library, &fetched.manifest.name, payload)
                .map(|report| (signed, serde_json::to_value(&report).unwrap_or_default()))
                .map_err(|r| self.refused(key, r))
        })
    }

    /// The covering lookup on the remote ([`crate::covering`]), after the
    /// exact key missed there: the candidates its arch-free markers name,
    /// best first, each downloaded under its own key's lock, passed through
    /// the gate as [`RemoteCache::pull`] does, published locally and served
    /// when it covers the GPUs by its own manifest. A backend that cannot
    /// list has no markers: nothing covers. Failures are warnings.
    pub(crate) fn cover(
        &self,
        store: &Store,
        covering: &CoveringAsk,
        warnings: &mut Vec<Warning>,
    ) -> crate::Result<Option<(Hit, Coverage)>> {
        let candidates = match self.remote.arch_free_entries(&covering.arch_free) {
            Ok(candidates) => candidates,
            Err(RemoteError::CannotList { .. }) => return Ok(None),
            Err(e) => {
                store.record(Event::RemoteError)?;
                warnings.push(Warning::RemoteFetch(Arc::new(e)));
                return Ok(None);
            }
        };
        for ranked in crate::covering::rank(&candidates, &covering.gpus) {
            let key = &ranked.key;
            let guard = match store.lookup_or_lock(key)? {
                Claim::Hit { hit, .. } => match crate::covering::covers(&hit, covering) {
                    Some(coverage) => return Ok(Some((hit, coverage))),
                    None => continue,
                },
                Claim::Build { guard, .. } => guard,
            };
            let fetched = match self.remote.fetch(key, guard.temp_dir()) {
                Ok(Some(fetched)) => fetched,
                // A stale marker: a miss.
                Ok(None) => continue,
                Err(e) => {
                    store.record(Event::RemoteError)?;
                    let unavailable = e.is_unavailable();
                    warnings.push(Warning::RemoteFetch(Arc::new(e)));
                    if unavailable {
                        return Ok(None);
                    }
                    continue;
                }
            };
            match self.admit_unkeyed(key, &fetched) {
                Ok((signed, audit)) => {
                    let hit = self.publish_admitted(store, guard, fetched, signed, audit)?;
                    if let Some(coverage) = crate::covering::covers(&hit, covering) {
                        return Ok(Some((hit, coverage)));
                    }
                }
                Err(refused) => {
                    store.record(Event::RemoteError)?;
                    warnings.push(Warning::Refused(refused));
                }
            }
        }
        Ok(None)
    }

    /// The gate's checks of a downloaded entry that need no spec: its
    /// payload hashes to `key`, and its signature (required, by a trusted
    /// key, when trusted keys are set).
    fn admit(&self, key: &str, fetched: &Fetched) -> Result<Signed, Refused> {
        gate::payload_for_key(key, &fetched.manifest.payload).map_err(|r| self.refused(key, r))?;
        let message = abicache_remote::signature_message(key, &fetched.manifest_json);
        gate::check_signature(
            &message,
            fetched.signature.as_ref(),
            &self.remote.config().trusted_keys,
        )
        .map_err(|r| self.refused(key, r))
    }

    /// `refusal` of `key`'s entry on this remote.
    fn refused(&self, key: &str, refusal: Refusal) -> Refused {
        Refused::entry(Source::Remote(self.remote.url().to_owned()), key, refusal)
    }

    /// What an entry pulled from this remote records about where it came from.
    fn provenance(&self, signed_by: Option<String>) -> Provenance {
        Provenance {
            source: "remote".to_owned(),
            origin: self.remote.url().to_string(),
            signed_by,
        }
    }

    /// Uploads a local entry (re-verified first) unless the remote has one.
    pub fn push(&self, store: &Store, entry: &EntryInfo) -> Result<Upload, RemoteError> {
        let Some(hit) = store.lookup(&entry.key)?.hit else {
            return Err(RemoteError::LocalEntryMissing {
                key: entry.key.clone(),
            });
        };
        let upload = self.remote.upload(&hit.manifest, &hit.library, false)?;
        if let Upload::Uploaded { bytes } = upload {
            store.record(Event::RemoteUpload { bytes })?;
        }
        Ok(upload)
    }

    /// The lookup of a build that missed locally and holds the key's lock:
    /// an intact download that passes the gate ([`crate::gate`]: payload,
    /// signature, the audit against the build's key) is published and
    /// returned; anything else gives the guard back to build with. Failures
    /// add one line to `warnings` and are counted.
    pub(crate) fn fetch_locked(
        &self,
        store: &Store,
        guard: BuildGuard,
        prepared: &Prepared,
        warnings: &mut Vec<Warning>,
    ) -> crate::Result<Fetch> {
        let key = &prepared.keyed.key;
        let fetched = match self.remote.fetch(key, guard.temp_dir()) {
            Ok(Some(fetched)) => fetched,
            Ok(None) => {
                store.record(Event::RemoteMiss)?;
                return Ok(Fetch::Build(guard, RemoteState::Missing));
            }
            Err(e) => {
                store.record(Event::RemoteError)?;
                let state = if e.is_unavailable() {
                    RemoteState::Unavailable
                } else {
                    RemoteState::Rejected
                };
                warnings.push(Warning::RemoteFetch(Arc::new(e)));
                return Ok(Fetch::Build(guard, state));
            }
        };
        let admitted = self.admit(key, &fetched).and_then(|signed| {
            gate::audit_keyed(&fetched.library, &prepared.keyed, &prepared.scan)
                .map(|audit| (signed, audit))
                .map_err(|r| self.refused(key, r))
        });
        let refused = match admitted {
            Ok((signed, audit)) => {
                let hit = self.publish_admitted(store, guard, fetched, signed, audit)?;
                return Ok(Fetch::Hit(hit));
            }
            Err(refused) => refused,
        };
        let _ = fs_err::remove_file(&fetched.library);
        store.record(Event::RemoteError)?;
        warnings.push(Warning::Refused(refused));
        Ok(Fetch::Build(guard, RemoteState::Rejected))
    }

    /// The upload after a local build was published (the lock is released):
    /// skipped when builds do not upload or the remote failed in this call.
    /// False when the remote failed (in this call or now): nothing more
    /// should be sent to it.
    pub(crate) fn upload_after_build(
        &self,
        store: &Store,
        hit: &Hit,
        state: RemoteState,
        warnings: &mut Vec<Warning>,
    ) -> bool {
        if state == RemoteState::Unavailable {
            return false;
        }
        if !self.uploads() {
            return true;
        }
        match self
            .remote
            .upload(&hit.manifest, &hit.library, state == RemoteState::Rejected)
        {
            Ok(Upload::Uploaded { bytes }) => {
                let _ = store.record(Event::RemoteUpload { bytes });
            }
            Ok(Upload::AlreadyThere) => {}
            Err(e) => {
                let _ = store.record(Event::RemoteError);
                warnings.push(Warning::RemoteUpload(Arc::new(e)));
                return false;
            }
        }
        true
    }
}

/// A session's remote cache, opened from the settings on first use
/// (shared by its remote source, its object cache and its uploads).
pub(crate) type RemoteSlot = OnceLock<Result<Option<RemoteCache>, Arc<RemoteError>>>;

/// The remote cache of `slot`, opened from `settings` (`--remote`, else
/// `ABICACHE_REMOTE`, else the config file) on first use; a key that cannot
/// be read is returned for the caller's warning.
pub(crate) fn resolve<'s>(
    slot: &'s RemoteSlot,
    settings: &RemoteSettings,
) -> Result<Option<&'s RemoteCache>, Arc<RemoteError>> {
    match slot.get_or_init(|| RemoteCache::from_settings(settings).map_err(Arc::new)) {
        Ok(remote) => Ok(remote.as_ref()),
        Err(e) => Err(Arc::clone(e)),
    }
}

/// The public keys of `ABICACHE_TRUSTED_KEYS` (else the config file) that
/// the settings name, as a store compares them with a pulled entry's signer
/// ([`Store::with_trusted_signers`]); when they cannot be read, one that
/// matches no signer (a pulled entry is then never served).
pub fn trusted_signers(settings: &RemoteSettings) -> Vec<String> {
    match Keys::from_settings(settings) {
        Ok(keys) => keys.trusted.iter().map(ToString::to_string).collect(),
        Err(_) => vec!["<unreadable ABICACHE_TRUSTED_KEYS>".to_owned()],
    }
}
