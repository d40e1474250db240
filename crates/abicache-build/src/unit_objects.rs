//! The object-cache names of a plan's units, without building: what a remote
//! cache needs to fetch objects before a build and upload them after it.

use std::path::Path;

use crate::compile::object_key;
use crate::error::BuildError;
use crate::flags::{compile_command, BuildPlan};
use crate::toolchain::Toolchain;

/// One unit's object as [`crate::build`] names it in the object cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitObject {
    /// The unit's display path (as in [`crate::BuildReport::units_compiled`]).
    pub display: String,
    /// The object's file name in the object cache, `<unit key>.o`: the same
    /// name [`crate::build`] reads and writes for this unit.
    pub name: String,
}

/// The objects of `plan`'s units, in plan order.
pub fn unit_objects(
    plan: &BuildPlan,
    toolchain: &Toolchain,
) -> Result<Vec<UnitObject>, BuildError> {
    plan.sources
        .iter()
        .map(|unit| {
            let command = compile_command(plan, toolchain, unit, Path::new(""))?;
            Ok(UnitObject {
                display: unit.display(),
                name: format!("{}.o", object_key(plan, toolchain, unit, &command)),
            })
        })
        .collect()
}
