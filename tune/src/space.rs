//! The search space: named parameters (macros the kernel is compiled
//! with, or the routine's team size), each with an explicit list of
//! values, integers (ordered) or names (categorical: a loop order, a
//! pragma choice; no order, no distance but "same or not"), and the
//! constraints every configuration must meet (checked
//! before anything is built: a configuration that violates one is never
//! compiled).

use crate::TuneError;
use config::{Config, Kind, Setting, Value};
use serde::Serialize;
use spec_lang::ast::Constraint;
use spec_lang::eval::Value as Number;
use std::collections::BTreeMap;
use std::fmt;

/// One tunable parameter and the values it may take: integers ascending,
/// or names (a categorical parameter) in the order given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Param {
    pub name: String,
    /// How its value reaches the candidate (by its name: `threads` is the
    /// team size, anything else a macro).
    pub kind: Kind,
    pub values: Vec<Value>,
}

impl Param {
    /// A parameter of integer values (sorted, each once).
    pub fn ints(name: &str, values: impl IntoIterator<Item = i64>) -> Param {
        let mut values: Vec<i64> = values.into_iter().collect();
        values.sort_unstable();
        values.dedup();
        Param {
            name: name.to_string(),
            kind: Kind::of(name),
            values: values.into_iter().map(Value::Int).collect(),
        }
    }

    /// Whether its values are names: no order, no distance between them
    /// (a search moves to any other name, never to a "next" one).
    pub fn categorical(&self) -> bool {
        self.values.first().is_some_and(Value::is_name)
    }

    /// Its `i`th value as an integer; 0 for a name (only parameters with
    /// roles or kinds are read as numbers, and those are integers).
    pub fn int(&self, i: usize) -> i64 {
        self.values[i].int().unwrap_or(0)
    }

    /// Its integer values.
    pub fn int_values(&self) -> impl Iterator<Item = i64> + '_ {
        self.values.iter().filter_map(Value::int)
    }
}

/// A parameter by `NAME=LO:HI[:STEP]` or `NAME=V1,V2,...`, where the
/// values of a list are all integers or all names (C identifiers:
/// `ORDER=ijk,ikj,jik` is categorical).
pub fn parse_param(text: &str) -> Result<Param, TuneError> {
    let bad = |why: String| TuneError::BadParam {
        text: text.to_string(),
        why,
    };
    let (name, range) = text
        .split_once('=')
        .ok_or_else(|| bad("expected NAME=LO:HI[:STEP] or NAME=V1,V2,...".into()))?;
    let name = name.trim();
    config::check_name(name).map_err(bad)?;
    let int = |s: &str| {
        s.trim()
            .parse::<i64>()
            .map_err(|_| bad(format!("`{}` is not an integer", s.trim())))
    };
    let mut values: Vec<i64> = if range.contains(':') {
        let parts: Vec<&str> = range.split(':').collect();
        if parts.len() > 3 {
            return Err(bad("a range has at most LO:HI:STEP".into()));
        }
        let (lo, hi) = (int(parts[0])?, int(parts[1])?);
        let step = if parts.len() == 3 { int(parts[2])? } else { 1 };
        if step <= 0 {
            return Err(bad(format!("step {step} must be positive")));
        }
        if hi < lo {
            return Err(bad(format!("{lo}:{hi} is empty (LO > HI)")));
        }
        // i128: LO and HI anywhere in i64 must neither overflow nor wrap
        // into a range that never ends.
        let count = (i128::from(hi) - i128::from(lo)) / i128::from(step) + 1;
        if count > 100_000 {
            return Err(bad("more than 100000 values; use a larger step".into()));
        }
        (0..count as i64).map(|i| lo + i * step).collect()
    } else {
        let items: Vec<Value> = range
            .split(',')
            .map(|v| Value::parse(v).map_err(&bad))
            .collect::<Result<_, _>>()?;
        if items.iter().any(Value::is_name) {
            return categorical(name, items).map_err(bad);
        }
        items.iter().filter_map(Value::int).collect()
    };
    values.sort_unstable();
    values.dedup();
    if values.is_empty() {
        return Err(bad("no values".into()));
    }
    let param = Param::ints(name, values);
    for v in [&param.values[0], &param.values[param.values.len() - 1]] {
        param.kind.check(v).map_err(bad)?;
    }
    Ok(param)
}

