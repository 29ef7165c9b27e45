//! The driver's own command line, written once on the Rust side: every
//! option the C runtime's parser (`tdg_parse_options` in
//! templates/tdg_runtime.c) accepts, with the values it takes. `run`'s
//! `driver_args` spells each option it sends through this table, and the
//! tests below read the runtime's parser and its `--help` text and fail on
//! any option or keyword value one side has and the other lacks.

use spec_lang::ast::{FlushMethod, Selection, TimerMethod};
use spec_lang::vocabulary::Keyword;

/// What an option of the driver takes.
#[derive(Debug, Clone, Copy)]
pub enum Takes {
    /// A switch: `--json`.
    Nothing,
    /// `--name=VALUE`: a number or a list of them.
    Value,
    /// `--name=WORD`, one of these words.
    Word(fn() -> Vec<&'static str>),
}

/// One option of the driver's command line.
#[derive(Debug, Clone, Copy)]
pub struct DriverOption {
    /// Without the leading `--`.
    pub name: &'static str,
    pub takes: Takes,
}

impl DriverOption {
    /// `--name=value`, as the driver's parser reads it.
    pub fn with(self, value: impl std::fmt::Display) -> String {
        debug_assert!(
            !matches!(self.takes, Takes::Nothing),
            "--{} takes no value",
            self.name
        );
        format!("--{}={value}", self.name)
    }

    /// `--name`, a switch.
    pub fn switch(self) -> String {
        debug_assert!(
            matches!(self.takes, Takes::Nothing),
            "--{} takes a value",
            self.name
        );
        format!("--{}", self.name)
    }
}

const fn value(name: &'static str) -> DriverOption {
    DriverOption {
        name,
        takes: Takes::Value,
    }
}

const fn switch(name: &'static str) -> DriverOption {
    DriverOption {
        name,
        takes: Takes::Nothing,
    }
}

pub const TIMER: DriverOption = DriverOption {
    name: "timer",
    takes: Takes::Word(TimerMethod::spellings),
};
pub const SAMPLES: DriverOption = value("samples");
pub const MIN_SAMPLES: DriverOption = value("min-samples");
pub const MIN_TIME_MS: DriverOption = value("min-time-ms");
pub const MAX_TIME_MS: DriverOption = value("max-time-ms");
pub const STABLE_PCT: DriverOption = value("stable-pct");
pub const SELECT: DriverOption = DriverOption {
    name: "select",
    takes: Takes::Word(Selection::spellings),
};
pub const FLUSH: DriverOption = DriverOption {
    name: "flush",
    takes: Takes::Word(FlushMethod::spellings),
};
pub const FLUSH_KIB: DriverOption = value("flush-kib");
pub const EVICT_KIB: DriverOption = value("evict-kib");
pub const EVICT_PAGES: DriverOption = value("evict-pages");
pub const FLUSH_ALL_CPUS: DriverOption = switch("flush-all-cpus");
pub const NO_FLUSH_ALL_CPUS: DriverOption = switch("no-flush-all-cpus");
pub const MIN_INTERVAL_NS: DriverOption = value("min-interval-ns");
pub const REPS: DriverOption = value("reps");
pub const PIN: DriverOption = value("pin");
pub const THREADS: DriverOption = value("threads");
pub const FIRST_TOUCH: DriverOption = DriverOption {
    name: "first-touch",
    takes: Takes::Word(first_touch_words),
};
pub const NO_TOUCH: DriverOption = switch("no-touch");
pub const NO_DUMMY_CALL: DriverOption = switch("no-dummy-call");
pub const COLD_CODE: DriverOption = switch("cold-code");
pub const NO_OVERFLOW_GUARD: DriverOption = switch("no-overflow-guard");
pub const NO_VERIFY: DriverOption = switch("no-verify");
pub const TOLERANCE: DriverOption = value("tolerance");
pub const MAX_FLUSH_MIB: DriverOption = value("max-flush-mib");
pub const JSON: DriverOption = switch("json");
pub const DESCRIBE: DriverOption = switch("describe");

fn first_touch_words() -> Vec<&'static str> {
    vec!["threads", "main"]
}

