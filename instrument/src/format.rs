//! The profile file (`.tdgp`), version 4: what the C runtime writes and
//! `tdg profile report` reads (version 1, without `defined in`, version 2,
//! without the address, and version 3, one line per record with at most 5
//! values and no thread count, are still read). All integers little-endian.
//!
//! ```text
//! header (80 bytes)
//!   0  magic         b"TDGPROF\0"
//!   8  u32 version   4
//!  12  u32 header    size of this header in bytes (80); readers skip extra
//!  16  u64 ticks/s   tick rate, measured against CLOCK_MONOTONIC_RAW
//!  24  u64 lines     64-byte record lines that follow the routine table
//!                    (versions 1-3: records, one line each)
//!  32  u64 dropped   calls not recorded because the buffer was full
//!  40  u64 capacity  buffer size in records
//!  48  u32 pid
//!  52  u32 routines  entries in the routine table
//!  56  u32 threads   threads that recorded at least one call
//!  60  u16 flags     bit 0: non-temporal stores; bit 1: ticks are TSC
//!                    (else nanoseconds)
//!  62  u16 record    record size in bytes (64)
//!  64  u64 overhead  minimum ticks of an empty begin/end pair
//!  72  u64 reserved
//! routine table, `routines` entries, id = position:
//!   u16 len, name bytes; u16 len, params bytes ("name:kind,..."; kind is
//!   i signed, u unsigned, p pointer address, f double bit pattern);
//!   u16 len, defined-in bytes (the object an interposer forwards to, empty
//!   for markers; not in version 1); u64 address of the definition in the
//!   process, 0 for markers (not in versions 1 and 2); u64 dropped calls of
//!   this routine
//! records, each a first line and as many extension lines as its values
//! need beyond the first 5 (7 a line):
//!   first line: u64 start tick, u64 elapsed ticks, u16 routine id, u16
//!   calling thread (numbered as threads first record), u8 value count (all
//!   lines), u8 flags (bit 0 valid), u16 threads the process ran with at
//!   the call (0 unknown; reserved before version 4), 5 x i64 values
//!   extension line k (1, 2, ...): 2 x i64 values, u16 routine id, u16 k,
//!   u8 0, u8 flags (bit 1 extension, never bit 0), u16 0, 5 x i64 values
//! ```

use serde::Serialize;
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"TDGPROF\0";
pub const VERSION: u32 = 4;
/// The oldest version `parse` still reads.
pub const OLDEST_VERSION: u32 = 1;
pub const HEADER_SIZE: usize = 80;
/// One record line.
pub const RECORD_SIZE: usize = 64;
/// Values a record holds at most (`TDG_MAX_VALUES` of tdg_instrument.h).
pub const MAX_VALUES: usize = 40;
/// Values in a record's first line, and in each extension line.
pub const HEAD_VALUES: usize = 5;
pub const EXTENSION_VALUES: usize = 7;
const FLAG_VALID: u8 = 1;
const FLAG_EXTENSION: u8 = 2;

/// Extension lines a record of `n` values takes.
pub fn extension_lines(n: usize) -> usize {
    n.saturating_sub(HEAD_VALUES).div_ceil(EXTENSION_VALUES)
}

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("cannot read profile {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a tdg profile (bad magic); profiles are written by programs run under `tdg profile`")]
    BadMagic { path: String },
    #[error("{path} is profile format version {found}; this tdg reads versions {OLDEST_VERSION} to {VERSION}: re-record it with this tdg")]
    Version { path: String, found: u32 },
    #[error("{path} is truncated or corrupt: {what}")]
    Corrupt { path: String, what: String },
}

/// How a recorded value is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ValueKind {
    Signed,
    Unsigned,
    /// The argument's address: says which buffer, and its alignment.
    Pointer,
    /// An IEEE double stored as its bit pattern.
    Double,
}

impl ValueKind {
    pub fn code(self) -> char {
        match self {
            ValueKind::Signed => 'i',
            ValueKind::Unsigned => 'u',
            ValueKind::Pointer => 'p',
            ValueKind::Double => 'f',
        }
    }

