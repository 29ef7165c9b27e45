//! Timing-driver generation.
