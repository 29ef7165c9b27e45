//! A configuration: the values of a candidate's tuning parameters, by name,
//! in the order the search space lists them, each parameter with the
//! [`Kind`] that says how its value reaches the timed candidate (a macro
//! the implementation is compiled with, or the routine's team size).
//!
//! It sits below every crate that builds, runs, searches, stores or reports
//! candidates (tune and its campaigns, the formats, the report pages, the
//! autotuner's dispatcher), so each of them names a configuration with the
//! same type and turns it into compiler and driver options in one place:
//! [`Config::apply`].
//!
//! A value is an integer (`NB=64`) or a name (`ORDER=ikj`: a loop order, a
//! pragma choice; a categorical parameter, whose values have no order).
//!
//! On disk a configuration is a JSON object, `{"NB": 64, "ORDER": "ikj"}`,
//! in its parameters' order; the reader also takes the list of
//! `[name, value]` pairs campaign results were stored as before this type
//! existed.

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The name of the parameter that is not a macro: `--param threads=1:4`
/// searches the routine's team size.
pub const THREADS: &str = "threads";

/// The name of the parameter that places the candidate's code:
/// `--param code_offset=0,16,32,48` searches where the routine starts
/// against 64-byte fetch blocks (the spec's `code_offset=`, bytes past a
/// page), which can move a tight loop's speed by half.
pub const CODE_OFFSET: &str = "code_offset";

/// How a parameter's value reaches the timed candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A preprocessor macro of the implementation: `-DNAME=V` when the
    /// candidate is compiled.
    Macro,
    /// The routine's team size: the driver's `--threads V`, as the spec's
    /// `timer={ threads=N; }` sets it; never a macro. A checkpoint's team
    /// is the application's own, so no candidate on an image takes one.
    Threads,
    /// Where the routine's code starts, bytes past a 4096-byte page: the
    /// driver's `--code-offset V` (and where a deployment places it);
    /// never a macro. A checkpoint's code is where its loader put it.
    CodeOffset,
}

impl Kind {
    /// The kind a parameter's name gives it.
    pub fn of(name: &str) -> Kind {
        match name {
            THREADS => Kind::Threads,
            CODE_OFFSET => Kind::CodeOffset,
            _ => Kind::Macro,
        }
    }

    /// Whether a parameter of this kind may take `value`, and why not.
    pub fn check(self, value: &Value) -> Result<(), String> {
        let value = match (self, value) {
            (Kind::Macro, _) => return Ok(()),
            (_, Value::Int(v)) => *v,
            (_, Value::Name(n)) => {
                return Err(format!(
                    "`{n}` is a name; {} takes integers",
                    match self {
                        Kind::Threads => THREADS,
                        _ => CODE_OFFSET,
                    }
                ))
            }
        };
        match self {
            Kind::Macro => Ok(()),
            Kind::Threads => {
                let most = i64::from(spec_lang::ast::MAX_THREADS);
                if (1..=most).contains(&value) {
                    Ok(())
                } else {
                    Err(format!(
                        "a team size is 1 to {most} threads, e.g. threads=1:4"
                    ))
                }
            }
            Kind::CodeOffset => {
                let page = i64::from(spec_lang::ast::CODE_PAGE);
                if (0..page).contains(&value) {
                    Ok(())
                } else {
                    Err(format!(
                        "a code offset is 0 to {} bytes past a page, e.g. code_offset=0,16,32,48",
                        page - 1
                    ))
                }
            }
        }
    }
}

/// Whether `name` may name a parameter: a C identifier (what `-D` takes,
/// and safe in the file names a campaign gives its configurations).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(format!("`{name}` is not a C macro name"))
    }
}

/// One parameter's value: an integer, or a name (a categorical
/// parameter's choice). Integers order before names; names have no order
/// among themselves that means anything to a search (it is only there so
/// configurations can be sorted and kept in sets).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    Int(i64),
    Name(String),
}

impl Value {
    /// A name value: a C identifier (it becomes a macro's value and part
    /// of a macro name, `-DORDER=ikj -DORDER_ikj`, and of file names).
    pub fn name(text: &str) -> Result<Value, String> {
        check_name(text)
            .map(|()| Value::Name(text.to_string()))
            .map_err(|_| format!("`{text}` is neither an integer nor a C identifier"))
    }

    /// The value as `--param` and `--start` write it: an integer when it
    /// reads as one, else a name.
    pub fn parse(text: &str) -> Result<Value, String> {
        let text = text.trim();
        match text.parse::<i64>() {
            Ok(v) => Ok(Value::Int(v)),
            Err(_) => Value::name(text),
        }
    }

