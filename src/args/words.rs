//! Flags whose value is itself a command line (`--cflags "-O2 -DMSG='\"a b\"'"`,
//! `--sbatch-option`): split into words as /bin/sh would, so a quoted
//! argument reaches the compiler or `sbatch` whole.

/// One flag's value as the words of a command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Words(pub Vec<String>);

impl Words {
    pub fn to_vec(&self) -> Vec<String> {
        self.0.clone()
    }
}

/// The value parser for `#[arg(value_parser = words)]`: shell quoting and
/// escapes as `sh` reads them; an unclosed quote is a usage error that says
/// which.
pub fn words(text: &str) -> Result<Words, String> {
    shell_words::split(text).map(Words).map_err(|_| {
        format!("`{text}` has an unclosed quote; quote the whole value for your shell and each argument inside it, e.g. --cflags \"-O2 -DMSG='\\\"a b\\\"'\"")
    })
}

/// Every word of a repeatable command-line flag, in order.
pub fn flatten(values: &[Words]) -> Vec<String> {
    values.iter().flat_map(|w| w.0.iter().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_arguments_stay_whole() {
        let w = words("-O2 -DMSG='\"a b\"'  -march=native").unwrap();
        assert_eq!(w.0, ["-O2", "-DMSG=\"a b\"", "-march=native"]);
        assert_eq!(words("").unwrap().0, Vec::<String>::new());
        let e = words("-DX='a").unwrap_err();
        assert!(e.contains("unclosed quote"), "{e}");
    }
}
