//! The client: one OpenDAL operator for the configured URL, every call
//! bounded by the configured time-out.

use std::future::Future;
use std::path::{Path, PathBuf};

use abicache_store::Manifest;
use opendal::{services, ErrorKind, Operator};

use crate::config::{Mode, RemoteConfig};
use crate::entry_blob::{self, Header};
use crate::error::{RemoteError, Result};
use crate::verify::{verify_entry, Rejection};

mod arch_index;

/// The folder of entry blobs inside the remote (versioned like the local
/// layout). Its value is the on-remote layout and never changes with the
/// name in code (it was `OBJECT_DIR`): existing remote caches stay readable.
pub const ENTRY_DIR: &str = "v1";

/// A remote cache.
pub struct Remote {
    config: RemoteConfig,
    op: Operator,
    rt: tokio::runtime::Runtime,
    /// `host:port` of a Redis server, connected to once before the first
    /// operation: its client retries a refused connection until the
    /// time-out, and a refusal should fail at once.
    probe: Option<String>,
    reachable: std::sync::OnceLock<std::result::Result<(), String>>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.config.url)
            .field("mode", &self.config.mode)
            .finish()
    }
}

/// An intact entry downloaded by [`Remote::fetch`]: its library is what its
/// manifest records. Whether it may be used (payload, signature, audit) is
/// the gate's to decide (`abicache::gate`).
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The entry's manifest (verified against the key asked for and the library).
    pub manifest: Manifest,
    /// The manifest's exact bytes, as the signature covers them.
    pub manifest_json: Vec<u8>,
    /// The signature the entry carries, unchecked.
    pub signature: Option<crate::sign::Signature>,
    /// Where the library was written.
    pub library: PathBuf,
    /// Bytes downloaded.
    pub bytes: u64,
}

/// What [`Remote::upload`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upload {
    /// The entry was written; `bytes` is the blob's size.
    Uploaded {
        /// Bytes uploaded.
        bytes: u64,
    },
    /// The remote already had an entry for the key; nothing was written.
    AlreadyThere,
}

