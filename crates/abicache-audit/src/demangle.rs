//! Itanium C++ demangling with a fallback to the raw name.

use cpp_demangle::{DemangleOptions, Symbol};

/// Demangles an Itanium C++ symbol name (`_ZN3c104impl...` → `c10::impl::...`),
/// spelling vtables and VTTs as `c++filt` does (`vtable for T`, `VTT for T`).
///
/// Guarantees: never panics and never fails; a name that is not mangled, or
/// that cannot be demangled, is returned unchanged. A trailing `@VERSION` or
/// `@@VERSION` suffix (as `nm` prints it) is kept on the output.
pub fn demangle(name: &str) -> String {
    let (base, version) = match name.find('@') {
        Some(at) => name.split_at(at),
        None => (name, ""),
    };
    if !base.starts_with("_Z") {
        return name.to_owned();
    }
    let demangled = Symbol::new(base)
        .ok()
        .and_then(|symbol| symbol.demangle(&DemangleOptions::default()).ok());
    match demangled {
        Some(text) => format!("{}{version}", like_cxxfilt(text)),
        None => name.to_owned(),
    }
}

/// Rewrites cpp_demangle's `{vtable(T)}` and `{vtt(T)}` as `c++filt` prints them.
fn like_cxxfilt(text: String) -> String {
    for (open, label) in [("{vtable(", "vtable for "), ("{vtt(", "VTT for ")] {
        if let Some(inner) = text.strip_prefix(open).and_then(|t| t.strip_suffix(")}")) {
            return format!("{label}{inner}");
        }
    }
    text
}

/// Whether `text` contains `needle` starting at an identifier boundary (the
/// character before it, if any, is not part of an identifier).
pub(crate) fn mentions(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(at, _)| {
        text[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_and_keeps_version_suffix() {
        assert_eq!(demangle("_ZN3c103fooEv"), "c10::foo()");
        assert_eq!(
            demangle("_ZdlPv@GLIBCXX_3.4"),
            "operator delete(void*)@GLIBCXX_3.4"
        );
        assert_eq!(demangle("PyLong_FromLong"), "PyLong_FromLong");
        assert_eq!(
            demangle("_ZTVN10__cxxabiv120__si_class_type_infoE"),
            "vtable for __cxxabiv1::__si_class_type_info"
        );
        assert_eq!(demangle("_ZTTN3c103FooE"), "VTT for c10::Foo");
        assert_eq!(demangle("_Znot-a-valid-name"), "_Znot-a-valid-name");
    }

    #[test]
    fn mentions_requires_identifier_boundary() {
        assert!(mentions("foo(at::Tensor)", "at::"));
        assert!(mentions("at::Tensor", "at::"));
        assert!(!mentions("what::ever", "at::"));
        assert!(!mentions("my_at::x", "at::"));
    }
}
