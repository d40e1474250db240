//! Finding the next byte the lexer must look at, 16 bytes at a time.
//!
//! In ordinary code only these bytes can change what the lexer finds (see
//! [`crate::lexer`]): a newline, `#`, `%`, `/`, `"`, `'`, and, *where a token starts*
//! (the previous byte is not an identifier character: a digit or letter inside an
//! identifier is part of it), a digit or the first letter of `Py`, `PY`, `py`, `RE`,
//! `ST` or `TO` (how every marker begins; a raw string's prefix is recognised at its
//! quote instead). [`next_candidate`] classifies 16 bytes with a handful of SSE2
//! compares (part of every x86_64 CPU) and returns the first candidate; other targets
//! use the same rule one byte at a time.

/// Whether `c` may continue an identifier (`[A-Za-z0-9_$]` or any byte ≥ 0x80).
fn is_ident_continue(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// Whether `c` followed by `next` starts a marker: `Py`, `PY`, `py`, `RE`, `ST`, `TO`.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn starts_marker(c: u8, next: u8) -> bool {
    matches!(
        (c, next),
        (b'P', b'y' | b'Y') | (b'p', b'y') | (b'R', b'E') | (b'S', b'T') | (b'T', b'O')
    )
}

/// Finds candidates (see the module docs) at increasing positions, classifying each
/// 16-byte block once: a block's candidates depend only on its bytes and the bytes
/// just before and after it, so the last block's masks answer every later position
/// inside it.
#[derive(Debug, Default)]
pub(crate) struct Candidates {
    /// Start of the last classified block, its candidates and identifier characters.
    block: Option<(usize, u32, u32)>,
}

impl Candidates {
    /// The first position at or after `from` holding a candidate byte, or `s.len()` when
    /// there is none. `s` must be the same text on every call.
    pub(crate) fn next(&mut self, s: &[u8], from: usize) -> usize {
        let mut i = from;
        let mut prev_continues = None;
        if let Some((at, candidates, continues)) = self.block {
            if (at..at + 16).contains(&from) {
                let left = candidates & (u32::MAX << (from - at));
                if left != 0 {
                    return at + left.trailing_zeros() as usize;
                }
                i = at + 16;
                prev_continues = Some(continues & (1 << 15) != 0);
            }
        }
        let mut prev_continues = prev_continues
            .unwrap_or_else(|| i > 0 && s.get(i - 1).is_some_and(|&c| is_ident_continue(c)));
        while i < s.len() {
            // The block and the bytes one further (a marker's second letter).
            let (candidates, continues) = match s.get(i..i + 17) {
                Some(full) => classify(
                    full[..16].try_into().expect("16 bytes"),
                    full[1..].try_into().expect("16 bytes"),
                    prev_continues,
                ),
                None => {
                    let mut block = [0u8; 17];
                    block[..s.len() - i].copy_from_slice(&s[i..]);
                    classify(
                        block[..16].try_into().expect("16 bytes"),
                        block[1..].try_into().expect("16 bytes"),
                        prev_continues,
                    )
                }
            };
            // Bytes past the end (zeros) are never candidates.
            if candidates != 0 {
                self.block = Some((i, candidates, continues));
                return i + candidates.trailing_zeros() as usize;
            }
            prev_continues = continues & (1 << 15) != 0;
            i += 16;
        }
        s.len()
    }
}

/// The first position at or after `from` holding a candidate byte, or `s.len()`.
#[cfg(test)]
fn next_candidate(s: &[u8], from: usize) -> usize {
    Candidates::default().next(s, from)
}

/// The candidates of `block` (bit k for byte k) and its identifier characters, given
/// the bytes one further (`next[k]` follows `block[k]`) and whether the byte before it
/// continues an identifier.
#[cfg(target_arch = "x86_64")]
fn classify(block: &[u8; 16], next: &[u8; 16], prev_continues: bool) -> (u32, u32) {
    let (punct, starters, continues) = sse2::masks(block, next);
    let after_ident = (continues << 1) | u32::from(prev_continues);
    (punct | (starters & !after_ident & 0xFFFF), continues)
}