impl Remote {
    /// A client for `config.url`. Connects lazily: an unreachable server is
    /// reported by the first operation, not here.
    pub fn open(config: RemoteConfig) -> Result<Remote> {
        // reqwest is built without a default TLS provider; use ring's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (op, probe) = operator(&config.url)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("abicache-remote")
            .enable_all()
            .build()
            .map_err(RemoteError::Runtime)?;
        Ok(Remote {
            config,
            op,
            rt,
            probe,
            reachable: std::sync::OnceLock::new(),
        })
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &RemoteConfig {
        &self.config
    }

    /// The remote's URL.
    pub fn url(&self) -> &str {
        &self.config.url
    }

    /// The blob path of `key`'s entry inside the remote.
    pub fn entry_path(key: &str) -> String {
        format!("{ENTRY_DIR}/{key}")
    }

    /// Downloads `key`'s entry, checks that it is intact
    /// ([`crate::verify_entry`]) and writes its library into `dir` under the
    /// manifest's file name. `Ok(None)` when the remote has no entry for the
    /// key; a corrupt or oversized entry is an error and nothing is left in
    /// `dir`. Its payload, signature and audit are checked by the caller's
    /// gate (`abicache::gate`).
    ///
    /// The blob is streamed: its header is parsed from the first bytes,
    /// then the library goes to a temporary file in `dir` and is hashed as
    /// it arrives, so memory stays bounded whatever the blob's size, and
    /// at most [`RemoteConfig::max_size`] bytes are read.
    pub fn fetch(&self, key: &str, dir: &Path) -> Result<Option<Fetched>> {
        let blob = Self::entry_path(key);
        let corrupt = |reason| RemoteError::Corrupt {
            url: self.config.url.clone(),
            blob: blob.clone(),
            reason,
        };
        let Some(download) = self.download::<Header>(&blob, dir)? else {
            return Ok(None);
        };
        let verified =
            verify_entry(key, download.header, &download.library_digest).map_err(|r| match r {
                Rejection::Corrupt(reason) | Rejection::Untrusted(reason) => corrupt(reason),
            })?;
        let path = dir.join(verified.library_name.as_str());
        download
            .library
            .persist(&path)
            .map_err(|e| RemoteError::Io(e.error))?;
        Ok(Some(Fetched {
            manifest: verified.manifest,
            manifest_json: verified.manifest_json,
            signature: verified.signature,
            library: path,
            bytes: download.bytes,
        }))
    }

    /// Streams `blob` into a temporary file in `dir`; `None` when absent.
    pub(crate) fn download<H: Framed>(
        &self,
        blob: &str,
        dir: &Path,
    ) -> Result<Option<Download<H>>> {
        use futures::TryStreamExt;
        use std::io::Write;

        let open = async { self.op.reader(blob).await?.into_stream(..).await };
        let mut stream = match self.bounded("read", blob, open) {
            Ok(stream) => stream,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let cap = self.config.max_size;
        let corrupt = |reason| RemoteError::Corrupt {
            url: self.config.url.clone(),
            blob: blob.to_owned(),
            reason,
        };
        let too_large = |size: u64| RemoteError::TooLarge {
            url: self.config.url.clone(),
            blob: blob.to_owned(),
            size,
            cap,
        };
        let io = |e: std::io::Error| RemoteError::Io(with_path(e, dir));
        // Created once the header is in: a remote that fails first leaves nothing.
        let mut sink: Option<(H, Library)> = None;
        let mut pending = Vec::new();
        let mut bytes = 0u64;
        // Each chunk must arrive within the time-out; the size cap bounds the whole.
        while let Some(buffer) = match self.bounded("read", blob, stream.try_next()) {
            Err(e) if bytes == 0 && is_not_found(&e) => return Ok(None),
            other => other?,
        } {
            for chunk in buffer {
                bytes += chunk.len() as u64;
                if bytes > cap {
                    return Err(too_large(bytes));
                }
                let rest = match &mut sink {
                    Some((header, library)) => {
                        let expected = header.body_size();
                        if library.size() + chunk.len() as u64 > expected {
                            return Err(corrupt(longer_than(expected)));
                        }
                        library.write_all(&chunk).map_err(io)?;
                        continue;
                    }
                    None => {
                        pending.extend_from_slice(&chunk);
                        match H::decode(&pending).map_err(corrupt)? {
                            Some(parsed) => parsed,
                            None => continue,
                        }
                    }
                };
                let (header, used) = rest;
                let size = header.body_size();
                if used as u64 + size > cap {
                    return Err(too_large(used as u64 + size));
                }
                if (pending.len() - used) as u64 > size {
                    return Err(corrupt(longer_than(size)));
                }
                let temp = tempfile::Builder::new()
                    .prefix(".download-")
                    .tempfile_in(dir)
                    .map_err(io)?;
                let mut library = abicache_fs::DigestWriter::new(std::io::BufWriter::new(temp));
                library.write_all(&pending[used..]).map_err(io)?;
                pending = Vec::new();
                sink = Some((header, library));
            }
        }
        let Some((header, library)) = sink else {
            return Err(corrupt(entry_blob::truncated(pending.len())));
        };
        let (writer, library_digest) = library.finish().map_err(io)?;
        let library = writer.into_inner().map_err(|e| io(e.into_error()))?;
        Ok(Some(Download {
            header,
            library,
            library_digest,
            bytes,
        }))
    }

    /// True when the remote has a blob for `key` (intact or not).
    pub fn contains(&self, key: &str) -> Result<bool> {
        self.exists(&Self::entry_path(key))
    }

    /// Uploads `library` with `manifest` (a published local entry's), signed
    /// with the configured signing key if any. Unless `overwrite`, an
    /// existing blob for the key is kept ([`Upload::AlreadyThere`]); pass
    /// `overwrite` after [`Remote::fetch`] rejected the existing one.
    /// Refused on a read-only remote.
    pub fn upload(&self, manifest: &Manifest, library: &Path, overwrite: bool) -> Result<Upload> {
        if self.config.mode == Mode::ReadOnly {
            return Err(RemoteError::ReadOnly {
                url: self.config.url.clone(),
            });
        }
        if !overwrite && self.contains(&manifest.key)? {
            return Ok(Upload::AlreadyThere);
        }
        let library = fs_err::read(library)?;
        let header = Header::new(manifest, self.config.signing_key.as_ref());
        let bytes = entry_blob::encode(&header, &library);
        let size = bytes.len() as u64;
        self.write_entry(&manifest.key, bytes)?;
        if self.op.info().full_capability().list {
            let marker = name_marker(&manifest.name, &manifest.key);
            self.bounded("write", &marker, self.op.write(&marker, Vec::<u8>::new()))?;
        }
        self.index_arch_free(manifest)?;
        Ok(Upload::Uploaded { bytes: size })
    }

    /// The keys uploaded for extension `name` (from the name markers uploads
    /// leave). Needs a backend that can list (S3, `file://`; not Redis).
    pub fn keys_named(&self, name: &str) -> Result<Vec<String>> {
        if !self.op.info().full_capability().list {
            return Err(RemoteError::CannotList {
                url: self.config.url.clone(),
            });
        }
        let dir = format!("{ENTRY_DIR}/names/{name}/");
        let entries = match self.bounded("list", &dir, self.op.list(&dir)) {
            Err(RemoteError::Backend { source, .. }) if source.kind() == ErrorKind::NotFound => {
                Vec::new()
            }
            other => other?,
        };
        let mut keys: Vec<String> = entries
            .iter()
            .map(|e| e.name().trim_end_matches('/').to_owned())
            .filter(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_hexdigit()))
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// The raw blob of `key` (`None` when absent), unverified: for tools
    /// and tests; loaders use [`Remote::fetch`].
    pub fn read_entry(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.read_raw(&Self::entry_path(key))
    }

    /// The raw blob at `path` inside the remote (`None` when absent), unverified.
    pub fn read_raw(&self, path: &str) -> Result<Option<Vec<u8>>> {
        match self.bounded("read", path, self.op.read(path)) {
            Ok(buffer) => Ok(Some(buffer.to_vec())),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `bytes` as `key`'s blob, replacing any: for tools and tests;
    /// writers use [`Remote::upload`].
    pub fn write_entry(&self, key: &str, bytes: Vec<u8>) -> Result<()> {
        self.write_raw(&Self::entry_path(key), bytes)
    }

    /// Writes `bytes` at `path` inside the remote, replacing any blob there.
    pub fn write_raw(&self, path: &str, bytes: Vec<u8>) -> Result<()> {
        self.bounded("write", path, self.op.write(path, bytes))
            .map(|_| ())
    }

    /// True when the remote has a blob at `path` (intact or not).
    pub(crate) fn exists(&self, path: &str) -> Result<bool> {
        match self.bounded("stat", path, self.op.stat(path)) {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Runs `fut` on the client's runtime, giving up after the time-out.
    fn bounded<T>(
        &self,
        action: &'static str,
        blob: &str,
        fut: impl Future<Output = opendal::Result<T>>,
    ) -> Result<T> {
        let timeout = self.config.timeout;
        if let Some(address) = &self.probe {
            self.reachable
                .get_or_init(|| connect(address, timeout))
                .clone()
                .map_err(|reason| RemoteError::Unreachable {
                    url: self.config.url.clone(),
                    reason,
                })?;
        }
        match self
            .rt
            .block_on(async { tokio::time::timeout(timeout, fut).await })
        {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(RemoteError::Backend {
                url: self.config.url.clone(),
                action,
                blob: blob.to_owned(),
                source: Box::new(source),
            }),
            Err(_) => Err(RemoteError::Timeout {
                url: self.config.url.clone(),
                action,
                blob: blob.to_owned(),
                timeout,
            }),
        }
    }
}

/// Where a download's library goes while it streams: hashed and counted.
type Library = abicache_fs::DigestWriter<std::io::BufWriter<tempfile::NamedTempFile>>;

fn longer_than(size: u64) -> String {
    format!("its library is longer than the {size} bytes its manifest records")
}

/// A streamed download before verification.
pub(crate) struct Download<H> {
    pub(crate) header: H,
    pub(crate) library: tempfile::NamedTempFile,
    pub(crate) library_digest: abicache_fs::Digest,
    pub(crate) bytes: u64,
}

/// A blob's header as a download reads it: parsed from a prefix of the
/// blob, and saying how many bytes follow it.
pub(crate) trait Framed: Sized {
    /// The header at the start of `bytes` and the bytes it takes; `Ok(None)`
    /// when more bytes are needed.
    fn decode(bytes: &[u8]) -> std::result::Result<Option<(Self, usize)>, String>;
    /// The size of what follows the header.
    fn body_size(&self) -> u64;
}

impl Framed for Header {
    fn decode(bytes: &[u8]) -> std::result::Result<Option<(Self, usize)>, String> {
        entry_blob::decode_header(bytes)
    }
    fn body_size(&self) -> u64 {
        self.manifest.size
    }
}

fn is_not_found(e: &RemoteError) -> bool {
    matches!(e, RemoteError::Backend { source, .. } if source.kind() == ErrorKind::NotFound)
}

/// `e` with `path` in its message (`tempfile`'s errors do not name it).
fn with_path(e: std::io::Error, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("`{}`: {e}", path.display()))
}

/// One TCP connection to `address` within `timeout`.
fn connect(address: &str, timeout: std::time::Duration) -> std::result::Result<(), String> {
    use std::net::ToSocketAddrs;
    let addresses = address
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{address}`: {e}"))?;
    let mut last = format!("`{address}` resolves to no address");
    for addr in addresses {
        match std::net::TcpStream::connect_timeout(&addr, timeout) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("cannot connect to `{addr}`: {e}"),
        }
    }
    Err(last)
}

fn name_marker(name: &str, key: &str) -> String {
    format!("{ENTRY_DIR}/names/{name}/{key}")
}

/// The OpenDAL operator for a remote URL, and the address to probe first (Redis).
fn operator(url: &str) -> Result<(Operator, Option<String>)> {
    let invalid = |reason: &str| RemoteError::InvalidUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| invalid("it has no scheme"))?;
    let backend_error = |e: opendal::Error| invalid(&e.to_string());
    match scheme {
        "s3" => {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(invalid("it names no bucket"));
            }
            let mut builder = services::S3::default()
                .bucket(bucket)
                .root(&format!("/{}", prefix.trim_matches('/')));
            if abicache_env_vars::var_os(abicache_env_vars::AWS_REGION).is_none()
                && abicache_env_vars::var_os(abicache_env_vars::AWS_DEFAULT_REGION).is_none()
            {
                builder = builder.region("us-east-1");
            }
            Ok((
                Operator::new(builder).map_err(backend_error)?.finish(),
                None,
            ))
        }
        "redis" | "rediss" => {
            let (authority, db) = rest.split_once('/').unwrap_or((rest, ""));
            let (userinfo, host) = authority
                .rsplit_once('@')
                .map_or((None, authority), |(u, h)| (Some(u), h));
            if host.is_empty() {
                return Err(invalid("it names no host"));
            }
            let mut builder = services::Redis::default()
                .endpoint(&format!("{scheme}://{host}"))
                .root("/abicache/");
            let db = db.trim_matches('/');
            if !db.is_empty() {
                builder = builder.db(db
                    .parse()
                    .map_err(|_| invalid("its database is not a number"))?);
            }
            if let Some(userinfo) = userinfo {
                let (user, password) = userinfo.split_once(':').unwrap_or(("", userinfo));
                if !user.is_empty() {
                    builder = builder.username(user);
                }
                builder = builder.password(password);
            }
            let probe = if host.contains(':') {
                host.to_owned()
            } else {
                format!("{host}:6379")
            };
            Ok((
                Operator::new(builder).map_err(backend_error)?.finish(),
                Some(probe),
            ))
        }
        "file" => {
            if !rest.starts_with('/') {
                return Err(invalid(
                    "a `file://` URL needs an absolute path (`file:///shared/abicache`)",
                ));
            }
            let root = rest.trim_end_matches('/');
            let builder = services::Fs::default()
                .root(root)
                .atomic_write_dir(&format!("{root}/.tmp"));
            Ok((
                Operator::new(builder).map_err(backend_error)?.finish(),
                None,
            ))
        }
        _ => Err(invalid(&format!("unsupported scheme `{scheme}`"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> RemoteConfig {
        RemoteConfig {
            url: url.into(),
            mode: Mode::ReadWrite,
            timeout: std::time::Duration::from_secs(5),
            trusted_keys: Vec::new(),
            signing_key: None,
            max_size: crate::config::DEFAULT_MAX_SIZE,
        }
    }

    #[test]
    fn urls_of_each_backend_open_and_bad_ones_say_what_is_expected() {
        for url in [
            "s3://bucket/prefix",
            "s3://bucket",
            "redis://127.0.0.1:6379/0",
            "redis://:pw@h:1",
            "file:///tmp/x",
        ] {
            Remote::open(config(url)).unwrap_or_else(|e| panic!("{url}: {e}"));
        }
        let errors: Vec<String> = ["ftp://x/y", "s3:///p", "file://relative", "nothing"]
            .iter()
            .map(|url| Remote::open(config(url)).unwrap_err().to_string())
            .collect();
        insta::assert_snapshot!(errors.join("\n"));
    }
}
