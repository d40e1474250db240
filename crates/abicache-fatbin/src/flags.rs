//! The device images nvcc arch flags ask for.

use std::collections::BTreeSet;

use crate::{ArchVariant, DeviceImage, Error, SmArch};

/// nvcc options whose value is the next argument and says nothing about
/// device code (so `-Xcompiler -arch=x` is not read as nvcc's `-arch`).
const OPTIONS_WITH_FOREIGN_VALUE: &[&str] = &[
    "-Xcompiler",
    "--compiler-options",
    "-Xlinker",
    "--linker-options",
    "-Xptxas",
    "--ptxas-options",
    "-Xnvlink",
    "--nvlink-options",
    "-Xfatbin",
    "--fatbin-options",
    "-Xarchive",
    "--archive-options",
    "-ccbin",
    "--compiler-bindir",
];

/// Which arch option a flag is.
#[derive(Clone, Copy, PartialEq)]
enum ArchOption {
    /// `-gencode` / `--generate-code`: `arch=compute_XY,code=…`.
    Gencode,
    /// `-arch` / `--gpu-architecture`.
    Arch,
    /// `-code` / `--gpu-code`.
    Code,
}

const OPTION_NAMES: &[(&str, ArchOption)] = &[
    ("-gencode", ArchOption::Gencode),
    ("--generate-code", ArchOption::Gencode),
    ("-arch", ArchOption::Arch),
    ("--gpu-architecture", ArchOption::Arch),
    ("-code", ArchOption::Code),
    ("--gpu-code", ArchOption::Code),
];

/// The device images nvcc builds for these flags (the whole nvcc argument
/// list, or just its arch flags), sorted and deduplicated, as nvcc 12.9 to
/// 13.2 does:
/// - each `-gencode arch=compute_XY,code=…` (also `--generate-code`, `=`
///   or a separate argument, `code=[a,b]` or `code="a,b"`) adds its codes:
///   `sm_XY` SASS, `compute_XY` PTX (`lto_XY` adds neither);
/// - `-arch=compute_XY` (also `--gpu-architecture`) with `-code=…` (also
///   `--gpu-code`) adds the codes; without `-code`, the PTX `compute_XY`;
/// - `-arch=sm_XY` without `-code` adds SASS `sm_XY` and PTX `compute_XY`,
///   and for `sm_XYa` / `sm_XYf` also the plain PTX `compute_XY`;
/// - the last `-arch` and the last `-code` count, as in nvcc.
///
/// No arch flag gives `[]`: nvcc then builds its own default, which depends
/// on its version. `-arch=native`, `all` and `all-major` are an
/// [`Error::ArchChosenByNvcc`]; a flag nvcc would refuse (`-code` without
/// `-arch`, `-arch=sm_XY` with `-code`, a malformed value) an [`Error::BadFlag`].
///
/// ```
/// use abicache_fatbin::expected_images;
///
/// let flags = ["-gencode=arch=compute_90,code=[sm_90,compute_90]".to_string()];
/// let images: Vec<String> = expected_images(&flags).unwrap().iter().map(|i| i.to_string()).collect();
/// assert_eq!(images, ["sm_90", "compute_90"]);
/// ```
pub fn expected_images(nvcc_flags: &[String]) -> Result<Vec<DeviceImage>, Error> {
    let mut images = BTreeSet::new();
    let mut arch: Option<(String, String)> = None;
    let mut code: Option<(String, String)> = None;
    let mut args = nvcc_flags.iter();
    while let Some(arg) = args.next() {
        if OPTIONS_WITH_FOREIGN_VALUE.contains(&arg.as_str()) {
            args.next();
            continue;
        }
        let Some((option, name, inline)) = OPTION_NAMES.iter().find_map(|&(name, option)| {
            if arg == name {
                Some((option, name, None))
            } else {
                arg.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('='))
                    .map(|value| (option, name, Some(value)))
            }
        }) else {
            continue;
        };
        let value = match inline {
            Some(value) => value.to_string(),
            None => args.next().cloned().ok_or_else(|| Error::BadFlag {
                flag: arg.clone(),
                reason: format!("`{name}` needs a value after it"),
            })?,
        };
        let flag = match inline {
            Some(_) => arg.clone(),
            None => format!("{arg} {value}"),
        };
        match option {
            ArchOption::Gencode => gencode(&flag, &value, &mut images)?,
            ArchOption::Arch => arch = Some((flag, value)),
            ArchOption::Code => code = Some((flag, value)),
        }
    }
    match (arch, code) {
        (None, None) => {}
        (None, Some((flag, _))) => return Err(Error::BadFlag {
            flag,
            reason:
                "`-code` / `--gpu-code` needs `-arch=compute_XY` beside it (nvcc refuses it alone)"
                    .into(),
        }),
        (Some((flag, value)), code) => arch_and_code(&flag, &value, code, &mut images)?,
    }
    Ok(images.into_iter().collect())
}

