//! abicache-scan (in progress).
