//! abicache-build (in progress).
