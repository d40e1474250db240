//! Computed includes resolved by macro expansion (docs/key.md, step 1).
//!
//! `#include MACRO(args)` names its header through macros. The scan expands
//! the operand with every macro defined in the visited files and by `-D`
//! flags, as a preprocessor would, except that conditionals are not
//! evaluated: every `#define` of a name is an alternative, and the result is
//! the union of what each alternative gives (as every include in a
//! conditional block counts). Expansion follows the C rules that headers use
//! to build names: object-like and function-like macros, arguments expanded
//! before substitution, `#` (stringizing), `##` (pasting), `__VA_ARGS__`, and
//! rescanning with a macro never re-expanded inside its own expansion.
//!
//! An alternative that expands to `<…>` or `"…"` is a header name, resolved
//! by the normal rules. One that expands to nothing or to other tokens cannot
//! compile (the compiler rejects it) and is dropped. One that still starts
//! with an identifier (a macro defined nowhere the scan can see, e.g. in a
//! system header) or that exceeds the expansion budget makes the include
//! unresolvable: it then stays conservative (recorded, a Python-ABI marker,
//! refused under a stable target).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One `#define` as written: what a file contributes to the macro table.
///
/// Serialisable, so it can be cached with the rest of a file's facts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MacroDef {
    /// The macro's name.
    pub name: String,
    /// The parameter list between the parentheses (`x, y`, `...`, `a, rest...`)
    /// for a function-like macro, `None` for an object-like one.
    pub params: Option<String>,
    /// The replacement list as written (comments not yet removed).
    pub body: String,
}

/// The `#define`s of one file, in order, kept compactly: one string holds
/// every name, parameter list and body, so lexing a header of many macros
/// allocates once rather than three times per macro (most scans never need
/// them: only a computed include does). [`Defines::iter`] gives each as a
/// [`MacroDef`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Defines {
    /// Every define's name, parameters (when any) and body, back to back.
    text: String,
    /// Per define, where its parts end in `text` (each starts where the
    /// previous part ended).
    ends: Vec<DefineEnds>,
}

/// The bytes [`Defines::text`] starts with: a few typical defines.
const FIRST_DEFINES_CAPACITY: usize = 256;

/// Where one define's parts end in [`Defines::text`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct DefineEnds {
    name: usize,
    params: Option<usize>,
    body: usize,
}

impl Defines {
    /// Appends a define (invalid UTF-8 replaced, as [`String::from_utf8_lossy`]).
    pub(crate) fn push(&mut self, name: &[u8], params: Option<&[u8]>, body: &[u8]) {
        let lossy = String::from_utf8_lossy;
        let params = params.map(lossy);
        self.append(&lossy(name), params.as_deref(), &lossy(body));
    }

    /// [`Defines::push`] of the parts of `directive` at `name`, `params`
    /// and `body`: the same define, with the directive's text checked for
    /// UTF-8 once rather than once per part (a header of many macros spends
    /// more on that check than on copying them), and per part only when
    /// that fails.
    pub(crate) fn push_parts(
        &mut self,
        directive: &[u8],
        name: Range<usize>,
        params: Option<Range<usize>>,
        body: Range<usize>,
    ) {
        let valid = std::str::from_utf8(directive).ok();
        let parts = valid.and_then(|text| {
            let params = match params.clone() {
                Some(p) => Some(text.get(p)?),
                None => None,
            };
            Some((text.get(name.clone())?, params, text.get(body.clone())?))
        });
        match parts {
            Some((name, params, body)) => self.append(name, params, body),
            None => self.push(
                &directive[name],
                params.map(|p| &directive[p]),
                &directive[body],
            ),
        }
    }

    /// Appends a define's parts to the text and where they end.
    fn append(&mut self, name: &str, params: Option<&str>, body: &str) {
        let text = &mut self.text;
        if text.capacity() == 0 {
            // A header that defines one macro usually defines several:
            // room for a few, rather than a doubling per part.
            text.reserve(FIRST_DEFINES_CAPACITY);
        }
        text.push_str(name);
        let name = text.len();
        let params = params.map(|p| {
            text.push_str(p);
            text.len()
        });
        text.push_str(body);
        let body = text.len();
        self.ends.push(DefineEnds { name, params, body });
    }

