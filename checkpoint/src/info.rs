//! `tdg checkpoint info`: what an image holds and what its restored copies
//! get in place of each file the application had open.

use crate::manifest::Manifest;
use crate::substitution::{substitutions, Substitution};
use std::path::{Path, PathBuf};

/// An image described.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImageInfo {
    pub image: PathBuf,
    pub manifest: Manifest,
    /// Every descriptor and shared file mapping, with what copies get.
    pub substitutions: Vec<Substitution>,
}

/// Reads `image`'s manifest (nothing is restored or checked beyond it).
pub fn image_info(image: &Path) -> crate::Result<ImageInfo> {
    let manifest = Manifest::read(image)?;
    Ok(ImageInfo {
        image: image.to_path_buf(),
        substitutions: substitutions(&manifest.capture),
        manifest,
    })
}

impl ImageInfo {
    pub fn render_text(&self) -> String {
        let m = &self.manifest;
        let what = match (&m.site, m.call, m.delay) {
            (Some(site), Some(call), Some(0)) => format!("region {site}, call {call}, immediate"),
            (Some(site), Some(call), Some(d)) => {
                format!("region {site}, call {call}, delayed by {d} call(s)")
            }
            _ => "region between tdg_enter_checkpoint and tdg_stop_checkpoint".into(),
        };
        let mut t = format!(
            "image {} ({what}; {})\n\
             captured from {} (sha256 {}), `{}` in {}; CRIU {}, tdg {}\n",
            self.image.display(),
            stats::bytes(m.image_bytes()),
            m.exe.display(),
            m.exe_sha256.chars().take(12).collect::<String>(),
            m.command.join(" "),
            m.cwd.display(),
            m.criu_version,
            m.tdg_version,
        );
        if let Some(c) = m.captured_call {
            t += &format!(
                "the application's own run of the call: {} wall, {} CPU\n",
                stats::ns(c.ns as f64),
                stats::ns(c.cpu_ns as f64)
            );
        }
        t += "what restored copies get in place of the application's files (! changes what the region may see):\n";
        let width = self
            .substitutions
            .iter()
            .map(|s| s.what().chars().count())
            .max()
            .unwrap_or(0);
        for s in &self.substitutions {
            t += &format!(
                "{} {:<width$}  {}\n",
                if s.treatment.warns() { "!" } else { " " },
                s.what(),
                s.says
            );
        }
        t
    }
}
