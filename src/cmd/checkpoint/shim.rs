//! The region `capture` and `inapp` act on: a marked site, or with `--spec`
//! a routine of an unmodified application, marked by an LD_PRELOAD shim;
//! and the call of it.
use std::path::PathBuf;

/// The region and its call (capture, inapp).
#[derive(clap::Args)]
pub(super) struct RegionArgs {
    /// Region site (the string passed to tdg_region_begin); default: the first one marked.
    #[arg(long, conflicts_with = "spec")]
    site: Option<String>,
    /// Which call of the region to time (1-based).
    #[arg(long, default_value_t = 1)]
    pub(super) call: u64,
    // Last: its heading holds for the arguments after it (clap does not
    // restore the one before a flatten), which the commands set again.
    #[command(flatten)]
    shim: ShimArgs,
}

impl RegionArgs {
    /// The site (with --spec: the routine's name) and the region shim, built
    /// in `scratch` (None without --spec).
    pub(super) fn region(
        &self,
        scratch: &std::path::Path,
    ) -> anyhow::Result<(Option<String>, Option<PathBuf>)> {
        self.shim.region(self.site.clone(), scratch)
    }
}

/// The region as a routine of an unmodified application (capture, inapp).
#[derive(clap::Args)]
#[command(next_help_heading = "Region shim")]
struct ShimArgs {
    /// Spec of a routine the unmodified application calls through a shared
    /// library: an LD_PRELOAD shim makes each call of it the region (no
    /// markers, no rebuild); the site is the routine's name.
    #[arg(long, value_name = "SPEC")]
    spec: Option<PathBuf>,
    /// Include directory for the spec's include= clauses [default: the spec's directory].
    #[arg(short = 'I', value_name = "DIR", requires = "spec")]
    include: Vec<PathBuf>,
    /// C compiler for the shim [default: $CC, cc, gcc, clang].
    #[arg(long, requires = "spec")]
    cc: Option<String>,
}

impl ShimArgs {
    /// With --spec: the site (the routine's name) and the region shim,
    /// built in `scratch`. Without: `site` as given, no shim.
    pub(super) fn region(
        &self,
        site: Option<String>,
        scratch: &std::path::Path,
    ) -> anyhow::Result<(Option<String>, Option<PathBuf>)> {
        let Some(spec) = &self.spec else {
            return Ok((site, None));
        };
        let cache = toolchain::BuildCache::open_or_warn(&driver_gen::default_build_cache());
        let shim = checkpoint::region_shim_for_spec(
            spec,
            &self.include,
            self.cc.as_deref(),
            scratch,
            cache.as_ref(),
        )
        .map_err(|e| match e {
            // Printed as every spec error is: located, with a caret.
            checkpoint::RegionShimError::Spec(d) => anyhow::Error::from(d),
            other => other.into(),
        })?;
        Ok((Some(shim.site), Some(shim.shared_object)))
    }
}