    /// The number of defines.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when the file defines nothing.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Each define, in order.
    pub fn iter(&self) -> impl Iterator<Item = MacroDef> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |ends| {
            let name = self.text[start..ends.name].to_owned();
            let body_start = ends.params.unwrap_or(ends.name);
            let params = ends.params.map(|end| self.text[ends.name..end].to_owned());
            let body = self.text[body_start..ends.body].to_owned();
            start = ends.body;
            MacroDef { name, params, body }
        })
    }
}

impl IntoIterator for Defines {
    type Item = MacroDef;
    type IntoIter = std::vec::IntoIter<MacroDef>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter().collect::<Vec<_>>().into_iter()
    }
}

impl MacroDef {
    /// Parses a `-D` flag's operand: `NAME`, `NAME=VALUE` or `NAME(x)=VALUE`.
    /// `-DNAME` defines `NAME` as `1`, as compilers do. `None` when `NAME`
    /// is not an identifier.
    pub fn from_flag(operand: &str) -> Option<MacroDef> {
        let (head, body) = match operand.split_once('=') {
            Some((h, b)) => (h, b.to_owned()),
            None => (operand, "1".to_owned()),
        };
        let (name, params) = match head.split_once('(') {
            Some((n, rest)) => (n, Some(rest.strip_suffix(')')?.to_owned())),
            None => (head, None),
        };
        is_identifier(name).then(|| MacroDef {
            name: name.to_owned(),
            params,
            body,
        })
    }
}

/// The `-D` definitions among compiler flags (`-DNAME[=V]` and `-D NAME[=V]`),
/// in order.
pub fn defines_in_flags(flags: &[String]) -> Vec<MacroDef> {
    let mut out = Vec::new();
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        let operand = match flag.strip_prefix("-D") {
            Some("") => it.next().map(String::as_str),
            Some(rest) => Some(rest),
            None => None,
        };
        if let Some(def) = operand.and_then(MacroDef::from_flag) {
            out.push(def);
        }
    }
    out
}

/// What a computed include's operand expands to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expansion {
    /// Header names it can reach: `(angle, name)`, sorted, de-duplicated.
    pub headers: Vec<(bool, String)>,
    /// Why (some alternative of) it could not be resolved, if so.
    pub unresolved: Option<String>,
}

/// Every macro definition seen so far, each name with all its distinct
/// alternatives.
#[derive(Debug, Default)]
pub struct MacroTable {
    defs: HashMap<String, Vec<Arc<MacroDef>>>,
    /// Incremented whenever a new distinct definition is added.
    generation: u64,
}

impl MacroTable {
    /// Adds a definition; a definition already known (the same name,
    /// parameters and body) is ignored.
    pub fn add(&mut self, def: &MacroDef) {
        self.add_owned(def.clone());
    }

    /// [`MacroTable::add`] for a definition the caller no longer needs.
    pub(crate) fn add_owned(&mut self, def: MacroDef) {
        let alts = self.defs.entry(def.name.clone()).or_default();
        if !alts.iter().any(|d| **d == def) {
            alts.push(Arc::new(def));
            self.generation += 1;
        }
    }

    /// Changes whenever a definition is added (for callers' caches).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Expands `operand` (the text after `#include`) with every alternative
    /// of every macro (see the module documentation).
    pub fn expand(&self, operand: &str) -> Expansion {
        let mut budget = Budget { steps: 0 };
        let input = tokenize(operand);
        let mut out = Expansion::default();
        match self.expand_tokens(input, &mut budget) {
            Err(why) => out.unresolved = Some(why),
            Ok(alternatives) => {
                for tokens in alternatives {
                    match header_name(&tokens) {
                        HeaderName::Header(angle, name) => out.headers.push((angle, name)),
                        HeaderName::Invalid => {}
                        HeaderName::Unknown(id) => {
                            out.unresolved.get_or_insert_with(|| {
                                format!("`{id}` is not a macro defined in a scanned file or by a -D flag")
                            });
                        }
                    }
                }
                if out.headers.is_empty() && out.unresolved.is_none() {
                    out.unresolved =
                        Some("no alternative expands to `<name>` or `\"name\"`".into());
                }
            }
        }
        out.headers.sort();
        out.headers.dedup();
        out
    }

