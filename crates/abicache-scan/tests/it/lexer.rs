//! The lexer against every comment, literal and directive form of docs/key.md, steps 1–2.

use abicache_scan::{lex, FileFacts, IncludeKind};

fn includes(src: &str) -> Vec<(String, IncludeKind, u32, bool)> {
    lex(src.as_bytes())
        .includes
        .into_iter()
        .map(|i| (i.name, i.kind, i.line, i.next))
        .collect()
}

fn names(src: &str) -> Vec<String> {
    lex(src.as_bytes())
        .includes
        .into_iter()
        .map(|i| i.name)
        .collect()
}

fn markers(src: &str) -> Vec<(u32, String)> {
    lex(src.as_bytes()).python_markers
}

fn marker_texts(src: &str) -> Vec<String> {
    markers(src).into_iter().map(|(_, m)| m).collect()
}

/// Text that would be an include and every kind of marker if it were code.
const PAYLOAD: &str = "#include \"hidden.h\" PyLong_FromLong py::object PYBIND11_MODULE REGISTER_EXTENSION( STABLE_TORCH_LIBRARY";

fn assert_hidden(src: &str) {
    let facts = lex(src.as_bytes());
    assert_eq!(
        facts,
        FileFacts::default(),
        "facts leaked out of {src:?}: {facts:?}"
    );
}

// ---- directives -------------------------------------------------------------

#[test]
fn angle_quoted_and_include_next() {
    let src = "#include <vector>\n#include \"local.h\"\n#include_next <limits.h>\n";
    assert_eq!(
        includes(src),
        vec![
            ("vector".into(), IncludeKind::Angle, 1, false),
            ("local.h".into(), IncludeKind::Quoted, 2, false),
            ("limits.h".into(), IncludeKind::Angle, 3, true),
        ]
    );
}

#[test]
fn any_whitespace_around_hash_and_keyword_counts() {
    let src = "#  include \"a.h\"\n# include \"b.h\"\n   #\tinclude\t<c.h>\n#include<d.h>\n#include\"e.h\"\n";
    assert_eq!(names(src), ["a.h", "b.h", "c.h", "d.h", "e.h"]);
}

#[test]
fn block_comment_between_hash_and_include_is_whitespace() {
    assert_eq!(names("# /* x */ include /* y */ \"a.h\"\n"), ["a.h"]);
    assert_eq!(names("/* lead */ #include \"b.h\"\n"), ["b.h"]);
}

#[test]
fn digraph_percent_colon_is_a_hash() {
    assert_eq!(names("%:include \"a.h\"\n"), ["a.h"]);
}

#[test]
fn hash_not_first_on_line_is_not_a_directive() {
    assert_hidden("int x; #include \"a.h\"\n");
    // A block comment spanning lines is one space: no newline before `#`.
    assert_hidden("int x; /*\n*/ #include \"a.h\"\n");
    // A `#` inside a macro body is no directive: only the define is recorded.
    let facts = lex(b"#define INC #include \"a.h\"\n");
    assert!(facts.includes.is_empty(), "{facts:?}");
    assert_eq!(facts.defines.len(), 1);
}

#[test]
fn other_directives_and_lookalikes_are_not_includes() {
    assert!(names("#included \"a.h\"\n#import \"b.h\"\n#pragma include \"c.h\"\n").is_empty());
    assert!(names("#if __has_include(<d.h>)\n#endif\n").is_empty());
}

#[test]
fn conditional_blocks_are_not_evaluated() {
    let src = "#if 0\n#include \"never.h\"\n#else\n#include <always.h>\n#endif\n";
    assert_eq!(names(src), ["never.h", "always.h"]);
}

#[test]
fn computed_include_records_operand_and_leaves_the_verdict_to_the_scan() {
    let src = "#include KERNEL_HEADER // which one?\n#include_next NEXT(x) /* c */\n";
    assert_eq!(
        includes(src),
        vec![
            ("KERNEL_HEADER".into(), IncludeKind::Computed, 1, false),
            ("NEXT(x)".into(), IncludeKind::Computed, 2, true),
        ]
    );
    // Whether it is a marker depends on what its macros expand to (scan).
    assert!(markers(src).is_empty());
}