/// A categorical parameter: names only, each once, in the order given.
fn categorical(name: &str, items: Vec<Value>) -> Result<Param, String> {
    if let Some(i) = items.iter().find(|v| !v.is_name()) {
        return Err(format!(
            "`{i}` is an integer among names; a parameter's values are all integers or all names"
        ));
    }
    let kind = Kind::of(name);
    kind.check(&items[0])?;
    let mut values: Vec<Value> = Vec::with_capacity(items.len());
    for v in items {
        if !values.contains(&v) {
            values.push(v);
        }
    }
    Ok(Param {
        name: name.to_string(),
        kind,
        values,
    })
}

/// Where a constraint was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConstraintOrigin {
    /// `constraint="..."` in the spec's `tune` clause.
    Spec,
    /// `--constraint`.
    CommandLine,
}

/// A constraint of the space with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpaceConstraint {
    pub text: String,
    pub origin: ConstraintOrigin,
    #[serde(skip)]
    pub constraint: Constraint,
}

/// A `--constraint` text, parsed; its error is one line with the column.
pub fn parse_constraint(text: &str) -> Result<SpaceConstraint, TuneError> {
    let condition = spec_lang::parse_condition(text, 0).map_err(|d| {
        let col = d
            .span
            .map_or(1, |s| text[..s.start.min(text.len())].chars().count() + 1);
        TuneError::BadConstraint {
            text: text.to_string(),
            why: format!(
                "{} at column {col}{}",
                d.message,
                d.hint.map(|h| format!(" ({h})")).unwrap_or_default()
            ),
        }
    })?;
    Ok(SpaceConstraint {
        text: text.to_string(),
        origin: ConstraintOrigin::CommandLine,
        constraint: Constraint {
            text: text.to_string(),
            condition,
        },
    })
}

/// The cartesian product of the parameters, less the configurations the
/// constraints rule out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Space {
    pub params: Vec<Param>,
    pub constraints: Vec<SpaceConstraint>,
    /// Values of the spec's fixed macros (sizes after `-D`) a constraint
    /// may read beside the parameters.
    #[serde(skip)]
    pub fixed: BTreeMap<String, i64>,
    /// Only these points exist (a recorded space replayed: what its file
    /// holds); `None`: the whole product.
    #[serde(skip)]
    pub recorded: Option<std::collections::BTreeSet<Point>>,
}

/// Most configurations enumerated to count or search the allowed ones.
const ENUMERATION_LIMIT: u128 = 4_000_000;

/// A point of the space as one index into each parameter's values.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point(pub Vec<usize>);

impl Space {
    pub fn new(params: Vec<Param>) -> Result<Space, TuneError> {
        if params.is_empty() {
            return Err(TuneError::EmptySpace);
        }
        for (i, p) in params.iter().enumerate() {
            if params[..i].iter().any(|q| q.name == p.name) {
                return Err(TuneError::BadParam {
                    text: p.name.clone(),
                    why: "given twice".into(),
                });
            }
        }
        Ok(Space {
            params,
            constraints: Vec::new(),
            fixed: BTreeMap::new(),
            recorded: None,
        })
    }