    /// All expansions of `input`, each fully rescanned.
    fn expand_tokens(&self, input: Vec<Tok>, budget: &mut Budget) -> Result<Vec<Vec<Tok>>, String> {
        // Each state: (output so far, input left, reversed so `pop` takes the next).
        let mut rest = input;
        rest.reverse();
        let mut states = vec![(Vec::new(), rest)];
        let mut results: Vec<Vec<Tok>> = Vec::new();
        while let Some((mut out, mut rest)) = states.pop() {
            loop {
                budget.step()?;
                let Some(tok) = rest.pop() else {
                    if !results.contains(&out) {
                        results.push(out);
                    }
                    break;
                };
                let alts = match (&tok.kind, self.defs.get(tok.text.as_str())) {
                    (Kind::Ident, Some(alts)) if !tok.hide.contains(&tok.text) => alts,
                    _ => {
                        out.push(tok);
                        continue;
                    }
                };
                let mut forks = Vec::new();
                for def in alts {
                    let mut rest = rest.clone();
                    let body = match &def.params {
                        None => self.substitute(def, &[], &[], budget)?,
                        Some(_) => {
                            if rest.last().is_none_or(|t| t.text != "(") {
                                // Not invoked: the name stays as it is.
                                let mut out = out.clone();
                                out.push(tok.clone());
                                forks.push((out, rest));
                                continue;
                            }
                            rest.pop();
                            let args = collect_args(&mut rest)?;
                            let mut expanded = vec![Vec::new()];
                            for arg in &args {
                                let alts = self.expand_tokens(arg.clone(), budget)?;
                                expanded = product(expanded, alts, budget)?;
                            }
                            let mut bodies = Vec::new();
                            for exp in &expanded {
                                bodies.extend(self.substitute(def, &args, exp, budget)?);
                            }
                            bodies
                        }
                    };
                    for mut tokens in body {
                        for t in &mut tokens {
                            t.hide.extend(tok.hide.iter().cloned());
                            t.hide.push(def.name.clone());
                        }
                        if let Some(first) = tokens.first_mut() {
                            first.space = tok.space;
                        }
                        let mut rest = rest.clone();
                        rest.extend(tokens.into_iter().rev());
                        forks.push((out.clone(), rest));
                    }
                }
                if states.len() + forks.len() > MAX_ALTERNATIVES {
                    return Err(too_many());
                }
                states.extend(forks);
                break;
            }
            if results.len() > MAX_ALTERNATIVES {
                return Err(too_many());
            }
        }
        Ok(results)
    }

    /// The replacement list of `def` with its parameters substituted
    /// (`args`: as written, `expanded`: macro-expanded) and `##` applied.
    /// One result per way of pasting (pasting cannot fork; kept as a list
    /// for the caller's convenience).
    fn substitute(
        &self,
        def: &MacroDef,
        args: &[Vec<Tok>],
        expanded: &[Vec<Tok>],
        budget: &mut Budget,
    ) -> Result<Vec<Vec<Tok>>, String> {
        let params = def.params.as_deref().map(parse_params).unwrap_or_default();
        let body = tokenize(&def.body);
        let param_index = |t: &Tok| -> Option<usize> {
            if t.kind != Kind::Ident {
                return None;
            }
            params.iter().position(|p| *p == t.text)
        };
        let arg = |k: usize, list: &[Vec<Tok>]| -> Vec<Tok> {
            if k + 1 == params.len() && def_is_variadic(def) {
                // The variadic parameter takes the rest, commas included.
                let mut out = Vec::new();
                for (n, a) in list.iter().enumerate().skip(k) {
                    if n > k {
                        out.push(Tok::punct(","));
                    }
                    out.extend(a.iter().cloned());
                }
                out
            } else {
                list.get(k).cloned().unwrap_or_default()
            }
        };
        let mut out: Vec<Tok> = Vec::new();
        let mut i = 0;
        while i < body.len() {
            budget.step()?;
            let t = &body[i];
            let function_like = def.params.is_some();
            if function_like && t.text == "#" && t.kind == Kind::Punct {
                if let Some(k) = body.get(i + 1).and_then(param_index) {
                    let mut s = Tok::new(Kind::Str, stringize(&arg(k, args)));
                    s.space = t.space;
                    out.push(s);
                    i += 2;
                    continue;
                }
            }
            if t.text == "##" && t.kind == Kind::Punct {
                let mut paste = t.clone();
                paste.kind = Kind::Paste;
                out.push(paste);
                i += 1;
                continue;
            }
            if let Some(k) = param_index(t) {
                let next_is_paste = body.get(i + 1).is_some_and(|n| n.text == "##");
                let prev_is_paste = i > 0 && body[i - 1].text == "##";
                let mut tokens = if next_is_paste || prev_is_paste {
                    arg(k, args)
                } else {
                    arg(k, expanded)
                };
                if tokens.is_empty() {
                    tokens.push(Tok::new(Kind::Placemarker, String::new()));
                }
                tokens[0].space = t.space;
                out.extend(tokens);
            } else {
                out.push(t.clone());
            }
            i += 1;
        }
        Ok(vec![paste_all(out)])
    }
}

