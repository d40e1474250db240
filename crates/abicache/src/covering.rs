//! The covering lookup: when nobody chose a CUDA extension's arch list
//! (no `cuda_archs` in the spec or the environment, no
//! `TORCH_CUDA_ARCH_LIST`, no arch flag in its nvcc flags), the list is the
//! visible GPUs' capabilities, so two machines with different GPUs get
//! different keys for the same code. A lookup that misses on its exact key
//! then goes on to the entries of the same extension and environment that
//! differ only in their arch list (the same arch-free key,
//! [`abicache_store::arch_free_key`]) and serves one whose device images
//! every visible GPU can run.
//!
//! An explicit arch list stays exact: [`CoveringAsk::of`] is `None` then.
//!
//! Among the entries that cover, the choice is deterministic
//! ([`rank`]): SASS for every GPU before any PTX the driver must JIT, then
//! fewer GPUs left to the JIT, then fewer images, then the key's order.

use abicache_fatbin::{best_image, Capability, DeviceImage, Runs};
use abicache_store::{ArchIndexed, Hit, HitRecipe, Manifest, Store};
use serde::Serialize;

use crate::prepared::Prepared;

/// What a covering lookup looks for: the arch-free key of the request and
/// the GPUs an entry must serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoveringAsk {
    /// The request's key without its arch list.
    pub arch_free: String,
    /// The visible GPUs' capabilities (the arch list they gave).
    pub gpus: Vec<Capability>,
}

impl CoveringAsk {
    /// The covering lookup `prepared` may take: `None` unless its arch list
    /// came from the visible GPUs ([`Prepared::archs_from_gpus`]) and
    /// every entry of that list is a plain capability.
    pub fn of(prepared: &Prepared) -> Option<CoveringAsk> {
        if !prepared.archs_from_gpus {
            return None;
        }
        Self::from_parts(
            &prepared.keyed.payload.text(),
            prepared.env.cuda_archs.as_deref()?,
        )
    }

    /// The covering lookup of a key whose payload is `payload` and whose
    /// arch list `list` came from the visible GPUs (the caller has checked
    /// that it did); `None` when the list is not plain capabilities or the
    /// payload has no arch list.
    pub fn from_parts(payload: &str, list: &str) -> Option<CoveringAsk> {
        let gpus = list
            .split([' ', ';'])
            .filter(|t| !t.is_empty())
            .map(str::parse)
            .collect::<Result<Vec<Capability>, _>>()
            .ok()
            .filter(|g| !g.is_empty())?;
        let arch_free = abicache_store::arch_free_key(payload)?;
        Some(CoveringAsk { arch_free, gpus })
    }
}

/// An entry that covers the GPUs, and how: what `abicache explain` and a
/// build's JSON (`covered_by`) show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// The entry's key.
    pub key: String,
    /// Its device images.
    pub images: Vec<String>,
    /// For each visible GPU, the image it runs.
    pub gpus: Vec<GpuServed>,
}

/// One GPU and the image of a covering entry it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuServed {
    /// Its compute capability (`9.0`).
    pub capability: String,
    /// The image it runs (`sm_90`, `compute_80`).
    pub image: String,
    /// True when the image is PTX the driver JIT-compiles at load.
    pub jit: bool,
}

impl Coverage {
    /// One sentence: which entry covers the GPUs and why.
    pub fn describe(&self) -> String {
        let each: Vec<String> = self
            .gpus
            .iter()
            .map(|g| {
                let how = if g.jit {
                    "PTX, JIT-compiled by the driver"
                } else {
                    "SASS"
                };
                format!("GPU {} runs its {} ({how})", g.capability, g.image)
            })
            .collect();
        format!(
            "entry `{}` ({}) covers the visible GPUs: {}",
            self.key,
            self.images.join(" "),
            each.join("; ")
        )
    }

    /// How many GPUs the driver must JIT for.
    fn jit_gpus(&self) -> usize {
        self.gpus.iter().filter(|g| g.jit).count()
    }
}

