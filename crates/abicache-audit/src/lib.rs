//! abicache-audit (in progress).