    /// The integer, if the value is one.
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::Name(_) => None,
        }
    }

    pub fn is_name(&self) -> bool {
        matches!(self, Value::Name(_))
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Name(n) => f.write_str(n),
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Int(v) => serializer.serialize_i64(*v),
            Value::Name(n) => serializer.serialize_str(n),
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl Visitor<'_> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer or a C identifier")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        i64::try_from(v)
            .map(Value::Int)
            .map_err(|_| E::custom(format!("{v} is past the largest integer value")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Value::name(v).map_err(E::custom)
    }
}

/// Why a configuration could not be made: one line naming the parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// One parameter's value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Setting {
    name: String,
    kind: Kind,
    value: Value,
}

impl Setting {
    /// `name=value`, its kind given by the name; refused when the name is
    /// not a C identifier or the kind does not admit the value.
    pub fn new(name: &str, value: impl Into<Value>) -> Result<Setting, ConfigError> {
        let value = value.into();
        check_name(name).map_err(ConfigError)?;
        let kind = Kind::of(name);
        kind.check(&value)
            .map_err(|why| ConfigError(format!("{name}={value}: {why}")))?;
        Ok(Setting {
            name: name.to_string(),
            kind,
            value,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The value if it is an integer.
    pub fn int(&self) -> Option<i64> {
        self.value.int()
    }
}

impl Setting {
    /// The macros a macro parameter defines: `NB=64`; for a name,
    /// `ORDER=ikj` and its selector `ORDER_ikj=1`.
    fn macros(&self) -> Vec<(String, String)> {
        let mut out = vec![(self.name.clone(), self.value.to_string())];
        if let Value::Name(n) = &self.value {
            out.push((format!("{}_{n}", self.name), "1".into()));
        }
        out
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.value)
    }
}

/// Named parameter values in order; each name once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Config {
    settings: Vec<Setting>,
}

impl Config {
    /// No parameters: the candidate as its defaults build it.
    pub fn new() -> Config {
        Config::default()
    }

    /// A configuration of `(name, value)` pairs in order.
    pub fn from_pairs<N: AsRef<str>, V: Into<Value>>(
        pairs: impl IntoIterator<Item = (N, V)>,
    ) -> Result<Config, ConfigError> {
        let mut c = Config::new();
        for (name, value) in pairs {
            c.push(Setting::new(name.as_ref(), value)?)?;
        }
        Ok(c)
    }

    /// Adds a parameter after the others; a name given twice is refused.
    pub fn push(&mut self, setting: Setting) -> Result<(), ConfigError> {
        if self.setting(&setting.name).is_some() {
            return Err(ConfigError(format!("`{}` is given twice", setting.name)));
        }
        self.settings.push(setting);
        Ok(())
    }

    /// Gives `setting`'s parameter its value, where it is, or adds it last.
    pub fn set(&mut self, setting: Setting) {
        match self.settings.iter_mut().find(|s| s.name == setting.name) {
            Some(s) => *s = setting,
            None => self.settings.push(setting),
        }
    }

    /// The parameter's value when it is an integer (`None` for a name or
    /// a parameter the configuration lacks: see [`Config::value`]).
    pub fn get(&self, name: &str) -> Option<i64> {
        self.setting(name).and_then(Setting::int)
    }

    /// The parameter's value, integer or name.
    pub fn value(&self, name: &str) -> Option<&Value> {
        self.setting(name).map(Setting::value)
    }

    pub fn setting(&self, name: &str) -> Option<&Setting> {
        self.settings.iter().find(|s| s.name == name)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Setting> {
        self.settings.iter()
    }

    pub fn len(&self) -> usize {
        self.settings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.settings.is_empty()
    }

    /// The parameters of `kind`.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Setting> {
        self.settings.iter().filter(move |s| s.kind == kind)
    }

    /// The team size the configuration asks for, if it has one.
    pub fn team_size(&self) -> Option<u32> {
        self.of_kind(Kind::Threads)
            .next()
            .and_then(|s| u32::try_from(s.int()?).ok())
    }

