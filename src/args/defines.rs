//! `-D NAME=VALUE` macro definitions, parsed by the command line itself
//! (once), and from the environment (`TDG_PARAM_*`).

/// The value parser for `-D`: `NAME=VALUE` with a C identifier as NAME
/// (`-D NAME` alone is `NAME=1`, as for a C compiler).
pub fn define(text: &str) -> Result<(String, String), String> {
    let (k, v) = text.split_once('=').unwrap_or((text, "1"));
    let ok = !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit());
    if !ok {
        return Err("expected NAME=VALUE with a C identifier as NAME, e.g. -D NS=4096".into());
    }
    Ok((k.to_string(), v.to_string()))
}

/// `defines`, then `TDG_PARAM_NAME=VALUE` from the environment as
/// `-D NAME=VALUE`, for tuners that export a candidate's parameters; a `-D`
/// on the command line wins.
pub fn with_env_params(mut defines: Vec<(String, String)>) -> Vec<(String, String)> {
    for (name, value) in formats::contract::params_from_env(std::env::vars_os()) {
        if !defines.iter().any(|(k, _)| *k == name) {
            defines.push((name, value));
        }
    }
    defines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_needs_a_c_identifier_and_defaults_to_one() {
        assert_eq!(define("NS=4096").unwrap(), ("NS".into(), "4096".into()));
        assert_eq!(define("FAST").unwrap(), ("FAST".into(), "1".into()));
        for bad in ["=3", "4N=1", "N-B=2"] {
            assert!(define(bad).unwrap_err().contains("C identifier"), "{bad}");
        }
    }
}
