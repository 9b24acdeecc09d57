//! Error type for trace reading and writing.

use std::io;

use thiserror::Error;

/// Everything that can go wrong while reading or writing a trace.
///
/// Every message starts with the file name and, where a position makes sense, the absolute
/// byte offset (`trace.pcap: byte 1234: ...`), because the person who has to act on the error
/// is usually looking at a capture they did not produce and needs to find the damage.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The file could not be opened or created.
    #[error("{file}: cannot open: {}", crate::os_reason(cause))]
    Open {
        /// File name as given by the caller.
        file: String,
        /// Underlying error.
        /// What the system said (in the message, not a separate cause: printing the error
        /// with its causes would say it twice).
        cause: io::Error,
    },

    /// Reading or writing failed at the given position.
    #[error("{file}: byte {offset}: I/O error: {}", crate::os_reason(cause))]
    Io {
        /// File name as given by the caller.
        file: String,
        /// Absolute byte position at which the operation failed.
        offset: u64,
        /// Underlying error.
        /// What the system said (in the message, not a separate cause: printing the error
        /// with its causes would say it twice).
        cause: io::Error,
    },

    /// The first four bytes are neither a pcap nor a pcapng magic number.
    #[error("{file}: byte 0: not a pcap or pcapng file (magic 0x{magic:08x})")]
    NotATrace {
        /// File name as given by the caller.
        file: String,
        /// The first four bytes, read big-endian.
        magic: u32,
    },

    /// The file ends in the middle of a header or record.
    ///
    /// Every complete packet before `offset` has already been delivered when this is returned,
    /// so a capture cut short (a crashed capture process, a full disk) is still usable.
    #[error(
        "{file}: byte {offset}: truncated {what} ({})",
        truncated_detail(*.declared, *.needed, *.present)
    )]
    Truncated {
        /// File name as given by the caller.
        file: String,
        /// Absolute offset where the incomplete header or record starts.
        offset: u64,
        /// What was being read, e.g. `"packet record"` or `"pcapng block"`.
        what: &'static str,
        /// Bytes required: the length declared by the record header when `declared`,
        /// otherwise the fixed size of the header being read.
        needed: u64,
        /// Bytes actually present (counted the same way as `needed`).
        present: u64,
        /// Whether `needed` was read from a length field of the file.
        declared: bool,
    },

    /// A header or record contains impossible values; reading cannot continue because the
    /// position of the next record is unknown.
    #[error("{file}: byte {offset}: corrupt {what}: {reason}")]
    Corrupt {
        /// File name as given by the caller.
        file: String,
        /// Absolute offset of the corrupt header or record.
        offset: u64,
        /// What was being read, e.g. `"packet record"`.
        what: &'static str,
        /// Human-readable description of the problem.
        reason: String,
    },

    /// A packet cannot be represented in the output file (too long, timestamp out of range).
    #[error("{file}: byte {offset}: cannot write packet: {reason}")]
    Unwritable {
        /// File name as given by the caller.
        file: String,
        /// Offset at which the record would have been written.
        offset: u64,
        /// Why the packet was refused.
        reason: String,
    },
}

impl TraceError {
    /// The file name the error refers to, for callers that group or filter errors by file.
    pub fn file(&self) -> &str {
        match self {
            TraceError::Open { file, .. }
            | TraceError::Io { file, .. }
            | TraceError::NotATrace { file, .. }
            | TraceError::Truncated { file, .. }
            | TraceError::Corrupt { file, .. }
            | TraceError::Unwritable { file, .. } => file,
        }
    }

    /// The absolute byte offset the error refers to, if it has one (everything except
    /// failures to open a file).
    pub fn offset(&self) -> Option<u64> {
        match self {
            TraceError::Open { .. } => None,
            TraceError::NotATrace { .. } => Some(0),
            TraceError::Io { offset, .. }
            | TraceError::Truncated { offset, .. }
            | TraceError::Corrupt { offset, .. }
            | TraceError::Unwritable { offset, .. } => Some(*offset),
        }
    }
}

/// Formats the parenthesised part of a [`TraceError::Truncated`] message.
fn truncated_detail(declared: bool, needed: u64, present: u64) -> String {
    if declared {
        format!("header says {needed} bytes, {present} present")
    } else {
        format!("{needed} bytes needed, {present} present")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_file_and_offset() {
        let e = TraceError::Truncated {
            file: "trace.pcap".into(),
            offset: 1234,
            what: "packet record",
            needed: 1514,
            present: 600,
            declared: true,
        };
        assert_eq!(
            e.to_string(),
            "trace.pcap: byte 1234: truncated packet record (header says 1514 bytes, 600 present)"
        );
        assert_eq!(e.offset(), Some(1234));
        assert_eq!(e.file(), "trace.pcap");

        let e = TraceError::NotATrace { file: "garbage.pcap".into(), magic: 0x1234_5678 };
        assert_eq!(e.to_string(), "garbage.pcap: byte 0: not a pcap or pcapng file (magic 0x12345678)");

        let e = TraceError::Truncated {
            file: "t.pcap".into(),
            offset: 24,
            what: "packet record header",
            needed: 16,
            present: 3,
            declared: false,
        };
        assert_eq!(
            e.to_string(),
            "t.pcap: byte 24: truncated packet record header (16 bytes needed, 3 present)"
        );

        let e = TraceError::Open {
            file: "/nonexistent/x.pcap".into(),
            cause: io::Error::from(io::ErrorKind::NotFound),
        };
        assert!(e.to_string().starts_with("/nonexistent/x.pcap: cannot open: "));
        assert_eq!(e.offset(), None);
    }
}
