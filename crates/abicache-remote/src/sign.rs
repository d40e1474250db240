//! ed25519 keys and the signature a remote entry carries.
//!
//! A signature covers [`signature_message`]: the key and the BLAKE3 of the
//! whole manifest as uploaded (payload, library name, size and BLAKE3,
//! toolchain, everything), so it vouches for exactly one binary under
//! exactly one key and one manifest, and cannot be moved to another entry.

use std::io::Read;

use ed25519_dalek::{Signer, Verifier};
use serde::{Deserialize, Serialize};

use crate::error::{RemoteError, Result};
use crate::hex;

/// A public key whose signatures a reader may trust.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublicKey(ed25519_dalek::VerifyingKey);

/// A secret key uploads are signed with.
#[derive(Clone)]
pub struct SecretKey(ed25519_dalek::SigningKey);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretKey(public {})", self.public())
    }
}

/// A freshly generated key pair.
#[derive(Debug, Clone)]
pub struct KeyPair {
    /// The secret key (keep it private; `ABICACHE_SIGNING_KEY` on builders).
    pub secret: SecretKey,
    /// Its public key (`ABICACHE_TRUSTED_KEYS` on readers).
    pub public: PublicKey,
}

/// A signature as stored in a remote entry's header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    /// The signer's public key, hex.
    pub public_key: String,
    /// The ed25519 signature over [`signature_message`], hex.
    pub signature: String,
}

impl std::fmt::Display for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0.as_bytes()))
    }
}

impl PublicKey {
    /// Parses 64 hex digits; `origin` names where they came from in the error.
    pub fn parse(text: &str, origin: &str) -> Result<PublicKey> {
        let bytes = hex::decode::<32>(text.trim()).ok_or_else(|| RemoteError::InvalidKey {
            what: "public key",
            origin: origin.to_owned(),
            reason: format!("`{}` is not 64 hex digits", text.trim()),
        })?;
        ed25519_dalek::VerifyingKey::from_bytes(&bytes)
            .map(PublicKey)
            .map_err(|e| RemoteError::InvalidKey {
                what: "public key",
                origin: origin.to_owned(),
                reason: e.to_string(),
            })
    }

    /// True when `signature` is this key's valid signature over `message`.
    pub fn verifies(&self, message: &[u8], signature: &Signature) -> bool {
        let Some(bytes) = hex::decode::<64>(&signature.signature) else {
            return false;
        };
        let signature = ed25519_dalek::Signature::from_bytes(&bytes);
        self.0.verify(message, &signature).is_ok()
    }
}

impl SecretKey {
    /// Parses 64 hex digits (the seed); `origin` names where they came from in the error.
    pub fn parse(text: &str, origin: &str) -> Result<SecretKey> {
        let bytes = hex::decode::<32>(text.trim()).ok_or_else(|| RemoteError::InvalidKey {
            what: "secret key",
            origin: origin.to_owned(),
            reason: "it is not 64 hex digits".to_owned(),
        })?;
        Ok(SecretKey(ed25519_dalek::SigningKey::from_bytes(&bytes)))
    }

    /// The secret as 64 hex digits (what [`SecretKey::parse`] reads).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0.as_bytes())
    }

    /// The matching public key.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// Signs `message`.
    pub fn sign(&self, message: &[u8]) -> Signature {
        Signature {
            public_key: self.public().to_string(),
            signature: hex::encode(&self.0.sign(message).to_bytes()),
        }
    }
}

impl KeyPair {
    /// A new key pair from the operating system's random source (`/dev/urandom`).
    pub fn generate() -> Result<KeyPair> {
        let mut seed = [0u8; 32];
        fs_err::File::open("/dev/urandom")?.read_exact(&mut seed)?;
        let secret = SecretKey(ed25519_dalek::SigningKey::from_bytes(&seed));
        Ok(KeyPair {
            public: secret.public(),
            secret,
        })
    }
}

/// The bytes a signature covers: a versioned text naming the key and the
/// BLAKE3 (hex) of the manifest's exact bytes, which record the payload and
/// the library's name, size and BLAKE3.
pub fn signature_message(key: &str, manifest_json: &[u8]) -> Vec<u8> {
    format!(
        "abicache-remote-signature-v2\nkey={key}\nmanifest_blake3={}\n",
        blake3::hash(manifest_json).to_hex()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_verifies_only_for_its_key_and_message() {
        let a = KeyPair::generate().unwrap();
        let b = KeyPair::generate().unwrap();
        let message = signature_message("k", b"{\"library\":\"a.so\"}");
        let signature = a.secret.sign(&message);
        assert_eq!(signature.public_key, a.public.to_string());
        assert!(a.public.verifies(&message, &signature));
        assert!(!b.public.verifies(&message, &signature));
        assert!(!a.public.verifies(
            &signature_message("k", b"{\"library\":\"b.so\"}"),
            &signature
        ));
    }

    #[test]
    fn keys_round_trip_through_hex() {
        let pair = KeyPair::generate().unwrap();
        let secret = SecretKey::parse(&pair.secret.to_hex(), "test").unwrap();
        assert_eq!(secret.public(), pair.public);
        assert_eq!(
            PublicKey::parse(&pair.public.to_string(), "test").unwrap(),
            pair.public
        );
    }

    #[test]
    fn malformed_keys_are_errors_naming_their_origin() {
        let err = PublicKey::parse("abc", "`ABICACHE_TRUSTED_KEYS`").unwrap_err();
        insta::assert_snapshot!(err.to_string(), @"invalid ed25519 public key in `ABICACHE_TRUSTED_KEYS`: `abc` is not 64 hex digits; keys are 64 hex digits, as `abicache keygen` prints them");
    }
}
