//! Packets: the field table, the fixed-layout flow key, frame parsing and rewriting, and
//! ovs-ofctl notation.

pub mod build;
pub mod checksum;
pub mod ct_state;
pub mod field;
pub mod format;
pub mod frame_rewrite;
pub mod hash;
pub mod key;
pub mod malformed_counts;
pub mod parse;
pub mod reassembly;

pub use field::{FieldId, KEY_WORDS};
pub use key::{FlowKey, FlowMask};
pub use malformed_counts::MalformedCounts;
pub use parse::{parse_captured, parse_frame, parse_frame_with_layout, FrameLayout, LinkKind, Malformed};