#[test]
fn defines_are_recorded_with_parameters_and_body() {
    let src = "#define A 1\n# define F(x, ...) <x/__VA_ARGS__> /* c\n */\n\
               #define G (not params)\n\"#define NO\"\n#define L a \\\n  b // tail\n";
    let defs: Vec<(String, Option<String>, String)> = lex(src.as_bytes())
        .defines
        .into_iter()
        .map(|d| (d.name, d.params, d.body))
        .collect();
    assert_eq!(
        defs,
        [
            ("A".into(), None, "1".into()),
            (
                "F".into(),
                Some("x, ...".into()),
                "<x/__VA_ARGS__> /* c\n */".into()
            ),
            ("G".into(), None, "(not params)".into()),
            ("L".into(), None, "a   b".into()),
        ]
    );
}

#[test]
fn leading_byte_order_mark_is_skipped() {
    let src = "\u{feff}#include \"h.h\"\n";
    assert_eq!(names(src), ["h.h"]);
}

#[test]
fn empty_include_operand_is_ignored() {
    assert!(names("#include\n#include // nothing\n").is_empty());
}

#[test]
fn include_split_by_backslash_newline_counts_on_its_first_line() {
    let src = "int a;\n#inc\\\nlude \\\n\"split.h\"\n#include \"after.h\"\n";
    assert_eq!(
        includes(src),
        vec![
            ("split.h".into(), IncludeKind::Quoted, 2, false),
            ("after.h".into(), IncludeKind::Quoted, 5, false),
        ]
    );
}

#[test]
fn crlf_continuation_is_spliced() {
    let src = "#inc\\\r\nlude \"crlf.h\"\r\n#include \"b.h\"\r\n";
    assert_eq!(
        includes(src),
        vec![
            ("crlf.h".into(), IncludeKind::Quoted, 1, false),
            ("b.h".into(), IncludeKind::Quoted, 3, false),
        ]
    );
}

#[test]
fn header_names_are_not_literals_or_comments() {
    // `'` and `//` inside a header name do not start a literal or comment.
    let src = "#include <it's.h>\n#include \"a//b.h\"\n#include \"c.h\"\n";
    assert_eq!(names(src), ["it's.h", "a//b.h", "c.h"]);
}

// ---- comments and literals hide includes and markers -----------------------

#[test]
fn line_comment_hides() {
    assert_hidden(&format!("// {PAYLOAD}\n"));
    assert_hidden(&format!("int x; // {PAYLOAD}"));
}

#[test]
fn continuation_extends_line_comment_to_next_line() {
    assert_hidden(&format!("// comment \\\n{PAYLOAD}\n"));
    assert_hidden(&format!("// comment \\\r\n{PAYLOAD}\r\n"));
    // Without the backslash the next line is code.
    assert_eq!(names("// comment\n#include \"a.h\"\n"), ["a.h"]);
}

#[test]
fn block_comment_hides_across_lines() {
    assert_hidden(&format!("/* {PAYLOAD}\n{PAYLOAD}\n*/"));
    assert_hidden(&format!("/* unterminated\n{PAYLOAD}\n"));
    assert_eq!(names("/* a */\n#include \"a.h\"\n"), ["a.h"]);
}

#[test]
fn block_comment_ends_at_the_first_star_slash_after_its_opening() {
    // `/*/` opens without closing; `/**/` is a whole comment.
    assert_hidden(&format!("/*/ {PAYLOAD} */"));
    assert_eq!(names("/**/#include \"a.h\"\n"), ["a.h"]);
    // Slashes and stars inside do not end it; the first `*/` does.
    assert_hidden(&format!("/* a/b // c * / d ** {PAYLOAD} */"));
    assert_eq!(names("/* x **/ /* y */\n#include \"b.h\"\n"), ["b.h"]);
    assert_eq!(marker_texts("/* x */ PyObject* o; /* y */"), ["PyObject"]);
    // Unterminated, ending in a lone `*` or `/`.
    assert_hidden(&format!("/* {PAYLOAD} *"));
    assert_hidden(&format!("/* {PAYLOAD} /"));
    assert_hidden("/*");
}

