//! A C/C++ lexer that finds what the scan needs: includes, Python-ABI
//! markers and stable-ABI registrations (docs/key.md, steps 1–2).
//!
//! It works on raw bytes (never assumes UTF-8) and understands
//! backslash-newline continuations (`\` + LF or CR LF), `//` and `/* */`
//! comments, string and character literals with their prefixes
//! (`u8 u U L`), raw strings (`R"d(...)d"`, `u8R"…"`, …), digit separators
//! (`1'000`) and preprocessing directives. Text inside comments and
//! literals is never an include nor a marker. Conditional blocks are not
//! evaluated: every directive counts. Lines are 1-based physical lines of
//! where the directive (`#`) or identifier starts. A leading UTF-8 byte-order
//! mark is skipped, as compilers do, so it hides no directive.

use std::ops::Range;

use memchr::{memchr, memchr2, memchr3};
use serde::{Deserialize, Serialize};

use crate::macros::Defines;

/// How an include names its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum IncludeKind {
    /// `#include <name>`.
    Angle,
    /// `#include "name"`.
    Quoted,
    /// `#include MACRO`: anything else; `name` holds the operand as written.
    Computed,
}

/// One `#include` or `#include_next` directive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Include {
    /// The header name between the delimiters, or the operand text of a
    /// computed include (trimmed, comments cut off). Non-UTF-8 bytes are
    /// replaced with U+FFFD.
    pub name: String,
    /// Angle, quoted or computed.
    pub kind: IncludeKind,
    /// 1-based physical line of the directive's `#`.
    pub line: u32,
    /// True for `#include_next`.
    pub next: bool,
}

impl Include {
    /// The directive in normalised form: `#include <x>`, `#include "x"`,
    /// `#include MACRO`, or the same with `#include_next`.
    pub fn directive(&self) -> String {
        let kw = if self.next {
            "#include_next"
        } else {
            "#include"
        };
        match self.kind {
            IncludeKind::Angle => format!("{kw} <{}>", self.name),
            IncludeKind::Quoted => format!("{kw} \"{}\"", self.name),
            IncludeKind::Computed => format!("{kw} {}", self.name),
        }
    }

    /// True when this include is itself a Python-ABI marker (docs/key.md, step 2):
    /// `Python.h` (any directory), `pybind11/…`, `torch/extension.h` or
    /// `torch/python.h`. A computed include is judged by the scan, once its
    /// macros are expanded: by the headers it reaches, or as a marker itself
    /// when it cannot be resolved.
    pub fn is_python_marker(&self) -> bool {
        match self.kind {
            IncludeKind::Computed => false,
            IncludeKind::Angle | IncludeKind::Quoted => {
                let n = self.name.as_str();
                n == "Python.h"
                    || n.ends_with("/Python.h")
                    || n.starts_with("pybind11/")
                    || n == "torch/extension.h"
                    || n == "torch/python.h"
            }
        }
    }
}

/// Everything the scan needs to know about one file's text.
///
/// Serializable as a whole: the stat cache ([`crate::StatCache`]) stores it
/// per file, so a field added here is cached without further work.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileFacts {
    /// Every include directive outside comments and literals, in order.
    pub includes: Vec<Include>,
    /// Python-ABI markers `(line, marker)` in order: identifiers matching
    /// `Py[A-Z]\w*` or `PYBIND11_\w+`, `py::`, `REGISTER_EXTENSION(`, and
    /// the marker includes (see [`Include::is_python_marker`]) as
    /// [`Include::directive`].
    pub python_markers: Vec<(u32, String)>,
    /// Every `#define` outside comments and literals, in order: the macros
    /// computed includes are expanded with.
    pub defines: Defines,
    /// Lines of identifiers starting with `STABLE_TORCH_LIBRARY`.
    pub stable_registrations: Vec<u32>,
    /// Whether the identifier `TORCH_EXTENSION_NAME` appears (the only way
    /// the `-DTORCH_EXTENSION_NAME=` define can reach a unit's object code).
    pub uses_extension_name: bool,
}

/// Lexes one file. Never panics, whatever the bytes.
pub fn lex(bytes: &[u8]) -> FileFacts {
    lex_reusing(bytes, &mut LexScratch::default())
}

