//! The one wording of every refusal of an outside entry: which source, which
//! entry (or the source's index), what was wrong, what happened instead and
//! what to do. Every source renders through [`Refused`]'s `Display`.

use std::fmt;
use std::path::PathBuf;

/// Where an outside entry comes from, as a refusal names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// A read-only cache layer (`ABICACHE_READONLY_DIRS`, `readonly_dirs`
    /// in the config file): its root.
    Layer(PathBuf),
    /// An installed cache wheel (a layer the Python package found): its root.
    Wheel(PathBuf),
    /// A remote cache: its URL.
    Remote(String),
    /// A bundle being imported: its file (`-`: standard input).
    Bundle(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Layer(root) => write!(f, "read-only cache layer `{}`", root.display()),
            Source::Wheel(root) => write!(
                f,
                "read-only cache layer `{}` (an installed cache wheel)",
                root.display()
            ),
            Source::Remote(url) => write!(f, "remote cache `{url}`"),
            Source::Bundle(file) if file == "-" => f.write_str("the bundle on standard input"),
            Source::Bundle(file) => write!(f, "bundle `{file}`"),
        }
    }
}

impl Source {
    /// What happens instead of using the refused entry.
    fn instead(&self) -> &'static str {
        match self {
            Source::Layer(_) | Source::Wheel(_) | Source::Remote(_) => {
                "it is built locally instead"
            }
            Source::Bundle(_) => "nothing was imported",
        }
    }

    /// How the source's owner gets a signed copy.
    fn how_to_sign(&self) -> &'static str {
        match self {
            Source::Layer(_) | Source::Wheel(_) => {
                "export it signed (`abicache export --wheel` with `ABICACHE_SIGNING_KEY` set)"
            }
            Source::Remote(_) => "have builders sign their uploads with `ABICACHE_SIGNING_KEY`",
            Source::Bundle(_) => "export it again with `ABICACHE_SIGNING_KEY` set",
        }
    }

    /// How the source's owner replaces a bad copy. A cache wheel is not in
    /// `ABICACHE_READONLY_DIRS`: its remedy names the distribution, when its
    /// root is an installed wheel's (`…/_abicache_cache_<dist>/cache`).
    pub fn how_to_repair(&self) -> String {
        match self {
            Source::Layer(_) => {
                "re-populate the layer, or remove it from `ABICACHE_READONLY_DIRS`".to_owned()
            }
            Source::Wheel(root) => match wheel_distribution(root) {
                Some(dist) => format!(
                    "reinstall the cache wheel (`pip install --force-reinstall {dist}`), or \
                     uninstall it (`pip uninstall {dist}`)"
                ),
                None => "reinstall the cache wheel, or uninstall it".to_owned(),
            },
            Source::Remote(_) => {
                "a build here uploads a good entry over it (unless uploads are off)".to_owned()
            }
            Source::Bundle(_) => {
                "export the bundle again from a cache whose entry is good".to_owned()
            }
        }
    }
}

/// The distribution of the cache wheel installed at `root`
/// (`…/_abicache_cache_<dist>/cache`, as `abicache export --wheel` lays it out).
fn wheel_distribution(root: &std::path::Path) -> Option<&str> {
    if root.file_name()? != "cache" {
        return None;
    }
    root.parent()?
        .file_name()?
        .to_str()?
        .strip_prefix("_abicache_cache_")
        .filter(|dist| !dist.is_empty())
}

