//! abicache (in progress).