/// Space [`lex_reusing`] keeps from one file to the next (the text with its
/// continuations removed), so that lexing many files allocates it once.
#[derive(Debug, Default)]
pub(crate) struct LexScratch {
    text: Vec<u8>,
    splices: Vec<usize>,
}

/// [`lex`], with scratch space reused from earlier calls.
pub(crate) fn lex_reusing(bytes: &[u8], scratch: &mut LexScratch) -> FileFacts {
    lex_with(bytes, scratch, |lexer| lexer.run())
}

/// [`lex`] through the scalar reference loop: every byte classified one at a time, as the
/// lexer did before it skipped ordinary code a block of bytes at a time. Kept for the
/// differential tests (`tests/it/lexer_differential.rs`), which assert both give identical
/// facts; not for production use.
#[doc(hidden)]
pub fn lex_scalar(bytes: &[u8]) -> FileFacts {
    lex_with(bytes, &mut LexScratch::default(), |lexer| {
        lexer.run_scalar()
    })
}

/// The facts of `bytes`, lexed by `run` (one of the two loops).
fn lex_with(
    bytes: &[u8],
    scratch: &mut LexScratch,
    run: impl for<'s> FnOnce(&mut Lexer<'s>),
) -> FileFacts {
    // A byte-order mark is not text: skipping it keeps a first-line
    // directive at a line start (lines are unaffected: it has no newline).
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let LexScratch { text, splices } = scratch;
    let text = splice(bytes, text, splices);
    let mut lexer = Lexer {
        s: text,
        lines: LineCounter {
            splices,
            pos: 0,
            line: 1,
            next_splice: 0,
        },
        facts: FileFacts::default(),
    };
    run(&mut lexer);
    lexer.facts
}

/// Removes backslash-newline continuations. Returns the spliced text
/// (`bytes` itself when it has none, else built in `out`) and fills
/// `splices` with, for each removed continuation, the offset in the spliced
/// text where the next physical line begins.
fn splice<'a>(bytes: &'a [u8], out: &'a mut Vec<u8>, splices: &mut Vec<usize>) -> &'a [u8] {
    splices.clear();
    out.clear();
    let mut copied = 0; // bytes of `bytes` already handled
    let mut search = 0;
    while let Some(k) = memchr(b'\\', &bytes[search..]) {
        let at = search + k;
        let len = match bytes.get(at + 1) {
            Some(b'\n') => 2,
            Some(b'\r') if bytes.get(at + 2) == Some(&b'\n') => 3,
            _ => {
                search = at + 1;
                continue;
            }
        };
        if splices.is_empty() {
            out.reserve(bytes.len());
        }
        out.extend_from_slice(&bytes[copied..at]);
        splices.push(out.len());
        copied = at + len;
        search = copied;
    }
    if splices.is_empty() {
        return bytes;
    }
    out.extend_from_slice(&bytes[copied..]);
    out
}

/// Maps increasing offsets of the spliced text to physical lines.
struct LineCounter<'a> {
    splices: &'a [usize],
    pos: usize,
    line: u32,
    next_splice: usize,
}

impl LineCounter<'_> {
    fn line_at(&mut self, s: &[u8], off: usize) -> u32 {
        if off > self.pos {
            let n = memchr::memchr_iter(b'\n', &s[self.pos..off]).count();
            self.line = self
                .line
                .saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
            self.pos = off;
        }
        while self
            .splices
            .get(self.next_splice)
            .is_some_and(|&p| p <= off)
        {
            self.line = self.line.saturating_add(1);
            self.next_splice += 1;
        }
        self.line
    }
}

struct Lexer<'a> {
    s: &'a [u8],
    lines: LineCounter<'a>,
    facts: FileFacts,
}

