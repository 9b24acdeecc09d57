//! FlexStorm (FlexNIC §4): stream processing whose tuples a NIC demultiplexes to workers and
//! acknowledges itself.
//!
//! [`dccp`] is the wire format (a tuple per DCCP-Data packet, the cumulative acknowledgement
//! Figure 7 crafts, checksums); [`topology`] the top-n users topology (sliding-window
//! counters, the ranker); [`workload`] a tweet-like stream (Zipf user names, dealt to
//! counters by name). I/O-free: the live server (`hyflow storm`, crate `hyflow-live`) brings
//! the frames, the threads and the clock.

pub mod dccp;
pub mod topology;
pub mod workload;
