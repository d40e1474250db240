//! What the running CPU supports, without a compiler: the feature names
//! Linux lists in `/proc/cpuinfo` (`flags` on x86-64, `Features` on
//! AArch64: what the CPU has and the kernel lets processes use), and on
//! x86-64 also what `cpuid` reports through the standard library's
//! detection, so a feature a hypervisor hides from `/proc/cpuinfo` but the
//! CPU runs (`rdseed` in some VMs) is not refused.

use std::collections::BTreeSet;
use std::io::{self, Read};
use std::sync::OnceLock;

/// The path the features are read from.
pub const CPUINFO: &str = "/proc/cpuinfo";

/// How many bytes [`running_cpu`] asks for per read of [`CPUINFO`]: one
/// page, what the kernel fills per read anyway (the text of the processors
/// that fit, ~1.5–3 KB and ~15 µs each here). Stopping after the first
/// processor's block then makes it write two or three processors' text,
/// not every processor's of a many-core machine.
///
/// Restated in Python as `WARM_CPUINFO_READ` (generated into
/// `python/abicache/_warm_record.py`), used by `python/abicache/_cpu.py:running_cpu`, tied by
/// `tests/python/test_warm_reader.py::test_the_cpu_identity_is_the_first_processors_whatever_sizes_the_reads_return`
/// and `tests/python/test_warm_record.py::test_a_native_cpu_flag_extension_gets_a_record_that_checks_the_cpu_and_the_compiler`.
pub const CPUINFO_READ: usize = 4096;

/// The running CPU's features and a description that identifies the CPU.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuFeatures {
    names: BTreeSet<String>,
    identity: String,
    /// Also ask `cpuid` (only for the CPU this process runs on).
    running: bool,
}

impl CpuFeatures {
    /// The features of the CPU described by `cpuinfo` (the text of
    /// `/proc/cpuinfo`; only its first processor is read).
    ///
    /// Restated in Python at `python/abicache/_cpu.py:running_cpu`, tied by
    /// `tests/python/test_warm_reader.py::test_the_cpu_identity_is_the_first_processors_whatever_sizes_the_reads_return`
    /// and `tests/python/test_warm_record.py::test_a_native_cpu_flag_extension_gets_a_record_that_checks_the_cpu_and_the_compiler`.
    pub fn from_cpuinfo(cpuinfo: &str) -> Self {
        Self::first_processor(cpuinfo).0
    }

    /// [`CpuFeatures::from_cpuinfo`], and whether `cpuinfo` reaches past the
    /// first processor's block (a blank line after it): then no text after
    /// it could change the answer.
    fn first_processor(cpuinfo: &str) -> (Self, bool) {
        let mut names = BTreeSet::new();
        let mut identity = String::new();
        let mut ended = false;
        for line in cpuinfo.lines() {
            if line.trim().is_empty() {
                if !identity.is_empty() {
                    ended = true; // one processor is enough: they are alike
                    break;
                }
                continue;
            }
            let Some((field, value)) = line.split_once(':') else {
                continue;
            };
            let field = field.trim();
            if IDENTITY_FIELDS.contains(&field) {
                identity.push_str(field);
                identity.push('=');
                identity.push_str(value.trim());
                identity.push('\n');
            }
            if field == "flags" || field == "Features" {
                names.extend(value.split_whitespace().map(str::to_owned));
            }
        }
        let cpu = CpuFeatures {
            names,
            identity,
            running: false,
        };
        (cpu, ended)
    }

    /// Whether the CPU has the feature `name` (a `/proc/cpuinfo` name); for
    /// the running CPU ([`running_cpu`]) also when `cpuid` reports it.
    pub fn has(&self, name: &str) -> bool {
        self.names.contains(name) || (self.running && detected_by_cpuid(name))
    }

    /// The `/proc/cpuinfo` feature names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// What identifies this CPU for caches of answers that depend on it
    /// (the `-march=native` probe): vendor, family, model, stepping or
    /// their AArch64 equivalents, and the feature list.
    pub fn identity(&self) -> &str {
        &self.identity
    }
}

/// The `/proc/cpuinfo` fields that identify a CPU (x86-64 and AArch64):
/// [`CpuFeatures::identity`] is each of them present in the first
/// processor's block, as `field=value` lines in the file's order.
///
/// Restated in Python as `WARM_CPU_IDENTITY_FIELDS` (generated into
/// `python/abicache/_warm_record.py`), used by `python/abicache/_cpu.py:running_cpu`, tied by
/// `tests/python/test_warm_reader.py::test_the_cpu_identity_is_the_first_processors_whatever_sizes_the_reads_return`
/// and `tests/python/test_warm_record.py::test_a_native_cpu_flag_extension_gets_a_record_that_checks_the_cpu_and_the_compiler`.
pub const IDENTITY_FIELDS: &[&str] = &[
    "vendor_id",
    "cpu family",
    "model",
    "model name",
    "stepping",
    "microcode",
    "flags",
    "CPU implementer",
    "CPU architecture",
    "CPU variant",
    "CPU part",
    "CPU revision",
    "Features",
];