/// Byte classes, looked up once per byte on the hot path.
const IDENT_START: u8 = 1;
const IDENT_CONTINUE: u8 = 2;
/// Bytes the main loop can pass over without looking at them: horizontal
/// whitespace and the punctuation that starts nothing the lexer cares about.
const INERT: u8 = 4;

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        let start = b.is_ascii_alphabetic() || b == b'_' || b == b'$' || b >= 0x80;
        if start {
            t[c] |= IDENT_START | IDENT_CONTINUE;
        }
        if b.is_ascii_digit() {
            t[c] |= IDENT_CONTINUE;
        }
        if matches!(b, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c')
            || (b.is_ascii_punctuation()
                && !matches!(b, b'/' | b'#' | b'%' | b'"' | b'\'' | b'.' | b'_' | b'$'))
        {
            t[c] |= INERT;
        }
        c += 1;
    }
    t
};

fn is_ident_start(c: u8) -> bool {
    CLASS[c as usize] & IDENT_START != 0
}

fn is_ident_continue(c: u8) -> bool {
    CLASS[c as usize] & IDENT_CONTINUE != 0
}

/// Only identifiers starting with one of these bytes can matter: raw-string
/// prefixes (`R`, `u`, `U`, `L`) and markers (`Py…`, `PYBIND11_`, `py::`,
/// `REGISTER_EXTENSION`, `STABLE_TORCH_LIBRARY…`, `TORCH_EXTENSION_NAME`).
fn may_matter(first: u8) -> bool {
    matches!(first, b'P' | b'p' | b'R' | b'u' | b'U' | b'L' | b'S' | b'T')
}

fn is_hspace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c')
}

/// The first byte at or after `i` that is not horizontal whitespace: runs
/// of spaces (indentation) eight bytes at a time.
fn skip_hspace(s: &[u8], mut i: usize) -> usize {
    while let Some(word) = s.get(i..i + 8) {
        let other = u64::from_le_bytes(word.try_into().expect("8 bytes")) ^ 0x2020_2020_2020_2020;
        if other != 0 {
            i += (other.trailing_zeros() / 8) as usize;
            break;
        }
        i += 8;
    }
    while s.get(i).is_some_and(|&c| is_hspace(c)) {
        i += 1;
    }
    i
}

