//! What each tuned parameter is to the machine model: its role (the cache
//! tile, the register tile's rows or columns, the k-loop unrolling), from
//! `--role NAME=ROLE`, else the spec's `tune` clause, else the ATLAS name
//! (NB, MU, NU, KU), and the layout that says which register-tile extent
//! is unit-stride.

use crate::space::Space;
use crate::TuneError;
use serde::Serialize;
pub use spec_lang::ast::TuneRole as Role;
use spec_lang::ast::{TuneClause, TuneLayout};
use spec_lang::vocabulary::Keyword;

/// Where a parameter's role came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoleSource {
    /// `--role NAME=ROLE`.
    CommandLine,
    /// The spec's `tune={ NAME=ROLE; }`.
    Spec,
    /// The parameter is named as in ATLAS (NB, MU, NU, KU).
    AtlasName,
}

impl RoleSource {
    pub fn describe(self) -> &'static str {
        match self {
            RoleSource::CommandLine => "--role",
            RoleSource::Spec => "the spec's tune clause",
            RoleSource::AtlasName => "its ATLAS name",
        }
    }
}

/// One parameter with a role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assigned {
    /// Index of the parameter in the space.
    pub dim: usize,
    pub name: String,
    #[serde(serialize_with = "role_spelling")]
    pub role: Role,
    pub source: RoleSource,
}

fn role_spelling<S: serde::Serializer>(r: &Role, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(r.spelling())
}

/// The roles of a space's parameters (each role at most once) and the
/// result's layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Roles {
    pub assigned: Vec<Assigned>,
    /// `None`: not given; the model assumes column-major (BLAS's layout)
    /// and also tries the transposed register tile.
    #[serde(serialize_with = "layout_spelling")]
    pub layout: Option<TuneLayout>,
}

fn layout_spelling<S: serde::Serializer>(l: &Option<TuneLayout>, s: S) -> Result<S::Ok, S::Error> {
    match l {
        Some(l) => s.serialize_str(l.spelling()),
        None => s.serialize_none(),
    }
}

/// `NAME=ROLE` as `--role` takes it.
pub fn parse_role(text: &str) -> Result<(String, Role), TuneError> {
    let bad = |why: String| TuneError::BadRole {
        text: text.to_string(),
        why,
    };
    let (name, role) = text
        .split_once('=')
        .ok_or_else(|| bad("expected NAME=ROLE, e.g. --role TILE=tile".into()))?;
    let role = role.trim();
    let role = Role::from_spelling(role).ok_or_else(|| {
        bad(format!(
            "`{role}` is not a tuning role{}; roles are {}",
            spec_lang::diag::did_you_mean(role, Role::spellings())
                .map(|h| format!(" ({h})"))
                .unwrap_or_default(),
            Role::spellings().join(", ")
        ))
    })?;
    Ok((name.trim().to_string(), role))
}

/// The ATLAS name of a role's parameter.
fn atlas_name(role: Role) -> &'static str {
    match role {
        Role::Tile => "NB",
        Role::Rows => "MU",
        Role::Cols => "NU",
        Role::KUnroll => "KU",
    }
}

