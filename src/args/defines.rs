//! `-D NAME=VALUE` macro definitions, from the command line and from the
//! environment (`TDG_PARAM_*`).

pub fn parse_defines(defs: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    defs.iter()
        .map(|d| {
            let (k, v) = d.split_once('=').unwrap_or((d.as_str(), "1"));
            let ok = !k.is_empty()
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !k.starts_with(|c: char| c.is_ascii_digit());
            if !ok {
                return Err(formats::contract::usage(format!(
                    "-D {d}: expected NAME=VALUE with a C identifier as NAME, e.g. -D NS=4096"
                ))
                .into());
            }
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

/// `TDG_PARAM_NAME=VALUE` in the environment is `-D NAME=VALUE`, for tuners
/// that export a candidate's parameters; a `-D` on the command line wins.
pub fn add_env_params(defines: &mut Vec<(String, String)>) {
    for (name, value) in formats::contract::params_from_env(std::env::vars_os()) {
        if !defines.iter().any(|(k, _)| *k == name) {
            defines.push((name, value));
        }
    }
}