    /// The configuration applied to a candidate's options, the one place
    /// each kind is given its way in: each macro replaces any `-D` of the
    /// same name in `defines` (appended after the others); a name value
    /// also defines its selector, `ORDER=ikj` is `-DORDER=ikj -DORDER_ikj=1`
    /// (the value for token pasting, the selector for `#ifdef`); the team size
    /// replaces `threads`. The code offset is not an option of the
    /// candidate's build or run but of its placement: whoever places code
    /// (a driver, a deployment) reads [`Config::code_offset`].
    pub fn apply(&self, defines: &mut Vec<(String, String)>, threads: &mut Option<u32>) {
        for s in &self.settings {
            match s.kind {
                Kind::Macro => {
                    for (name, value) in s.macros() {
                        defines.retain(|(k, _)| *k != name);
                        defines.push((name, value));
                    }
                }
                Kind::Threads => *threads = s.int().and_then(|v| u32::try_from(v).ok()),
                Kind::CodeOffset => {}
            }
        }
    }

    /// The compiler's options for the macros: `-DNB=64 -DMU=4`.
    pub fn build_flags(&self) -> Vec<String> {
        self.of_kind(Kind::Macro)
            .flat_map(Setting::macros)
            .map(|(name, value)| format!("-D{name}={value}"))
            .collect()
    }

    /// The driver's options for the rest: `--threads 2 --code-offset 32`.
    pub fn run_flags(&self) -> Vec<String> {
        let threads = self.team_size().map(|n| format!("--threads {n}"));
        let placed = self.code_offset().map(|o| format!("--code-offset {o}"));
        threads.into_iter().chain(placed).collect()
    }

    /// Where the configuration places the routine's code, if it says.
    pub fn code_offset(&self) -> Option<u32> {
        self.of_kind(Kind::CodeOffset)
            .next()
            .and_then(|s| u32::try_from(s.int()?).ok())
    }

