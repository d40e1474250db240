//! BLAKE3 over length-prefixed fields: the one framing of every digest that
//! names something by what it was made from (compiled-object keys, PCH
//! keys, host-CPU answers, key-memo inputs, generated-source directories).
//!
//! A field is its length as a little-endian `u64`, then its bytes, so no two
//! different sequences of fields hash alike. The framing is part of cache
//! keys on disk: changing it would orphan every existing entry, which the
//! pinned digests in this module's tests guard against.

/// A BLAKE3 hasher fed with length-prefixed fields.
#[derive(Debug, Clone, Default)]
pub struct FieldHasher {
    hasher: blake3::Hasher,
}

impl FieldHasher {
    /// An empty hasher.
    pub fn new() -> FieldHasher {
        FieldHasher::default()
    }

    /// Adds `bytes` as one field: its length (`u64`, little-endian), then the bytes.
    pub fn field(&mut self, bytes: &[u8]) -> &mut FieldHasher {
        self.hasher.update(&(bytes.len() as u64).to_le_bytes());
        self.hasher.update(bytes);
        self
    }

    /// Adds `name` and `value` as two fields (the named form of the build's keys).
    pub fn named(&mut self, name: &str, value: &str) -> &mut FieldHasher {
        self.field(name.as_bytes()).field(value.as_bytes())
    }

    /// Adds `bytes` with no length before them, for a caller whose own
    /// framing delimits them (a file name ended by a NUL byte).
    pub fn unframed(&mut self, bytes: &[u8]) -> &mut FieldHasher {
        self.hasher.update(bytes);
        self
    }

    /// The digest of everything added.
    pub fn finalize(&self) -> blake3::Hash {
        self.hasher.finalize()
    }
}

#[cfg(test)]
mod tests {
    use super::FieldHasher;

    /// The framing as each caller wrote it by hand before this helper.
    fn by_hand(parts: &[&[u8]]) -> String {
        let mut h = blake3::Hasher::new();
        for part in parts {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.finalize().to_hex().to_string()
    }

    /// Keys on disk are made with this framing: these digests must never change.
    #[test]
    fn digests_are_pinned_and_match_the_framing_written_by_hand() {
        let mut named = FieldHasher::new();
        named.named("format", "1").named("cxx", "/usr/bin/g++");
        let named = named.finalize().to_hex().to_string();
        assert_eq!(named, by_hand(&[b"format", b"1", b"cxx", b"/usr/bin/g++"]));
        assert_eq!(
            named,
            "8b3e3c050948ad6868d564d7bdfc37bf15c55b1b7bb2bc2650eb60631d99227d"
        );

        let mut fields = FieldHasher::new();
        fields
            .field(b"")
            .field(&42u64.to_le_bytes())
            .field(b"x86-64");
        let fields = fields.finalize().to_hex().to_string();
        assert_eq!(fields, by_hand(&[b"", &42u64.to_le_bytes(), b"x86-64"]));
        assert_eq!(
            fields,
            "9d4b767c5c5620bc1021841ce3f3d83086059d763c090d58928bed701075b9e5"
        );

        let mut sources = FieldHasher::new();
        sources
            .unframed(b"main.cpp")
            .unframed(&[0])
            .field(b"int x;");
        let sources = sources.finalize().to_hex().to_string();
        let mut h = blake3::Hasher::new();
        h.update(b"main.cpp");
        h.update(&[0]);
        h.update(&6u64.to_le_bytes());
        h.update(b"int x;");
        assert_eq!(sources, h.finalize().to_hex().to_string());
        assert_eq!(
            sources,
            "5da9467faa0dd59094de1e48fb66262912d482b78fe097a8a1e73dd9fa1b78b0"
        );
    }
}