/// Why the gate refused an outside entry (or the index of a layer or bundle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `ABICACHE_TRUSTED_KEYS` (or `trusted_keys` in the config file) cannot be read.
    TrustedKeysUnreadable {
        /// Why.
        reason: String,
    },
    /// Trusted keys are set and it carries no signature.
    Unsigned,
    /// Its signature (or the signer's public key) cannot be read.
    SignatureUnreadable {
        /// What is wrong with it.
        reason: String,
    },
    /// Its valid signature is by a key that is not trusted.
    UntrustedSigner {
        /// The signer's public key (hex).
        signer: String,
    },
    /// Its signature does not match what it signs.
    Altered {
        /// The signer's public key (hex).
        signer: String,
    },
    /// It was pulled into the cache that serves it (a layer) unsigned or
    /// signed by a key that is not trusted, or its provenance cannot be read.
    PulledUntrusted {
        /// The provenance's account (`it was pulled from remote `…` unsigned, …`).
        reason: String,
    },
    /// Its manifest's payload cannot be parsed.
    PayloadUnreadable {
        /// Why.
        reason: String,
    },
    /// Its manifest's payload hashes to another key.
    PayloadKeyMismatch {
        /// What the payload hashes to.
        payload_key: String,
    },
    /// Its library cannot be audited (not an ELF shared library, unreadable).
    Unauditable {
        /// Why.
        reason: String,
    },
    /// Its library imports what its payload says it must not (the audit).
    Audit {
        /// The audit's explanation (symbols, likely cause, fixes).
        explanation: String,
    },
    /// Its library requires instruction-set extensions this CPU lacks.
    Isa {
        /// `built with FLAG; this CPU lacks A, B`, per flag.
        reasons: String,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TrustedKeysUnreadable { reason } => {
                write!(f, "the trusted keys cannot be read ({reason})")
            }
            Refusal::Unsigned => f.write_str(
                "it is not signed, and `ABICACHE_TRUSTED_KEYS` accepts only what one of its keys signed",
            ),
            Refusal::SignatureUnreadable { reason } => {
                write!(f, "its signature cannot be read ({reason})")
            }
            Refusal::UntrustedSigner { signer } => write!(
                f,
                "it is signed by `{signer}`, which is not one of `ABICACHE_TRUSTED_KEYS`"
            ),
            Refusal::Altered { signer } => write!(
                f,
                "its signature by `{signer}` does not match what it signs: it was altered after signing"
            ),
            Refusal::PulledUntrusted { reason } => f.write_str(reason),
            Refusal::PayloadUnreadable { reason } => {
                write!(f, "its payload cannot be read ({reason})")
            }
            Refusal::PayloadKeyMismatch { payload_key } => {
                write!(f, "its payload hashes to `{payload_key}`, not to its key")
            }
            Refusal::Unauditable { reason } => {
                write!(f, "its library cannot be audited ({reason})")
            }
            Refusal::Audit { explanation } => f.write_str(explanation),
            Refusal::Isa { reasons } => write!(
                f,
                "its library requires instruction-set extensions this CPU lacks ({reasons}), \
                 and loading it would stop the process with an illegal instruction (SIGILL)"
            ),
        }
    }
}

impl Refusal {
    /// What to do about it, coming from `source`.
    fn advice(&self, source: &Source) -> String {
        match self {
            Refusal::TrustedKeysUnreadable { .. } => {
                "Fix `ABICACHE_TRUSTED_KEYS` (or `trusted_keys` in the config file)".to_owned()
            }
            Refusal::Unsigned => capitalized(source.how_to_sign()),
            Refusal::UntrustedSigner { .. } => format!(
                "If you trust its signer, add the signer's public key to `ABICACHE_TRUSTED_KEYS`; \
                 otherwise {}",
                source.how_to_sign()
            ),
            Refusal::Isa { .. } => "Use it on a CPU that has those extensions, or set \
                 `ABICACHE_ISA_CHECK=0` to accept it anyway"
                .to_owned(),
            Refusal::SignatureUnreadable { .. }
            | Refusal::Altered { .. }
            | Refusal::PulledUntrusted { .. }
            | Refusal::PayloadUnreadable { .. }
            | Refusal::PayloadKeyMismatch { .. }
            | Refusal::Unauditable { .. }
            | Refusal::Audit { .. } => capitalized(&source.how_to_repair()),
        }
    }
}

/// `text` with its first letter upper-case (it starts a sentence).
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A refusal with where it happened: the one text a user sees, whatever
/// the source (`{source}: entry `{key}` refused: {why}; {instead}. {advice}.`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Where the entry came from.
    pub source: Source,
    /// The entry's key; `None` when the source's index (its signature) was refused.
    pub key: Option<String>,
    /// What was wrong.
    pub refusal: Refusal,
}

impl Refused {
    /// `refusal` of `key`'s entry from `source`.
    pub fn entry(source: Source, key: &str, refusal: Refusal) -> Self {
        Refused {
            source,
            key: Some(key.to_owned()),
            refusal,
        }
    }

