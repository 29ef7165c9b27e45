//! Profiling routines inside host applications.