/// The coverage of an entry with `images` for `gpus`, or `None` when one
/// GPU can run none of them (or an image is unreadable).
pub fn coverage(candidate: &ArchIndexed, gpus: &[Capability]) -> Option<Coverage> {
    let images = candidate
        .images
        .iter()
        .map(|i| i.parse())
        .collect::<Result<Vec<DeviceImage>, _>>()
        .ok()?;
    let served = gpus
        .iter()
        .map(|&gpu| match best_image(&images, gpu) {
            Runs::Sass(image) => Some((gpu, image, false)),
            Runs::PtxJit(image) => Some((gpu, image, true)),
            Runs::No => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Coverage {
        key: candidate.key.clone(),
        images: candidate.images.clone(),
        gpus: served
            .into_iter()
            .map(|(gpu, image, jit)| GpuServed {
                capability: gpu.to_string(),
                image: image.to_string(),
                jit,
            })
            .collect(),
    })
}

/// How the verified entry `hit` covers the GPUs of `ask`, judged from its
/// own manifest (not the index that named it): it must have been audited
/// (an entry from before audits is audited against its own key only, on an
/// exact hit), its payload must have the request's arch-free key, and its
/// images must serve every GPU. `None` when it does not: the index line was
/// stale, and that is a miss.
pub fn covers(hit: &Hit, ask: &CoveringAsk) -> Option<Coverage> {
    let manifest = &hit.manifest;
    if manifest.audit.is_none()
        || abicache_store::arch_free_key(&manifest.payload).as_deref() != Some(&ask.arch_free)
    {
        return None;
    }
    let candidate = ArchIndexed {
        key: manifest.key.clone(),
        images: abicache_store::entry_images(manifest),
    };
    coverage(&candidate, &ask.gpus)
}

/// The warm-path description ([`HitRecipe`]) of the best local entry that
/// covers `ask`'s GPUs, judged from its own manifest as [`covers`] does;
/// `None` when none has a recipe (see [`abicache_store::Store::hit_recipe`]).
pub(crate) fn covering_recipe(store: &Store, ask: &CoveringAsk) -> Option<HitRecipe> {
    let candidates = store.arch_free_entries(&ask.arch_free);
    rank(&candidates, &ask.gpus).into_iter().find_map(|ranked| {
        let recipe = store.hit_recipe(&ranked.key)?;
        let manifest = Manifest::read(&recipe.dir.join(abicache_store::MANIFEST_FILE)).ok()?;
        let own = abicache_store::arch_free_key(&manifest.payload)? == ask.arch_free
            && coverage(
                &ArchIndexed {
                    key: manifest.key.clone(),
                    images: abicache_store::entry_images(&manifest),
                },
                &ask.gpus,
            )
            .is_some();
        own.then_some(recipe)
    })
}

/// The candidates that cover every GPU, best first: fewest GPUs left to the
/// PTX JIT (SASS preferred), then fewest images, then by key.
pub fn rank(candidates: &[ArchIndexed], gpus: &[Capability]) -> Vec<Coverage> {
    let mut covering: Vec<Coverage> = candidates
        .iter()
        .filter_map(|c| coverage(c, gpus))
        .collect();
    covering.sort_by(|a, b| {
        (a.jit_gpus(), a.images.len(), &a.key).cmp(&(b.jit_gpus(), b.images.len(), &b.key))
    });
    covering
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, images: &str) -> ArchIndexed {
        ArchIndexed {
            key: key.repeat(32),
            images: images.split_whitespace().map(str::to_owned).collect(),
        }
    }

    fn gpus(list: &str) -> Vec<Capability> {
        list.split_whitespace()
            .map(|c| c.parse().unwrap())
            .collect()
    }

    #[test]
    fn sass_is_preferred_then_fewer_images_then_the_key() {
        let candidates = [
            entry("a", "compute_80"),
            entry("b", "sm_80 sm_90 sm_100"),
            entry("c", "sm_80 sm_90"),
            entry("d", "sm_90 sm_80"),
            entry("e", "sm_86"),
        ];
        let ranked: Vec<String> = rank(&candidates, &gpus("9.0"))
            .into_iter()
            .map(|c| c.key[..1].to_owned())
            .collect();
        // `e` (sm_86) cannot run on 9.0; the PTX-only `a` comes last.
        assert_eq!(ranked, ["c", "d", "b", "a"]);
    }

    #[test]
    fn an_entry_covers_by_its_own_manifest_never_by_the_index_alone() {
        let payload = "format=1\nname=ext\ncuda_archs=-gencode=arch=compute_80,code=sm_80 \
                       -gencode=arch=compute_90,code=sm_90\nnvcc=13.0\n";
        let mut manifest = abicache_store::Manifest::new("c".repeat(32), "ext", payload);
        manifest.audit = Some(serde_json::json!({}));
        let hit = |manifest: abicache_store::Manifest| Hit {
            dir: "/c/v1/entries/c".into(),
            library: "/c/v1/entries/c/libext.so".into(),
            manifest,
            rehashed: false,
            stamp: None,
        };
        // A 9.0 machine's own payload: the same but for its arch list.
        let nine =
            "format=1\nname=ext\ncuda_archs=-gencode=arch=compute_90,code=sm_90\nnvcc=13.0\n";
        let ask = CoveringAsk::from_parts(nine, "9.0").unwrap();
        assert_eq!(
            covers(&hit(manifest.clone()), &ask).unwrap().gpus[0].image,
            "sm_90"
        );
        // Not audited, another extension's payload, or images that do not serve: a miss.
        let unaudited = abicache_store::Manifest {
            audit: None,
            ..manifest.clone()
        };
        assert_eq!(covers(&hit(unaudited), &ask), None);
        let other = abicache_store::Manifest {
            payload: payload.replace("name=ext", "name=other"),
            ..manifest.clone()
        };
        assert_eq!(covers(&hit(other), &ask), None);
        let ada = CoveringAsk {
            gpus: vec!["10.0".parse().unwrap()],
            ..ask
        };
        assert_eq!(covers(&hit(manifest), &ada), None);
    }

    #[test]
    fn every_gpu_must_be_served_and_the_reason_names_each() {
        let both = entry("c", "sm_80 sm_90");
        let covered = coverage(&both, &gpus("8.6 9.0")).unwrap();
        assert_eq!(
            covered.describe(),
            format!(
                "entry `{}` (sm_80 sm_90) covers the visible GPUs: GPU 8.6 runs its sm_80 (SASS); \
                 GPU 9.0 runs its sm_90 (SASS)",
                "c".repeat(32)
            )
        );
        assert_eq!(coverage(&both, &gpus("9.0 10.0")), None);
        assert_eq!(
            coverage(&entry("x", "sm_80 not_an_image"), &gpus("8.0")),
            None
        );
        let jit = coverage(&entry("p", "compute_90"), &gpus("10.0")).unwrap();
        assert!(jit.gpus[0].jit, "{jit:?}");
    }
}