#[test]
fn string_literals_hide_with_every_prefix() {
    for prefix in ["", "u8", "u", "U", "L"] {
        let escaped = PAYLOAD.replace('"', "\\\"");
        assert_hidden(&format!("auto s = {prefix}\"{escaped}\";\n"));
    }
}

#[test]
fn escaped_quote_does_not_end_a_string() {
    assert_hidden("const char* s = \"\\\" py::cast PyFoo \\\\\\\" PYBIND11_X\";\n");
    // An escaped backslash does end it.
    assert_eq!(
        marker_texts("auto s = \"\\\\\"; PyObject* o;"),
        ["PyObject"]
    );
}

#[test]
fn char_literals_hide_with_every_prefix() {
    for prefix in ["", "u8", "u", "U", "L"] {
        assert_hidden(&format!("auto c = {prefix}'\"'; auto d = '\\''; // done\n"));
    }
    // A quote inside a char literal does not open a string.
    assert_eq!(
        marker_texts("char q = '\"'; PyObject* o; char r = '\"';"),
        ["PyObject"]
    );
}

#[test]
fn unterminated_literal_ends_at_newline() {
    // `#error don't` must not swallow the next line.
    assert_eq!(names("#error don't do this\n#include \"a.h\"\n"), ["a.h"]);
    assert_eq!(names("auto s = \"open\n#include \"b.h\"\n"), ["b.h"]);
}

#[test]
fn raw_strings_hide_including_quotes_and_parens() {
    assert_hidden(&format!("auto r = R\"({PAYLOAD})\";\n"));
    assert_hidden(&format!(
        "auto r = R\"xy(\n{PAYLOAD}\n)\" still inside )x\" too )xy\";\n"
    ));
    for prefix in ["u8R", "uR", "UR", "LR"] {
        assert_hidden(&format!("auto r = {prefix}\"d({PAYLOAD} )\" )d\";\n"));
    }
    // The code after the raw string is lexed again.
    assert_eq!(
        marker_texts("auto r = R\"x()\" py::x )x\"; py::object o;"),
        ["py::"]
    );
}

#[test]
fn raw_string_backslashes_are_not_escapes() {
    // `\"` inside a raw string does not protect the terminator.
    assert_eq!(
        marker_texts("auto r = R\"(\\)\"; PyObject* o;"),
        ["PyObject"]
    );
}

#[test]
fn identifier_ending_in_r_is_not_a_raw_prefix() {
    // `FOOR"(...` is identifier FOOR then an ordinary string ending at `"`.
    assert_eq!(marker_texts("FOOR\"(\" PyObject \")\""), ["PyObject"]);
}

#[test]
fn digit_separators_are_not_char_literals() {
    assert_eq!(
        marker_texts("int n = 1'000'000; PyObject* o; char c = 'x';"),
        ["PyObject"]
    );
    assert_eq!(marker_texts("auto h = 0xFF'FF; py::int_ i;"), ["py::"]);
}

// ---- markers ----------------------------------------------------------------

#[test]
fn py_uppercase_identifier_is_a_marker_only_as_a_whole_identifier() {
    assert_eq!(
        marker_texts("PyObject* o = PyLong_FromLong(1); Py_ssize_t n; MyPyThing t; _PyFoo f; Pyx p; PyTorch x;"),
        ["PyObject", "PyLong_FromLong", "PyTorch"]
    );
}

#[test]
fn pybind11_identifier_is_a_marker() {
    assert_eq!(
        marker_texts("PYBIND11_MODULE(m, mod) {} PYBIND11_ XPYBIND11_FOO"),
        ["PYBIND11_MODULE"]
    );
}

#[test]
fn py_scope_is_a_marker_even_with_whitespace() {
    assert_eq!(
        markers("py::object a;\nauto b = py :: none();\nnumpy::x c; py; py : d;"),
        vec![(1, "py::".to_owned()), (2, "py::".to_owned())]
    );
}