/// The running CPU, read once per process; `None` when `/proc/cpuinfo`
/// cannot be read (or its first processor's block is not UTF-8) or lists
/// no features (then nothing can be checked). Only the first processor's
/// block is read (`read_first_processor`).
///
/// Restated in Python at `python/abicache/_cpu.py:running_cpu`, tied by
/// `tests/python/test_warm_reader.py::test_the_cpu_identity_is_the_first_processors_whatever_sizes_the_reads_return`
/// and `tests/python/test_warm_record.py::test_a_native_cpu_flag_extension_gets_a_record_that_checks_the_cpu_and_the_compiler`.
pub fn running_cpu() -> Option<&'static CpuFeatures> {
    static CPU: OnceLock<Option<CpuFeatures>> = OnceLock::new();
    CPU.get_or_init(|| {
        let file = std::fs::File::open(CPUINFO).ok()?;
        let cpu = CpuFeatures {
            running: true,
            ..read_first_processor(file).ok()?
        };
        (!cpu.names.is_empty()).then_some(cpu)
    })
    .as_ref()
}

/// [`CpuFeatures::from_cpuinfo`] of the text `cpuinfo` yields, read
/// [`CPUINFO_READ`] bytes at a time and only until the first processor's
/// block has ended: the same answer as reading the whole text, whatever
/// sizes the reads return (whole lines are parsed; a read may stop
/// anywhere). Fails when a read fails or the text read is not UTF-8.
///
/// Restated in Python at `python/abicache/_cpu.py:running_cpu`, tied by
/// `tests/python/test_warm_reader.py::test_the_cpu_identity_is_the_first_processors_whatever_sizes_the_reads_return`
/// and `tests/python/test_warm_record.py::test_a_native_cpu_flag_extension_gets_a_record_that_checks_the_cpu_and_the_compiler`.
fn read_first_processor(mut cpuinfo: impl Read) -> io::Result<CpuFeatures> {
    let mut text = Vec::with_capacity(CPUINFO_READ);
    let mut chunk = vec![0; CPUINFO_READ];
    loop {
        let read = match cpuinfo.read(&mut chunk) {
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        text.extend_from_slice(&chunk[..read]);
        // Whole lines until the end (a newline never falls inside a UTF-8
        // character, so this is a character boundary too).
        let whole = match read {
            0 => text.len(),
            _ => text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1),
        };
        let lines = std::str::from_utf8(&text[..whole])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let (cpu, ended) = CpuFeatures::first_processor(lines);
        if ended || read == 0 {
            return Ok(cpu);
        }
    }
}