/// The same as the SSE2 version, one byte at a time.
#[cfg(not(target_arch = "x86_64"))]
fn classify(block: &[u8; 16], next: &[u8; 16], prev_continues: bool) -> (u32, u32) {
    let (mut punct, mut starters, mut continues) = (0u32, 0u32, 0u32);
    for (k, &c) in block.iter().enumerate() {
        punct |= u32::from(matches!(c, b'\n' | b'#' | b'%' | b'/' | b'"' | b'\'')) << k;
        starters |= u32::from(c.is_ascii_digit() || starts_marker(c, next[k])) << k;
        continues |= u32::from(is_ident_continue(c)) << k;
    }
    let after_ident = (continues << 1) | u32::from(prev_continues);
    (punct | (starters & !after_ident & 0xFFFF), continues)
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // the SSE2 intrinsics; see the SAFETY comment
mod sse2 {
    use std::arch::x86_64::*;

    /// (punctuation, digits and marker starts, identifier characters) of `block`,
    /// whose bytes are followed by those of `next`.
    pub(super) fn masks(block: &[u8; 16], next: &[u8; 16]) -> (u32, u32, u32) {
        // SAFETY: SSE2 is part of the x86_64 baseline (every x86_64 CPU has it, and Rust's
        // x86_64 targets enable it), and both arrays are 16 readable bytes (unaligned loads).
        unsafe { masks_sse2(block, next) }
    }

    #[target_feature(enable = "sse2")]
    fn masks_sse2(block: &[u8; 16], next: &[u8; 16]) -> (u32, u32, u32) {
        // SAFETY: both are 16 bytes; `_mm_loadu_si128` has no alignment requirement.
        let v = unsafe { _mm_loadu_si128(block.as_ptr().cast()) };
        // SAFETY: as above.
        let n = unsafe { _mm_loadu_si128(next.as_ptr().cast()) };
        let eq = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
        let next_is = |c: u8| _mm_cmpeq_epi8(n, _mm_set1_epi8(c as i8));
        let pair = |a: u8, b: u8| _mm_and_si128(eq(a), next_is(b));
        // `x <= max` for unsigned bytes: min(x, max) == x.
        let le = |x: __m128i, max: u8| _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(max as i8)), x);
        let punct = _mm_or_si128(
            _mm_or_si128(
                _mm_or_si128(eq(b'\n'), eq(b'#')),
                _mm_or_si128(eq(b'%'), eq(b'/')),
            ),
            _mm_or_si128(eq(b'"'), eq(b'\'')),
        );
        let digit = le(_mm_sub_epi8(v, _mm_set1_epi8(b'0' as i8)), 9);
        let lower = _mm_or_si128(v, _mm_set1_epi8(0x20));
        let alpha = le(_mm_sub_epi8(lower, _mm_set1_epi8(b'a' as i8)), 25);
        // `Py PY py RE ST TO`.
        let py = _mm_and_si128(
            _mm_or_si128(eq(b'P'), eq(b'p')),
            _mm_cmpeq_epi8(
                _mm_or_si128(n, _mm_set1_epi8(0x20)),
                _mm_set1_epi8(b'y' as i8),
            ),
        );
        // `pY` is no marker start.
        let py = _mm_andnot_si128(pair(b'p', b'Y'), py);
        let starters = _mm_or_si128(
            _mm_or_si128(digit, py),
            _mm_or_si128(
                pair(b'R', b'E'),
                _mm_or_si128(pair(b'S', b'T'), pair(b'T', b'O')),
            ),
        );
        // Identifier characters: letters, digits, `_`, `$` and bytes >= 0x80 (the sign bit,
        // which `movemask` reads directly).
        let word = _mm_or_si128(_mm_or_si128(alpha, digit), _mm_or_si128(eq(b'_'), eq(b'$')));
        let high = _mm_movemask_epi8(v) as u32;
        (
            _mm_movemask_epi8(punct) as u32,
            _mm_movemask_epi8(starters) as u32,
            _mm_movemask_epi8(word) as u32 | high,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule, one byte at a time, straight from the module docs.
    fn reference(s: &[u8], from: usize) -> usize {
        (from..s.len())
            .find(|&k| {
                let c = s[k];
                let starts = k == 0 || !is_ident_continue(s[k - 1]);
                let next = s.get(k + 1).copied().unwrap_or(0);
                matches!(c, b'\n' | b'#' | b'%' | b'/' | b'"' | b'\'')
                    || starts && (c.is_ascii_digit() || starts_marker(c, next))
            })
            .unwrap_or(s.len())
    }

    #[test]
    fn walking_every_candidate_through_the_cache_matches_the_rule() {
        let mut text: Vec<u8> = Vec::new();
        for k in 0..40u8 {
            text.extend_from_slice(b"ab1 P2 xPy Py PY pY py RE ST TO T .5 'q' /x/ #y\n");
            text.extend((0..k).map(|n| b"aZ_$9%u\xc3PyTOST"[usize::from(n) % 14]));
        }
        for step in 1..4 {
            let mut walker = Candidates::default();
            let mut at = 0;
            while at < text.len() {
                let want = reference(&text, at);
                assert_eq!(walker.next(&text, at), want, "from {at}");
                at = (want + step).min(text.len());
            }
        }
    }

    #[test]
    fn every_byte_value_at_every_offset_matches_the_rule() {
        let mut text: Vec<u8> = (0..=255u8).collect();
        text.extend_from_slice(
            b"int x_1 = Py_2 + pPy 3.5e+1 'a' \"s\" // c\n#x %: u8R\"(r)\" LT$S\xc3\xa9T PYpy REST TO",
        );
        text.extend((0..=255u8).rev());
        for from in 0..=text.len() {
            for end in [text.len(), text.len().saturating_sub(7)] {
                if from <= end {
                    assert_eq!(
                        next_candidate(&text[..end], from),
                        reference(&text[..end], from),
                        "from {from}, end {end}"
                    );
                }
            }
        }
    }
}