impl Lexer<'_> {
    fn line(&mut self, off: usize) -> u32 {
        self.lines.line_at(self.s, off)
    }

    /// The main loop. Ordinary code is skipped 32 bytes at a time
    /// ([`crate::lexer_skip::Candidates`]): only a newline, `#`, `%`, `/`, a quote,
    /// and a digit or the first letter of a marker that starts a token can change the
    /// facts (a raw string's prefix is recognised at its quote, [`raw_prefix_before`]).
    /// A line's leading whitespace and block comments are walked byte by byte, since a
    /// `#` (or `%:`) after them starts a directive. Gives exactly the facts of
    /// [`Lexer::run_scalar`] (see the module's differential tests).
    fn run(&mut self) {
        let s = self.s;
        let mut i = 0;
        let mut candidates = crate::lexer_skip::Candidates::default();
        // Where the last pp-number ended: a raw-string prefix must not be its tail.
        let mut number_end = usize::MAX;
        'line: loop {
            // At a line start: whitespace and block comments may come before a directive.
            loop {
                i = skip_hspace(s, i);
                match s.get(i) {
                    None => return,
                    Some(b'\n') => i += 1,
                    Some(b'#') => {
                        i = self.directive(i, i + 1);
                        break;
                    }
                    Some(b'%') if s.get(i + 1) == Some(&b':') => {
                        i = self.directive(i, i + 2);
                        break;
                    }
                    Some(b'/') if s.get(i + 1) == Some(&b'*') => i = self.skip_block_comment(i),
                    Some(b'/') if s.get(i + 1) == Some(&b'/') => i = self.skip_line_comment(i),
                    Some(_) => break,
                }
            }
            // The rest of the line: only candidates matter.
            loop {
                i = candidates.next(s, i);
                let Some(&c) = s.get(i) else {
                    return;
                };
                match c {
                    b'\n' => {
                        i += 1;
                        continue 'line;
                    }
                    b'/' if s.get(i + 1) == Some(&b'/') => i = self.skip_line_comment(i),
                    b'/' if s.get(i + 1) == Some(&b'*') => i = self.skip_block_comment(i),
                    b'"' if number_end != i && raw_prefix_before(s, i) => i = self.skip_raw(i),
                    b'"' | b'\'' => i = self.skip_quoted(i, c),
                    b'0'..=b'9' => {
                        i = self.skip_number(i);
                        number_end = i;
                    }
                    _ if may_matter(c) => i = self.identifier(i),
                    // `#` or `%` inside a line, a `/` that starts no comment.
                    _ => i += 1,
                }
            }
        }
    }

    /// The scalar reference of [`Lexer::run`]: one byte class lookup per byte.
    fn run_scalar(&mut self) {
        let s = self.s;
        let mut i = 0;
        let mut line_start = true;
        while i < s.len() {
            let c = s[i];
            let class = CLASS[c as usize];
            if class & INERT != 0 {
                // Whitespace or inert punctuation: skip the whole run. A `#`
                // after it is not at a line start unless only whitespace came.
                let run = s[i..]
                    .iter()
                    .position(|&b| CLASS[b as usize] & INERT == 0)
                    .unwrap_or(s.len() - i);
                if line_start && s[i..i + run].iter().any(|&b| !is_hspace(b)) {
                    line_start = false;
                }
                i += run;
                continue;
            }
            if class & IDENT_START != 0 && !may_matter(c) {
                i += s[i..]
                    .iter()
                    .position(|&b| !is_ident_continue(b))
                    .unwrap_or(s.len() - i);
                line_start = false;
                continue;
            }
            match c {
                b'\n' => {
                    line_start = true;
                    i += 1;
                }
                b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c' => i += 1,
                b'/' if s.get(i + 1) == Some(&b'/') => i = self.skip_line_comment(i),
                b'/' if s.get(i + 1) == Some(&b'*') => i = self.skip_block_comment(i),
                b'#' if line_start => {
                    i = self.directive(i, i + 1);
                    line_start = false;
                }
                b'%' if line_start && s.get(i + 1) == Some(&b':') => {
                    i = self.directive(i, i + 2);
                    line_start = false;
                }
                b'"' => {
                    i = self.skip_quoted(i, b'"');
                    line_start = false;
                }
                b'\'' => {
                    i = self.skip_quoted(i, b'\'');
                    line_start = false;
                }
                b'0'..=b'9' => {
                    i = self.skip_number(i);
                    line_start = false;
                }
                b'.' if s.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                    i = self.skip_number(i);
                    line_start = false;
                }
                _ if is_ident_start(c) => {
                    i = self.identifier(i);
                    line_start = false;
                }
                _ => {
                    i += 1;
                    line_start = false;
                }
            }
        }
    }

    /// `//` up to (not including) the end of the (spliced) line.
    fn skip_line_comment(&self, i: usize) -> usize {
        match memchr(b'\n', &self.s[i + 2..]) {
            Some(k) => i + 2 + k,
            None => self.s.len(),
        }
    }

    /// `/* ... */`, or to the end of the file when unterminated. It ends at
    /// the first `/` after a `*` past the opening `/*` (so `/*/` does not
    /// close): a search for `/`, rare inside comments, rather than for the
    /// pair, which sets up a searcher per call.
    ///
    /// Kept out of line: inlined into [`Lexer::run`] it slowed the main
    /// loop for every byte (`callgrind`: +5 % of machete's instructions).
    #[inline(never)]
    fn skip_block_comment(&self, i: usize) -> usize {
        let s = self.s;
        let mut j = i + 3;
        while let Some(k) = s.get(j..).and_then(|rest| memchr(b'/', rest)) {
            let at = j + k;
            if s[at - 1] == b'*' {
                return at + 1;
            }
            j = at + 1;
        }
        s.len()
    }

    /// A string or character literal starting at the quote `i`. It ends at
    /// the matching quote; an unterminated one ends before the newline.
    fn skip_quoted(&self, i: usize, quote: u8) -> usize {
        let s = self.s;
        let mut j = i + 1;
        loop {
            match memchr3(quote, b'\\', b'\n', &s[j..]) {
                None => return s.len(),
                Some(k) => {
                    let at = j + k;
                    match s[at] {
                        b'\\' => j = at + 2,
                        b'\n' => return at,
                        _ => return at + 1,
                    }
                    if j >= s.len() {
                        return s.len();
                    }
                }
            }
        }
    }

    /// A raw string whose `"` is at `q`: `"delim( ... )delim"`. An invalid
    /// delimiter makes it an ordinary string literal.
    fn skip_raw(&self, q: usize) -> usize {
        let s = self.s;
        let open = s[q + 1..]
            .iter()
            .take(17)
            .position(|&c| c == b'(' || !is_raw_delim_char(c));
        let Some(k) = open.filter(|&k| s[q + 1 + k] == b'(') else {
            return self.skip_quoted(q, b'"');
        };
        let delim = &s[q + 1..q + 1 + k];
        let body = q + 1 + k + 1;
        // `)delim"` on the stack: a delimiter has at most 16 characters.
        let mut closing = [0u8; 18];
        closing[0] = b')';
        closing[1..1 + delim.len()].copy_from_slice(delim);
        closing[1 + delim.len()] = b'"';
        find_after(s, body, &closing[..delim.len() + 2]).unwrap_or(s.len())
    }

    /// A pp-number: digits, identifier characters, `.`, `'` separators and
    /// exponent signs.
    fn skip_number(&self, i: usize) -> usize {
        let s = self.s;
        let mut j = i + 1;
        while j < s.len() {
            let c = s[j];
            if is_ident_continue(c) || c == b'.' {
                j += 1;
            } else if c == b'\'' && s.get(j + 1).is_some_and(|&d| is_ident_continue(d)) {
                j += 2;
            } else if (c == b'+' || c == b'-') && matches!(s[j - 1], b'e' | b'E' | b'p' | b'P') {
                j += 1;
            } else {
                break;
            }
        }
        j
    }

    /// An identifier at `i`: a literal prefix, a marker, or nothing.
    fn identifier(&mut self, i: usize) -> usize {
        let s = self.s;
        let end = i + s[i..]
            .iter()
            .position(|&c| !is_ident_continue(c))
            .unwrap_or(s.len() - i);
        let id = &s[i..end];
        if s.get(end) == Some(&b'"') && matches!(id, b"R" | b"u8R" | b"uR" | b"UR" | b"LR") {
            return self.skip_raw(end);
        }
        // Ordinary prefixes (`u8"…"`, `L'x'`) need nothing special: the
        // literal that follows is skipped as any other.
        if id.len() >= 3 && id.starts_with(b"Py") && id[2].is_ascii_uppercase()
            || id.len() > 9 && id.starts_with(b"PYBIND11_")
        {
            let line = self.line(i);
            let marker = String::from_utf8_lossy(id).into_owned();
            self.facts.python_markers.push((line, marker));
        } else if id == b"py" {
            let k = self.skip_space(end);
            if s[k..].starts_with(b"::") {
                let line = self.line(i);
                self.facts.python_markers.push((line, "py::".to_owned()));
            }
        } else if id == b"REGISTER_EXTENSION" {
            let k = self.skip_space(end);
            if s.get(k) == Some(&b'(') {
                let line = self.line(i);
                let marker = "REGISTER_EXTENSION(".to_owned();
                self.facts.python_markers.push((line, marker));
            }
        } else if id.starts_with(b"STABLE_TORCH_LIBRARY") {
            let line = self.line(i);
            self.facts.stable_registrations.push(line);
        } else if id == b"TORCH_EXTENSION_NAME" {
            self.facts.uses_extension_name = true;
        }
        end
    }

    /// Whitespace including newlines (tokens may be split across lines).
    fn skip_space(&self, mut j: usize) -> usize {
        while self.s.get(j).is_some_and(|&c| is_hspace(c) || c == b'\n') {
            j += 1;
        }
        j
    }

    /// Horizontal whitespace and block comments inside a directive.
    fn skip_directive_space(&self, mut j: usize) -> usize {
        let s = self.s;
        loop {
            while s.get(j).is_some_and(|&c| is_hspace(c)) {
                j += 1;
            }
            if s.get(j) == Some(&b'/') && s.get(j + 1) == Some(&b'*') {
                j = self.skip_block_comment(j);
            } else {
                return j;
            }
        }
    }

    /// A directive whose `#` (or `%:`) is at `hash`; `after` follows it.
    /// Records includes; every other directive is lexed as ordinary text
    /// from `after` on, so markers in `#define` bodies count.
    fn directive(&mut self, hash: usize, after: usize) -> usize {
        let s = self.s;
        let j = self.skip_directive_space(after);
        let end = j + s[j..]
            .iter()
            .position(|&c| !is_ident_continue(c))
            .unwrap_or(s.len() - j);
        let next = match &s[j..end] {
            b"include" => false,
            b"include_next" => true,
            b"define" => {
                self.define(end);
                return after;
            }
            _ => return after,
        };
        let op = self.skip_directive_space(end);
        let eol = memchr(b'\n', &s[op..]).map_or(s.len(), |k| op + k);
        let delimited = match s.get(op) {
            Some(b'<') => memchr2(b'>', b'\n', &s[op + 1..])
                .filter(|&k| s[op + 1 + k] == b'>')
                .map(|k| (IncludeKind::Angle, op + 1 + k)),
            Some(b'"') => memchr2(b'"', b'\n', &s[op + 1..])
                .filter(|&k| s[op + 1 + k] == b'"')
                .map(|k| (IncludeKind::Quoted, op + 1 + k)),
            _ => None,
        };
        let (kind, name, resume) = match delimited {
            Some((kind, close)) => (kind, &s[op + 1..close], close + 1),
            None => {
                let text = trim(cut_comment(&s[op..eol]));
                if text.is_empty() {
                    return op;
                }
                // Lex the operand as ordinary text too: a macro name
                // can itself be a marker.
                (IncludeKind::Computed, text, op)
            }
        };
        let include = Include {
            name: String::from_utf8_lossy(name).into_owned(),
            kind,
            line: self.line(hash),
            next,
        };
        if include.is_python_marker() {
            self.facts
                .python_markers
                .push((include.line, include.directive()));
        }
        self.facts.includes.push(include);
        resume
    }
}