/// Alternatives (and nested states) one expansion may produce before it
/// is given up as unresolvable.
const MAX_ALTERNATIVES: usize = 256;
/// Tokens one expansion may process before it is given up.
const MAX_STEPS: usize = 100_000;

fn too_many() -> String {
    format!("its expansion has more than {MAX_ALTERNATIVES} alternatives or {MAX_STEPS} steps")
}

struct Budget {
    steps: usize,
}

impl Budget {
    fn step(&mut self) -> Result<(), String> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            Err(too_many())
        } else {
            Ok(())
        }
    }
}

/// Every combination of `prefixes` extended by one alternative of the next argument.
fn product(
    prefixes: Vec<Vec<Vec<Tok>>>,
    alts: Vec<Vec<Tok>>,
    budget: &mut Budget,
) -> Result<Vec<Vec<Vec<Tok>>>, String> {
    let mut out = Vec::new();
    for p in &prefixes {
        for a in &alts {
            budget.step()?;
            let mut next = p.clone();
            next.push(a.clone());
            out.push(next);
            if out.len() > MAX_ALTERNATIVES {
                return Err(too_many());
            }
        }
    }
    Ok(out)
}

/// The arguments of an invocation whose `(` was just taken from `rest`
/// (reversed), up to the matching `)`, split at top-level commas.
fn collect_args(rest: &mut Vec<Tok>) -> Result<Vec<Vec<Tok>>, String> {
    let mut args = vec![Vec::new()];
    let mut depth = 0usize;
    loop {
        let Some(t) = rest.pop() else {
            return Err("a macro invocation has no closing `)`".into());
        };
        if t.kind == Kind::Punct {
            match t.text.as_str() {
                "(" => depth += 1,
                ")" if depth == 0 => break,
                ")" => depth -= 1,
                "," if depth == 0 => {
                    args.push(Vec::new());
                    continue;
                }
                _ => {}
            }
        }
        args.last_mut().expect("never empty").push(t);
    }
    if args.len() == 1 && args[0].is_empty() {
        args.clear();
    }
    Ok(args)
}

fn def_is_variadic(def: &MacroDef) -> bool {
    def.params
        .as_deref()
        .is_some_and(|p| p.trim_end().ends_with("..."))
}

/// Parameter names; `...` is `__VA_ARGS__`, GNU `name...` is `name`.
fn parse_params(params: &str) -> Vec<String> {
    params
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| match p.strip_suffix("...") {
            Some("") => "__VA_ARGS__".to_owned(),
            Some(name) => name.trim().to_owned(),
            None => p.to_owned(),
        })
        .collect()
}

