//! End to end on a real open-source program: zlib 1.2.13 built from
//! Debian's source package by scripts/setup.d/40-profile-apps.sh. minigzip
//! computes a CRC-32 over every byte it compresses or decompresses, so the
//! recorded `len` values must add up to the file size exactly.

use crate::interpose_support::zlib_dir;
use crate::support::TDG;
use driver_gen::contexts as drive;
use instrument::{contexts, format, report};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use toolchain::{CCompiler, CompileJob};

fn spec_path() -> PathBuf {
    testkit::repo().join("instrument/examples/zlib/crc32.spec")
}

/// ~3 MB of compressible text (the workspace's own sources, repeated).
fn input_file(dir: &Path) -> PathBuf {
    let root = testkit::repo();
    let mut text = Vec::new();
    let mut part = std::fs::read(root.join("Cargo.lock")).unwrap();
    part.extend(std::fs::read(root.join("instrument/c/tdg_instrument.c")).unwrap());
    while text.len() < 3_000_000 {
        text.extend_from_slice(&part);
    }
    let p = dir.join("input.txt");
    std::fs::write(&p, &text).unwrap();
    p
}

fn sum_of_len(p: &format::Profile) -> u64 {
    let len_at = p.routines[0]
        .values
        .iter()
        .position(|v| v.name == "len")
        .expect("len is recorded");
    p.records.iter().map(|r| r.values()[len_at] as u64).sum()
}