    /// The space with `constraints`, which may read the parameters and the
    /// `fixed` macros (the spec's sizes): a name that is neither is an
    /// error, as is a space no configuration of which meets them all.
    pub fn constrained(
        mut self,
        constraints: Vec<SpaceConstraint>,
        fixed: BTreeMap<String, i64>,
    ) -> Result<Space, TuneError> {
        for c in &constraints {
            for name in c.constraint.condition.names() {
                if self.index_of(&name.name).is_none()
                    && !fixed.contains_key(&name.name)
                    && self.choice_number(&name.name).is_none()
                {
                    let tuned: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
                    return Err(TuneError::BadConstraint {
                        text: c.text.clone(),
                        why: format!(
                            "`{}` is neither a tuned parameter ({}) nor a macro of the spec{}",
                            name.name,
                            tuned.join(", "),
                            match c.origin {
                                ConstraintOrigin::Spec =>
                                    " (the constraint is in the spec's tune clause)",
                                ConstraintOrigin::CommandLine => "",
                            }
                        ),
                    });
                }
            }
        }
        self.constraints = constraints;
        self.fixed = fixed;
        if !self.constraints.is_empty()
            && self.size() <= ENUMERATION_LIMIT
            && self.all_points().next().is_none()
        {
            return Err(TuneError::BadConstraint {
                    text: self
                        .constraints
                        .iter()
                        .map(|c| c.text.as_str())
                        .collect::<Vec<_>>()
                        .join("; "),
                    why: "no configuration of the --param ranges meets them all; widen a range or relax a constraint".into(),
                });
        }
        Ok(self)
    }

    /// Whether `p` meets every constraint. A constraint that cannot be
    /// evaluated at `p` (a division by zero) rules it out.
    pub fn allows(&self, p: &Point) -> bool {
        if self.recorded.as_ref().is_some_and(|r| !r.contains(p)) {
            return false;
        }
        if self.constraints.is_empty() {
            return true;
        }
        // A categorical parameter reads as its value's position and each
        // of its names as theirs, so `ORDER == ikj` and `ORDER != ijk`
        // mean what they say; a parameter or macro of the same name wins.
        let mut env: BTreeMap<String, Number> = self
            .params
            .iter()
            .filter(|q| q.categorical())
            .flat_map(|q| q.values.iter().enumerate())
            .map(|(i, v)| (v.to_string(), Number::Int(i as i64)))
            .collect();
        env.extend(self.fixed.iter().map(|(k, v)| (k.clone(), Number::Int(*v))));
        for (param, &i) in self.params.iter().zip(&p.0) {
            let number = param.values[i].int().unwrap_or(i as i64);
            env.insert(param.name.clone(), Number::Int(number));
        }
        self.constraints.iter().all(|c| {
            spec_lang::eval::eval_condition(&c.constraint.condition, &env).unwrap_or(false)
        })
    }

    /// Configurations that meet the constraints, when the space is small
    /// enough to count them.
    pub fn allowed_size(&self) -> Option<u128> {
        if let Some(r) = &self.recorded {
            return Some(r.iter().filter(|p| self.allows(p)).count() as u128);
        }
        if self.constraints.is_empty() {
            return Some(self.size());
        }
        (self.size() <= ENUMERATION_LIMIT).then(|| self.all_points().count() as u128)
    }

    /// Number of configurations.
    pub fn size(&self) -> u128 {
        self.params.iter().map(|p| p.values.len() as u128).product()
    }

    /// The position of a categorical parameter's value named `name`.
    fn choice_number(&self, name: &str) -> Option<usize> {
        self.params
            .iter()
            .filter(|q| q.categorical())
            .find_map(|q| q.values.iter().position(|v| v.to_string() == name))
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.params
            .iter()
            .position(|p| p.name.eq_ignore_ascii_case(name))
    }

    /// The configuration at a point.
    pub fn config(&self, p: &Point) -> Config {
        Config::from_pairs(
            self.params
                .iter()
                .zip(&p.0)
                .map(|(param, &i)| (param.name.as_str(), param.values[i].clone())),
        )
        .expect("a space's parameters are distinct identifiers with values their kind admits")
    }

    /// The value of parameter `dim` at a point, as an integer (0 for a
    /// name: read only for parameters with roles, which are integers).
    pub fn value(&self, p: &Point, dim: usize) -> i64 {
        self.params[dim].int(p.0[dim])
    }

    /// The point of a configuration of this space's parameters (any order),
    /// when each value is one of its parameter's.
    pub fn point_of(&self, config: &Config) -> Option<Point> {
        if config.len() != self.params.len() {
            return None;
        }
        self.params
            .iter()
            .map(|p| {
                let v = config.value(&p.name)?;
                p.values.iter().position(|x| x == v)
            })
            .collect::<Option<Vec<usize>>>()
            .map(Point)
    }

