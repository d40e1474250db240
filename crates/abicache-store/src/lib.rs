//! abicache-store (in progress).
