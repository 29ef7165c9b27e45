//! The `.spec` language.
pub mod ast;
