//! How images and capabilities are written, parsed, ordered and serialized.

use abicache_fatbin::{ArchVariant, Capability, DeviceImage, Error, SmArch};

#[test]
fn images_round_trip_through_their_nvcc_names() {
    for text in [
        "sm_80",
        "sm_86",
        "sm_90",
        "sm_90a",
        "sm_100",
        "sm_100a",
        "sm_100f",
        "sm_120",
        "sm_121f",
        "compute_75",
        "compute_90",
        "compute_90a",
        "compute_100f",
        "compute_120",
    ] {
        let image: DeviceImage = text.parse().unwrap();
        assert_eq!(image.to_string(), text);
        let json = serde_json::to_string(&image).unwrap();
        assert_eq!(json, format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<DeviceImage>(&json).unwrap(), image);
    }
    assert_eq!(
        "sm_100f".parse::<DeviceImage>().unwrap(),
        DeviceImage::Sass(SmArch {
            major: 10,
            minor: 0,
            variant: ArchVariant::FamilySpecific
        })
    );
    assert_eq!(
        "compute_90a".parse::<DeviceImage>().unwrap(),
        DeviceImage::Ptx(SmArch {
            major: 9,
            minor: 0,
            variant: ArchVariant::ArchSpecific
        })
    );
}

#[test]
fn malformed_names_are_errors_naming_the_text() {
    for text in [
        "",
        "sm_",
        "sm_9",
        "sm_90b",
        "sm_90af",
        "compute_x0",
        "lto_90",
        "90",
        "sm_12345",
        "SM_90",
    ] {
        let error = text.parse::<DeviceImage>().unwrap_err();
        assert!(matches!(error, Error::BadArch { .. }), "{error:?}");
        assert!(error.to_string().contains(&format!("`{text}`")), "{error}");
    }
    assert!(serde_json::from_str::<DeviceImage>("\"sm_9x\"").is_err());
    for text in ["9", "9.", ".0", "9.0.1", "a.b", "", "1234.0"] {
        let error = text.parse::<Capability>().unwrap_err();
        assert!(error.to_string().contains(&format!("`{text}`")), "{error}");
    }
}

#[test]
fn capabilities_read_and_write_as_nvidia_smi_prints_them() {
    let cap: Capability = "9.0".parse().unwrap();
    assert_eq!(cap, Capability { major: 9, minor: 0 });
    assert_eq!(" 12.0\n".parse::<Capability>().unwrap().to_string(), "12.0");
    assert_eq!(serde_json::to_string(&cap).unwrap(), "\"9.0\"");
    assert_eq!(
        serde_json::from_str::<Capability>("\"8.6\"").unwrap(),
        Capability { major: 8, minor: 6 }
    );
    assert!("8.6".parse::<Capability>().unwrap() < "10.0".parse().unwrap());
}

#[test]
fn images_sort_by_architecture_then_sass_before_ptx() {
    let mut images: Vec<DeviceImage> = [
        "compute_120",
        "sm_100f",
        "compute_90",
        "sm_90a",
        "sm_80",
        "sm_90",
        "compute_80",
        "sm_120",
    ]
    .iter()
    .map(|t| t.parse().unwrap())
    .collect();
    images.sort();
    let sorted: Vec<String> = images.iter().map(ToString::to_string).collect();
    assert_eq!(
        sorted,
        [
            "sm_80",
            "compute_80",
            "sm_90",
            "compute_90",
            "sm_90a",
            "sm_100f",
            "sm_120",
            "compute_120"
        ]
    );
}