    /// The allowed point nearest to `wanted`: by parameter when that one
    /// meets the constraints, else the allowed point fewest value steps
    /// away from it (ties: the earlier parameters move least). A name is
    /// one step from every other name of its parameter.
    pub fn nearest<V: Clone + Into<Value>>(&self, wanted: &[V]) -> Point {
        let unconstrained = self.nearest_unconstrained(wanted);
        if self.allows(&unconstrained)
            || (self.recorded.is_none() && self.size() > ENUMERATION_LIMIT)
        {
            return unconstrained;
        }
        self.all_points()
            .min_by_key(|q| {
                let steps = self.steps_by_dim(q, &unconstrained);
                (steps.iter().sum::<usize>(), steps)
            })
            .unwrap_or(unconstrained)
    }

    /// Value steps between two points, by parameter: indices apart for
    /// integers, 0 or 1 for names (any other name is one step away).
    pub fn steps_by_dim(&self, a: &Point, b: &Point) -> Vec<usize> {
        (0..a.0.len())
            .map(|d| {
                let (x, y) = (a.0[d], b.0[d]);
                if self.params[d].categorical() {
                    usize::from(x != y)
                } else {
                    x.abs_diff(y)
                }
            })
            .collect()
    }

    /// Value steps between two points, over all parameters.
    pub fn steps(&self, a: &Point, b: &Point) -> usize {
        self.steps_by_dim(a, b).iter().sum()
    }

    fn nearest_unconstrained<V: Clone + Into<Value>>(&self, wanted: &[V]) -> Point {
        Point(
            self.params
                .iter()
                .zip(wanted)
                .map(|(p, w)| match w.clone().into() {
                    Value::Int(w) => (0..p.values.len())
                        .min_by_key(|&i| match &p.values[i] {
                            Value::Int(v) => (v.abs_diff(w), *v),
                            Value::Name(_) => (u64::MAX, 0),
                        })
                        .expect("parameters have values"),
                    name => p.values.iter().position(|v| *v == name).unwrap_or(0),
                })
                .collect(),
        )
    }

    /// The neighbours of `p` along `dim`, allowed or not: the values one
    /// step below and above for integers; every other value for names (a
    /// categorical parameter has no "next" value: each is one move away).
    pub fn neighbours(&self, p: &Point, dim: usize) -> Vec<Point> {
        if self.params[dim].categorical() {
            return (0..self.params[dim].values.len())
                .filter(|&i| i != p.0[dim])
                .map(|i| {
                    let mut q = p.clone();
                    q.0[dim] = i;
                    q
                })
                .collect();
        }
        [-1, 1]
            .into_iter()
            .filter_map(|delta| self.step(p, dim, delta))
            .collect()
    }

    /// Moves dimension `dim` by `delta` indices; `None` off the edge, and
    /// for a categorical parameter, whose values have no order to step
    /// along (see [`Space::neighbours`]).
    pub fn step(&self, p: &Point, dim: usize, delta: isize) -> Option<Point> {
        if self.params[dim].categorical() {
            return None;
        }
        let i = p.0[dim] as isize + delta;
        if i < 0 || i as usize >= self.params[dim].values.len() {
            return None;
        }
        let mut q = p.clone();
        q.0[dim] = i as usize;
        Some(q)
    }

    /// Every allowed point, last parameter varying fastest. Lazy, so
    /// `--exhaustive` with a budget on a huge space does not materialise
    /// the product.
    pub fn all_points(&self) -> Box<dyn Iterator<Item = Point> + '_> {
        match &self.recorded {
            Some(r) => Box::new(r.iter().filter(|p| self.allows(p)).cloned()),
            None => Box::new(self.every_point().filter(|p| self.allows(p))),
        }
    }

    fn every_point(&self) -> impl Iterator<Item = Point> + '_ {
        let mut next = Some(Point(vec![0; self.params.len()]));
        std::iter::from_fn(move || {
            let current = next.take()?;
            let mut q = current.clone();
            // Odometer increment from the last parameter.
            for dim in (0..q.0.len()).rev() {
                q.0[dim] += 1;
                if q.0[dim] < self.params[dim].values.len() {
                    next = Some(q);
                    break;
                }
                q.0[dim] = 0;
            }
            Some(current)
        })
    }

    /// "NB=64 MU=4 NU=2".
    pub fn describe(&self, p: &Point) -> String {
        self.config(p).to_string()
    }
}

