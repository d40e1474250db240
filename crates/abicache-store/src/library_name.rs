//! The one rule for the file name of an entry's library, shared by the local
//! store (publish, lookup) and the remote cache (downloads).

use crate::error::{Result, StoreError};

/// Longest accepted library file name, in bytes (`NAME_MAX` on Linux).
pub const MAX_LIBRARY_NAME_LEN: usize = 255;

/// A library file name that is safe inside an entry directory: 1 to 255
/// characters of `[A-Za-z0-9_.+-]`, not starting with `.`, ending in `.so`.
///
/// Guarantees: it is a plain name (no `/`, never `.` or `..`), it cannot be
/// hidden or collide with a file the entry itself keeps (`manifest.json`,
/// `last-used`, `compile_commands.json`: none ends in `.so`), and every
/// library abicache builds (`<extension name>.so`) has such a name. A
/// manifest naming anything else is corrupt, wherever it comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LibraryName(String);

impl LibraryName {
    /// Checks `name` against the rule; the error names it and the rule.
    pub fn parse(name: &str) -> Result<LibraryName> {
        match why_invalid(name) {
            None => Ok(LibraryName(name.to_owned())),
            Some(reason) => Err(StoreError::InvalidLibraryName {
                name: name.escape_debug().to_string(),
                reason,
            }),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for LibraryName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<std::path::Path> for LibraryName {
    fn as_ref(&self) -> &std::path::Path {
        std::path::Path::new(&self.0)
    }
}

fn why_invalid(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.len() > MAX_LIBRARY_NAME_LEN {
        return Some("it is longer than 255 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'+' | b'-'))
    {
        return Some("only `A-Z a-z 0-9 _ . + -` are allowed (no `/`, no spaces)");
    }
    if name.starts_with('.') {
        return Some("it starts with `.`");
    }
    if !name.ends_with(".so") || name.len() == 3 {
        return Some("it does not end in `.so`");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_library_names_pass() {
        for name in [
            "muladd_example.so",
            "libc.so",
            "lib.so",
            "ext+cu128.so",
            "a-b.1.so",
        ] {
            assert_eq!(LibraryName::parse(name).unwrap().as_str(), name);
        }
    }

    #[test]
    fn entry_files_paths_and_hidden_names_are_refused_with_the_reason() {
        let refused: Vec<String> = [
            "",
            "last-used",
            "manifest.json",
            "compile_commands.json",
            ".so",
            ".hidden.so",
            "../escape.so",
            "a/b.so",
            "..",
            "lib\0.so",
            "lib so.so",
        ]
        .iter()
        .map(|n| LibraryName::parse(n).unwrap_err().to_string())
        .collect();
        insta::assert_snapshot!(refused.join("\n"));
        assert!(LibraryName::parse(&format!("{}.so", "x".repeat(253))).is_err());
        assert!(LibraryName::parse(&format!("{}.so", "x".repeat(252))).is_ok());
    }
}