/// Applies every `##` of a substituted replacement list, then drops placemarkers.
fn paste_all(tokens: Vec<Tok>) -> Vec<Tok> {
    let mut out: Vec<Tok> = Vec::with_capacity(tokens.len());
    let mut it = tokens.into_iter().peekable();
    while let Some(t) = it.next() {
        if t.kind == Kind::Paste {
            let right = it.next();
            match (out.pop(), right) {
                (Some(left), Some(right)) => out.extend(paste(left, right)),
                (Some(left), None) => out.push(left),
                (None, Some(right)) => out.push(right),
                (None, None) => {}
            }
        } else {
            out.push(t);
        }
    }
    out.retain(|t| t.kind != Kind::Placemarker);
    out
}

/// `left ## right`: one token spelled as both, or both unchanged when the
/// spelling is not one token (an error for a compiler; harmless here).
fn paste(left: Tok, right: Tok) -> Vec<Tok> {
    match (left.kind, right.kind) {
        (Kind::Placemarker, _) => {
            return vec![Tok {
                space: left.space,
                ..right
            }]
        }
        (_, Kind::Placemarker) => return vec![left],
        _ => {}
    }
    let text = format!("{}{}", left.text, right.text);
    let mut tokens = tokenize(&text);
    if tokens.len() == 1 {
        let mut t = tokens.remove(0);
        t.space = left.space;
        t.hide = left.hide;
        vec![t]
    } else {
        vec![left, right]
    }
}

/// `#param`: the argument's spelling as a string literal, `"` and `\` inside
/// string and character literals escaped, whitespace between tokens one space.
fn stringize(tokens: &[Tok]) -> String {
    let mut s = String::from("\"");
    for (n, t) in tokens.iter().enumerate() {
        if t.kind == Kind::Placemarker {
            continue;
        }
        if n > 0 && t.space {
            s.push(' ');
        }
        if matches!(t.kind, Kind::Str | Kind::Char) {
            for c in t.text.chars() {
                if c == '"' || c == '\\' {
                    s.push('\\');
                }
                s.push(c);
            }
        } else {
            s.push_str(&t.text);
        }
    }
    s.push('"');
    s
}

enum HeaderName {
    /// `<name>` (`true`) or `"name"` (`false`).
    Header(bool, String),
    /// Something no compiler accepts as a header name: dropped.
    Invalid,
    /// Starts with an identifier no visible macro defines.
    Unknown(String),
}

/// The header an expanded operand names, as a compiler reads it: a string
/// literal, or the spelling of the tokens from `<` to the first `>`.
fn header_name(tokens: &[Tok]) -> HeaderName {
    match tokens.first() {
        Some(t) if t.kind == Kind::Str && t.text.starts_with('"') && t.text.len() >= 2 => {
            HeaderName::Header(false, t.text[1..t.text.len() - 1].to_owned())
        }
        Some(t) if t.kind == Kind::Punct && t.text == "<" => {
            let Some(close) = tokens.iter().position(|t| t.text == ">") else {
                return HeaderName::Invalid;
            };
            let mut name = String::new();
            for (n, t) in tokens[1..close].iter().enumerate() {
                if n > 0 && t.space {
                    name.push(' ');
                }
                name.push_str(&t.text);
            }
            if name.is_empty() {
                HeaderName::Invalid
            } else {
                HeaderName::Header(true, name)
            }
        }
        Some(t) if t.kind == Kind::Ident => HeaderName::Unknown(t.text.clone()),
        _ => HeaderName::Invalid,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ident,
    Number,
    Str,
    Char,
    Punct,
    /// A `##` of a replacement list (an operator, not an argument's token).
    Paste,
    /// An empty argument next to `##`.
    Placemarker,
}

/// A preprocessing token with what expansion needs to know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tok {
    kind: Kind,
    text: String,
    /// Preceded by whitespace.
    space: bool,
    /// Macros whose expansion produced this token (never re-expanded in it).
    hide: Vec<String>,
}

impl Tok {
    fn new(kind: Kind, text: String) -> Tok {
        Tok {
            kind,
            text,
            space: false,
            hide: Vec::new(),
        }
    }

    fn punct(text: &str) -> Tok {
        Tok::new(Kind::Punct, text.to_owned())
    }
}

