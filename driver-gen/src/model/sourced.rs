//! Where a timing setting's value came from, carried with the value from
//! the one place it is resolved to the driver, `tdg explain` and the report.

use serde::{Deserialize, Serialize};

/// Where a timing setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The caller's [`TimingOverrides`]: `tdg`'s options, or a library
    /// caller's (a tuner's share of the sampling budget, a flush sweep).
    CommandLine,
    /// The spec's `timer={...}` clause.
    Spec,
    /// This machine: the probe's measurements or sysfs.
    Machine,
    /// tdg's own default (or a rule on other settings, named in the detail).
    Default,
}

impl Source {
    /// How reports and `tdg explain` name it.
    pub fn describe(self) -> &'static str {
        match self {
            Source::CommandLine => "command line",
            Source::Spec => "spec timer={...}",
            Source::Machine => "machine",
            Source::Default => "default",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

/// A resolved setting: its value, where it came from, and how the value
/// follows from that source when it is not the value itself ("2 x L2 size
/// 1024 KiB (sysfs)" for a flush the spec sized by level).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl<T> Sourced<T> {
    pub fn new(value: T, source: Source) -> Self {
        Sourced {
            value,
            source,
            detail: String::new(),
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    /// The precedence of every timing setting, written once: the command
    /// line, else the spec, else `fallback` (the machine's or tdg's value).
    pub(super) fn pick(
        cli: Option<T>,
        spec: Option<T>,
        fallback: impl FnOnce() -> Sourced<T>,
    ) -> Self {
        match (cli, spec) {
            (Some(v), _) => Sourced::new(v, Source::CommandLine),
            (None, Some(v)) => Sourced::new(v, Source::Spec),
            (None, None) => fallback(),
        }
    }

    /// The source and the detail without the value.
    pub fn origin(&self) -> Origin {
        Origin {
            source: self.source,
            detail: self.detail.clone(),
        }
    }
}

/// Where a setting came from, for a report that holds the value elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub source: Source,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl std::fmt::Display for Origin {
    /// "command line", "machine: tdg probe: measured full flush".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.detail.as_str() {
            "" => f.write_str(self.source.describe()),
            d => write!(f, "{}: {d}", self.source.describe()),
        }
    }
}
