//! Deploying the tuned routine into the unmodified program: the candidate
//! compiled once per chosen configuration, each copy's definition renamed
//! and every other global symbol of it made local (two copies of the same
//! candidate must not collide), and a dispatcher in front of them that
//! routes each call by its context. Two forms of the same objects:
//!
//! - `libtdg-autotune.so`, for `LD_PRELOAD` (a routine in a shared
//!   library: the dispatcher finds the original definition on its first
//!   call, as the profiling shim does);
//! - `libtdg-autotune-wrap.a`, for a static link with `-Wl,--wrap=SYMBOL`
//!   (the original is `__real_SYMBOL`).

use instrument::interpose::{
    self, Dispatch, DispatchRoute, DispatchVariant, InterposeError, InterposerKind,
};
use spec_lang::ast::{Spec, CODE_PAGE};
use std::path::{Path, PathBuf};
use std::process::Command;
use toolchain::{CCompiler, CompileJob, ToolchainError};

/// The deployment directory's marker: tdg replaces what is in it only
/// when it made it.
pub const DEPLOY_DIR: fsguard::Purpose = fsguard::Purpose {
    what: "autotune deployment",
    option: "-o",
};

/// The preload library's name in a deployment directory.
pub const PRELOAD_LIBRARY: &str = "libtdg-autotune.so";
/// The static form's archive.
pub const WRAP_ARCHIVE: &str = "libtdg-autotune-wrap.a";

/// The drivers' code placement section, reused as it is.
const CODE_PLACEMENT_SOURCE: &str = include_str!("../../templates/tdg_code_place.S");

/// The candidate at one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantBuild {
    /// The configuration in words ("NB=64 MU=4").
    pub label: String,
    /// `-D NAME=VALUE` of the configuration.
    pub defines: Vec<(String, String)>,
    /// Bytes past a page where its code starts: where the drivers timed
    /// it (the configuration's code offset, else the spec's, else 0).
    pub code_offset: u32,
}

/// Everything a deployment is built from.
#[derive(Debug, Clone)]
pub struct DeployRequest<'a> {
    pub spec: &'a Spec,
    /// For the spec's `include=` lines.
    pub include_dirs: Vec<PathBuf>,
    pub implementation: PathBuf,
    /// More C files linked into every variant.
    pub extra: Vec<PathBuf>,
    pub cc: Option<String>,
    /// The candidate's flags (the search's `--cflags`).
    pub cflags: Vec<String>,
    pub variants: Vec<VariantBuild>,
    pub routes: Vec<DispatchRoute>,
}

/// What was built.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployed {
    pub preload_library: PathBuf,
    pub wrap_archive: PathBuf,
    /// The routine's link name (for `-Wl,--wrap=`).
    pub symbol: String,
    /// The dispatcher's C, kept for reading.
    pub dispatcher_source: PathBuf,
    /// Where each variant's code starts in the preload library, against
    /// where the drivers timed it.
    pub placements: Vec<Placement>,
}

/// A variant's code placement in the preload library. The drivers time a
/// candidate with its code at the spec's `code_offset` past a page (0 by
/// default); where a hot loop falls against 64-byte fetch blocks can move a
/// kernel's speed by a quarter, so the deployment puts each variant's code
/// at that same offset, or says where it could not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub label: String,
    /// The offset the drivers timed the candidate at.
    pub timed_at: u32,
    /// Where the variant's code starts in the library (its address modulo
    /// 4096); `None` when the library does not list it.
    pub placed_at: Option<u32>,
}

impl Placement {
    pub fn as_timed(&self) -> bool {
        self.placed_at == Some(self.timed_at)
    }
}

impl From<ToolchainError> for DeployError {
    fn from(e: ToolchainError) -> Self {
        DeployError::Toolchain(Box::new(e))
    }
}