#[test]
fn register_extension_needs_a_call() {
    assert_eq!(
        markers("REGISTER_EXTENSION (mod)\nREGISTER_EXTENSION;\nMY_REGISTER_EXTENSION(x)\n"),
        vec![(1, "REGISTER_EXTENSION(".to_owned())]
    );
}

#[test]
fn python_includes_are_markers_in_normalised_form() {
    let src = "#  include   <Python.h>\n#include \"pybind11/pybind11.h\"\n#include <torch/extension.h>\n#include <torch/python.h>\n#include <torch/torch.h>\n#include <python3.12/Python.h>\n#include <MyPython.h>\n";
    assert_eq!(
        markers(src),
        vec![
            (1, "#include <Python.h>".to_owned()),
            (2, "#include \"pybind11/pybind11.h\"".to_owned()),
            (3, "#include <torch/extension.h>".to_owned()),
            (4, "#include <torch/python.h>".to_owned()),
            (6, "#include <python3.12/Python.h>".to_owned()),
        ]
    );
}

#[test]
fn markers_in_define_bodies_count() {
    assert_eq!(
        markers("#define WRAP(x) PyLong_FromLong(x)\n"),
        vec![(1, "PyLong_FromLong".to_owned())]
    );
}

#[test]
fn stable_registrations_are_recorded_by_line() {
    let src = "STABLE_TORCH_LIBRARY(ns, m) {}\n\nSTABLE_TORCH_LIBRARY_IMPL(ns, CPU, m) {}\nSTABLE_TORCH_LIBRARY_FRAGMENT(ns, m) {}\n// STABLE_TORCH_LIBRARY(no)\nMY_STABLE_TORCH_LIBRARY x;\n";
    assert_eq!(lex(src.as_bytes()).stable_registrations, vec![1, 3, 4]);
}

// ---- lines and bytes ----------------------------------------------------------

#[test]
fn lines_are_physical_lines_of_the_token_start() {
    let src =
        "/* a\n b\n */\nint x = \\\n  1;\n\n  PyObject* o;\n#define M \\\n  PyLong_FromLong\n";
    assert_eq!(
        markers(src),
        vec![
            (7, "PyObject".to_owned()),
            (9, "PyLong_FromLong".to_owned())
        ]
    );
}

#[test]
fn non_utf8_bytes_are_lexed_not_rejected() {
    let mut src = b"// \xff\xfe latin-1 caf\xe9\n".to_vec();
    src.extend_from_slice(b"const char* s = \"\xc3\x28 py::hidden\";\n");
    src.extend_from_slice(b"#include \"caf\xe9.h\"\n");
    src.extend_from_slice(b"\xffPyNotAMarker PyObject\xe9 x;\n");
    let facts = lex(&src);
    assert_eq!(facts.includes.len(), 1);
    assert_eq!(facts.includes[0].name, "caf\u{fffd}.h");
    assert_eq!(facts.includes[0].line, 3);
    assert_eq!(
        facts.python_markers,
        vec![(4, "PyObject\u{fffd}".to_owned())]
    );
}

#[test]
fn truncated_inputs_do_not_panic() {
    for src in [
        "#",
        "#include",
        "#include <",
        "#include \"",
        "R\"",
        "R\"abc",
        "u8R\"x(",
        "'",
        "\"\\",
        "/*",
        "/",
        "\\",
        "py",
        "py:",
        "REGISTER_EXTENSION",
        "1'",
        "%:",
        "#include_next",
    ] {
        let _ = lex(src.as_bytes());
    }
}

#[test]
fn torch_extension_name_use_is_seen_only_in_code() {
    assert!(lex(b"PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}").uses_extension_name);
    assert!(lex(b"#define NAME TORCH_EXTENSION_NAME\n").uses_extension_name);
    assert!(
        !lex(b"// TORCH_EXTENSION_NAME\nconst char* s = \"TORCH_EXTENSION_NAME\";")
            .uses_extension_name
    );
    assert!(!lex(b"int MY_TORCH_EXTENSION_NAME_X = 0;").uses_extension_name);
}
