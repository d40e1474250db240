//! Finding the next byte the lexer must look at, 32 bytes at a time.
//!
//! In ordinary code only these bytes can change what the lexer finds (see
//! [`crate::lexer`]): a newline, `#`, `%`, `/`, `"`, `'`, and, *where a token starts*
//! (the previous byte is not an identifier character: a digit or letter inside an
//! identifier is part of it), a digit or the first letter of `Py`/`PY`/`py` (or `pY`),
//! `RE`, `ST` or `TO` (how every marker begins; a raw string's prefix is recognised at
//! its quote instead). [`next_candidate`] classifies 32 bytes with a handful of AVX2
//! compares, or twice 16 with SSE2 (part of every x86_64 CPU) on a CPU without AVX2,
//! and returns the first candidate; other targets use the same rule one byte at a
//! time.

/// Whether `c` may continue an identifier (`[A-Za-z0-9_$]` or any byte ≥ 0x80).
fn is_ident_continue(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// Whether `c` followed by `next` may start a marker: `P` or `p` before `y` or `Y`,
/// `RE`, `ST`, `TO`.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn starts_marker(c: u8, next: u8) -> bool {
    matches!(
        (c, next),
        (b'P' | b'p', b'y' | b'Y') | (b'R', b'E') | (b'S', b'T') | (b'T', b'O')
    )
}

/// Bytes classified at once.
const BLOCK: usize = 32;

/// Finds candidates (see the module docs) at increasing positions, classifying each
/// [`BLOCK`]-byte block once: a block's candidates depend only on its bytes and the
/// bytes just before and after it, so the last block's masks answer every later
/// position inside it.
#[derive(Debug, Default)]
pub(crate) struct Candidates {
    /// Start of the last classified block, its candidates and identifier characters.
    block: Option<(usize, u64, u64)>,
}

