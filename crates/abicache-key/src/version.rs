//! PEP 440 torch versions and the CPU wheel-switch normalization (docs/key.md, step 3).

use crate::KeyError;

/// A parsed PEP 440 version such as `2.12.0.dev20260101+cu128`.
///
/// Parsing is case-insensitive and accepts the PEP 440 spellings
/// (`1!2.0`, `2.0rc1`, `2.0.post1`, `2.0-1`, `2.0.dev3`, `v2.0`); `raw` keeps
/// the string exactly as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchVersion {
    /// The string as given (trimmed).
    pub raw: String,
    /// Epoch (`N!`), 0 when absent.
    pub epoch: u64,
    /// Release segments, at least one (`[2, 10, 0]`).
    pub release: Vec<u64>,
    /// Pre-release, normalized to `a`, `b` or `rc`, with its number.
    pub pre: Option<(String, u64)>,
    /// Post-release number.
    pub post: Option<u64>,
    /// Dev-release number.
    pub dev: Option<u64>,
    /// Local version label after `+`, exactly as written (`cu128`, `git1234abc`).
    pub local: Option<String>,
}

impl TorchVersion {
    /// Parses a PEP 440 version; `nightly`, empty and other non-versions are
    /// [`KeyError::InvalidTorchVersion`].
    pub fn parse(s: &str) -> Result<Self, KeyError> {
        let raw = s.trim();
        let err = |reason: &str| KeyError::InvalidTorchVersion {
            version: s.to_string(),
            reason: reason.to_string(),
        };
        if raw.is_empty() {
            return Err(err("it is empty"));
        }
        let (public, local) = match raw.split_once('+') {
            Some((p, l)) => {
                let valid = !l.is_empty()
                    && l.split(['.', '-', '_']).all(|part| {
                        !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric())
                    });
                if !valid {
                    return Err(err("the local part after `+` is not `[a-z0-9]` segments"));
                }
                (p, Some(l.to_string()))
            }
            None => (raw, None),
        };
        let lower = public.to_ascii_lowercase();
        let mut c = Cursor {
            s: lower.as_bytes(),
            i: 0,
        };
        if c.peek() == Some(b'v') {
            c.i += 1;
        }
        let first = c
            .number()
            .ok_or_else(|| err("it does not start with a number"))?;
        let epoch = if c.eat("!") { Some(first) } else { None };
        let mut release = vec![match epoch {
            Some(_) => c
                .number()
                .ok_or_else(|| err("no release number after the epoch"))?,
            None => first,
        }];
        while c.peek() == Some(b'.') && c.peek_at(1).is_some_and(|b| b.is_ascii_digit()) {
            c.i += 1;
            release.push(c.number().ok_or_else(|| err("bad release segment"))?);
        }
        let mut pre = None;
        let save = c.i;
        c.sep();
        if let Some(tag) = ["alpha", "beta", "preview", "pre", "rc", "a", "b", "c"]
            .into_iter()
            .find(|t| c.eat(t))
        {
            let norm = match tag {
                "alpha" | "a" => "a",
                "beta" | "b" => "b",
                _ => "rc",
            };
            pre = Some((norm.to_string(), c.opt_number()));
        } else {
            c.i = save;
        }
        let mut post = None;
        let save = c.i;
        if c.peek() == Some(b'-') && c.peek_at(1).is_some_and(|b| b.is_ascii_digit()) {
            c.i += 1;
            post = c.number();
        } else {
            c.sep();
            if ["post", "rev", "r"].into_iter().any(|t| c.eat(t)) {
                post = Some(c.opt_number());
            } else {
                c.i = save;
            }
        }
        let mut dev = None;
        let save = c.i;
        c.sep();
        if c.eat("dev") {
            dev = Some(c.opt_number());
        } else {
            c.i = save;
        }
        if c.i != c.s.len() {
            return Err(err(&format!(
                "unexpected `{}`",
                &public[c.i.min(public.len())..]
            )));
        }
        Ok(Self {
            raw: raw.to_string(),
            epoch: epoch.unwrap_or(0),
            release,
            pre,
            post,
            dev,
            local,
        })
    }

    /// `(major, minor)` of the release; a missing minor counts as 0.
    pub fn major_minor(&self) -> (u64, u64) {
        (self.release[0], self.release.get(1).copied().unwrap_or(0))
    }

    /// The version a non-stable CPU extension is keyed on (docs/key.md, step 3): the raw
    /// version with its local part removed only when that part is exactly
    /// `cpu`, `cuNNN`, `rocmX.Y[.Z]` or `xpu` (accelerator wheel tags, which do
    /// not change libtorch's CPU ABI); any other local part is kept verbatim.
    pub fn cpu_cache_version(&self) -> String {
        match &self.local {
            Some(local) if is_accelerator_tag(local) => self
                .raw
                .split_once('+')
                .map_or(&*self.raw, |(p, _)| p)
                .to_string(),
            _ => self.raw.clone(),
        }
    }
}

