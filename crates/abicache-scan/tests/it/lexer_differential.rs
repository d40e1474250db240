//! The lexer skips ordinary code 32 bytes at a time (`lexer_skip`); its scalar reference
//! loop classifies every byte. Both must find exactly the same facts (includes, markers,
//! defines, registrations) in every input: the generated benchmark tree, every header
//! torch ships in `.venv`, tricky hand-written fixtures and their truncations, and random
//! C-like text.

use std::path::{Path, PathBuf};

use abicache_scan::lexer::{lex, lex_scalar};
use proptest::prelude::*;

fn assert_same(bytes: &[u8], what: &dyn std::fmt::Display) {
    let fast = lex(bytes);
    let scalar = lex_scalar(bytes);
    assert_eq!(
        fast,
        scalar,
        "the lexers disagree on {what}: {:?}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(400)])
    );
}

fn repo() -> PathBuf {
    abicache_test_support::repo_root()
}

/// Every regular file under `dir`, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let t = entry.file_type().unwrap();
            if t.is_dir() {
                stack.push(entry.path());
            } else if t.is_file() {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

/// Fixtures where the candidates sit next to each other, at line starts, inside tokens,
/// at block boundaries (the padding below shifts each over every offset).
const FIXTURES: &[&str] = &[
    "#include <a.h>\n#include \"b.h\"\n  #  include_next <c.h>\n",
    "%:include <digraph.h>\n %: include \"d.h\"\n x %:include <no.h>\n",
    "/* c */ #include <after_comment.h>\n/* multi\nline */ #include <no_after_multiline.h>\n",
    "int x; /* \n */ #include <not_a_directive.h>\n",
    "// line comment #include <no.h>\n#include <yes.h> // trailing\n",
    "const char* s = \"#include <in_string.h> PyLong\"; char c = '#'; char d = '\\'';\n",
    "auto r = R\"x(#include <raw.h> )\" PyFake)x\"; auto u = u8R\"(py::x)\"; LR\"d(PyNo)d\";\n",
    "auto q = R\"(unterminated raw\n#include <still_raw.h>\n",
    "\"unterminated string\n#include <after_unterminated.h>\n'\n#include <after_quote.h>\n",
    "int n = 1'000'000 + 0x1P-3 + 1e+Py_x + .5e-3 + 1.e+PyNum + ..5PyAfter;\n",
    "x.PyDot a1PyIn_ident $PyDollar \u{e9}PyUtf8 _PyUnder PyReal(1) PYBIND11_MODULE(m, x) {}\n",
    "py::object o; py :: x; py\n::y; pyx::z; REGISTER_EXTENSION (x) REGISTER_EXTENSION; x\n",
    "STABLE_TORCH_LIBRARY(ns, m) {} STABLE_TORCH_LIBRARY_IMPL(ns, CPU, m) {} TORCH_EXTENSION_NAME\n",
    "#define PyMacro(a, b) PyBody(a) /* c */ // d\n#define EMPTY\n#define FN(x)x\n#define\n",
    "#define LONG \\\n  continued PyCont \\\r\n  more\n#include \\\n <spliced.h>\n",
    "#include MACRO_NAME // c\n#include PyComputed /* c */\n#include\n#include <>\n",
    "#pragma once\n#if defined(PyX) // c\n#endif\n#\n# \n#  define X 1\n",
    "u'a' U'b' L'c' u8'd' u\"e\" U\"f\" L\"g\" u8\"h\" uR\"(i)\" UR\"(j)\" R\"(k)\"",
    // Raw prefixes are recognised at their quote: never the tail of a pp-number or of a
    // longer identifier, whatever came before.
    "1R\"(\n#include <a1.h>\n)\" 1'R\"(PyA)\" 1e+R\"(PyB)\" .5R\"(PyC)\" x1R\"(PyD)\" $R\"(PyE)\"\n",
    "\"s\"R\"(PyF)\" /*c*/R\"(PyG)\" 'c'u8R\"(PyH)\" (LR\"(PyI)\") xu8R\"(PyJ)\" \u{e9}R\"(PyK)\"\n",
    "RE REGISTER_EXTENSION(x) ST STABLE_TORCH_LIBRARY TO TORCH_EXTENSION_NAME pY Py PY py PyZ\n",
    "a/b/c //\n/ /* */ / /**/#include <x.h>\n/*/ still */ #include <y.h>\n",
    "\t\x0b\x0c\r#include <ws.h>\r\n \r\n#include <crlf.h>\r\n",
    "\u{feff}#include <bom.h>\n",
    "\\\n#include <after_splice.h>\n#\\\ninclude <split_hash.h>\n",
    "PPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPP 1111111111111111111111111 uuuuuuuuuuuuuuuuuuuuuuu\n",
    "abcdefghijklmnopPyNo abcdefghijklmnoPyNo abcdefghijklmnopq PyYes",
    "%%%%%%%%%%%%%%%%%%%%%:##################//////////////\"\"''",
    "",
    "#",
    "P",
    "1'",
    "R\"",
];

#[test]
fn fixtures_at_every_offset_and_truncation_give_the_same_facts() {
    for (n, fixture) in FIXTURES.iter().enumerate() {
        for pad in 0..36 {
            for lead in ["", " ", "x", "\n", "1", "/*", "\"", "Py"] {
                let text = format!("{lead}{}{fixture}", " ".repeat(pad));
                let bytes = text.as_bytes();
                for end in 0..=bytes.len() {
                    assert_same(
                        &bytes[..end],
                        &format_args!("fixture {n}, pad {pad}, lead {lead:?}, end {end}"),
                    );
                }
            }
        }
    }
    // All of them in one file, and every pair concatenated.
    assert_same(FIXTURES.concat().as_bytes(), &"all fixtures");
    for a in FIXTURES {
        for b in FIXTURES {
            assert_same(format!("{a}{b}").as_bytes(), &format_args!("{a:?} + {b:?}"));
        }
    }
}

/// `benches/gen_tree.py`'s tree, smaller (300 headers, 1 MiB) but with every form.
#[test]
fn the_generated_tree_gives_the_same_facts() {
    let t = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("python3")
        .arg(repo().join("benches/gen_tree.py"))
        .arg(t.path())
        .args(["--headers", "300", "--mib", "1"])
        .status()
        .expect("python3 runs benches/gen_tree.py");
    assert!(status.success());
    let files = files_under(t.path());
    assert!(files.len() > 300, "{}", files.len());
    for file in files {
        assert_same(&std::fs::read(&file).unwrap(), &file.display());
    }
}

/// Every file under torch's `include/` in the project venv (about 8,000 headers).
#[test]
fn torchs_headers_give_the_same_facts() {
    let lib = repo().join(".venv/lib");
    let python = std::fs::read_dir(&lib)
        .unwrap_or_else(|e| {
            panic!(
                "`{}`: {e}: this test needs the project's venv; create it with \
                 `scripts/setup-venv.sh dev`",
                lib.display()
            )
        })
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .expect("a python3.X directory in .venv/lib")
        .path();
    let include = python.join("site-packages/torch/include");
    let files = files_under(&include);
    assert!(files.len() > 1000, "{}: {}", include.display(), files.len());
    for file in files {
        assert_same(&std::fs::read(&file).unwrap(), &file.display());
    }
}

/// Pieces that put candidates in every context.
const PIECES: &[&str] = &[
    "#",
    "%:",
    "%",
    "/",
    "//",
    "/*",
    "*/",
    "\"",
    "'",
    "\\\n",
    "\\\r\n",
    "\n",
    "\r\n",
    " ",
    "\t",
    "include",
    "include_next",
    "define",
    "<a.h>",
    "\"b.h\"",
    "R",
    "u8R",
    "LR",
    "u8",
    "L",
    "(",
    ")",
    "x(",
    ")x\"",
    "Py",
    "PyX",
    "PYBIND11_M",
    "py",
    "::",
    "REGISTER_EXTENSION",
    "STABLE_TORCH_LIBRARY",
    "TORCH_EXTENSION_NAME",
    "0",
    "1'0",
    "e+",
    "p-",
    ".",
    ".5",
    "_",
    "$",
    "\u{e9}",
    "abcdefgh",
    "S",
    "T",
    "U",
    "u",
    "p",
    "P",
    "uR",
    "UR",
    "RE",
    "ST",
    "TO",
    "y",
    "Y",
    "E",
    "O",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn random_c_like_text_gives_the_same_facts(
        parts in prop::collection::vec(
            prop_oneof![
                4 => prop::sample::select(PIECES).prop_map(|s| s.as_bytes().to_vec()),
                1 => prop::collection::vec(any::<u8>(), 0..3),
            ],
            0..96,
        )
    ) {
        let bytes = parts.concat();
        prop_assert_eq!(lex(&bytes), lex_scalar(&bytes));
    }
}
