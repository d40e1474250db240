//! `abicache push`, `pull` and `keygen`, and the remote cache of `build`.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use abicache::remote::{KeyPair, Upload};
use abicache::settings::Settings;
use abicache::store::{validate_key, Store};
use abicache::{Pulled, RemoteCache};
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use crate::output::{emit, print_json};
use crate::render::human_size;

/// `abicache push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// Extension names, keys or key prefixes (at least 8 characters) [default: every local entry].
    #[arg(value_name = "NAME|KEY")]
    pub targets: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `abicache pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// Keys, or extension names (found through the remote's listing: S3 and `file://`, not Redis).
    #[arg(required = true, value_name = "NAME|KEY")]
    pub targets: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `abicache keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Write the secret key to FILE (owner-only, never overwritten) and the public key to FILE.pub,
    /// instead of printing both.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// One line of `push` or `pull` output.
#[derive(Debug, Serialize)]
struct Transfer {
    name: String,
    key: String,
    /// `uploaded`, `already-there`, `downloaded`, `already-local`, `not-there` or `rejected`.
    result: &'static str,
    bytes: u64,
}

/// The remote cache for `build` that the settings name (`--remote`, else the
/// environment, else the config file; each value was checked when they were
/// resolved). A key that cannot be read is a warning and no remote, never a
/// failed build.
pub fn remote_for_build(settings: &Settings, no_upload: bool) -> Option<RemoteCache> {
    match RemoteCache::from_settings(&settings.remote) {
        Ok(remote) => remote.map(|r| if no_upload { r.without_upload() } else { r }),
        Err(e) => {
            eprintln!("warning: remote cache disabled: {e}");
            None
        }
    }
}

fn required_remote(settings: &Settings) -> Result<RemoteCache> {
    match RemoteCache::from_settings(&settings.remote)? {
        Some(remote) => Ok(remote),
        None => bail!(
            "no remote cache is configured; set `ABICACHE_REMOTE` (e.g. `s3://bucket/prefix`), pass `--remote URL`, \
             or add `remote = \"...\"` to the config file"
        ),
    }
}

/// `abicache push [NAME|KEY]...`.
pub fn push(store: Store, settings: &Settings, args: PushArgs) -> Result<()> {
    let remote = required_remote(settings)?;
    let entries = store.list().map_err(abicache::Error::from)?;
    let chosen: Vec<_> = if args.targets.is_empty() {
        entries.iter().collect()
    } else {
        let mut chosen = Vec::new();
        for target in &args.targets {
            let matched: Vec<_> = entries.iter().filter(|e| e.matches(target)).collect();
            if matched.is_empty() {
                bail!("no local entry named or keyed `{target}` (see `abicache ls`)");
            }
            chosen.extend(matched);
        }
        chosen
    };
    let mut done = Vec::new();
    for entry in chosen {
        let upload = remote
            .push(&store, entry)
            .with_context(|| format!("cannot push `{}` ({})", entry.name, entry.key))?;
        let (result, bytes) = match upload {
            Upload::Uploaded { bytes } => ("uploaded", bytes),
            Upload::AlreadyThere => ("already-there", 0),
        };
        done.push(Transfer {
            name: entry.name.clone(),
            key: entry.key.clone(),
            result,
            bytes,
        });
    }
    report(&done, args.json, remote.remote().url())
}

/// `abicache pull NAME|KEY...`.
pub fn pull(store: Store, settings: &Settings, args: PullArgs) -> Result<()> {
    let remote = required_remote(settings)?;
    let mut keys = Vec::new();
    for target in &args.targets {
        if validate_key(target).is_ok() && target.bytes().all(|b| b.is_ascii_hexdigit()) {
            keys.push((String::new(), target.clone()));
        } else {
            let named = remote.remote().keys_named(target)?;
            if named.is_empty() {
                bail!(
                    "the remote cache `{}` has no entry named `{target}`",
                    remote.remote().url()
                );
            }
            keys.extend(named.into_iter().map(|k| (target.clone(), k)));
        }
    }
    let mut done = Vec::new();
    let mut missing = Vec::new();
    for (name, key) in keys {
        let pulled = remote
            .pull(&store, &key)
            .with_context(|| format!("cannot pull `{key}`"))?;
        let (result, bytes) = match pulled {
            Pulled::Downloaded { bytes } => ("downloaded", bytes),
            Pulled::AlreadyLocal => ("already-local", 0),
            Pulled::NotThere => {
                missing.push(key.clone());
                ("not-there", 0)
            }
            // A bad remote entry is a warning: the next build of it builds locally.
            Pulled::Rejected { warning } => {
                eprintln!("warning: {warning}");
                ("rejected", 0)
            }
        };
        let name = match store.lookup(&key) {
            Ok(lookup) => lookup.hit.map_or(name, |hit| hit.manifest.name),
            Err(_) => name,
        };
        done.push(Transfer {
            name,
            key,
            result,
            bytes,
        });
    }
    report(&done, args.json, remote.remote().url())?;
    if !missing.is_empty() {
        bail!(
            "the remote cache `{}` has no entry for {}",
            remote.remote().url(),
            missing.join(", ")
        );
    }
    Ok(())
}

fn report(done: &[Transfer], json: bool, url: &str) -> Result<()> {
    if json {
        return print_json(&done);
    }
    let mut text = String::new();
    for t in done {
        let size = if t.bytes > 0 {
            format!(" ({})", human_size(t.bytes))
        } else {
            String::new()
        };
        let name = if t.name.is_empty() {
            String::new()
        } else {
            format!("{} ", t.name)
        };
        text.push_str(&format!("{:<14} {name}{}{size}\n", t.result, t.key));
    }
    if done.is_empty() {
        text.push_str(&format!("nothing to transfer (remote `{url}`)\n"));
    }
    emit(&text)
}

/// `abicache keygen [--out FILE]`.
pub fn keygen(args: KeygenArgs) -> Result<()> {
    let pair = KeyPair::generate()?;
    let public = pair.public.to_string();
    if let Some(out) = &args.out {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(out)
            .with_context(|| {
                format!(
                    "cannot create `{}` (an existing key file is never overwritten)",
                    out.display()
                )
            })?;
        writeln!(file, "{}", pair.secret.to_hex())
            .with_context(|| format!("cannot write `{}`", out.display()))?;
        let public_path = PathBuf::from(format!("{}.pub", out.display()));
        std::fs::write(&public_path, format!("{public}\n"))
            .with_context(|| format!("cannot write `{}`", public_path.display()))?;
        if args.json {
            return print_json(
                &serde_json::json!({ "public_key": public, "secret_key_file": out, "public_key_file": public_path }),
            );
        }
        return emit(&format!(
            "public key  {public}\nsecret key  written to {} (owner-only), public key to {}\n\n\
             builders:  ABICACHE_SIGNING_KEY={}\nreaders:   ABICACHE_TRUSTED_KEYS={public}\n",
            out.display(),
            public_path.display(),
            out.display()
        ));
    }
    let secret = pair.secret.to_hex();
    if args.json {
        return print_json(&serde_json::json!({ "public_key": public, "secret_key": secret }));
    }
    emit(&format!(
        "public key  {public}\nsecret key  {secret}\n\n\
         builders:  ABICACHE_SIGNING_KEY=<secret key>   (keep it secret)\nreaders:   ABICACHE_TRUSTED_KEYS={public}\n"
    ))
}