/// True for the wheel tags that [`TorchVersion::cpu_cache_version`] strips.
fn is_accelerator_tag(local: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if local == "cpu" || local == "xpu" {
        return true;
    }
    if let Some(n) = local.strip_prefix("cu") {
        return digits(n);
    }
    if let Some(v) = local.strip_prefix("rocm") {
        let parts: Vec<&str> = v.split('.').collect();
        return (parts.len() == 2 || parts.len() == 3) && parts.iter().all(|p| digits(p));
    }
    false
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn peek_at(&self, n: usize) -> Option<u8> {
        self.s.get(self.i + n).copied()
    }
    fn eat(&mut self, t: &str) -> bool {
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    fn sep(&mut self) {
        if matches!(self.peek(), Some(b'.' | b'-' | b'_')) {
            self.i += 1;
        }
    }
    fn number(&mut self) -> Option<u64> {
        let start = self.i;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()?
            .parse()
            .ok()
    }
    fn opt_number(&mut self) -> u64 {
        let save = self.i;
        self.sep();
        match self.number() {
            Some(n) => n,
            None => {
                self.i = save;
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_torch_release_nightly_and_source_builds() {
        let v = TorchVersion::parse("2.10.0").unwrap();
        assert_eq!((v.release.clone(), v.local.clone()), (vec![2, 10, 0], None));
        let v = TorchVersion::parse("2.11.0a0+git1234abc").unwrap();
        assert_eq!(v.pre, Some(("a".into(), 0)));
        assert_eq!(v.local.as_deref(), Some("git1234abc"));
        assert_eq!(v.major_minor(), (2, 11));
        let v = TorchVersion::parse("2.12.0.dev20260101+cu128").unwrap();
        assert_eq!(v.dev, Some(20260101));
        assert_eq!(v.local.as_deref(), Some("cu128"));
        let v = TorchVersion::parse("1!2.15.0.post2+cpu").unwrap();
        assert_eq!((v.epoch, v.post), (1, Some(2)));
        assert_eq!(v.major_minor(), (2, 15));
        let v = TorchVersion::parse("2.9.0rc1").unwrap();
        assert_eq!(v.pre, Some(("rc".into(), 1)));
        assert_eq!(TorchVersion::parse("2.9-1").unwrap().post, Some(1));
        assert_eq!(TorchVersion::parse("3").unwrap().major_minor(), (3, 0));
    }

    #[test]
    fn rejects_non_versions() {
        for bad in [
            "nightly",
            "",
            "  ",
            "2.10.0+",
            "2.10.0+cu 128",
            "2.x",
            "2.10.0 foo",
            "+cpu",
        ] {
            assert!(
                matches!(
                    TorchVersion::parse(bad),
                    Err(KeyError::InvalidTorchVersion { .. })
                ),
                "{bad:?} should not parse"
            );
        }
    }

    #[test]
    fn cpu_cache_version_strips_only_accelerator_tags() {
        let cpu = |s: &str| TorchVersion::parse(s).unwrap().cpu_cache_version();
        for v in [
            "2.8.0+cpu",
            "2.8.0+cu128",
            "2.8.0+rocm6.2",
            "2.8.0+rocm6.2.4",
            "2.8.0+xpu",
            "2.8.0",
        ] {
            assert_eq!(cpu(v), "2.8.0", "{v}");
        }
        for v in [
            "2.8.0+gitabc1234",
            "2.8.0+cu",
            "2.8.0+rocm6",
            "2.8.0+cpu.cxx11.abi",
            "2.8.0+cu128.vendor",
            "2.8.0+CPU",
            "2.8.0+xpu1",
        ] {
            assert_eq!(cpu(v), v, "{v} must be kept verbatim");
        }
        assert_eq!(cpu("2.12.0.dev20260101+cu128"), "2.12.0.dev20260101");
    }
}