    /// "NB=64_MU=4_NU=2": the name of the configuration's files (a
    /// campaign's result and kept build); `default` for no parameters.
    /// Names are C identifiers, so it is one path component.
    pub fn file_stem(&self) -> String {
        if self.settings.is_empty() {
            return "default".into();
        }
        self.settings
            .iter()
            .map(Setting::to_string)
            .collect::<Vec<_>>()
            .join("_")
    }
}

impl<'a> IntoIterator for &'a Config {
    type Item = &'a Setting;
    type IntoIter = std::slice::Iter<'a, Setting>;
    fn into_iter(self) -> Self::IntoIter {
        self.settings.iter()
    }
}

/// "NB=64 MU=4 NU=2": the configuration as it is written everywhere.
impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.settings.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// Configurations on one line, each written as [`Config`]'s `Display`
/// (settings apart by spaces), the configurations apart by "; ".
pub fn listed(configs: &[Config]) -> String {
    configs
        .iter()
        .map(Config::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl Serialize for Config {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.settings.len()))?;
        for s in &self.settings {
            map.serialize_entry(&s.name, &s.value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Config, D::Error> {
        deserializer.deserialize_any(ConfigVisitor)
    }
}

struct ConfigVisitor;

impl<'de> Visitor<'de> for ConfigVisitor {
    type Value = Config;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a configuration: an object of parameter names and integer or name values")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Config, A::Error> {
        let mut c = Config::new();
        while let Some((name, value)) = map.next_entry::<String, Value>()? {
            add(&mut c, &name, value)?;
        }
        Ok(c)
    }

    /// `[["NB", 64], ["MU", 4]]`: campaign results stored before this type.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Config, A::Error> {
        let mut c = Config::new();
        while let Some((name, value)) = seq.next_element::<(String, Value)>()? {
            add(&mut c, &name, value)?;
        }
        Ok(c)
    }
}

fn add<E: de::Error>(c: &mut Config, name: &str, value: Value) -> Result<(), E> {
    Setting::new(name, value)
        .and_then(|s| c.push(s))
        .map_err(E::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemm() -> Config {
        Config::from_pairs([("NB", 64), ("MU", 4), ("threads", 2)]).unwrap()
    }

    #[test]
    fn each_kind_reaches_the_candidate_its_own_way() {
        let c = gemm();
        assert_eq!(c.to_string(), "NB=64 MU=4 threads=2");
        assert_eq!(c.build_flags(), ["-DNB=64", "-DMU=4"]);
        assert_eq!(c.run_flags(), ["--threads 2"]);
        let mut defines = vec![
            ("NB".to_string(), "32".to_string()),
            ("N".into(), "100".into()),
        ];
        let mut threads = Some(1);
        c.apply(&mut defines, &mut threads);
        // The configuration's NB replaces the fixed one; N stays.
        assert_eq!(
            defines,
            [
                ("N".into(), "100".into()),
                ("NB".into(), "64".into()),
                ("MU".into(), "4".into())
            ]
        );
        assert_eq!(threads, Some(2));
        assert_eq!(c.team_size(), Some(2));
        assert_eq!(Config::from_pairs([("NB", 1)]).unwrap().team_size(), None);
    }

    #[test]
    fn names_are_identifiers_once_each_and_a_team_has_a_thread() {
        for (pairs, why) in [
            (vec![("9X", 1)], "not a C macro name"),
            (vec![("../x", 1)], "not a C macro name"),
            (vec![("", 1)], "not a C macro name"),
            (vec![("NB", 1), ("NB", 2)], "given twice"),
            (vec![("threads", 0)], "a team size is 1 to 1024 threads"),
        ] {
            let e = Config::from_pairs(pairs).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        let mut c = gemm();
        c.set(Setting::new("MU", 8).unwrap());
        c.set(Setting::new("KU", 1).unwrap());
        assert_eq!(c.to_string(), "NB=64 MU=8 threads=2 KU=1");
        assert_eq!(c.get("MU"), Some(8));
        assert_eq!(c.get("mu"), None);
    }

    #[test]
    fn json_keeps_the_order_and_reads_the_old_pairs() {
        let c = gemm();
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(text, r#"{"NB":64,"MU":4,"threads":2}"#);
        assert_eq!(serde_json::from_str::<Config>(&text).unwrap(), c);
        let old: Config = serde_json::from_str(r#"[["NB",64],["MU",4],["threads",2]]"#).unwrap();
        assert_eq!(old, c);
        for bad in [
            r#"{"NB":1.5}"#,
            r#"{"NB":"x y"}"#,
            r#"{"threads":"two"}"#,
            r#"{"NB":1,"NB":2}"#,
            r#"{"a/b":1}"#,
            r#"[["NB"]]"#,
            r#"{"threads":-1}"#,
            "7",
        ] {
            assert!(serde_json::from_str::<Config>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_file_stem_is_one_path_component() {
        assert_eq!(gemm().file_stem(), "NB=64_MU=4_threads=2");
        assert_eq!(Config::new().file_stem(), "default");
        assert!(!gemm().file_stem().contains('/'));
    }

    #[test]
    fn a_code_offset_places_the_code_and_is_no_macro() {
        let c = Config::from_pairs([("MU", 4), ("code_offset", 48)]).unwrap();
        assert_eq!(c.code_offset(), Some(48));
        assert_eq!(c.build_flags(), ["-DMU=4"]);
        assert_eq!(c.run_flags(), ["--code-offset 48"]);
        let mut defines = Vec::new();
        let mut threads = None;
        c.apply(&mut defines, &mut threads);
        assert_eq!(defines, [("MU".to_string(), "4".to_string())]);
        assert!(Setting::new("code_offset", 4096).is_err());
        assert!(Setting::new("code_offset", -1).is_err());
    }

    #[test]
    fn a_name_value_reaches_the_candidate_as_its_macro_and_selector() {
        let c = Config::from_pairs([
            ("NB", Value::Int(64)),
            ("ORDER", Value::name("ikj").unwrap()),
        ])
        .unwrap();
        assert_eq!(c.to_string(), "NB=64 ORDER=ikj");
        assert_eq!(c.build_flags(), ["-DNB=64", "-DORDER=ikj", "-DORDER_ikj=1"]);
        assert_eq!(c.get("ORDER"), None);
        assert_eq!(c.value("ORDER"), Some(&Value::Name("ikj".into())));
        let mut defines = vec![("ORDER".to_string(), "ijk".to_string())];
        let mut threads = None;
        c.apply(&mut defines, &mut threads);
        assert_eq!(
            defines,
            [
                ("NB".to_string(), "64".to_string()),
                ("ORDER".into(), "ikj".into()),
                ("ORDER_ikj".into(), "1".into())
            ]
        );
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(text, r#"{"NB":64,"ORDER":"ikj"}"#);
        assert_eq!(serde_json::from_str::<Config>(&text).unwrap(), c);
        assert_eq!(c.file_stem(), "NB=64_ORDER=ikj");
        for bad in ["a-b", "1x", ""] {
            assert!(Value::name(bad).is_err(), "{bad}");
        }
        assert_eq!(Value::parse(" 12 "), Ok(Value::Int(12)));
        let e = Setting::new("threads", Value::name("two").unwrap()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "threads=two: `two` is a name; threads takes integers"
        );
    }
}
