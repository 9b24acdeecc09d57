//! What the `hyflow` command line and the Python package share: every command's options
//! (names, defaults, help, ranges) and their meaning as the engine's workloads and configs,
//! the text of summaries and the plots. One definition, so that a keyword argument in
//! Python and a long option on the command line cannot drift apart: Python's keywords are
//! parsed here as the CLI's options ([`parse_args`]), with the CLI's messages.

#![deny(unsafe_code)]

pub mod convert;
pub mod gen;
pub mod names;
pub mod plot;
pub mod replay;
pub mod report;
pub mod run_record;
pub mod scaling_plot;
pub mod sim;
pub mod switch;
pub mod topk;
pub mod trace;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use clap::{Args, Command, FromArgMatches};
use hyflow::invalid_param::{CarriesInvalidParam, InvalidParam};

/// An error as the command line prints it: the chain of causes (`{e:#}`), with a parameter
/// the engine names (`rate`) spelled as the option that sets it (`--rate`).
pub fn error_message(e: &anyhow::Error) -> String {
    error_message_spelled(e, |name| format!("--{name}"))
}

/// An error with the parameters the engine names spelled by `spell` (Python: `nic_entries`).
pub fn error_message_spelled(e: &anyhow::Error, spell: impl Fn(&str) -> String) -> String {
    let text = format!("{e:#}");
    match e.chain().find_map(invalid_param_of) {
        Some(p) => text.replacen(&p.to_string(), &p.spelled(spell), 1),
        None => text,
    }
}

/// The parameter error behind `e`, if it is one of the engine's errors that can carry one.
fn invalid_param_of(e: &(dyn std::error::Error + 'static)) -> Option<InvalidParam> {
    macro_rules! first_of {
        ($($error:ty),*) => {
            $(if let Some(e) = e.downcast_ref::<$error>() {
                return e.invalid_param();
            })*
        };
    }
    first_of!(
        InvalidParam,
        hyflow::experiment::ExperimentError,
        hyflow::workload::TrafficError,
        hyflow::offload::PolicyConfigError,
        hyflow::timing::SimConfigError,
        hyflow::switch::SwitchConfigError,
        hyflow::measure::ConfigError
    );
    None
}

/// An engine warning (parameters named between backticks) as both fronts give it: each
/// parameter spelled as its option. The CLI prefixes `hyflow: warning: `; Python raises it.
pub fn warning_text(warning: &str) -> String {
    hyflow::invalid_param::respell(warning, |p| format!("--{p}"))
}

/// The warning for a capture found cut mid-record, as both fronts give it (without prefix,
/// as [`warning_text`]).
pub fn capture_cut_warning(cut: &hyflow::capture::CaptureCut) -> String {
    format!(
        "{}: the capture ends there; its {} complete packets were read (--strict makes this an error)",
        cut.error, cut.packets
    )
}

/// Opens `path` for writing (`-`: standard output), buffered.
pub fn create(path: &Path) -> Result<Box<dyn Write>> {
    if path == Path::new("-") {
        return Ok(Box::new(BufWriter::new(std::io::stdout())));
    }
    let f = File::create(path).with_context(|| format!("{}: cannot create", path.display()))?;
    Ok(Box::new(BufWriter::new(f)))
}

/// `--rate -1` is the value -1 (to be refused with its range), not an unknown option `-1`:
/// on every subcommand, as clap sets it per command.
pub fn negative_numbers_are_values(cmd: Command) -> Command {
    cmd.allow_negative_numbers(true).mut_subcommands(negative_numbers_are_values)
}

/// The command `name` whose options are `A`, as the CLI defines it.
pub fn command<A: Args>(name: &'static str) -> Command {
    negative_numbers_are_values(A::augment_args(Command::new(name)))
}

/// Parses `argv` (options only, no program name) as command `name`'s options `A`.
pub fn parse_args<A: Args + FromArgMatches>(name: &'static str, argv: &[String]) -> Result<A, clap::Error> {
    let matches = command::<A>(name).no_binary_name(true).try_get_matches_from(argv)?;
    A::from_arg_matches(&matches)
}

/// One option of a command, as a front that takes keywords needs to know it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OptionInfo {
    /// The long option without dashes (`microflow-entries`); positionals by their id.
    pub long: String,
    /// A flag (present or not) rather than an option with a value.
    pub flag: bool,
    /// A positional argument.
    pub positional: bool,
    /// What the value is: `int`, `float`, `path`, `str`, `choice` (one of `choices`) or `flag`.
    pub kind: &'static str,
    /// The value's name in help (`N`, `FILE`).
    pub value_name: Option<String>,
    /// The default, as the CLI shows it.
    pub default: Option<String>,
    /// The allowed values, for an option with a fixed set.
    pub choices: Vec<String>,
    /// The help text.
    pub help: String,
}

/// What an argument's value is, from the type its parser yields.
fn kind(a: &clap::Arg) -> &'static str {
    use std::any::TypeId;
    if !a.get_action().takes_values() {
        return "flag";
    }
    if !a.get_possible_values().is_empty() {
        return "choice";
    }
    let t = a.get_value_parser().type_id();
    let ints = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
    ];
    if ints.iter().any(|i| t == *i) {
        "int"
    } else if t == TypeId::of::<f64>() {
        "float"
    } else if t == TypeId::of::<std::path::PathBuf>() {
        "path"
    } else {
        "str"
    }
}

/// Every option of command `name` whose options are `A`, in help order.
pub fn options<A: Args>(name: &'static str) -> Vec<OptionInfo> {
    command::<A>(name)
        .get_arguments()
        // Hidden options are for the tool's own processes (a search's Ray tasks), not keywords.
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version") && !a.is_hide_set())
        .map(|a| OptionInfo {
            long: a.get_long().map_or_else(|| a.get_id().to_string(), str::to_string),
            flag: !a.get_action().takes_values(),
            positional: a.is_positional(),
            kind: kind(a),
            value_name: a.get_value_names().and_then(|v| v.first()).map(|v| v.to_string()),
            default: a.get_default_values().first().map(|v| v.to_string_lossy().into_owned()),
            // A flag's parser lists true/false; a keyword takes a bool there instead.
            choices: if a.get_action().takes_values() {
                a.get_possible_values().iter().map(|v| v.get_name().to_string()).collect()
            } else {
                Vec::new()
            },
            help: a.get_long_help().or(a.get_help()).map(|h| h.to_string()).unwrap_or_default(),
        })
        .collect()
}
