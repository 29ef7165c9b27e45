//! Where the LD_PRELOAD shim finds the definition it forwards to: a library
//! an application opened with `dlopen(RTLD_LOCAL)` after start-up (out of
//! `dlsym(RTLD_NEXT)`'s reach, as numpy's BLAS is under python3), and a
//! routine defined nowhere (one line, a documented status, no core dump).

use crate::instrument_support::cc;
use crate::support::tdg_in as tdg;
use instrument::{format, interpose, runtime};
use std::path::Path;
use std::process::Command;
use toolchain::{CCompiler, CompileJob};

const KERNEL: &str = r#"
long kern_sum(const long *v, long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += v[i];
    return s;
}
"#;

/// An extension module: calls the kernel through its PLT, like numpy's
/// _multiarray_umath calling cblas_dgemm in libblas.
const EXTENSION: &str = r#"
long kern_sum(const long *v, long n);
long ext_run(long n) {
    long v[64];
    for (long i = 0; i < 64; i++)
        v[i] = i;
    return kern_sum(v, n);
}
"#;

/// Opens the extension the way an interpreter opens its modules (local
/// scope, after start-up) and calls it for n = 10 (3 times) and 40 (5 times).
const HOST: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    void *ext = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!ext) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    long (*run)(long) = (long (*)(long))dlsym(ext, "ext_run");
    long total = 0;
    for (int i = 0; i < 3; i++)
        total += run(10);
    for (int i = 0; i < 5; i++)
        total += run(40);
    printf("total %ld\n", total);
    return 0;
}
"#;

fn compile(dir: &Path, name: &str, src: &str, output: &str, cflags: &[&str], link: &[String]) {
    let c = dir.join(name);
    std::fs::write(&c, src).unwrap();
    cc().compile(&CompileJob {
        sources: vec![c],
        output: dir.join(output),
        cflags: cflags.iter().map(|s| s.to_string()).collect(),
        link_args: link.to_vec(),
        ..Default::default()
    })
    .unwrap();
}

#[test]
fn a_routine_in_a_locally_dlopened_library_is_found_and_named() {
    let _heavy = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let lib = ["-O2", "-fPIC", "-shared"];
    compile(d, "kern.c", KERNEL, "libkern.so", &lib, &[]);
    let rpath = vec![
        format!("-L{}", d.display()),
        "-lkern".into(),
        format!("-Wl,-rpath,{}", d.display()),
    ];
    compile(d, "ext.c", EXTENSION, "libext.so", &lib, &rpath);
    compile(d, "host.c", HOST, "host", &["-O2"], &["-ldl".into()]);
    // A prototype is all the shim needs: no allocation for `v`.
    std::fs::write(
        d.join("kern.spec"),
        "routine=long kern_sum(const long* v, long n);\n",
    )
    .unwrap();
    let ext = d.join("libext.so").display().to_string();
    let host = d.join("host").display().to_string();

    let plain = Command::new(&host).arg(&ext).output().unwrap();
    assert!(plain.status.success());
    let run = tdg(
        &[
            "profile",
            "--spec",
            "kern.spec",
            "-o",
            "k.tdgp",
            "--",
            &host,
            &ext,
        ],
        d,
    );
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    // The program's own output is unchanged: every call was forwarded.
    assert_eq!(run.stdout, plain.stdout, "{err}");

    let p = format::read(&d.join("k.tdgp")).unwrap();
    let routine = &p.routines[0];
    assert_eq!(routine.name, "kern_sum");
    assert_eq!(
        Path::new(&routine.defined_in),
        d.join("libkern.so"),
        "the profile names the object the shim forwarded to"
    );
    let n_of = |n: i64| p.records.iter().filter(|r| r.values()[0] == n).count();
    assert_eq!((p.records.len(), n_of(10), n_of(40)), (8, 3, 5));

    let report = tdg(&["profile", "report", "k.tdgp"], d);
    let table = String::from_utf8_lossy(&report.stdout);
    assert!(
        table.contains(&format!("defined in {}", d.join("libkern.so").display())),
        "{table}"
    );
}

