//! OpenFlow: flow-file parsing, the classifier, and the multi-table pipeline (the slow path).

pub mod action;
mod action_pool;
pub mod classifier;
pub mod ct;
pub mod dp_actions;
pub mod execute;
pub mod expiry;
pub mod flow_file;
pub mod group;
pub mod learn;
pub mod named_text;
pub mod names;
pub mod normal;
pub mod ovs_hash;
pub mod parser;
pub mod passes;
pub mod pipeline;
pub mod prefixes;
pub mod recirc;
pub mod reference;
pub mod report;
pub mod rule;
pub mod segment;
mod ties;
pub mod traversal;
pub mod trie;
pub mod update;

pub use action::Action;
pub use classifier::Classifier;
pub use flow_file::{read_flow_file, read_flow_file_checked, read_flow_file_named, stream_flow_file};
pub use names::Names;
pub use parser::{parse_flows, parse_flows_named, parse_packet, parse_packet_named, FlowFileError};
pub use pipeline::{Pipeline, PipelineLoad};
pub use prefixes::PrefixTries;
pub use rule::{Actions, Match, Rule, RuleId};
pub use traversal::{LookupRef, Traversal};
