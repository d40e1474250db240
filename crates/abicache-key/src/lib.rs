//! abicache-key (in progress).