impl From<InterposeError> for DeployError {
    fn from(e: InterposeError) -> Self {
        DeployError::Dispatcher(Box::new(e))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("the candidate at {label} does not compile for deployment: {source}")]
    Variant {
        label: String,
        #[source]
        source: Box<ToolchainError>,
    },
    #[error("{tool} failed on the candidate at {label}: {stderr}")]
    Binutils {
        tool: &'static str,
        label: String,
        stderr: String,
    },
    #[error("cannot run {tool}: {source}; install binutils")]
    NoBinutils {
        tool: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the candidate at {label} does not define `{symbol}`; --impl must define the routine the spec names")]
    NoDefinition { label: String, symbol: String },
    #[error(transparent)]
    Dispatcher(Box<InterposeError>),
    #[error(transparent)]
    Toolchain(Box<ToolchainError>),
    #[error("{0}")]
    Files(#[from] std::io::Error),
}

/// Builds the deployment of `request` into `dir` (a directory tdg owns,
/// [`DEPLOY_DIR`]): the two libraries, replaced atomically (a program
/// running with the old one keeps its mapping), and the sources in
/// `dir/src`.
pub fn deploy(dir: &Path, request: &DeployRequest) -> Result<Deployed, DeployError> {
    let dir = fsguard::OwnedDir::open(dir, DEPLOY_DIR)?;
    let cc = CCompiler::find(request.cc.as_deref())?;
    let symbol = interpose::symbol_name(request.spec);
    let build = toolchain::scratch_dir("tdg-deploy")?;
    let work = build.path();
    fsguard::write_atomic(
        &work.join("tdg_resolve.h"),
        instrument::runtime::RESOLVE_HEADER.as_bytes(),
    )?;
    fsguard::write_atomic(
        &work.join("tdg_resolve.c"),
        instrument::runtime::RESOLVE_SOURCE.as_bytes(),
    )?;
    let mut objects = Vec::new();
    for (index, variant) in request.variants.iter().enumerate() {
        objects.push(build_variant(&cc, request, work, index, variant, &symbol)?);
    }
    let src_dir = fsguard::OwnedDir::open(&dir.path().join("src"), DEPLOY_DIR)?;
    let sources = write_dispatchers(request, src_dir.path(), &symbol)?;
    let mut includes = vec![work.to_path_buf()];
    includes.extend(request.include_dirs.iter().cloned());
    let library_tmp =
        link_preload_library(&cc, request, work, &sources.preload, &objects, &includes)?;
    let archive_tmp = archive_wrap_form(&cc, work, &sources.wrap, &objects, includes)?;
    for s in std::iter::once(&request.implementation).chain(&request.extra) {
        if let Some(name) = s.file_name() {
            fsguard::copy_atomic(s, &src_dir.path().join(name))?;
        }
    }
    let placements = placements_in(&library_tmp, request)?;
    let preload_library = dir.path().join(PRELOAD_LIBRARY);
    let wrap_archive = dir.path().join(WRAP_ARCHIVE);
    fsguard::copy_atomic(&library_tmp, &preload_library)?;
    fsguard::copy_atomic(&archive_tmp, &wrap_archive)?;
    Ok(Deployed {
        preload_library,
        wrap_archive,
        symbol,
        dispatcher_source: sources.preload,
        placements,
    })
}

/// The dispatcher's C in its two forms.
struct DispatcherSources {
    preload: PathBuf,
    wrap: PathBuf,
}

/// The dispatcher in front of `request`'s variants, written in `src_dir`
/// in both forms, each from one source compiled as the profiling shims are.
fn write_dispatchers(
    request: &DeployRequest,
    src_dir: &Path,
    symbol: &str,
) -> Result<DispatcherSources, DeployError> {
    let spec = request.spec;
    let dispatch = Dispatch {
        variants: request
            .variants
            .iter()
            .enumerate()
            .map(|(i, v)| DispatchVariant {
                symbol: interpose::variant_symbol(spec, i),
                label: v.label.clone(),
            })
            .collect(),
        routes: request.routes.clone(),
    };
    let preload = src_dir.join(format!("tdg_autotune_{symbol}.c"));
    fsguard::write_atomic(
        &preload,
        interpose::generate_dispatcher(spec, InterposerKind::Preload, &dispatch)?.as_bytes(),
    )?;
    let wrap = src_dir.join(format!("tdg_autotune_wrap_{symbol}.c"));
    fsguard::write_atomic(
        &wrap,
        interpose::generate_dispatcher(spec, InterposerKind::Wrap, &dispatch)?.as_bytes(),
    )?;
    Ok(DispatcherSources { preload, wrap })
}

/// The preload library, in `work`: the dispatcher, the resolver of the
/// original and the variants' objects.
fn link_preload_library(
    cc: &CCompiler,
    request: &DeployRequest,
    work: &Path,
    dispatcher: &Path,
    objects: &[PathBuf],
    includes: &[PathBuf],
) -> Result<PathBuf, DeployError> {
    let library = work.join(PRELOAD_LIBRARY);
    let mut sources = vec![dispatcher.to_path_buf(), work.join("tdg_resolve.c")];
    sources.extend(objects.iter().cloned());
    cc.compile(&CompileJob {
        sources,
        output: library.clone(),
        cflags: instrument::runtime::cflags()
            .into_iter()
            .chain(["-shared".to_string()])
            // What the candidate needs at link time too (-fopenmp).
            .chain(link_relevant(&request.cflags))
            .collect(),
        include_dirs: includes.to_vec(),
        link_args: vec!["-ldl".into(), "-lm".into()],
        ..Default::default()
    })?;
    Ok(library)
}

/// The static form's archive, in `work`: the `--wrap` dispatcher's object
/// and the variants' objects.
fn archive_wrap_form(
    cc: &CCompiler,
    work: &Path,
    dispatcher: &Path,
    objects: &[PathBuf],
    includes: Vec<PathBuf>,
) -> Result<PathBuf, DeployError> {
    let wrap_object = work.join("dispatch_wrap.o");
    cc.compile(&CompileJob {
        sources: vec![dispatcher.to_path_buf()],
        output: wrap_object.clone(),
        cflags: instrument::runtime::cflags(),
        include_dirs: includes,
        object_only: true,
        ..Default::default()
    })?;
    let archive = work.join(WRAP_ARCHIVE);
    let mut ar = Command::new("ar");
    ar.arg("rcs").arg(&archive).arg(&wrap_object).args(objects);
    binutils(&mut ar, "ar", "the static archive")?;
    Ok(archive)
}

/// Where each variant's code starts in `library`, against where the
/// drivers timed it.
fn placements_in(library: &Path, request: &DeployRequest) -> Result<Vec<Placement>, DeployError> {
    request
        .variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let address =
                toolchain::symbol_address(library, &interpose::variant_symbol(request.spec, i))?;
            Ok(Placement {
                label: v.label.clone(),
                timed_at: v.code_offset,
                placed_at: address.map(|a| (a % u64::from(CODE_PAGE)) as u32),
            })
        })
        .collect()
}