/// `--role NAME=ROLE` checked against `space` and the roles the command
/// line gave before it (`assigned`): the parameter is tuned, takes
/// integers, and neither it nor the role is taken.
fn command_line_role(
    space: &Space,
    assigned: &[Assigned],
    name: &str,
    role: Role,
) -> Result<Assigned, TuneError> {
    let bad = |why: String| TuneError::BadRole {
        text: format!("{name}={}", role.spelling()),
        why,
    };
    let dim = space.index_of(name).ok_or_else(|| {
        bad(format!(
            "`{name}` is not one of the --param names ({})",
            space
                .params
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    if let Some(other) = assigned.iter().find(|a| a.role == role || a.dim == dim) {
        return Err(bad(if other.dim == dim {
            format!("`{name}` already has the role {}", other.role.spelling())
        } else {
            format!(
                "`{}` already has the role {}; a kernel has one {}",
                other.name,
                role.spelling(),
                role.help()
            )
        }));
    }
    if space.params[dim].categorical() {
        return Err(bad(format!(
            "`{name}` takes names; a role is a size the machine model computes, so its parameter takes integers"
        )));
    }
    Ok(Assigned {
        dim,
        name: space.params[dim].name.clone(),
        role,
        source: RoleSource::CommandLine,
    })
}

impl Roles {
    /// Roles for `space`: `given` (the command line) first, then the
    /// spec's clause, then ATLAS's names. A role given on the command line
    /// takes it from any parameter the spec or a name gave it to; a `--role`
    /// for a parameter that is not tuned, or one role for two parameters on
    /// the command line, is an error. `layout` from the command line wins
    /// over the spec's.
    pub fn resolve(
        space: &Space,
        given: &[(String, Role)],
        layout: Option<TuneLayout>,
        spec: Option<&TuneClause>,
    ) -> Result<Roles, TuneError> {
        let mut assigned: Vec<Assigned> = Vec::new();
        for (name, role) in given {
            let a = command_line_role(space, &assigned, name, *role)?;
            assigned.push(a);
        }
        let from_spec = spec
            .map(|t| {
                t.roles
                    .iter()
                    .map(|(n, r)| (n.name.clone(), *r, RoleSource::Spec))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let from_names = Role::ALL
            .iter()
            .map(|r| (atlas_name(*r).to_string(), *r, RoleSource::AtlasName));
        for (name, role, source) in from_spec.into_iter().chain(from_names) {
            let Some(dim) = space.index_of(&name) else {
                continue;
            };
            // A parameter of names (`NB=small,big`) has no size to model:
            // the search treats it as any categorical one.
            if space.params[dim].categorical()
                || assigned.iter().any(|a| a.role == role || a.dim == dim)
            {
                continue;
            }
            assigned.push(Assigned {
                dim,
                name: space.params[dim].name.clone(),
                role,
                source,
            });
        }
        assigned.sort_by_key(|a| a.dim);
        Ok(Roles {
            assigned,
            layout: layout.or(spec.and_then(|t| t.layout)),
        })
    }

    /// The parameter (its index in the space) with `role`.
    pub fn dim(&self, role: Role) -> Option<usize> {
        self.assigned.iter().find(|a| a.role == role).map(|a| a.dim)
    }

    /// The role of the parameter at `dim`.
    pub fn role_of(&self, dim: usize) -> Option<Role> {
        self.assigned.iter().find(|a| a.dim == dim).map(|a| a.role)
    }

    /// "TILE=tile (spec), RT_R=rows (--role)".
    pub fn describe(&self) -> String {
        self.assigned
            .iter()
            .map(|a| format!("{}={} ({})", a.name, a.role.spelling(), a.source.describe()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::parse_param;

    fn space(names: &[&str]) -> Space {
        Space::new(
            names
                .iter()
                .map(|n| parse_param(&format!("{n}=1:4")).unwrap())
                .collect(),
        )
        .unwrap()
    }

    fn clause(src: &str) -> TuneClause {
        spec_lang::parse(
            &format!("routine=void f(void);\ntune={{ {src} }};"),
            "t.spec",
        )
        .unwrap()
        .tune
        .unwrap()
    }

    #[test]
    fn atlas_names_need_no_role() {
        let r = Roles::resolve(&space(&["NB", "mu", "NU", "X"]), &[], None, None).unwrap();
        assert_eq!(r.dim(Role::Tile), Some(0));
        assert_eq!(r.dim(Role::Rows), Some(1));
        assert_eq!(r.dim(Role::Cols), Some(2));
        assert_eq!(r.role_of(3), None);
        assert!(r.assigned.iter().all(|a| a.source == RoleSource::AtlasName));
    }

    #[test]
    fn command_line_over_spec_over_names() {
        let s = space(&["TILE", "RR", "RC", "NB"]);
        let spec = clause("TILE=tile; RR=rows; RC=cols; layout=row_major;");
        let r = Roles::resolve(&s, &[], None, Some(&spec)).unwrap();
        // The spec gave the tile to TILE, so NB keeps no role.
        assert_eq!(r.dim(Role::Tile), Some(0));
        assert_eq!(r.role_of(3), None);
        assert_eq!(r.layout, Some(TuneLayout::RowMajor));
        // --role moves the tile to NB and overrides the layout.
        let r = Roles::resolve(
            &s,
            &[parse_role("NB=tile").unwrap()],
            Some(TuneLayout::ColMajor),
            Some(&spec),
        )
        .unwrap();
        assert_eq!(r.dim(Role::Tile), Some(3));
        assert_eq!(r.role_of(0), None);
        assert_eq!(r.layout, Some(TuneLayout::ColMajor));
        assert!(
            r.describe().contains("NB=tile (--role)"),
            "{}",
            r.describe()
        );
        assert!(r.describe().contains("RR=rows (the spec's tune clause)"));
    }

    #[test]
    fn bad_roles_are_one_line_errors() {
        let s = space(&["A", "B"]);
        for (given, want) in [
            (vec!["A"], "expected NAME=ROLE"),
            (
                vec!["A=tiles"],
                "`tiles` is not a tuning role (did you mean `tile`?)",
            ),
            (vec!["C=tile"], "`C` is not one of the --param names (A, B)"),
            (vec!["A=tile", "B=tile"], "`A` already has the role tile"),
            (vec!["A=tile", "A=rows"], "`A` already has the role tile"),
        ] {
            let e = given
                .iter()
                .map(|g| parse_role(g))
                .collect::<Result<Vec<_>, _>>()
                .and_then(|g| Roles::resolve(&s, &g, None, None))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{given:?}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
    }
}