#[test]
fn a_routine_defined_nowhere_ends_the_program_with_one_line_and_a_documented_status() {
    let _heavy = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A weak reference: the program calls the routine if something defines
    // it, and under the shim the shim does, with nothing behind it.
    let src = r#"
#include <stdio.h>
extern long kern_missing(long n) __attribute__((weak));
int main(void) {
    printf("output before the call\n"); /* buffered: stdout is a pipe */
    if (kern_missing)
        printf("%ld\n", kern_missing(3));
    printf("after the call\n");
    return 0;
}
"#;
    compile(d, "host.c", src, "host", &["-O2"], &[]);
    std::fs::write(
        d.join("missing.spec"),
        "routine=long kern_missing(long n);\n",
    )
    .unwrap();
    let host = d.join("host").display().to_string();
    let run = tdg(&["profile", "--spec", "missing.spec", "--", &host], d);
    let err = String::from_utf8_lossy(&run.stderr);
    let out = String::from_utf8_lossy(&run.stdout);
    // The shim's own status (87, docs/profiling.md) ended the program; tdg
    // says it is the spec's routine that is missing: a usage error.
    assert_eq!(
        runtime::exit_unresolved(),
        87,
        "docs/profiling.md documents 87"
    );
    assert_eq!(run.status.code(), Some(2), "{err}");
    // What the program wrote before is not lost; it did not go on.
    assert_eq!(out, "output before the call\n", "{err}");
    let shim_lines: Vec<&str> = err.lines().filter(|l| l.starts_with("tdg shim:")).collect();
    assert_eq!(shim_lines.len(), 1, "{err}");
    let line = shim_lines[0];
    assert!(
        line.contains("kern_missing is defined in none of the")
            && line.contains(&host)
            && line.contains("libc.so.6")
            && line.contains("status 87"),
        "{line}"
    );
    // tdg explains the status; nothing was killed, nothing dumped core.
    assert!(
        err.contains("found no definition") && err.contains("nm -D"),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("core dumped"),
        "{err}"
    );
    let cores: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("core"))
        .collect();
    assert!(cores.is_empty());
}