/// Every option of the driver's command line, in its `--help` order.
pub const ALL: &[DriverOption] = &[
    TIMER,
    SAMPLES,
    MIN_SAMPLES,
    MIN_TIME_MS,
    MAX_TIME_MS,
    STABLE_PCT,
    SELECT,
    FLUSH,
    FLUSH_KIB,
    EVICT_KIB,
    EVICT_PAGES,
    FLUSH_ALL_CPUS,
    NO_FLUSH_ALL_CPUS,
    MIN_INTERVAL_NS,
    REPS,
    PIN,
    THREADS,
    FIRST_TOUCH,
    NO_TOUCH,
    NO_DUMMY_CALL,
    COLD_CODE,
    NO_OVERFLOW_GUARD,
    NO_VERIFY,
    TOLERANCE,
    MAX_FLUSH_MIB,
    JSON,
    DESCRIBE,
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const RUNTIME: &str = include_str!("../../templates/tdg_runtime.c");

    /// The body of the C function whose definition starts with `signature`.
    fn function<'a>(signature: &str) -> &'a str {
        let start = RUNTIME.find(signature).expect(signature);
        let end = RUNTIME[start..].find("\n}\n").expect("its closing brace");
        &RUNTIME[start..start + end]
    }

    /// What the runtime's parser accepts: each option with the words it
    /// compares the value against (empty for a number or a switch), and
    /// whether it takes a value.
    fn parsed_by_the_runtime() -> BTreeMap<String, (bool, Vec<String>)> {
        let body = function("int tdg_parse_options(");
        let mut options = BTreeMap::new();
        for branch in body.split("} else if") {
            let quoted = |after: &str| {
                branch.find(after).map(|at| {
                    let rest = &branch[at + after.len()..];
                    rest[..rest.find('"').unwrap()].to_string()
                })
            };
            let (name, takes_value) = if let Some(n) = quoted("TDG_IS(\"--") {
                (n.trim_end_matches('=').to_string(), true)
            } else if let Some(n) = quoted("strcmp(a, \"--") {
                (n, false)
            } else {
                continue;
            };
            if name == "help" {
                continue;
            }
            let mut words = Vec::new();
            let mut rest = branch;
            while let Some(at) = rest.find("strcmp(v, \"") {
                rest = &rest[at + "strcmp(v, \"".len()..];
                words.push(rest[..rest.find('"').unwrap()].to_string());
            }
            options.insert(name, (takes_value, words));
        }
        options
    }

    #[test]
    fn the_runtimes_parser_reads_exactly_the_options_of_the_table() {
        let c = parsed_by_the_runtime();
        let rust: BTreeMap<String, (bool, Vec<String>)> = ALL
            .iter()
            .map(|o| {
                let (value, words) = match o.takes {
                    Takes::Nothing => (false, vec![]),
                    Takes::Value => (true, vec![]),
                    Takes::Word(words) => (true, words().into_iter().map(String::from).collect()),
                };
                (o.name.to_string(), (value, words))
            })
            .collect();
        assert!(c.len() > 20, "the parser was not read: {c:?}");
        for (name, want) in &rust {
            assert_eq!(
                c.get(name),
                Some(want),
                "--{name}: the C runtime's parser differs"
            );
        }
        for name in c.keys() {
            assert!(
                rust.contains_key(name),
                "--{name}: the C runtime parses it, the table lacks it"
            );
        }
    }

    #[test]
    fn the_drivers_help_lists_exactly_the_options_of_the_table() {
        let body = function("void tdg_usage(");
        let listed: Vec<&str> = body
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("\"  --"))
            .map(|l| {
                l.split(|c: char| c == '=' || c.is_whitespace())
                    .next()
                    .unwrap()
            })
            .collect();
        let table: Vec<&str> = ALL.iter().map(|o| o.name).collect();
        assert_eq!(
            listed, table,
            "the driver's --help against the table, in order"
        );
    }

    #[test]
    fn an_option_is_spelled_as_the_driver_reads_it() {
        assert_eq!(TIMER.with("cpu"), "--timer=cpu");
        assert_eq!(JSON.switch(), "--json");
        // The test above would not see a parser branch it cannot read:
        // every branch of the C parser names one option.
        let ifs = function("int tdg_parse_options(")
            .matches("if (TDG_IS(\"--")
            .count()
            + function("int tdg_parse_options(")
                .matches("if (!strcmp(a, \"--")
                .count();
        assert_eq!(ifs, ALL.len() + 1, "one branch per option, plus --help");
    }
}
