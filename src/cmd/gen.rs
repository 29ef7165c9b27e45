// PLACEHOLDER: owned by the helper building this command; replaced before landing.
use super::CmdResult;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    anyhow::bail!("`tdg gen` is not built yet")
}
