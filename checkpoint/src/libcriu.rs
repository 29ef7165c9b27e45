//! A thin binding to libcriu, for one purpose: checking, the way the
//! application's self-dump will use them, that the libcriu tdg hands the
//! host library drives the criu binary tdg found (libcriu forwards every
//! request over RPC to `criu swrk`, so a library and a binary that do not
//! speak to each other break the capture inside the application, where the
//! cause is hard to see).
//!
//! Restores stay on the CLI (`criu restore` in a fresh PID namespace):
//! libcriu's `criu_restore_child` would make tdg's own process the restored
//! copy's parent outside any PID namespace, so the copy's original PID could
//! collide, and the copy takes many samples per restore anyway, so the
//! restore's cost is shared out (docs/checkpoint.md).

use crate::criu::CriuVersion;
use std::ffi::{CStr, CString};
use std::path::Path;

/// What libcriu said, or why it could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LibcriuError {
    #[error("cannot load {path}: {detail}")]
    Load { path: String, detail: String },
    #[error("{path} has no `{symbol}`")]
    Symbol { path: String, symbol: &'static str },
    #[error("libcriu's {call} failed: {}", errno_text(*errno))]
    Call { call: &'static str, errno: i32 },
}

fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

/// The version of `criu` as libcriu sees it through RPC (criu_get_version()).
pub fn version_through_libcriu(libcriu: &Path, criu: &Path) -> Result<CriuVersion, LibcriuError> {
    let path = libcriu.display().to_string();
    let c_path =
        CString::new(libcriu.as_os_str().as_encoded_bytes()).map_err(|_| LibcriuError::Load {
            path: path.clone(),
            detail: "path contains a NUL byte".into(),
        })?;
    let c_criu =
        CString::new(criu.as_os_str().as_encoded_bytes()).map_err(|_| LibcriuError::Load {
            path: path.clone(),
            detail: "criu's path contains a NUL byte".into(),
        })?;
    // libcriu keeps its options in one global: one request at a time.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: dlopen/dlsym/dlclose with valid C strings; each symbol is cast
    // to its signature in criu.h, and called only after it resolved.
    unsafe {
        let handle = libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if handle.is_null() {
            let detail = CStr::from_ptr(libc::dlerror())
                .to_string_lossy()
                .to_string();
            return Err(LibcriuError::Load { path, detail });
        }
        let symbol = |name: &'static str| {
            let c = CString::new(name).expect("no NUL");
            let p = libc::dlsym(handle, c.as_ptr());
            if p.is_null() {
                Err(LibcriuError::Symbol {
                    path: path.clone(),
                    symbol: name,
                })
            } else {
                Ok(p)
            }
        };
        let result = (|| {
            let init: extern "C" fn() -> libc::c_int =
                std::mem::transmute(symbol("criu_init_opts")?);
            let set_service: extern "C" fn(*const libc::c_char) -> libc::c_int =
                std::mem::transmute(symbol("criu_set_service_binary")?);
            let get_version: extern "C" fn() -> libc::c_int =
                std::mem::transmute(symbol("criu_get_version")?);
            let check = |call, ret: libc::c_int| {
                if ret < 0 {
                    Err(LibcriuError::Call { call, errno: -ret })
                } else {
                    Ok(ret)
                }
            };
            check("criu_init_opts", init())?;
            check("criu_set_service_binary", set_service(c_criu.as_ptr()))?;
            // 0 is not a version: libcriu returns it when the RPC got no answer.
            match check("criu_get_version", get_version())? {
                0 => Err(LibcriuError::Call {
                    call: "criu_get_version",
                    errno: libc::EBADMSG,
                }),
                v => Ok(from_libcriu(v as u32)),
            }
        })();
        libc::dlclose(handle);
        result
    }
}

/// libcriu's major * 10000 + minor * 100 + sublevel.
fn from_libcriu(v: u32) -> CriuVersion {
    CriuVersion {
        major: v / 10000,
        minor: v / 100 % 100,
        patch: v % 100,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libcriu_versions_read_as_dotted_triples() {
        assert_eq!(from_libcriu(40101).to_string(), "4.1.1");
        assert_eq!(from_libcriu(31700).to_string(), "3.17.0");
    }

    #[test]
    fn a_missing_library_is_a_load_error_naming_it() {
        let e = version_through_libcriu(Path::new("/nonexistent/libcriu.so"), Path::new("criu"))
            .unwrap_err();
        assert!(matches!(e, LibcriuError::Load { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/libcriu.so"), "{e}");
    }

    /// A "criu" that does not answer the RPC is a structured error, not a
    /// version.
    #[test]
    fn a_binary_that_does_not_answer_is_an_error() {
        let criu = crate::find_criu().unwrap_or_else(|e| panic!("{e}"));
        let lib = criu.libcriu.clone().expect("libcriu next to criu");
        let e = version_through_libcriu(&lib, Path::new("/bin/true")).unwrap_err();
        assert!(matches!(e, LibcriuError::Call { .. }), "{e}");
    }

    /// The libcriu and criu scripts/setup provisions speak to each other:
    /// the version libcriu reports is the binary's.
    #[test]
    fn provisioned_libcriu_reports_the_binarys_version() {
        let criu = crate::find_criu().unwrap_or_else(|e| panic!("{e}"));
        let lib = criu.libcriu.clone().expect("libcriu next to criu");
        let v = version_through_libcriu(&lib, &criu.path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.to_string(), criu.version.to_string());
    }
}