impl fmt::Display for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .params
            .iter()
            .map(|p| {
                if p.categorical() {
                    let names: Vec<String> = p.values.iter().map(Value::to_string).collect();
                    format!("{} ({})", p.name, names.join("|"))
                } else {
                    format!(
                        "{} ({} values {}..{})",
                        p.name,
                        p.values.len(),
                        p.values[0],
                        p.values[p.values.len() - 1]
                    )
                }
            })
            .collect();
        write!(f, "{}", parts.join(" x "))
    }
}

/// `--start NAME=VALUE`: a start value for one of `space`'s parameters,
/// named as the space names it.
pub fn parse_start(text: &str, space: &Space) -> Result<Setting, TuneError> {
    let bad = |why: String| TuneError::BadStart {
        text: text.to_string(),
        why,
    };
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| bad("expected NAME=VALUE".into()))?;
    let dim = space
        .index_of(name.trim())
        .ok_or_else(|| bad(format!("`{name}` is not one of the --param names")))?;
    let param = &space.params[dim];
    let value = if param.categorical() {
        let v = Value::parse(value).map_err(&bad)?;
        if !param.values.contains(&v) {
            let names: Vec<String> = param.values.iter().map(Value::to_string).collect();
            return Err(bad(format!(
                "`{v}` is not one of {}'s values ({})",
                param.name,
                names.join(", ")
            )));
        }
        v
    } else {
        Value::Int(
            value
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{value}` is not an integer")))?,
        )
    };
    Setting::new(&param.name, value).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_value_names_a_parameter_of_the_space() {
        let space = Space::new(vec![parse_param("NB=16:64:16").unwrap()]).unwrap();
        assert_eq!(
            parse_start("nb=32", &space).unwrap(),
            Setting::new("NB", 32).unwrap()
        );
        for (text, why) in [
            ("NB", "expected NAME=VALUE"),
            ("NB=x", "`x` is not an integer"),
            ("XX=3", "`XX` is not one of the --param names"),
        ] {
            let e = parse_start(text, &space).unwrap_err();
            assert_eq!(e.to_string(), format!("--start {text}: {why}"));
            assert_eq!(e.failure(), Some(failure::Failure::Usage));
        }
    }

    #[test]
    fn a_team_size_is_at_least_one_thread() {
        assert_eq!(
            parse_param("threads=1:4")
                .unwrap()
                .int_values()
                .collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        for bad in ["threads=0:2", "threads=2,2000"] {
            let e = parse_param(bad).unwrap_err().to_string();
            assert!(e.contains("a team size is 1 to 1024 threads"), "{bad}: {e}");
        }
    }

    #[test]
    fn parses_ranges_steps_and_lists() {
        assert_eq!(
            parse_param("NB=16:64:16")
                .unwrap()
                .int_values()
                .collect::<Vec<_>>(),
            vec![16, 32, 48, 64]
        );
        assert_eq!(
            parse_param("MU=1:4")
                .unwrap()
                .int_values()
                .collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        assert_eq!(
            parse_param("NB=16:60:16")
                .unwrap()
                .int_values()
                .collect::<Vec<_>>(),
            vec![16, 32, 48]
        );
        assert_eq!(
            parse_param("X=8,2,4,2")
                .unwrap()
                .int_values()
                .collect::<Vec<_>>(),
            vec![2, 4, 8]
        );
        // A range ending near i64::MAX stops at HI instead of wrapping.
        assert_eq!(
            parse_param("N=9223372036854775800:9223372036854775807:5")
                .unwrap()
                .int_values()
                .collect::<Vec<_>>(),
            vec![9223372036854775800, 9223372036854775805]
        );
    }

    #[test]
    fn rejects_bad_params_with_the_reason() {
        for (text, why) in [
            ("NB", "expected NAME="),
            ("NB=16:8", "empty"),
            ("NB=1:8:0", "must be positive"),
            ("NB=a:8", "not an integer"),
            ("9X=1:2", "not a C macro name"),
            ("NB=1:2:3:4", "at most"),
            (
                "NB=-9223372036854775808:9223372036854775807",
                "more than 100000",
            ),
        ] {
            let e = parse_param(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
        let dup = Space::new(vec![
            parse_param("A=1:2").unwrap(),
            parse_param("A=3:4").unwrap(),
        ]);
        assert!(dup.unwrap_err().to_string().contains("given twice"));
    }

    #[test]
    fn enumerates_steps_and_snaps() {
        let s = Space::new(vec![
            parse_param("NB=16:64:16").unwrap(),
            parse_param("MU=1:3").unwrap(),
        ])
        .unwrap();
        assert_eq!(s.size(), 12);
        let all: Vec<Point> = s.all_points().collect();
        assert_eq!(all.len(), 12);
        assert_eq!(s.describe(&all[1]), "NB=16 MU=2");
        assert_eq!(s.describe(&all[11]), "NB=64 MU=3");
        let mut uniq = all.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), 12);
        let p = s.nearest(&[37, 9]);
        assert_eq!(s.describe(&p), "NB=32 MU=3");
        assert_eq!(s.step(&p, 1, 1), None);
        assert_eq!(s.describe(&s.step(&p, 0, 2).unwrap()), "NB=64 MU=3");
    }

    #[test]
    fn names_make_a_categorical_parameter_in_their_order() {
        let order = parse_param("ORDER=ikj,ijk,jik,ijk").unwrap();
        assert!(order.categorical());
        let names: Vec<String> = order.values.iter().map(Value::to_string).collect();
        assert_eq!(names, ["ikj", "ijk", "jik"]);
        for (text, why) in [
            ("ORDER=ijk,2", "`2` is an integer among names"),
            (
                "ORDER=ijk,a-b",
                "`a-b` is neither an integer nor a C identifier",
            ),
            ("threads=one,two", "`one` is a name; threads takes integers"),
            ("ORDER=ijk:ikj", "`ijk` is not an integer"),
        ] {
            let e = parse_param(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
        let space = Space::new(vec![order, parse_param("NB=16,32").unwrap()])
            .unwrap()
            .constrained(
                vec![parse_constraint("ORDER != jik || NB == 32").unwrap()],
                BTreeMap::new(),
            )
            .unwrap();
        let all: Vec<String> = space.all_points().map(|p| space.describe(&p)).collect();
        assert_eq!(
            all,
            [
                "ORDER=ikj NB=16",
                "ORDER=ikj NB=32",
                "ORDER=ijk NB=16",
                "ORDER=ijk NB=32",
                "ORDER=jik NB=32"
            ]
        );
        // Wanted `jik` with NB=16 is ruled out: the nearest allowed point
        // changes one thing, and a name is one step from any other.
        let p = space.nearest(&[Value::name("jik").unwrap(), Value::Int(16)]);
        assert_eq!(space.describe(&p), "ORDER=jik NB=32");
        assert_eq!(
            parse_start("ORDER=ijk", &space).unwrap(),
            Setting::new("ORDER", Value::name("ijk").unwrap()).unwrap()
        );
        let e = parse_start("ORDER=kji", &space).unwrap_err().to_string();
        assert!(
            e.contains("`kji` is not one of ORDER's values (ikj, ijk, jik)"),
            "{e}"
        );
        assert_eq!(
            space.to_string(),
            "ORDER (ikj|ijk|jik) x NB (2 values 16..32)"
        );
        let c = space.config(&p);
        assert_eq!(space.point_of(&c), Some(p));
    }
}
