//! Property tests: the lexer never panics, and includes or markers inside
//! comments and literals are never reported, while those outside always are.

use abicache_scan::{lex, IncludeKind};
use proptest::prelude::*;

/// Fragments that would be includes, markers or lexer traps if they leaked.
const FRAGMENTS: &[&str] = &[
    "#include \"leak.h\"",
    "\n#include <leak.h>\n",
    "#include MACRO",
    "# include_next <x>",
    "PyLong_FromLong",
    "py::object",
    "PYBIND11_MODULE",
    "REGISTER_EXTENSION(",
    "STABLE_TORCH_LIBRARY",
    "\"",
    "'",
    "\\",
    "/*",
    "*/",
    "//",
    ")\"",
    "R\"(",
    "\n",
    " ",
    "u8R\"x(",
    "1'0",
];

#[derive(Debug, Clone)]
enum Hidden {
    LineComment(String),
    ContinuedLineComment(String),
    Block(String),
    Str(&'static str, String),
    Char(&'static str, String),
    Raw(&'static str, String, String),
}

#[derive(Debug, Clone)]
enum Line {
    Hidden(Vec<Hidden>),
    Include(usize),
    Marker(usize),
}

fn payload() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..8).prop_map(|v| v.concat())
}

fn prefix() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["", "u8", "u", "U", "L"][..])
}

fn hidden() -> impl Strategy<Value = Hidden> {
    prop_oneof![
        payload().prop_map(Hidden::LineComment),
        payload().prop_map(Hidden::ContinuedLineComment),
        payload().prop_map(Hidden::Block),
        (prefix(), payload()).prop_map(|(p, s)| Hidden::Str(p, s)),
        (prefix(), payload()).prop_map(|(p, s)| Hidden::Char(p, s)),
        (prefix(), "[a-z]{0,4}", payload()).prop_map(|(p, d, s)| Hidden::Raw(p, d, s)),
    ]
}

fn line() -> impl Strategy<Value = Line> {
    prop_oneof![
        3 => prop::collection::vec(hidden(), 1..4).prop_map(Line::Hidden),
        1 => (0usize..100).prop_map(Line::Include),
        1 => (0usize..100).prop_map(Line::Marker),
    ]
}

fn replace_all(mut s: String, from: &str, to: &str) -> String {
    while s.contains(from) {
        s = s.replace(from, to);
    }
    s
}

fn escape(s: &str, quote: char) -> String {
    s.replace('\n', "")
        .replace('\\', "\\\\")
        .replace(quote, &format!("\\{quote}"))
}

impl Hidden {
    fn render(&self) -> String {
        match self {
            // No backslash: one before the line's end would continue it.
            Hidden::LineComment(p) => format!("// {}", p.replace(['\n', '\\'], "")),
            Hidden::ContinuedLineComment(p) => {
                format!("// c \\\n{}", p.replace(['\n', '\\'], ""))
            }
            // Splicing comes first: `*\\\n/` would end the comment too.
            Hidden::Block(p) => {
                let unspliced = replace_all(p.clone(), "\\\n", "\\ \n");
                format!("/* {} */", replace_all(unspliced, "*/", "* /"))
            }
            Hidden::Str(pre, p) => format!("{pre}\"{}\"", escape(p, '"')),
            Hidden::Char(pre, p) => format!("{pre}'{}'", escape(p, '\'')),
            Hidden::Raw(pre, d, p) => {
                // Backslash-newline inside raw strings is a known
                // simplification (spliced like everywhere else); keep it out.
                let closing = format!("){d}\"");
                let body = replace_all(p.replace('\\', ""), &closing, &format!(") {d}\""));
                format!("{pre}R\"{d}({body}){d}\"")
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let facts = lex(&bytes);
        for inc in &facts.includes {
            prop_assert!(inc.line >= 1);
        }
    }

    #[test]
    fn random_c_like_bytes_never_panic(
        parts in prop::collection::vec(
            prop_oneof![
                prop::sample::select(FRAGMENTS).prop_map(|s| s.as_bytes().to_vec()),
                prop::collection::vec(any::<u8>(), 0..4),
                Just(b"\\\r\n".to_vec()),
            ],
            0..64,
        )
    ) {
        let _ = lex(&parts.concat());
    }

    #[test]
    fn only_code_outside_comments_and_literals_is_reported(lines in prop::collection::vec(line(), 0..24)) {
        let mut text = String::new();
        let mut want_includes = Vec::new();
        let mut want_markers = Vec::new();
        for l in &lines {
            let lineno = text.matches('\n').count() as u32 + 1;
            match l {
                Line::Hidden(forms) => {
                    // A line comment hides the rest of its line, so it goes last:
                    // a block comment after it would end on a later line.
                    let (comments, rest): (Vec<&Hidden>, Vec<&Hidden>) = forms.iter().partition(|f| {
                        matches!(f, Hidden::LineComment(_) | Hidden::ContinuedLineComment(_))
                    });
                    let rendered: Vec<String> = rest.into_iter().chain(comments).map(Hidden::render).collect();
                    text.push_str(&rendered.join(" "));
                }
                Line::Include(i) => {
                    text.push_str(&format!("#include \"v{i}.h\""));
                    want_includes.push((format!("v{i}.h"), lineno));
                }
                Line::Marker(i) => {
                    text.push_str(&format!("PyVisible{i} x;"));
                    want_markers.push((lineno, format!("PyVisible{i}")));
                }
            }
            text.push('\n');
        }
        let facts = lex(text.as_bytes());
        let got: Vec<(String, u32)> = facts
            .includes
            .iter()
            .map(|i| {
                assert_eq!(i.kind, IncludeKind::Quoted);
                (i.name.clone(), i.line)
            })
            .collect();
        prop_assert_eq!(got, want_includes, "text:\n{}", text);
        prop_assert_eq!(facts.python_markers, want_markers, "text:\n{}", text);
        prop_assert!(facts.stable_registrations.is_empty(), "text:\n{}", text);
    }
}