fn is_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Splits text into preprocessing tokens; comments are whitespace.
fn tokenize(text: &str) -> Vec<Tok> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut space = false;
    while i < s.len() {
        let c = s[i];
        let start = i;
        let kind = if c.is_ascii_whitespace() {
            space = true;
            i += 1;
            continue;
        } else if s[i..].starts_with(b"/*") {
            i = s[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(s.len(), |k| i + 2 + k + 2);
            space = true;
            continue;
        } else if s[i..].starts_with(b"//") {
            break;
        } else if c == b'"' || c == b'\'' {
            i = skip_literal(s, i);
            if c == b'"' {
                Kind::Str
            } else {
                Kind::Char
            }
        } else if c.is_ascii_digit() || (c == b'.' && s.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            i += 1;
            while i < s.len() {
                let d = s[i];
                let exponent_sign =
                    (d == b'+' || d == b'-') && matches!(s[i - 1], b'e' | b'E' | b'p' | b'P');
                if is_ident_byte(d) || d == b'.' || exponent_sign {
                    i += 1;
                } else if d == b'\'' && s.get(i + 1).is_some_and(|&n| is_ident_byte(n)) {
                    i += 2;
                } else {
                    break;
                }
            }
            Kind::Number
        } else if is_ident_byte(c) && !c.is_ascii_digit() {
            while i < s.len() && is_ident_byte(s[i]) {
                i += 1;
            }
            // Literal prefixes: `u8"x"`, `L'x'` are one literal.
            let prefix = &s[start..i];
            if matches!(prefix, b"u8" | b"u" | b"U" | b"L")
                && matches!(s.get(i), Some(b'"' | b'\''))
            {
                let quote = s[i];
                i = skip_literal(s, i);
                if quote == b'"' {
                    Kind::Str
                } else {
                    Kind::Char
                }
            } else {
                Kind::Ident
            }
        } else if s[i..].starts_with(b"##") || s[i..].starts_with(b"%:%:") {
            i += if c == b'#' { 2 } else { 4 };
            out.push(Tok {
                space,
                ..Tok::punct("##")
            });
            space = false;
            continue;
        } else if s[i..].starts_with(b"...") {
            i += 3;
            Kind::Punct
        } else {
            // One character (UTF-8 sequences kept whole).
            i += text[i..].chars().next().map_or(1, char::len_utf8);
            Kind::Punct
        };
        out.push(Tok {
            kind,
            text: text[start..i].to_owned(),
            space,
            hide: Vec::new(),
        });
        space = false;
    }
    out
}

