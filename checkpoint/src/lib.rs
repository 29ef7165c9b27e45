//! Checkpoint/restore timing with CRIU.
