//! CUDA's compatibility rule, as a table: which GPU runs which image.

use abicache_fatbin::{best_image, runs_on, Capability, DeviceImage, Runs};

fn image(text: &str) -> DeviceImage {
    text.parse().unwrap()
}

fn gpu(text: &str) -> Capability {
    text.parse().unwrap()
}

/// (image, GPUs that run it, GPUs that do not).
const TABLE: &[(&str, &[&str], &[&str])] = &[
    // Plain SASS: the same major, minor at least the image's.
    (
        "sm_80",
        &["8.0", "8.6", "8.9"],
        &["7.5", "9.0", "10.0", "12.0"],
    ),
    ("sm_86", &["8.6", "8.7", "8.9"], &["8.0", "9.0"]),
    ("sm_90", &["9.0"], &["8.9", "10.0", "12.0"]),
    ("sm_100", &["10.0", "10.3"], &["9.0", "11.0", "12.0"]),
    ("sm_120", &["12.0", "12.1"], &["10.0", "13.0"]),
    // Arch-specific: exactly its capability.
    ("sm_90a", &["9.0"], &["8.9", "9.1", "10.0", "12.0"]),
    ("sm_100a", &["10.0"], &["10.3", "9.0", "12.0"]),
    ("compute_90a", &["9.0"], &["10.0", "12.0", "8.6"]),
    // Family-specific: its family, the same major with minor at least its own.
    ("sm_100f", &["10.0", "10.3"], &["9.0", "11.0", "12.0"]),
    ("sm_103f", &["10.3"], &["10.0", "12.0"]),
    ("sm_120f", &["12.0", "12.1"], &["10.0", "13.0"]),
    ("compute_100f", &["10.0", "10.3"], &["9.0", "12.0"]),
    // Plain PTX: JIT-compiled for any capability at least its own.
    (
        "compute_90",
        &["9.0", "10.0", "10.3", "12.0", "13.0"],
        &["8.6", "8.9"],
    ),
    ("compute_80", &["8.0", "8.6", "9.0", "12.0"], &["7.5"]),
];

#[test]
fn every_image_runs_on_exactly_the_gpus_of_its_row() {
    let mut checked = 0;
    for (text, runs, does_not) in TABLE {
        let img = image(text);
        let want = match img {
            DeviceImage::Sass(_) => Runs::Sass(img),
            DeviceImage::Ptx(_) => Runs::PtxJit(img),
        };
        for on in *runs {
            assert_eq!(runs_on(&img, gpu(on)), want, "{text} should run on {on}");
            checked += 1;
        }
        for on in *does_not {
            assert_eq!(
                runs_on(&img, gpu(on)),
                Runs::No,
                "{text} should not run on {on}"
            );
            checked += 1;
        }
    }
    assert!(checked > 60, "{checked}");
}

/// (images of a library, GPU, what it runs).
const BEST: &[(&[&str], &str, Option<&str>)] = &[
    // SASS preferred over PTX, even newer PTX.
    (&["sm_80", "compute_90"], "9.0", Some("compute_90")),
    (&["sm_90", "compute_90"], "9.0", Some("sm_90")),
    (&["sm_80", "sm_86", "compute_80"], "8.6", Some("sm_86")),
    (&["sm_80", "sm_86", "compute_80"], "8.9", Some("sm_86")),
    (&["sm_80", "sm_86"], "8.0", Some("sm_80")),
    (&["sm_80", "sm_86"], "9.0", None),
    (
        &["sm_80", "compute_80", "compute_90"],
        "12.0",
        Some("compute_90"),
    ),
    // Arch-specific beside plain: the more specific SASS, deterministically.
    (&["sm_90", "sm_90a"], "9.0", Some("sm_90a")),
    (&["sm_90a", "compute_90a"], "10.0", None),
    (&["sm_90a", "compute_90"], "10.0", Some("compute_90")),
    (&["sm_100f", "compute_100f"], "10.3", Some("sm_100f")),
    (&["sm_100f", "compute_100f"], "12.0", None),
    (&[], "9.0", None),
];

#[test]
fn best_image_prefers_sass_and_does_not_depend_on_order() {
    for (images, on, want) in BEST {
        let mut images: Vec<DeviceImage> = images.iter().map(|t| image(t)).collect();
        let want = match want.map(image) {
            Some(img @ DeviceImage::Sass(_)) => Runs::Sass(img),
            Some(img @ DeviceImage::Ptx(_)) => Runs::PtxJit(img),
            None => Runs::No,
        };
        assert_eq!(best_image(&images, gpu(on)), want, "{images:?} on {on}");
        images.reverse();
        images.extend(images.clone());
        assert_eq!(
            best_image(&images, gpu(on)),
            want,
            "{images:?} on {on}, reversed and doubled"
        );
    }
}