/// The candidate compiled at `variant` into one relocatable object whose
/// only global definition is the renamed routine.
fn build_variant(
    cc: &CCompiler,
    request: &DeployRequest,
    work: &Path,
    index: usize,
    variant: &VariantBuild,
    symbol: &str,
) -> Result<PathBuf, DeployError> {
    let renamed = interpose::variant_symbol(request.spec, index);
    let mut parts = Vec::new();
    for (i, source) in std::iter::once(&request.implementation)
        .chain(&request.extra)
        .enumerate()
    {
        let object = work.join(format!("v{index}_{i}.o"));
        cc.compile(&CompileJob {
            sources: vec![source.clone()],
            output: object.clone(),
            cflags: request
                .cflags
                .iter()
                .cloned()
                .chain(["-fPIC".to_string()])
                .collect(),
            defines: variant
                .defines
                .iter()
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect(),
            include_dirs: source
                .parent()
                .map(|p| vec![p.to_path_buf()])
                .into_iter()
                .flatten()
                .chain(request.include_dirs.iter().cloned())
                .collect(),
            object_only: true,
            ..Default::default()
        })
        .map_err(|source| DeployError::Variant {
            label: variant.label.clone(),
            source: Box::new(source),
        })?;
        parts.push(object);
    }
    let combined = work.join(format!("v{index}.o"));
    let mut ld = Command::new("ld");
    ld.arg("-r").arg("-o").arg(&combined).args(&parts);
    binutils(&mut ld, "ld", &variant.label)?;
    if !defines_symbol(&combined, symbol)? {
        return Err(DeployError::NoDefinition {
            label: variant.label.clone(),
            symbol: symbol.to_string(),
        });
    }
    let mut objcopy = Command::new("objcopy");
    objcopy
        .arg(format!("--redefine-sym={symbol}={renamed}"))
        .arg(format!("--keep-global-symbol={renamed}"))
        .arg(&combined);
    binutils(&mut objcopy, "objcopy", &variant.label)?;
    place_variant(cc, work, index, &combined, &renamed, variant)
}

/// The variant's object behind a page-aligned padding section that puts
/// `renamed` at the offset the drivers timed the candidate at: in the
/// library the object's code then starts on a page (the padding section's
/// alignment), the routine that many bytes past it, as
/// templates/tdg_code_place.S places it in every driver. Unchanged when the
/// routine is not in the object's `.text` (the compiler put it in a section
/// of its own): [`Placement`] then says where it landed.
fn place_variant(
    cc: &CCompiler,
    work: &Path,
    index: usize,
    combined: &Path,
    renamed: &str,
    variant: &VariantBuild,
) -> Result<PathBuf, DeployError> {
    // The drivers' own rule: the padding that puts the routine there, from
    // its offset in the object's .text.
    let Some(pad) = driver_gen::predicted_padding(combined, renamed, variant.code_offset) else {
        return Ok(combined.to_path_buf());
    };
    let source = work.join("tdg_code_place.S");
    fsguard::write_atomic(&source, CODE_PLACEMENT_SOURCE.as_bytes())?;
    let padding = work.join(format!("v{index}_place.o"));
    cc.compile(&CompileJob {
        sources: vec![source],
        output: padding.clone(),
        defines: vec![("TDG_CODE_OFFSET".into(), Some(pad.to_string()))],
        object_only: true,
        ..Default::default()
    })?;
    let placed = work.join(format!("v{index}_placed.o"));
    let mut ld = Command::new("ld");
    ld.arg("-r")
        .arg("-o")
        .arg(&placed)
        .arg(&padding)
        .arg(combined);
    binutils(&mut ld, "ld", &variant.label)?;
    Ok(placed)
}

/// Whether `object` defines `symbol` globally.
fn defines_symbol(object: &Path, symbol: &str) -> Result<bool, DeployError> {
    Ok(toolchain::symbol_address(object, symbol)?.is_some())
}

fn binutils(cmd: &mut Command, tool: &'static str, label: &str) -> Result<(), DeployError> {
    let out = cmd
        .output()
        .map_err(|source| DeployError::NoBinutils { tool, source })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(DeployError::Binutils {
            tool,
            label: label.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The candidate's flags that the link of a shared object needs as well.
fn link_relevant(cflags: &[String]) -> impl Iterator<Item = String> + '_ {
    cflags
        .iter()
        .filter(|f| {
            f.starts_with("-fopenmp")
                || f.starts_with("-l")
                || f.starts_with("-L")
                || *f == "-pthread"
        })
        .cloned()
}