#[test]
fn generated_interposers_compile_warning_free_for_void_and_fortran_routines() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    // A prototype-only spec whose recorded values are all integers.
    let dgemm =
        std::fs::read_to_string(testkit::repo().join("instrument/examples/blas/cblas_dgemm.spec"))
            .unwrap();
    // The runtime (whose resolver is compiled into every shim) and the
    // checkpoint host library do not depend on the spec: made once.
    let rt = runtime::build(&cc(), &dir.path().join("runtime"), None).unwrap();
    let host = checkpoint::write_host_library(&dir.path().join("host")).unwrap();
    // The runtimes the shims link, with the timing header they include.
    let mut units = vec![
        (rt.resolve_source.clone(), "resolver".to_string()),
        (rt.source.clone(), "profiling runtime".to_string()),
        (host.source.clone(), "checkpoint host library".to_string()),
    ];
    for (name, src) in [
        (
            "void",
            "routine=void scale(double* x, const int n, const double a);\ninit={ n=Macro(N, 10); a=2.0; x=Vector(double, RANDOM, align(64), n); };\n",
        ),
        (
            "fortran",
            "lang=fortran;\nroutine=void DAXPY(const int N, const double A, const double* X, double* Y);\ninit={ N=Macro(NS, 10); A=2.0; X=Vector(double, RANDOM, _, N); Y=Vector(double, RANDOM, _, N); };\n",
        ),
        (
            "prototype",
            dgemm.as_str(),
        ),
        // Outputs the region shim declares: a count with checked arithmetic,
        // a count from the allocation, bytes behind a void*, the result.
        (
            "outputs",
            "routine=long pack(const int n, const int stride, double* x, unsigned char* flags, void* raw, long* idx);\ninit={ idx=Vector(long, ZERO, _, n); };\nreturns(x[(n - 1) * stride / 2 % 9 + -1], flags[n], raw[16], idx, pack);\n",
        ),
        // Member paths: a block behind a member counted by members of
        // nested and pointed-to structs, a member itself, an array member,
        // a parameter's block counted by a member; NULL-checked at each `->`.
        (
            "member-outputs",
            "include=\"typedef struct cfg { int n; long m; } cfg;\";\ninclude=\"typedef struct node { struct node* next; cfg c; cfg* pc; unsigned* ptr; int origin; double arr[4]; } node;\";\nroutine=int walk(node* s, const int k, double* x);\nreturns(s->ptr[s->c.n * k + s->pc->m], s->origin, s->next->ptr[s->next->c.n], s->arr[4], x[s->c.n], walk);\n",
        ),
        (
            "fortran-outputs",
            "lang=fortran;\nroutine=void DAXPY(const int N, const double A, const double* X, double* Y);\ninit={ Y=Vector(double, RANDOM, _, N); };\nreturns(Y);\n",
        ),
    ] {
        let spec = spec_lang::check_source(src, name, &[]).and_then(|c| c.for_use(spec_lang::Use::Checkpoint)).unwrap();
        for (kind, text) in [
            ("preload", interpose::generate(&spec, interpose::InterposerKind::Preload)),
            ("wrap", interpose::generate(&spec, interpose::InterposerKind::Wrap)),
            ("region", interpose::generate_region_shim(&spec)),
        ] {
            let text = text.unwrap();
            if name.starts_with("fortran") {
                // Scalars by reference, arrays as their first element's
                // address: the prototype the driver declares for DAXPY.
                assert!(
                    text.contains("daxpy_(const int* N, const double* A, const double* X, double* Y)"),
                    "{text}"
                );
            }
            let c = dir.path().join(format!("{name}-{kind}.c"));
            std::fs::write(&c, text).unwrap();
            units.push((c, format!("{name} {kind}")));
        }
        if name == "prototype" || name.ends_with("outputs") {
            continue;
        }
        let values = interpose::recorded_values(&spec);
        assert_eq!(values[0].kind, format::ValueKind::Signed, "{name}");
        assert_eq!(values[1].kind, format::ValueKind::Double, "{name}");
    }
    // -Werror: clean under -Wall -Wextra, with gcc and with clang; two
    // compiles at a time, this machine's two cores.
    let compilers: Vec<CCompiler> = ["gcc", "clang"]
        .iter()
        .map(|c| CCompiler::find(Some(c)).unwrap())
        .collect();
    let jobs: Vec<(&Path, &str, &CCompiler)> = compilers
        .iter()
        .flat_map(|cc| {
            units
                .iter()
                .map(move |(source, what)| (source.as_path(), what.as_str(), cc))
        })
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(&(source, what, cc)) = jobs.get(i) else {
                    return;
                };
                cc.compile(&CompileJob {
                    output: source.with_extension(format!("{}.o", cc.program)),
                    sources: vec![source.to_path_buf()],
                    cflags: vec![
                        "-O2".into(),
                        "-fPIC".into(),
                        "-Wall".into(),
                        "-Wextra".into(),
                        "-Werror".into(),
                    ],
                    include_dirs: vec![rt.include_dir.clone(), host.dir.clone()],
                    object_only: true,
                    ..Default::default()
                })
                .unwrap_or_else(|e| panic!("{what} with {}: {e}", cc.program));
            });
        }
    });
    let spec = spec_lang::check_source("lang=fortran;\nroutine=void DAXPY(const int N, const double A, const double* X, double* Y);\ninit={ N=Macro(NS, 10); A=2.0; X=Vector(double, RANDOM, _, N); Y=Vector(double, RANDOM, _, N); };\n", "f", &[]).and_then(|c| c.for_use(spec_lang::Use::Driver))
    .unwrap();
    assert_eq!(interpose::symbol_name(&spec), "daxpy_");
}