impl Lexer<'_> {
    /// Records the `#define` whose name follows `at` (after whitespace).
    /// The directive is lexed as ordinary text afterwards all the same, so
    /// markers in its body count.
    fn define(&mut self, at: usize) {
        let s = self.s;
        let name_start = self.skip_directive_space(at);
        if !s.get(name_start).is_some_and(|&c| is_ident_start(c)) {
            return;
        }
        let name_end = name_start
            + s[name_start..]
                .iter()
                .position(|&c| !is_ident_continue(c))
                .unwrap_or(s.len() - name_start);
        // A function-like macro has its `(` right after the name.
        let (params, body_start) = if s.get(name_end) == Some(&b'(') {
            match memchr2(b')', b'\n', &s[name_end + 1..]) {
                Some(k) if s[name_end + 1 + k] == b')' => {
                    (Some(name_end + 1..name_end + 1 + k), name_end + 2 + k)
                }
                _ => return,
            }
        } else {
            (None, name_end)
        };
        let body = trimmed(s, body_start, self.directive_end(body_start));
        // The parts as ranges of the directive's text from the name on.
        let from_name = |r: Range<usize>| r.start - name_start..r.end - name_start;
        self.facts.defines.push_parts(
            &s[name_start..body.end],
            from_name(name_start..name_end),
            params.map(from_name),
            from_name(body),
        );
    }

    /// The end of a directive starting at `j`: the end of its (spliced)
    /// line, or of the last block comment that begins on it; a `//`
    /// comment ends it early.
    ///
    /// Only a newline, `/` or quote can end it or skip ahead, so those are
    /// searched for a block at a time (the end of the line once per line
    /// reached, so a long line of `/`s stays linear) rather than every
    /// byte of the body classified; what each does is what the byte-wise
    /// definition (`directive_end_bytewise`, kept for the tests, which hold
    /// the two to each other) does with it.
    fn directive_end(&self, mut j: usize) -> usize {
        let s = self.s;
        let mut line_end: Option<usize> = None;
        while j < s.len() {
            let eol = match line_end {
                Some(eol) if j <= eol => eol,
                _ => memchr(b'\n', &s[j..]).map_or(s.len(), |k| j + k),
            };
            line_end = Some(eol);
            let Some(k) = memchr3(b'/', b'"', b'\'', &s[j..eol]) else {
                return eol;
            };
            let at = j + k;
            j = match s[at] {
                b'/' if s.get(at + 1) == Some(&b'/') => return at,
                b'/' if s.get(at + 1) == Some(&b'*') => self.skip_block_comment(at),
                b'/' => at + 1,
                q => self.skip_quoted(at, q),
            };
        }
        s.len()
    }

    /// [`Lexer::directive_end`] a byte at a time: the definition the
    /// block-wise search is tested against.
    #[cfg(test)]
    fn directive_end_bytewise(&self, mut j: usize) -> usize {
        let s = self.s;
        while j < s.len() {
            match s[j] {
                b'\n' => return j,
                b'/' if s.get(j + 1) == Some(&b'/') => return j,
                b'/' if s.get(j + 1) == Some(&b'*') => j = self.skip_block_comment(j),
                q @ (b'"' | b'\'') => j = self.skip_quoted(j, q),
                _ => j += 1,
            }
        }
        s.len()
    }
}