/// Whether `cpuid` (through the standard library, which also checks that
/// the OS saves the registers) reports the feature `/proc/cpuinfo` calls
/// `name`; false for names it does not know and on other architectures.
#[cfg(target_arch = "x86_64")]
fn detected_by_cpuid(name: &str) -> bool {
    use std::arch::is_x86_feature_detected as has;
    match name {
        "pni" => has!("sse3"),
        "ssse3" => has!("ssse3"),
        "sse4_1" => has!("sse4.1"),
        "sse4_2" => has!("sse4.2"),
        "sse4a" => has!("sse4a"),
        "popcnt" => has!("popcnt"),
        "abm" => has!("lzcnt"),
        "cx16" => has!("cmpxchg16b"),
        "movbe" => has!("movbe"),
        "bmi1" => has!("bmi1"),
        "bmi2" => has!("bmi2"),
        "tbm" => has!("tbm"),
        "adx" => has!("adx"),
        "aes" => has!("aes"),
        "pclmulqdq" => has!("pclmulqdq"),
        "sha_ni" => has!("sha"),
        "rdrand" => has!("rdrand"),
        "rdseed" => has!("rdseed"),
        "xsave" => has!("xsave"),
        "xsaveopt" => has!("xsaveopt"),
        "xsavec" => has!("xsavec"),
        "xsaves" => has!("xsaves"),
        "avx" => has!("avx"),
        "avx2" => has!("avx2"),
        "fma" => has!("fma"),
        "f16c" => has!("f16c"),
        "gfni" => has!("gfni"),
        "vaes" => has!("vaes"),
        "vpclmulqdq" => has!("vpclmulqdq"),
        "avx512f" => has!("avx512f"),
        "avx512cd" => has!("avx512cd"),
        "avx512dq" => has!("avx512dq"),
        "avx512bw" => has!("avx512bw"),
        "avx512vl" => has!("avx512vl"),
        "avx512ifma" => has!("avx512ifma"),
        "avx512vbmi" => has!("avx512vbmi"),
        "avx512_vbmi2" => has!("avx512vbmi2"),
        "avx512_vnni" => has!("avx512vnni"),
        "avx512_bitalg" => has!("avx512bitalg"),
        "avx512_vpopcntdq" => has!("avx512vpopcntdq"),
        "avx512_bf16" => has!("avx512bf16"),
        "avx512_fp16" => has!("avx512fp16"),
        "avx512_vp2intersect" => has!("avx512vp2intersect"),
        _ => false,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detected_by_cpuid(_name: &str) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_processor_is_read_on_both_architectures() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n\
                   flags\t\t: fpu sse4_2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu amx_tile\n";
        let cpu = CpuFeatures::from_cpuinfo(x86);
        assert!(cpu.names().any(|n| n == "avx512_bf16"));
        assert!(
            !cpu.names().any(|n| n == "amx_tile"),
            "only the first processor"
        );
        assert!(cpu.identity().contains("vendor_id=AuthenticAMD"));
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve sve2 bf16\n\
                   CPU implementer\t: 0x41\nCPU part\t: 0xd4f\n";
        let cpu = CpuFeatures::from_cpuinfo(arm);
        assert!(cpu.has("sve2") && cpu.has("bf16"));
        assert!(cpu.identity().contains("CPU part=0xd4f"));
    }

    /// Yields `text` at most `per_read` bytes per read, counting what it served.
    struct Reads<'a> {
        text: &'a [u8],
        per_read: usize,
        served: usize,
    }

    impl Read for Reads<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let rest = &self.text[self.served..];
            let n = rest.len().min(self.per_read).min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.served += n;
            Ok(n)
        }
    }

    #[test]
    fn reading_stops_after_the_first_processor_whatever_sizes_the_reads_return() {
        let block = |n: usize| {
            format!(
                "processor\t: {n}\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon® Gold (ß {n})\n\
                 flags\t\t: fpu sse2 avx2 f{n}\nbugs\t\t: none\n\n"
            )
        };
        let many: String = (0..64).map(block).collect();
        let first_end = block(0).len();
        let real = std::fs::read(CPUINFO).expect("this machine has /proc/cpuinfo");
        let texts: [&[u8]; 4] = [
            many.as_bytes(),
            &real,
            b"flags : a b\n\n\nflags : c\n",
            b"  \n\nmodel : 1\r\nflags : x y",
        ];
        for text in texts {
            let whole = CpuFeatures::from_cpuinfo(std::str::from_utf8(text).unwrap());
            for per_read in [1, 2, 7, 100, 1000, CPUINFO_READ, 1 << 20] {
                let mut reads = Reads {
                    text,
                    per_read,
                    served: 0,
                };
                let cpu = read_first_processor(&mut reads).unwrap();
                assert_eq!(cpu, whole, "{per_read} bytes per read");
                if text == many.as_bytes() {
                    assert!(cpu.names().any(|n| n == "f0") && !cpu.names().any(|n| n == "f1"));
                    assert!(
                        reads.served <= first_end + per_read.min(CPUINFO_READ),
                        "{per_read} bytes per read: served {} of {}, the first block ends at {first_end}",
                        reads.served,
                        text.len()
                    );
                }
            }
        }
    }

    #[test]
    fn text_that_is_not_utf8_fails_only_where_it_is_read() {
        let early = b"vendor_id : \xff\nflags : a\n\nflags : b\n";
        assert!(read_first_processor(&early[..]).is_err());
        let late = b"vendor_id : x\nflags : a\n\nvendor_id : \xff\n";
        let mut reads = Reads {
            text: late,
            per_read: 1,
            served: 0,
        };
        let cpu = read_first_processor(&mut reads).unwrap();
        assert_eq!(cpu.names().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn the_running_cpu_has_the_baseline() {
        // Every x86-64 and AArch64 Linux lists these.
        let cpu = running_cpu().expect("/proc/cpuinfo lists this CPU's features");
        #[cfg(target_arch = "x86_64")]
        assert!(cpu.has("sse2"), "{:?}", cpu.names().collect::<Vec<_>>());
        #[cfg(target_arch = "aarch64")]
        assert!(cpu.has("asimd"));
    }
}
