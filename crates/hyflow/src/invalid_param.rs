//! A configuration parameter out of its range, named the engine's way so that each front
//! spells it its own way (`--rate` on the command line and in Python's argument lists).
//!
//! The engine knows parameters, not options: an error that said `--rate` would be wrong for
//! any front that does not call it that. So every range check fails with an [`InvalidParam`]
//! naming the parameter, and a front respells it with [`InvalidParam::spelled`].

use std::fmt;

/// A parameter outside its allowed range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidParam {
    /// The parameter's name, in kebab case as the configs' docs and the policy registry
    /// spell it (`rate`, `queue-threshold`).
    pub param: &'static str,
    /// What is wrong and what is allowed, following the name ("must be at least 1"). Other
    /// parameters it names stand between backticks (`` `ring` ``), so fronts respell them too.
    pub message: String,
}

impl InvalidParam {
    /// `param` with what is wrong with it.
    pub fn new(param: &'static str, message: impl Into<String>) -> Self {
        InvalidParam { param, message: message.into() }
    }

    /// The error with every parameter name it holds spelled by `spell`: the front's syntax
    /// for an option (`|p| format!("--{p}")`).
    pub fn spelled(&self, spell: impl Fn(&str) -> String) -> String {
        format!("{} {}", spell(self.param), respell(&self.message, spell))
    }
}

/// `text` with every parameter it names between backticks spelled by `spell`: how a front
/// gives the engine's errors and warnings in its own syntax.
pub fn respell(text: &str, spell: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((before, after)) = rest.split_once('`') {
        let Some((name, tail)) = after.split_once('`') else { break };
        out.push_str(before);
        out.push_str(&spell(name));
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// Names stay between backticks: the engine's own rendering, for callers without a front.
impl fmt::Display for InvalidParam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spelled(|p| format!("`{p}`")))
    }
}

impl std::error::Error for InvalidParam {}

/// An error that may be, or wrap, an [`InvalidParam`]: how a front finds the parameter behind
/// an error several layers up without knowing how the layers wrap it.
pub trait CarriesInvalidParam {
    /// The parameter error inside, if this is one.
    fn invalid_param(&self) -> Option<InvalidParam>;
}

impl CarriesInvalidParam for InvalidParam {
    fn invalid_param(&self) -> Option<InvalidParam> {
        Some(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_parameter_is_respelled() {
        let e = InvalidParam::new(
            "queue-threshold",
            "is not positive: give a larger `ring` or a lower `nic-rate`",
        );
        assert_eq!(
            e.spelled(|p| format!("--{p}")),
            "--queue-threshold is not positive: give a larger --ring or a lower --nic-rate"
        );
        assert_eq!(
            e.to_string(),
            "`queue-threshold` is not positive: give a larger `ring` or a lower `nic-rate`"
        );
        // An unmatched backtick is text, not a name.
        assert_eq!(InvalidParam::new("k", "odd ` mark").spelled(|p| p.to_uppercase()), "K odd ` mark");
    }
}