/// Whether the identifier that ends at the quote `q` (and starts a token)
/// is a raw string's prefix: `R`, `u8R`, `uR`, `UR` or `LR`. What
/// [`Lexer::identifier`] checks when it meets the prefix first.
fn raw_prefix_before(s: &[u8], q: usize) -> bool {
    if q == 0 || s[q - 1] != b'R' {
        return false;
    }
    let start = s[..q]
        .iter()
        .rposition(|&c| !is_ident_continue(c))
        .map_or(0, |k| k + 1);
    matches!(&s[start..q], b"R" | b"u8R" | b"uR" | b"UR" | b"LR")
}

/// The end of the first `needle` (non-empty) in `s` at or after `from`.
fn find_after(s: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let mut j = from;
    while let Some(k) = memchr(needle[0], s.get(j..)?) {
        let at = j + k;
        if s[at..].starts_with(needle) {
            return Some(at + needle.len());
        }
        j = at + 1;
    }
    None
}

fn is_raw_delim_char(c: u8) -> bool {
    c.is_ascii_graphic() && !matches!(c, b'(' | b')' | b'\\' | b'"')
}

/// The operand of a computed include up to a `//` or `/*` comment.
fn cut_comment(text: &[u8]) -> &[u8] {
    let cut = text
        .windows(2)
        .position(|w| w == b"//" || w == b"/*")
        .unwrap_or(text.len());
    &text[..cut]
}