impl Candidates {
    /// The first position at or after `from` holding a candidate byte, or `s.len()` when
    /// there is none. `s` must be the same text on every call.
    pub(crate) fn next(&mut self, s: &[u8], from: usize) -> usize {
        let mut i = from;
        let mut prev_continues = None;
        if let Some((at, candidates, continues)) = self.block {
            if (at..at + BLOCK).contains(&from) {
                let left = candidates & (u64::MAX << (from - at));
                if left != 0 {
                    return at + left.trailing_zeros() as usize;
                }
                i = at + BLOCK;
                prev_continues = Some(continues & (1 << (BLOCK - 1)) != 0);
            }
        }
        let mut prev_continues = prev_continues
            .unwrap_or_else(|| i > 0 && s.get(i - 1).is_some_and(|&c| is_ident_continue(c)));
        while i < s.len() {
            // The block and the bytes one further (a marker's second letter).
            let (candidates, continues) = match s.get(i..i + BLOCK + 1) {
                Some(full) => classify(
                    full[..BLOCK].try_into().expect("a block"),
                    full[1..].try_into().expect("a block"),
                    prev_continues,
                ),
                None => {
                    let mut block = [0u8; BLOCK + 1];
                    block[..s.len() - i].copy_from_slice(&s[i..]);
                    classify(
                        block[..BLOCK].try_into().expect("a block"),
                        block[1..].try_into().expect("a block"),
                        prev_continues,
                    )
                }
            };
            // Bytes past the end (zeros) are never candidates.
            if candidates != 0 {
                self.block = Some((i, candidates, continues));
                return i + candidates.trailing_zeros() as usize;
            }
            prev_continues = continues & (1 << (BLOCK - 1)) != 0;
            i += BLOCK;
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
fn classify(block: &[u8; BLOCK], next: &[u8; BLOCK], prev_continues: bool) -> (u64, u64) {
    let (punct, starters, continues) = simd::masks(block, next);
    let after_ident = (continues << 1) | u64::from(prev_continues);
    (punct | (starters & !after_ident & 0xFFFF_FFFF), continues)
}

/// The same as the SIMD version, one byte at a time.
#[cfg(not(target_arch = "x86_64"))]
fn classify(block: &[u8; BLOCK], next: &[u8; BLOCK], prev_continues: bool) -> (u64, u64) {
    let (mut punct, mut starters, mut continues) = (0u64, 0u64, 0u64);
    for (k, &c) in block.iter().enumerate() {
        punct |= u64::from(matches!(c, b'\n' | b'#' | b'%' | b'/' | b'"' | b'\'')) << k;
        starters |= u64::from(c.is_ascii_digit() || starts_marker(c, next[k])) << k;
        continues |= u64::from(is_ident_continue(c)) << k;
    }
    let after_ident = (continues << 1) | u64::from(prev_continues);
    (punct | (starters & !after_ident & 0xFFFF_FFFF), continues)
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // the SSE2 and AVX2 intrinsics; see the SAFETY comments
mod simd {
    use std::arch::x86_64::*;

    use super::BLOCK;

    /// (punctuation, digits and marker starts, identifier characters) of `block`,
    /// whose bytes are followed by those of `next`: one AVX2 pass where the CPU has
    /// AVX2, else two SSE2 passes (SSE2 is part of every x86_64 CPU).
    pub(super) fn masks(block: &[u8; BLOCK], next: &[u8; BLOCK]) -> (u64, u64, u64) {
        if is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above); both arrays are 32
            // readable bytes (unaligned loads).
            return unsafe { masks_avx2(block, next) };
        }
        masks_sse2_twice(block, next)
    }

    /// [`masks`] through SSE2 alone (twice 16 bytes).
    pub(super) fn masks_sse2_twice(block: &[u8; BLOCK], next: &[u8; BLOCK]) -> (u64, u64, u64) {
        let half = |k: usize| {
            let b: &[u8; 16] = block[k..k + 16].try_into().expect("16 bytes");
            let n: &[u8; 16] = next[k..k + 16].try_into().expect("16 bytes");
            // SAFETY: SSE2 is part of the x86_64 baseline (every x86_64 CPU has it, and
            // Rust's x86_64 targets enable it); both arrays are 16 readable bytes.
            unsafe { masks_sse2(b, n) }
        };
        let (lo, hi) = (half(0), half(16));
        (lo.0 | hi.0 << 16, lo.1 | hi.1 << 16, lo.2 | hi.2 << 16)
    }

    #[target_feature(enable = "sse2")]
    fn masks_sse2(block: &[u8; 16], next: &[u8; 16]) -> (u64, u64, u64) {
        // SAFETY: both are 16 bytes; `_mm_loadu_si128` has no alignment requirement.
        let v = unsafe { _mm_loadu_si128(block.as_ptr().cast()) };
        // SAFETY: as above.
        let n = unsafe { _mm_loadu_si128(next.as_ptr().cast()) };
        let set = |c: u8| _mm_set1_epi8(c as i8);
        let eq = |x: __m128i, c: u8| _mm_cmpeq_epi8(x, set(c));
        // `x <= max` for unsigned bytes: min(x, max) == x.
        let le = |x: __m128i, max: u8| _mm_cmpeq_epi8(_mm_min_epu8(x, set(max)), x);
        let or = _mm_or_si128;
        let and = _mm_and_si128;
        let punct = or(
            or(or(eq(v, b'\n'), eq(v, b'#')), or(eq(v, b'%'), eq(v, b'/'))),
            or(eq(v, b'"'), eq(v, b'\'')),
        );
        let digit = le(_mm_sub_epi8(v, set(b'0')), 9);
        let lower = or(v, set(0x20));
        let alpha = le(_mm_sub_epi8(lower, set(b'a')), 25);
        // `P p` before `y Y`, `R` before `E`, `S` before `T`, `T` before `O`.
        let py = and(eq(lower, b'p'), eq(or(n, set(0x20)), b'y'));
        let rst = or(
            and(eq(v, b'R'), eq(n, b'E')),
            or(and(eq(v, b'S'), eq(n, b'T')), and(eq(v, b'T'), eq(n, b'O'))),
        );
        let starters = or(digit, or(py, rst));
        // Identifier characters: letters, digits, `_`, `$` and bytes >= 0x80 (the sign
        // bit, which `movemask` reads directly).
        let word = or(or(alpha, digit), or(eq(v, b'_'), eq(v, b'$')));
        let high = _mm_movemask_epi8(v) as u32;
        (
            u64::from(_mm_movemask_epi8(punct) as u32),
            u64::from(_mm_movemask_epi8(starters) as u32),
            u64::from(_mm_movemask_epi8(word) as u32 | high),
        )
    }

    /// [`masks_sse2`] on 32 bytes at once.
    #[target_feature(enable = "avx2")]
    fn masks_avx2(block: &[u8; BLOCK], next: &[u8; BLOCK]) -> (u64, u64, u64) {
        // SAFETY: both are 32 bytes; `_mm256_loadu_si256` has no alignment requirement.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().cast()) };
        // SAFETY: as above.
        let n = unsafe { _mm256_loadu_si256(next.as_ptr().cast()) };
        let set = |c: u8| _mm256_set1_epi8(c as i8);
        let eq = |x: __m256i, c: u8| _mm256_cmpeq_epi8(x, set(c));
        let le = |x: __m256i, max: u8| _mm256_cmpeq_epi8(_mm256_min_epu8(x, set(max)), x);
        let or = _mm256_or_si256;
        let and = _mm256_and_si256;
        let punct = or(
            or(or(eq(v, b'\n'), eq(v, b'#')), or(eq(v, b'%'), eq(v, b'/'))),
            or(eq(v, b'"'), eq(v, b'\'')),
        );
        let digit = le(_mm256_sub_epi8(v, set(b'0')), 9);
        let lower = or(v, set(0x20));
        let alpha = le(_mm256_sub_epi8(lower, set(b'a')), 25);
        let py = and(eq(lower, b'p'), eq(or(n, set(0x20)), b'y'));
        let rst = or(
            and(eq(v, b'R'), eq(n, b'E')),
            or(and(eq(v, b'S'), eq(n, b'T')), and(eq(v, b'T'), eq(n, b'O'))),
        );
        let starters = or(digit, or(py, rst));
        let word = or(or(alpha, digit), or(eq(v, b'_'), eq(v, b'$')));
        let high = _mm256_movemask_epi8(v) as u32;
        (
            u64::from(_mm256_movemask_epi8(punct) as u32),
            u64::from(_mm256_movemask_epi8(starters) as u32),
            u64::from(_mm256_movemask_epi8(word) as u32 | high),
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

    /// The masks of one block, one byte at a time.
    #[cfg(target_arch = "x86_64")]
    fn byte_masks(block: &[u8; BLOCK], next: &[u8; BLOCK]) -> (u64, u64, u64) {
        let (mut punct, mut starters, mut continues) = (0u64, 0u64, 0u64);
        for (k, &c) in block.iter().enumerate() {
            punct |= u64::from(matches!(c, b'\n' | b'#' | b'%' | b'/' | b'"' | b'\'')) << k;
            starters |= u64::from(c.is_ascii_digit() || starts_marker(c, next[k])) << k;
            continues |= u64::from(is_ident_continue(c)) << k;
        }
        (punct, starters, continues)
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_sse2_and_the_avx2_masks_are_the_rule_for_every_byte_pair() {
        // Every (byte, next byte) pair lands at every position of some block.
        let mut text = Vec::new();
        for a in 0..=255u8 {
            for b in [0u8, b'y', b'Y', b'E', b'T', b'O', b'a', 0x80, 0xff] {
                text.extend_from_slice(&[a, b]);
            }
        }
        text.extend_from_slice(b"Py PY py pY RE ST TO 09 #%/\"' _$\n");
        for at in 0..text.len().saturating_sub(BLOCK + 1) {
            let block: &[u8; BLOCK] = text[at..at + BLOCK].try_into().unwrap();
            let next: &[u8; BLOCK] = text[at + 1..at + BLOCK + 1].try_into().unwrap();
            let want = byte_masks(block, next);
            assert_eq!(simd::masks_sse2_twice(block, next), want, "at {at}");
            assert_eq!(simd::masks(block, next), want, "at {at}");
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