/// The end of a string or character literal starting at the quote `i`
/// (an unterminated one ends the text).
fn skip_literal(s: &[u8], i: usize) -> usize {
    let quote = s[i];
    let mut j = i + 1;
    while j < s.len() {
        match s[j] {
            b'\\' => j += 2,
            c if c == quote => return j + 1,
            _ => j += 1,
        }
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text of five pieces among a few ASCII bytes and the two bytes
    /// of a two-byte character (alone they are invalid UTF-8), cut at every
    /// place: a define pushed from its directive's text is the one pushed
    /// part by part.
    #[test]
    fn push_parts_is_push_of_each_part() {
        let pieces: [&[u8]; 5] = [b"a", b" ", b"(", b"\xC3", b"\xA9"];
        let mut texts: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..5 {
            let longer: Vec<Vec<u8>> = texts
                .iter()
                .flat_map(|t| {
                    pieces.iter().map(move |p| {
                        let mut t = t.clone();
                        t.extend_from_slice(p);
                        t
                    })
                })
                .collect();
            texts = longer;
        }
        for text in &texts {
            let n = text.len();
            for a in 0..=n {
                for b in a..=n {
                    for params in [None, Some(a..b)] {
                        let (name, body) = (0..a, b..n);
                        let mut whole = Defines::default();
                        whole.push_parts(text, name.clone(), params.clone(), body.clone());
                        let mut each = Defines::default();
                        each.push(&text[name], params.map(|p| &text[p]), &text[body]);
                        assert_eq!(whole, each, "{text:?} {a} {b}");
                    }
                }
            }
        }
    }

    fn table(defs: &[&str]) -> MacroTable {
        let mut t = MacroTable::default();
        for d in defs {
            t.add(&MacroDef::from_flag(d).expect("valid definition"));
        }
        t
    }

    fn headers(t: &MacroTable, operand: &str) -> Vec<(bool, String)> {
        let e = t.expand(operand);
        assert_eq!(e.unresolved, None, "{operand}");
        e.headers
    }

    #[test]
    fn tokenizer_keeps_spelling_and_spaces() {
        let toks = tokenize("<a/b.h>  x ## y /* c */ \"s\\\"\" u8\"t\" 1.5e+3");
        let texts: Vec<_> = toks.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "<",
                "a",
                "/",
                "b",
                ".",
                "h",
                ">",
                "x",
                "##",
                "y",
                "\"s\\\"\"",
                "u8\"t\"",
                "1.5e+3"
            ]
        );
        assert!(toks[7].space && !toks[1].space);
    }

    #[test]
    fn object_like_and_nested() {
        let t = table(&["HDR=INNER", "INNER=<dir/inner.h>"]);
        assert_eq!(headers(&t, "HDR"), [(true, "dir/inner.h".into())]);
    }

    #[test]
    fn function_like_with_cutlass_style_parameter_in_angle_brackets() {
        let t = table(&[
            "CUDA_STD_HEADER(header)=<cuda/std/header>",
            "CUDA_STD_HEADER(header)=<cccl/cuda/std/header>",
        ]);
        assert_eq!(
            headers(&t, "CUDA_STD_HEADER(tuple)"),
            [
                (true, "cccl/cuda/std/tuple".into()),
                (true, "cuda/std/tuple".into())
            ]
        );
    }

    #[test]
    fn stringize_and_paste() {
        let t = table(&[
            "STR_(x)=#x",
            "STR(x)=STR_(x)",
            "CAT(a,b)=a##b",
            "NAME=kern",
            "HDR(n)=STR(CAT(n,_impl.h))",
        ]);
        // Arguments are expanded before substitution, except next to # and ##.
        assert_eq!(headers(&t, "STR(NAME.h)"), [(false, "kern.h".into())]);
        assert_eq!(headers(&t, "STR_(NAME.h)"), [(false, "NAME.h".into())]);
        assert_eq!(headers(&t, "HDR(gemm)"), [(false, "gemm_impl.h".into())]);
    }

    #[test]
    fn variadic_and_self_reference() {
        let t = table(&["FIRST(x, ...)=x", "LOOP=LOOP", "P(...)=<__VA_ARGS__>"]);
        assert_eq!(headers(&t, "FIRST(<a.h>, <b.h>)"), [(true, "a.h".into())]);
        assert_eq!(headers(&t, "P(x/y.h)"), [(true, "x/y.h".into())]);
        let e = t.expand("LOOP");
        assert!(
            e.unresolved.is_some(),
            "a self-referential macro stays itself"
        );
    }

    #[test]
    fn unknown_macro_is_unresolved_and_empty_alternative_dropped() {
        let t = table(&["EMPTY=", "EMPTY=<real.h>"]);
        assert_eq!(headers(&t, "EMPTY"), [(true, "real.h".into())]);
        let e = t.expand("NOT_DEFINED(x)");
        assert!(e.unresolved.unwrap().contains("NOT_DEFINED"));
    }

    #[test]
    fn exponential_definitions_hit_the_budget() {
        let mut defs = Vec::new();
        for k in 0..12 {
            defs.push(format!("M{k}=M{}", k + 1));
            defs.push(format!("M{k}=M{} M{}", k + 1, k + 1));
        }
        defs.push("M12=<x.h>".into());
        let refs: Vec<&str> = defs.iter().map(String::as_str).collect();
        let e = table(&refs).expand("M0");
        assert!(e.unresolved.unwrap().contains("alternatives"));
    }

    #[test]
    fn flags_parse() {
        let flags: Vec<String> = ["-DA", "-D", "B=<b.h>", "-DF(x)=<x.h>", "-I/x", "-D1bad"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let defs = defines_in_flags(&flags);
        let names: Vec<_> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["A", "B", "F"]);
        assert_eq!(defs[0].body, "1");
        assert_eq!(defs[2].params.as_deref(), Some("x"));
    }
}