/// The range of `s[start..end]` without its leading and trailing blanks.
fn trimmed(s: &[u8], start: usize, end: usize) -> Range<usize> {
    let text = &s[start..end];
    let first = text
        .iter()
        .position(|&c| !is_hspace(c))
        .unwrap_or(text.len());
    let last = text
        .iter()
        .rposition(|&c| !is_hspace(c))
        .map_or(first, |k| k + 1);
    start + first..start + last.max(first)
}

/// `text` without its leading and trailing blanks.
fn trim(text: &[u8]) -> &[u8] {
    &text[trimmed(text, 0, text.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text of up to seven bytes over the bytes that matter to a
    /// directive's end (and one that does not), from every start: the
    /// block-wise search ends where the byte-wise definition does.
    #[test]
    fn directive_end_is_the_bytewise_definition() {
        let alphabet = *b"/*\"'\\\na";
        let mut text = Vec::new();
        let mut checked = 0usize;
        for len in 0..=7u32 {
            for mut code in 0..alphabet.len().pow(len) {
                text.clear();
                for _ in 0..len {
                    text.push(alphabet[code % alphabet.len()]);
                    code /= alphabet.len();
                }
                let lexer = Lexer {
                    s: &text,
                    lines: LineCounter {
                        splices: &[],
                        pos: 0,
                        line: 1,
                        next_splice: 0,
                    },
                    facts: FileFacts::default(),
                };
                for j in 0..=text.len() {
                    assert_eq!(
                        lexer.directive_end(j),
                        lexer.directive_end_bytewise(j),
                        "{:?} from {j}",
                        String::from_utf8_lossy(&text)
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 7usize.pow(7), "{checked}");
    }
}