#[test]
fn minigzip_profiled_through_ld_preload_end_to_end() {
    let _alone = testkit::exclusive();
    let z = zlib_dir();
    let dir = tempfile::tempdir().unwrap();
    let input = input_file(dir.path());
    let size = std::fs::metadata(&input).unwrap().len();
    let prof = dir.path().join("crc32.tdgp");

    let plain = Command::new(z.join("minigzipsh"))
        .arg("-c")
        .arg(&input)
        .env("LD_LIBRARY_PATH", &z)
        .output()
        .unwrap();
    assert!(plain.status.success());
    let profiled = Command::new(TDG)
        .args(["profile", "--spec"])
        .arg(spec_path())
        .arg("-o")
        .arg(&prof)
        .arg("--")
        .arg(z.join("minigzipsh"))
        .arg("-c")
        .arg(&input)
        .env("LD_LIBRARY_PATH", &z)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&profiled.stderr);
    assert!(profiled.status.success(), "{stderr}");
    assert!(
        stderr.contains("crc32") && stderr.contains("0 dropped"),
        "{stderr}"
    );
    // The shim forwards every call unchanged: byte-identical output.
    assert!(
        plain.stdout == profiled.stdout,
        "compressed output differs under the shim"
    );

    let p = format::read(&prof).unwrap();
    assert_eq!(
        sum_of_len(&p),
        size,
        "every input byte passes through crc32 once"
    );
    assert!(p.nontemporal && p.dropped == 0);
    // The shim recorded where the definition it forwards to was loaded: a
    // shared library sits at a page boundary, so modulo a page that is the
    // symbol's own offset in the file.
    let crc32 = &p.routines[0];
    let in_file = toolchain::symbol_address(Path::new(&crc32.defined_in), "crc32")
        .unwrap()
        .unwrap_or_else(|| panic!("no crc32 in {}", crc32.defined_in));
    let app_offset = in_file % 4096;
    assert_eq!(
        crc32.address.expect("the shim records the address") % 4096,
        app_offset
    );

    let json = Command::new(TDG)
        .args(["profile", "report", "--json", "--svg"])
        .arg(dir.path().join("crc32.svg"))
        .arg(&prof)
        .output()
        .unwrap();
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    // By value, not rank: one descheduled call could reorder the contexts.
    let chunks = v["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["values"][0]["name"] == "len" && c["values"][0]["value"] == 16384)
        .expect("deflate reads 16 KiB chunks");
    assert!(chunks["calls"].as_u64().unwrap() as f64 > 0.9 * p.records.len() as f64);
    let rank = chunks["rank"].as_u64().unwrap().to_string();
    assert_eq!(
        v["data_values"][0][0], "crc",
        "the running CRC is data, not context"
    );
    let svg = std::fs::read_to_string(dir.path().join("crc32.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.matches("<circle").count() as u64 >= p.records.len() as u64
    );

    let spec_out = dir.path().join("crc32.profiled.spec");
    let ctx_out = dir.path().join("crc32.contexts.json");
    let sfp = Command::new(TDG)
        .arg("spec-from-profile")
        .arg(&prof)
        .arg("--spec")
        .arg(spec_path())
        .arg("-o")
        .arg(&spec_out)
        .arg("--contexts")
        .arg(&ctx_out)
        .args(["--rank", &rank])
        .output()
        .unwrap();
    assert!(
        sfp.status.success(),
        "{}",
        String::from_utf8_lossy(&sfp.stderr)
    );
    let text = std::fs::read_to_string(&spec_out).unwrap();
    assert!(text.contains("len=Macro(LEN, 16384);"), "{text}");
    assert!(
        text.contains(&format!("code_offset={app_offset};")),
        "the derived spec places crc32 as the application had it:\n{text}"
    );
    let mut file = contexts::ContextsFile::load(&ctx_out).unwrap();
    assert_eq!(file.calls as usize, p.records.len());
    file.contexts.retain(|c| c.values["len"] == 16384);
    assert_eq!(file.contexts[0].defines["LEN"], "16384");

    // The driver, built from zlib's own crc32.c with the dominant context,
    // times that context (warm: minigzip's input chunk was just read into
    // cache) and predicts its in-app total from its calls. How close the
    // prediction comes is a benchmark (scripts/bench-instrument,
    // docs/benchmarks.md "profiling"): a band around the in-app time is a
    // comparison of two timings, which a shared host's drift can break.
    let spec = spec_lang::load(&spec_out, &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap();
    let opts = driver_gen::RunOptions {
        timing: driver_gen::TimingOverrides {
            flush: Some(spec_lang::ast::FlushMethod::None),
            samples: Some(9),
            ..Default::default()
        },
        verify: false,
        ..Default::default()
    };
    // The driver built from zlib's own crc32.c has crc32 where libz had it.
    let built = driver_gen::build_driver(&spec, &z.join("kernel/crc32.c"), &opts).unwrap();
    let placed = toolchain::symbol_address(&built.exe, "crc32")
        .unwrap()
        .unwrap();
    assert_eq!(placed % 4096, app_offset);
    drop(built);
    let pred =
        drive::predict_with_driver(&spec, &z.join("kernel/crc32.c"), &opts, &file, 1).unwrap();
    let row = &pred.rows[0];
    let context = &file.contexts[0];
    assert_eq!((row.rank, row.calls), (context.rank, context.calls));
    assert!(row.label.contains("len=16384"), "{}", row.label);
    assert!(row.driver_ns_per_call > 0.0, "{row:?}");
    assert_eq!(row.predicted_ns, row.driver_ns_per_call * row.calls as f64);
    assert_eq!(row.measured_ns, context.in_app_total_ns);
    println!("{}", contexts::render_prediction(&pred));
}

#[test]
fn statically_linked_minigzip_profiled_through_the_wrap_object() {
    let _heavy = testkit::shared();
    let z = zlib_dir();
    let dir = tempfile::tempdir().unwrap();
    let input = input_file(dir.path());
    let size = std::fs::metadata(&input).unwrap().len();
    let inst = dir.path().join("inst");
    let out = Command::new(TDG)
        .arg("instrument")
        .arg(spec_path())
        .arg("-o")
        .arg(&inst)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exe = dir.path().join("minigzip_wrapped");
    CCompiler::find(None)
        .unwrap()
        .compile(&CompileJob {
            sources: vec![z.join("minigzip.o")],
            output: exe.clone(),
            link_args: vec![
                "-Wl,--wrap=crc32".into(),
                inst.join("tdg_wrap_crc32.o").display().to_string(),
                z.join("libz.a").display().to_string(),
                inst.join("libtdg_instrument.a").display().to_string(),
                "-lpthread".into(),
            ],
            ..Default::default()
        })
        .unwrap();
    // Compression: crc32 sees every input byte exactly once.
    let prof = dir.path().join("c.tdgp");
    let gz = dir.path().join("input.txt.gz");
    let run = Command::new(&exe)
        .arg("-c")
        .arg(&input)
        .env("TDG_PROFILE_OUT", &prof)
        .stdout(std::fs::File::create(&gz).unwrap())
        .status()
        .unwrap();
    assert!(run.success());
    let p = format::read(&prof).unwrap();
    assert_eq!(
        sum_of_len(&p),
        size,
        "every input byte passes through crc32 once"
    );
    // The wrap object recorded the address of the definition it calls
    // (`__real_crc32`): a position-independent executable keeps it modulo a page.
    let linked = toolchain::symbol_address(&exe, "crc32").unwrap().unwrap();
    assert_eq!(
        p.routines[0]
            .address
            .expect("the wrap object records the address")
            % 4096,
        linked % 4096
    );

    // Decompression: every output byte, plus the two bytes of the gzip
    // header's flags field that inflate also checksums.
    let prof = dir.path().join("d.tdgp");
    let run = Command::new(&exe)
        .arg("-d")
        .arg(&gz)
        .env("TDG_PROFILE_OUT", &prof)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(run.success());
    let p = format::read(&prof).unwrap();
    let sum = sum_of_len(&p);
    assert!((size..=size + 16).contains(&sum), "{sum} vs {size}");
    assert_eq!(
        std::fs::metadata(&input).unwrap().len(),
        size,
        "round trip restored the file"
    );
    let rep = report::build(&p, &Default::default()).unwrap();
    assert!(
        rep.contexts.len() > 1,
        "inflate produces chunks of many sizes"
    );
}

#[test]
fn validate_says_which_cache_state_minigzip_runs_crc32_in() {
    let _heavy = testkit::shared();
    let z = zlib_dir();
    let dir = tempfile::tempdir().unwrap();
    let input = input_file(dir.path());
    let prof = dir.path().join("crc32.tdgp");
    let st = Command::new(TDG)
        .args(["profile", "--spec"])
        .arg(spec_path())
        .arg("-o")
        .arg(&prof)
        .arg("--")
        .arg(z.join("minigzipsh"))
        .arg("-c")
        .arg(&input)
        .env("LD_LIBRARY_PATH", &z)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let out = Command::new(TDG)
        .arg("validate")
        .arg(&prof)
        .arg("--spec")
        .arg(spec_path())
        .arg("--impl")
        .arg(z.join("kernel/crc32.c"))
        .args(["--samples", "9"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "in-app, later calls",
        "driver, warm",
        "driver, flushed",
        "verdict:",
    ] {
        assert!(text.contains(want), "missing `{want}` in:\n{text}");
    }
    println!("{text}");
    // Bad input gets a one-line error with a way out.
    let bad = Command::new(TDG)
        .args(["validate"])
        .arg(&prof)
        .arg("--spec")
        .arg(spec_path())
        .arg("--impl")
        .arg(z.join("kernel/crc32.c"))
        .args(["--rank", "99"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--rank must be 1..="), "{err}");
}

#[test]
fn markers_around_a_static_routine_of_zlib_profile_a_rebuilt_minigzip() {
    let _heavy = testkit::shared();
    // deflate()'s block compressor (deflate_stored/_huff/_rle/_slow, picked
    // through a static function table) cannot be interposed: it is static.
    // A few lines of source change make it visible.
    let z = zlib_dir();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = input_file(d);
    let src = d.join("zsrc");
    std::fs::create_dir_all(&src).unwrap();
    let mut sources = Vec::new();
    for e in std::fs::read_dir(z.join("src")).unwrap() {
        let p = e.unwrap().path();
        let to = src.join(p.file_name().unwrap());
        std::fs::copy(&p, &to).unwrap();
        if to.extension().is_some_and(|x| x == "c") {
            sources.push(to);
        }
    }
    let deflate_c = src.join("deflate.c");
    let text = std::fs::read_to_string(&deflate_c).unwrap();
    let start = text
        .find("bstate = s->level == 0 ? deflate_stored(s, flush) :")
        .expect("zlib 1.2.13's deflate() block dispatch");
    let end_pat = "(*(configuration_table[s->level].func))(s, flush);";
    let end = start + text[start..].find(end_pat).unwrap() + end_pat.len();
    let call = text[start..end - 1].to_string(); // without the `;`
    let patched = format!(
        "{}TDG_PROFILE(\"deflate_block\", \"flush:i,level:i\", {call}, flush, s->level);{}",
        &text[..start],
        &text[end..]
    )
    .replacen(
        "#include \"deflate.h\"",
        "#include \"deflate.h\"\n#include \"tdg_instrument.h\"",
        1,
    );
    std::fs::write(&deflate_c, patched).unwrap();

    let rt =
        instrument::runtime::build(&CCompiler::find(None).unwrap(), &d.join("rt"), None).unwrap();
    let exe = d.join("minigzip_marked");
    CCompiler::find(None)
        .unwrap()
        .compile(&CompileJob {
            sources,
            output: exe.clone(),
            cflags: vec!["-O2".into()],
            include_dirs: vec![src.clone(), rt.include_dir.clone()],
            link_args: vec![rt.static_lib.display().to_string(), "-lpthread".into()],
            ..Default::default()
        })
        .unwrap();
    let prof = d.join("deflate.tdgp");
    let out = Command::new(TDG)
        .args(["profile", "-o"])
        .arg(&prof)
        .arg("--")
        .arg(&exe)
        .arg("-c")
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Behaviour unchanged: the output is a gzip stream of the input.
    let gz = d.join("out.gz");
    std::fs::write(&gz, &out.stdout).unwrap();
    let back = Command::new("gzip").arg("-dc").arg(&gz).output().unwrap();
    assert!(back.status.success());
    assert!(
        back.stdout == std::fs::read(&input).unwrap(),
        "round trip through the marked build"
    );

    let p = format::read(&prof).unwrap();
    let rep = report::build(&p, &Default::default()).unwrap();
    assert_eq!(rep.routine, "deflate_block");
    let calls_with = |flush: i64| {
        rep.contexts
            .iter()
            .filter(|c| c.values[0].value == flush && c.values[1].value == 6)
            .map(|c| c.calls)
            .sum::<u64>()
    };
    assert!(
        calls_with(0) >= 10,
        "Z_NO_FLUSH blocks:\n{}",
        report::render_table(&rep, 5)
    );
    assert!(
        calls_with(4) >= 1,
        "the Z_FINISH block:\n{}",
        report::render_table(&rep, 5)
    );
    println!("{}", report::render_table(&rep, 5));
}