/// `-gencode arch=compute_XY,code=…`.
fn gencode(flag: &str, value: &str, images: &mut BTreeSet<DeviceImage>) -> Result<(), Error> {
    let bad = |reason: &str| Error::BadFlag {
        flag: flag.to_string(),
        reason: reason.to_string(),
    };
    let value = unquote(value);
    let rest = value
        .strip_prefix("arch=")
        .ok_or_else(|| bad("the value must start with `arch=compute_XY`"))?;
    let (virtual_arch, codes) = rest
        .split_once(",code=")
        .ok_or_else(|| bad("the value must be `arch=compute_XY,code=…`"))?;
    virtual_arch_of(flag, virtual_arch)?;
    for code in split_list(codes) {
        images.extend(code_image(flag, code)?);
    }
    Ok(())
}

/// The last `-arch` value, with the last `-code` value if any.
fn arch_and_code(
    arch_flag: &str,
    arch: &str,
    code: Option<(String, String)>,
    images: &mut BTreeSet<DeviceImage>,
) -> Result<(), Error> {
    let arch = unquote(arch);
    if matches!(arch, "native" | "all" | "all-major") {
        return Err(Error::ArchChosenByNvcc {
            flag: arch_flag.to_string(),
        });
    }
    if let Some(number) = arch.strip_prefix("sm_") {
        if let Some((code_flag, _)) = code {
            return Err(Error::BadFlag {
                flag: format!("{arch_flag} {code_flag}"),
                reason: "with `-code`, `-arch` must name a virtual architecture (`compute_XY`), as nvcc requires".into(),
            });
        }
        let sm = SmArch::parse_number(number).ok_or_else(|| Error::BadFlag {
            flag: arch_flag.to_string(),
            reason: format!(
                "`{arch}` is not a GPU architecture such as `sm_90`, `sm_90a` or `compute_90`"
            ),
        })?;
        images.insert(DeviceImage::Sass(sm));
        images.insert(DeviceImage::Ptx(sm));
        if sm.variant != ArchVariant::Plain {
            images.insert(DeviceImage::Ptx(SmArch::plain(sm.major, sm.minor)));
        }
        return Ok(());
    }
    let virtual_arch = virtual_arch_of(arch_flag, arch)?;
    match code {
        None => {
            images.insert(DeviceImage::Ptx(virtual_arch));
        }
        Some((code_flag, codes)) => {
            for code in split_list(unquote(&codes)) {
                images.extend(code_image(&code_flag, code)?);
            }
        }
    }
    Ok(())
}

/// `compute_XY` as an architecture; anything else is a [`Error::BadFlag`].
fn virtual_arch_of(flag: &str, text: &str) -> Result<SmArch, Error> {
    text.strip_prefix("compute_")
        .and_then(SmArch::parse_number)
        .ok_or_else(|| Error::BadFlag {
            flag: flag.to_string(),
            reason: format!(
                "`{text}` is not a virtual architecture such as `compute_90` (nvcc requires one for `arch=`)"
            ),
        })
}

/// The image one code of a code list asks for: `sm_XY` SASS, `compute_XY`
/// PTX, nothing for `lto_XY`.
fn code_image(flag: &str, code: &str) -> Result<Option<DeviceImage>, Error> {
    if let Some(number) = code.strip_prefix("lto_") {
        if SmArch::parse_number(number).is_some() {
            return Ok(None);
        }
    }
    code.parse().map(Some).map_err(|_| Error::BadFlag {
        flag: flag.to_string(),
        reason: format!(
            "`{code}` is not a code such as `sm_90`, `sm_90a`, `compute_90` or `lto_90`"
        ),
    })
}

/// `[a,b]`, `"a,b"` or `a,b` → `a`, `b` (empty items dropped).
fn split_list(list: &str) -> impl Iterator<Item = &str> {
    let list = unquote(list);
    let list = list
        .strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
        .unwrap_or(list);
    list.split(',')
        .map(str::trim)
        .filter(|code| !code.is_empty())
}

/// The text without one pair of surrounding `"` or `'`.
fn unquote(text: &str) -> &str {
    let text = text.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(quote).and_then(|t| t.strip_suffix(quote)) {
            return inner;
        }
    }
    text
}