    fn from_code(c: &str) -> Option<ValueKind> {
        Some(match c {
            "i" => ValueKind::Signed,
            "u" => ValueKind::Unsigned,
            "p" => ValueKind::Pointer,
            "f" => ValueKind::Double,
            _ => return None,
        })
    }

    /// Pointers are not part of a call context: an address says where the
    /// data is, not how much work the call does.
    pub fn is_context(self) -> bool {
        self != ValueKind::Pointer
    }

    /// The value as a person reads it.
    pub fn display(self, raw: i64) -> String {
        match self {
            ValueKind::Signed => raw.to_string(),
            ValueKind::Unsigned => (raw as u64).to_string(),
            ValueKind::Pointer => format!("{:#x}", raw as u64),
            ValueKind::Double => f64::from_bits(raw as u64).to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValueInfo {
    pub name: String,
    pub kind: ValueKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoutineInfo {
    pub name: String,
    pub values: Vec<ValueInfo>,
    /// Path of the loaded object whose definition the shim forwarded to;
    /// empty when the calls were recorded by markers (or in version 1).
    pub defined_in: String,
    /// Where that definition's code was in the process: its address modulo
    /// 4096 is where a driver places the routine to time it as the
    /// application ran it (`timer={ code_offset=...; }`). `None` for
    /// markers and versions 1 and 2.
    pub address: Option<u64>,
    pub dropped: u64,
}

impl RoutineInfo {
    /// `"crc:u,buf:p"` as written by `tdg_routine`.
    pub fn parse_params(text: &str) -> Result<Vec<ValueInfo>, String> {
        let mut out = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, kind) = item
                .rsplit_once(':')
                .ok_or_else(|| format!("parameter `{item}` has no `:kind`"))?;
            let kind = ValueKind::from_code(kind.trim())
                .ok_or_else(|| format!("parameter `{item}`: kind must be i, u, p or f"))?;
            out.push(ValueInfo {
                name: name.trim().to_string(),
                kind,
            });
        }
        Ok(out)
    }

    pub fn params_text(&self) -> String {
        self.values
            .iter()
            .map(|v| format!("{}:{}", v.name, v.kind.code()))
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    pub start: u64,
    pub ticks: u64,
    pub routine: u16,
    /// The calling thread (threads are numbered as they first record; a
    /// merged profile numbers each process's threads apart).
    pub thread: u16,
    /// Threads the process ran with at the call: OpenMP's team size where
    /// the program had libgomp loaded, else the threads of the process.
    /// 0 when unknown (profiles before version 4).
    pub threads: u16,
    /// In the order of the routine's value list, at most [`MAX_VALUES`].
    pub values: Vec<i64>,
}

impl Record {
    pub fn values(&self) -> &[i64] {
        &self.values
    }

    /// The thread count, `None` when the profile does not say.
    pub fn threads(&self) -> Option<u16> {
        (self.threads > 0).then_some(self.threads)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    pub ticks_per_sec: u64,
    pub dropped: u64,
    pub capacity: u64,
    /// Processes merged into this profile (one for a plain run).
    pub pids: Vec<u32>,
    pub threads: u32,
    pub nontemporal: bool,
    /// Ticks are TSC cycles (else nanoseconds).
    pub tsc: bool,
    pub timer_overhead_ticks: u64,
    pub routines: Vec<RoutineInfo>,
    /// In the order written; `merge` sorts by start tick.
    pub records: Vec<Record>,
}

impl Profile {
    pub fn ticks_to_ns(&self, ticks: u64) -> f64 {
        ticks as f64 * 1e9 / self.ticks_per_sec.max(1) as f64
    }

    pub fn routine_id(&self, name: &str) -> Option<u16> {
        self.routines
            .iter()
            .position(|r| r.name == name)
            .map(|i| i as u16)
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a str,
}

impl<'a> Cursor<'a> {
    fn corrupt(&self, what: String) -> FormatError {
        FormatError::Corrupt {
            path: self.path.to_string(),
            what,
        }
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], FormatError> {
        if self.buf.len() - self.pos < n {
            return Err(FormatError::Corrupt {
                path: self.path.to_string(),
                what: format!("file ends inside {what} at byte {}", self.pos),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u16(&mut self, what: &str) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.take(2, what)?.try_into().unwrap()))
    }
    fn u64(&mut self, what: &str) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    fn string(&mut self, what: &str) -> Result<String, FormatError> {
        let n = self.u16(what)? as usize;
        let bytes = self.take(n, what)?;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Parses a whole profile; `path` is only used in messages.
pub fn parse(bytes: &[u8], path: &str) -> Result<Profile, FormatError> {
    let corrupt = |what: String| FormatError::Corrupt {
        path: path.to_string(),
        what,
    };
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(FormatError::BadMagic {
            path: path.to_string(),
        });
    }
    let version = le_u32(bytes, 8);
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(FormatError::Version {
            path: path.to_string(),
            found: version,
        });
    }
    let header = le_u32(bytes, 12) as usize;
    if header < HEADER_SIZE || bytes.len() < header {
        return Err(corrupt(format!(
            "header claims {header} bytes, file has {}",
            bytes.len()
        )));
    }
    let nlines = le_u64(bytes, 24);
    let nroutines = le_u32(bytes, 52) as usize;
    let flags = le_u16(bytes, 60);
    let record_size = le_u16(bytes, 62) as usize;
    if record_size < RECORD_SIZE {
        return Err(corrupt(format!(
            "record size {record_size} < {RECORD_SIZE}"
        )));
    }
    let mut cur = Cursor {
        buf: bytes,
        pos: header,
        path,
    };
    let routines = (0..nroutines)
        .map(|i| routine_info(&mut cur, version, i))
        .collect::<Result<Vec<_>, _>>()?;
    // Versions 1-3 count records of one line; version 4 counts lines.
    let rest = bytes.len() - cur.pos;
    let want = (nlines as u128) * record_size as u128;
    if (rest as u128) < want {
        return Err(corrupt(format!(
            "header announces {nlines} record lines ({want} bytes) but only {rest} bytes follow"
        )));
    }
    let mut lines = Lines {
        cur,
        version,
        record_size,
        nlines,
        nroutines,
        line: 0,
    };
    let mut records = Vec::with_capacity(nlines as usize);
    while lines.line < nlines {
        records.push(lines.record()?);
    }
    Ok(Profile {
        ticks_per_sec: le_u64(bytes, 16),
        dropped: le_u64(bytes, 32),
        capacity: le_u64(bytes, 40),
        pids: vec![le_u32(bytes, 48)],
        threads: le_u32(bytes, 56),
        nontemporal: flags & 1 != 0,
        tsc: flags & 2 != 0,
        timer_overhead_ticks: le_u64(bytes, 64),
        routines,
        records,
    })
}

/// One entry of the routine table.
fn routine_info(cur: &mut Cursor<'_>, version: u32, i: usize) -> Result<RoutineInfo, FormatError> {
    let name = cur.string("a routine name")?;
    let params = cur.string("a routine's parameter list")?;
    let values = RoutineInfo::parse_params(&params)
        .map_err(|e| cur.corrupt(format!("routine {i} ({name}): {e}")))?;
    let defined_in = if version >= 2 {
        cur.string("a routine's defining object")?
    } else {
        String::new()
    };
    let address = if version >= 3 {
        Some(cur.u64("a routine's address")?).filter(|a| *a != 0)
    } else {
        None
    };
    let dropped = cur.u64("a routine's dropped count")?;
    Ok(RoutineInfo {
        name,
        values,
        defined_in,
        address,
        dropped,
    })
}

/// The record lines of a profile, read one record (its first line and its
/// extension lines) at a time.
struct Lines<'a> {
    cur: Cursor<'a>,
    version: u32,
    record_size: usize,
    nlines: u64,
    nroutines: usize,
    /// Lines read so far.
    line: u64,
}

impl Lines<'_> {
    fn record(&mut self) -> Result<Record, FormatError> {
        let r = self.cur.take(self.record_size, "a record")?;
        self.line += 1;
        let routine = le_u16(r, 16);
        if usize::from(routine) >= self.nroutines {
            return Err(self.cur.corrupt(format!(
                "a record names routine {routine}, the table has {}",
                self.nroutines
            )));
        }
        let count = usize::from(r[20]);
        let (count, threads) = if self.version >= 4 {
            if r[21] & FLAG_VALID == 0 {
                return Err(self.cur.corrupt(format!(
                    "record line {} is not the start of a record",
                    self.line - 1
                )));
            }
            if count > MAX_VALUES {
                return Err(self.cur.corrupt(format!(
                    "a record claims {count} values, at most {MAX_VALUES} are recorded"
                )));
            }
            (count, le_u16(r, 22))
        } else {
            (count.min(HEAD_VALUES), 0)
        };
        let mut values: Vec<i64> = (0..count.min(HEAD_VALUES))
            .map(|i| le_u64(r, 24 + 8 * i) as i64)
            .collect();
        for k in 1..=extension_lines(count) {
            self.extension(routine, count, k, &mut values)?;
        }
        Ok(Record {
            start: le_u64(r, 0),
            ticks: le_u64(r, 8),
            routine,
            thread: le_u16(r, 18),
            threads,
            values,
        })
    }

    /// Extension line `k` of a record of `count` values: its values
    /// appended to `values`.
    fn extension(
        &mut self,
        routine: u16,
        count: usize,
        k: usize,
        values: &mut Vec<i64>,
    ) -> Result<(), FormatError> {
        if self.line >= self.nlines {
            return Err(self.cur.corrupt(format!(
                "a record of {count} values lacks its extension line {k}"
            )));
        }
        let e = self
            .cur
            .take(self.record_size, "a record's extension line")?;
        self.line += 1;
        if e[21] != FLAG_EXTENSION || le_u16(e, 16) != routine || le_u16(e, 18) as usize != k {
            return Err(self.cur.corrupt(format!(
                "record line {} is not extension line {k} of the record before it",
                self.line - 1
            )));
        }
        let line_values = [0, 8, 24, 32, 40, 48, 56].map(|at| le_u64(e, at) as i64);
        let take = (count - values.len()).min(EXTENSION_VALUES);
        values.extend_from_slice(&line_values[..take]);
        Ok(())
    }
}

/// The bytes of `profile` in format version 4 (a merged profile keeps only
/// its first pid; values past [`MAX_VALUES`] are not written).
pub fn to_bytes(profile: &Profile) -> Vec<u8> {
    let lines: usize = profile
        .records
        .iter()
        .map(|r| 1 + extension_lines(r.values.len().min(MAX_VALUES)))
        .sum();
    let mut b = Vec::with_capacity(HEADER_SIZE + lines * RECORD_SIZE + 256);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&(HEADER_SIZE as u32).to_le_bytes());
    b.extend_from_slice(&profile.ticks_per_sec.to_le_bytes());
    b.extend_from_slice(&(lines as u64).to_le_bytes());
    b.extend_from_slice(&profile.dropped.to_le_bytes());
    b.extend_from_slice(&profile.capacity.to_le_bytes());
    b.extend_from_slice(&profile.pids.first().copied().unwrap_or(0).to_le_bytes());
    b.extend_from_slice(&(profile.routines.len() as u32).to_le_bytes());
    b.extend_from_slice(&profile.threads.to_le_bytes());
    let flags = u16::from(profile.nontemporal) | (u16::from(profile.tsc) << 1);
    b.extend_from_slice(&flags.to_le_bytes());
    b.extend_from_slice(&(RECORD_SIZE as u16).to_le_bytes());
    b.extend_from_slice(&profile.timer_overhead_ticks.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    debug_assert_eq!(b.len(), HEADER_SIZE);
    for r in &profile.routines {
        let params = r.params_text();
        b.extend_from_slice(&(r.name.len() as u16).to_le_bytes());
        b.extend_from_slice(r.name.as_bytes());
        b.extend_from_slice(&(params.len() as u16).to_le_bytes());
        b.extend_from_slice(params.as_bytes());
        b.extend_from_slice(&(r.defined_in.len() as u16).to_le_bytes());
        b.extend_from_slice(r.defined_in.as_bytes());
        b.extend_from_slice(&r.address.unwrap_or(0).to_le_bytes());
        b.extend_from_slice(&r.dropped.to_le_bytes());
    }
    for r in &profile.records {
        let values = &r.values[..r.values.len().min(MAX_VALUES)];
        b.extend_from_slice(&r.start.to_le_bytes());
        b.extend_from_slice(&r.ticks.to_le_bytes());
        b.extend_from_slice(&r.routine.to_le_bytes());
        b.extend_from_slice(&r.thread.to_le_bytes());
        b.push(values.len() as u8);
        b.push(FLAG_VALID);
        b.extend_from_slice(&r.threads.to_le_bytes());
        let value = |i: usize| values.get(i).copied().unwrap_or(0).to_le_bytes();
        for i in 0..HEAD_VALUES {
            b.extend_from_slice(&value(i));
        }
        for k in 1..=extension_lines(values.len()) {
            let first = HEAD_VALUES + (k - 1) * EXTENSION_VALUES;
            b.extend_from_slice(&value(first));
            b.extend_from_slice(&value(first + 1));
            b.extend_from_slice(&r.routine.to_le_bytes());
            b.extend_from_slice(&(k as u16).to_le_bytes());
            b.push(0);
            b.push(FLAG_EXTENSION);
            b.extend_from_slice(&0u16.to_le_bytes());
            for i in first + 2..first + EXTENSION_VALUES {
                b.extend_from_slice(&value(i));
            }
        }
    }
    b
}

pub fn read(path: &Path) -> Result<Profile, FormatError> {
    let bytes = std::fs::read(path).map_err(|source| FormatError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse(&bytes, &path.display().to_string())
}

/// Writes the profile atomically (whole or not at all; a link at `path`
/// is refused, not followed).
pub fn write(profile: &Profile, path: &Path) -> std::io::Result<()> {
    fsguard::write_atomic(path, &to_bytes(profile))
}

/// One profile from the files of several processes (a program that forks or
/// runs others): routines unified by name, thread indices made distinct,
/// records ordered by start tick (the TSC is shared by all processes on a
/// machine with an invariant TSC).
pub fn merge(parts: Vec<Profile>) -> Option<Profile> {
    let mut iter = parts.into_iter();
    let mut out = iter.next()?;
    let mut rate_sum = out.ticks_per_sec as u128;
    let mut n = 1u128;
    for p in iter {
        let map: Vec<u16> = p
            .routines
            .iter()
            .map(|r| match out.routine_id(&r.name) {
                Some(id) => {
                    let mine = &mut out.routines[id as usize];
                    mine.dropped = mine.dropped.saturating_add(r.dropped);
                    if mine.defined_in.is_empty() {
                        mine.defined_in.clone_from(&r.defined_in);
                    }
                    mine.address = mine.address.or(r.address);
                    id
                }
                None => {
                    out.routines.push(r.clone());
                    (out.routines.len() - 1) as u16
                }
            })
            .collect();
        // Counts come from the files' headers: a corrupt one may claim any
        // number, and the sums saturate instead of overflowing.
        let thread_base = u16::try_from(out.threads).unwrap_or(u16::MAX);
        out.records.extend(p.records.iter().map(|r| Record {
            routine: map[r.routine as usize],
            thread: r.thread.saturating_add(thread_base),
            ..r.clone()
        }));
        out.threads = out.threads.saturating_add(p.threads);
        out.dropped = out.dropped.saturating_add(p.dropped);
        out.capacity = out.capacity.max(p.capacity);
        out.pids.extend(p.pids);
        out.nontemporal &= p.nontemporal;
        out.timer_overhead_ticks = out.timer_overhead_ticks.min(p.timer_overhead_ticks);
        rate_sum += p.ticks_per_sec as u128;
        n += 1;
    }
    out.ticks_per_sec = (rate_sum / n) as u64;
    out.records.sort_by_key(|r| r.start);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Profile {
        Profile {
            ticks_per_sec: 2_100_000_000,
            dropped: 3,
            capacity: 100,
            pids: vec![42],
            threads: 2,
            nontemporal: true,
            tsc: true,
            timer_overhead_ticks: 30,
            routines: vec![RoutineInfo {
                name: "crc32".into(),
                values: RoutineInfo::parse_params("crc:u,buf:p,len:u").unwrap(),
                defined_in: "/usr/lib/libz.so.1".into(),
                address: Some(0x7f12_3456_7a40),
                dropped: 3,
            }],
            records: vec![Record {
                start: 10,
                ticks: 500,
                routine: 0,
                thread: 1,
                threads: 2,
                values: vec![7, 0x1000, 4096],
            }],
        }
    }

    /// `profile` as an older version wrote it: `to_bytes` with the version
    /// patched, each record's thread count (reserved then) cleared.
    fn older(profile: &mut Profile, version: u32) -> Vec<u8> {
        for r in &mut profile.records {
            r.threads = 0;
        }
        let mut b = to_bytes(profile);
        b[8..12].copy_from_slice(&version.to_le_bytes());
        b
    }

    #[test]
    fn bad_magic_and_version_are_named() {
        let e = parse(b"hello world, not a profile", "x").unwrap_err();
        assert!(e.to_string().contains("not a tdg profile"), "{e}");
        let mut b = to_bytes(&sample());
        b[8] = 9;
        let e = parse(&b, "x").unwrap_err();
        assert!(e.to_string().contains("version 9"), "{e}");
    }

    #[test]
    fn version_1_without_defined_in_is_still_read() {
        let mut p = sample();
        p.routines[0].defined_in.clear();
        p.routines[0].address = None;
        let mut b = older(&mut p, 1);
        // Version 1 has no defined-in string and no address: drop the
        // string's (empty) length field and the (zero) address.
        let at = HEADER_SIZE + 2 + "crc32".len() + 2 + p.routines[0].params_text().len();
        assert_eq!(&b[at..at + 10], &[0; 10]);
        b.drain(at..at + 10);
        assert_eq!(parse(&b, "v1").unwrap(), p);
    }

    #[test]
    fn version_2_without_the_address_is_still_read() {
        let mut p = sample();
        p.routines[0].address = None;
        let mut b = older(&mut p, 2);
        let at = HEADER_SIZE
            + 2
            + "crc32".len()
            + 2
            + p.routines[0].params_text().len()
            + 2
            + p.routines[0].defined_in.len();
        assert_eq!(&b[at..at + 8], &[0; 8]);
        b.drain(at..at + 8);
        assert_eq!(parse(&b, "v2").unwrap(), p);
    }

    #[test]
    fn version_3_records_of_one_line_are_still_read() {
        let mut p = sample();
        let b = older(&mut p, 3);
        let back = parse(&b, "v3").unwrap();
        assert_eq!(back, p);
        assert_eq!(back.records[0].threads(), None);
    }

    /// fourteen values (cblas_dgemm's parameters) take the first line and
    /// two extension lines; the thread count comes back.
    #[test]
    fn a_record_with_more_than_five_values_takes_extension_lines() {
        let mut p = sample();
        let names: Vec<String> = (0..14).map(|i| format!("v{i}:i")).collect();
        p.routines[0].values = RoutineInfo::parse_params(&names.join(",")).unwrap();
        p.records[0].values = (1..=14).collect();
        p.records.push(Record {
            start: 20,
            values: vec![-1; 5],
            ..p.records[0].clone()
        });
        let b = to_bytes(&p);
        assert_eq!(le_u64(&b, 24), 4, "3 lines, then 1");
        let back = parse(&b, "x").unwrap();
        assert_eq!(back, p);
        assert_eq!(back.records[0].threads(), Some(2));
        // An extension line out of place, or one missing, is corruption.
        let first = b.len() - 4 * RECORD_SIZE;
        let mut swapped = b.clone();
        swapped.copy_within(
            first + RECORD_SIZE..first + 2 * RECORD_SIZE,
            first + 2 * RECORD_SIZE,
        );
        let e = parse(&swapped, "x").unwrap_err();
        assert!(e.to_string().contains("extension line 2"), "{e}");
        let mut cut = b[..b.len() - RECORD_SIZE].to_vec();
        cut[24..32].copy_from_slice(&3u64.to_le_bytes());
        assert!(
            parse(&cut, "x").is_ok(),
            "three whole lines: the first record"
        );
        cut[24..32].copy_from_slice(&2u64.to_le_bytes());
        let e = parse(&cut[..cut.len() - RECORD_SIZE], "x").unwrap_err();
        assert!(e.to_string().contains("lacks its extension line 2"), "{e}");
        let mut head_missing = b.clone();
        head_missing[first + 21] = 0;
        let e = parse(&head_missing, "x").unwrap_err();
        assert!(e.to_string().contains("not the start of a record"), "{e}");
    }

    /// The runtime, the reader and spec-lang's `record=` check agree on
    /// how many values a record holds.
    #[test]
    fn the_value_limit_is_the_runtimes() {
        let header = include_str!("../c/tdg_instrument.h");
        let line = format!("#define TDG_MAX_VALUES {MAX_VALUES}\n");
        assert!(header.contains(&line), "tdg_instrument.h lacks {line:?}");
        assert_eq!(spec_lang::MAX_RECORDED, MAX_VALUES);
        assert!(
            u8::try_from(MAX_VALUES).is_ok(),
            "a record's value count is a u8"
        );
    }

    #[test]
    fn truncation_is_reported_not_panicked() {
        let b = to_bytes(&sample());
        for cut in [20, HEADER_SIZE, HEADER_SIZE + 5, b.len() - 1] {
            let e = parse(&b[..cut], "x").unwrap_err();
            assert!(
                matches!(
                    e,
                    FormatError::Corrupt { .. } | FormatError::BadMagic { .. }
                ),
                "{e}"
            );
        }
    }

    #[test]
    fn merge_unifies_routines_and_threads() {
        let a = sample();
        let mut b = sample();
        b.pids = vec![43];
        b.records[0].start = 5;
        let m = merge(vec![a, b]).unwrap();
        assert_eq!(m.routines.len(), 1);
        assert_eq!(m.records.len(), 2);
        assert_eq!(m.records[0].start, 5);
        assert_eq!(m.records[0].thread, 3);
        assert_eq!(m.dropped, 6);
        assert_eq!(m.pids, vec![42, 43]);
    }

    /// Found by fuzzing: the counts a header claims were added unchecked
    /// when merging the files of two processes.
    #[test]
    fn merging_profiles_with_absurd_counts_saturates() {
        let mut a = sample();
        a.threads = u32::MAX;
        a.dropped = u64::MAX;
        a.routines[0].dropped = u64::MAX;
        a.records[0].thread = u16::MAX;
        let b = parse(&to_bytes(&a), "b").unwrap();
        let m = merge(vec![a, b]).unwrap();
        assert_eq!((m.threads, m.dropped), (u32::MAX, u64::MAX));
        assert_eq!(m.routines[0].dropped, u64::MAX);
        assert!(m.records.iter().all(|r| r.thread == u16::MAX));
    }

    proptest! {
        #[test]
        fn round_trip(
            rate in 1u64..10_000_000_000,
            dropped in any::<u64>(),
            recs in prop::collection::vec(
                (any::<u64>(), any::<u64>(), 0u16..3, any::<u16>(), any::<u16>(),
                 prop::collection::vec(any::<i64>(), 0..=MAX_VALUES)), 0..50),
        ) {
            let mut p = sample();
            p.ticks_per_sec = rate;
            p.dropped = dropped;
            p.routines.push(RoutineInfo { name: "b".into(), values: vec![], defined_in: String::new(), address: None, dropped: 0 });
            p.routines.push(RoutineInfo { name: "c".into(),
                values: RoutineInfo::parse_params("x:f").unwrap(), defined_in: String::new(), address: Some(4096), dropped: 1 });
            p.records = recs.into_iter().map(|(start, ticks, routine, thread, threads, values)| {
                Record { start, ticks, routine, thread, threads, values }
            }).collect();
            let back = parse(&to_bytes(&p), "rt").unwrap();
            prop_assert_eq!(back, p);
        }
    }
}