    /// `refusal` of the index of `source` (a layer's or bundle's signature).
    pub fn index(source: Source, refusal: Refusal) -> Self {
        Refused {
            source,
            key: None,
            refusal,
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "{}: entry `{key}` refused: ", self.source)?,
            None => write!(f, "{} refused: ", self.source)?,
        }
        write!(
            f,
            "{}; {}. {}.",
            self.refusal,
            self.source.instead(),
            self.refusal.advice(&self.source)
        )
    }
}

impl std::error::Error for Refused {}

#[cfg(test)]
mod tests {
    use super::*;

    /// One of each refusal.
    fn every_refusal() -> Vec<Refusal> {
        vec![
            Refusal::TrustedKeysUnreadable {
                reason: "`zz` is not 64 hex digits".into(),
            },
            Refusal::Unsigned,
            Refusal::SignatureUnreadable {
                reason: "expected value at line 1 column 1".into(),
            },
            Refusal::UntrustedSigner {
                signer: "5151…".into(),
            },
            Refusal::Altered {
                signer: "7a7a…".into(),
            },
            Refusal::PulledUntrusted {
                reason: "it was pulled from remote `s3://bucket/cache` unsigned, and \
                         `ABICACHE_TRUSTED_KEYS` is set"
                    .into(),
            },
            Refusal::PayloadUnreadable {
                reason: "line 1 has no `=`".into(),
            },
            Refusal::PayloadKeyMismatch {
                payload_key: "b2b2…".into(),
            },
            Refusal::Unauditable {
                reason: "not an ELF file".into(),
            },
            Refusal::Audit {
                explanation: "it is keyed `python_abi=agnostic` (shared across Python versions), \
                              but the built library depends on the CPython ABI"
                    .into(),
            },
            Refusal::Isa {
                reasons: "built with -mavx512f; this CPU lacks avx512f".into(),
            },
        ]
    }

    fn every_source() -> Vec<Source> {
        vec![
            Source::Layer("/srv/ci-cache".into()),
            Source::Wheel("/venv/site-packages/abicache_cache_ops".into()),
            Source::Remote("s3://bucket/cache".into()),
            Source::Bundle("ops.abicache".into()),
        ]
    }

    /// Each refusal rendered once per source: the reason is worded once and
    /// only the source, what happened instead and the owner's remedy differ.
    #[test]
    fn each_refusal_has_one_wording_for_every_source() {
        let mut table = String::new();
        for refusal in every_refusal() {
            let reason = refusal.to_string();
            for source in every_source() {
                let refused = Refused::entry(source.clone(), "a1a1…", refusal.clone());
                let text = refused.to_string();
                assert!(text.contains(&format!(" refused: {reason}; ")), "{text}");
                table.push_str(&format!("{refusal:?} × {source:?}\n  {text}\n"));
            }
            table.push('\n');
        }
        insta::assert_snapshot!(table);
    }

    /// A cache wheel is not in `ABICACHE_READONLY_DIRS`: its remedy names
    /// pip and the distribution of an installed wheel's root.
    #[test]
    fn a_wheels_remedy_names_its_distribution_not_the_layer_variable() {
        let wheel = Source::Wheel("/venv/site-packages/_abicache_cache_ops/cache".into());
        assert_eq!(
            wheel.how_to_repair(),
            "reinstall the cache wheel (`pip install --force-reinstall ops`), or uninstall it \
             (`pip uninstall ops`)"
        );
        for source in every_source()
            .into_iter()
            .filter(|s| matches!(s, Source::Wheel(_)))
        {
            assert!(!source.how_to_repair().contains("ABICACHE_READONLY_DIRS"));
        }
    }

    #[test]
    fn an_index_refusal_names_the_source_without_a_key() {
        let refused = Refused::index(
            Source::Layer("/srv/ci-cache".into()),
            Refusal::UntrustedSigner {
                signer: "5151…".into(),
            },
        );
        insta::assert_snapshot!(refused.to_string(), @"read-only cache layer `/srv/ci-cache` refused: it is signed by `5151…`, which is not one of `ABICACHE_TRUSTED_KEYS`; it is built locally instead. If you trust its signer, add the signer's public key to `ABICACHE_TRUSTED_KEYS`; otherwise export it signed (`abicache export --wheel` with `ABICACHE_SIGNING_KEY` set).");
    }
}
