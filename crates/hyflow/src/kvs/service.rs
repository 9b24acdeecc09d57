//! One memcached request against the store's partitions: parsed, served, answered in its
//! protocol, counted by outcome and by malformed reason.

use serde::Serialize;

use super::memcached::{self, Malformed, ReplyWriter, Request, StoreKind};
use super::store::{SetMode, SetOutcome, Store};
use super::{key_hash, owner};

/// memcached's exptime beyond which it is a Unix time, not seconds from now (30 days).
const RELATIVE_EXPTIME_MAX: i64 = 60 * 60 * 24 * 30;

/// The time a request is served at, as the caller's clock says.
#[derive(Clone, Copy, Debug)]
pub struct ServeTime {
    /// Seconds since the server started, from 1 (items expire in these).
    pub server_s: u32,
    /// The Unix time (for memcached's absolute exptimes).
    pub unix_s: u64,
}

impl ServeTime {
    /// The server second a memcached exptime ends at (0: never).
    fn expiry(&self, exptime: i64) -> u32 {
        let now = self.server_s.max(1);
        let ahead = match exptime {
            0 => return 0,
            e if e < 0 => 0,
            e if e <= RELATIVE_EXPTIME_MAX => e,
            e => e - self.unix_s as i64,
        };
        if ahead <= 0 {
            now
        } else {
            now.saturating_add(ahead.min(u32::MAX as i64) as u32)
        }
    }
}

/// Counters of requests served, by kind and outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServiceStats {
    /// Datagrams too short for a frame header: dropped unanswered, as memcached does (there
    /// is no request id to answer).
    pub short_datagrams: u64,
    /// Requests (datagrams with a frame header).
    pub requests: u64,
    /// Keys asked for by gets.
    pub get_keys: u64,
    /// Of them, found.
    pub get_hits: u64,
    /// Storage commands.
    pub stores: u64,
    /// Of them, stored.
    pub stored: u64,
    /// Deletes.
    pub deletes: u64,
    /// Of them, of a key present.
    pub deleted: u64,
    /// Requests not served, by [`Malformed::ALL`]'s order.
    pub malformed: [u64; 6],
    /// Requests whose steering key's hash came from the NIC and was checked against the
    /// hash software computes (one in [`NIC_HASH_CHECK_EVERY`]).
    pub nic_hash_checked: u64,
    /// Of them, different: the NIC program and the engine disagree on the hash function.
    pub nic_hash_mismatched: u64,
}

impl ServiceStats {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &ServiceStats) {
        self.short_datagrams += other.short_datagrams;
        self.requests += other.requests;
        self.get_keys += other.get_keys;
        self.get_hits += other.get_hits;
        self.stores += other.stores;
        self.stored += other.stored;
        self.deletes += other.deletes;
        self.deleted += other.deleted;
        for (a, b) in self.malformed.iter_mut().zip(other.malformed) {
            *a += b;
        }
        self.nic_hash_checked += other.nic_hash_checked;
        self.nic_hash_mismatched += other.nic_hash_mismatched;
    }

    /// Malformed requests in all.
    pub fn malformed_total(&self) -> u64 {
        self.malformed.iter().sum()
    }
}

/// One request in this many with a NIC hash has it checked against software's.
pub const NIC_HASH_CHECK_EVERY: u64 = 64;

/// Serves one UDP datagram: its frame header, then its request ([`serve`]); a request in
/// several datagrams is refused as memcached refuses it. Returns the request id the reply's
/// datagrams carry, or `None` (and no reply) for a datagram without a frame header.
pub fn serve_datagram(
    partitions: &[Store],
    writer: usize,
    datagram: &[u8],
    nic_hash: Option<u32>,
    time: ServeTime,
    out: &mut Vec<u8>,
    stats: &mut ServiceStats,
) -> Option<u16> {
    out.clear();
    let Some((header, request)) = memcached::FrameHeader::split(datagram) else {
        stats.short_datagrams += 1;
        return None;
    };
    if header.datagrams != 1 || header.sequence != 0 {
        stats.requests += 1;
        stats.malformed[Malformed::MultiDatagram.index()] += 1;
        let (protocol, _) = memcached::parse(request);
        ReplyWriter { out, protocol }.malformed(Malformed::MultiDatagram);
        return Some(header.request_id);
    }
    serve(partitions, writer, request, nic_hash, time, out, stats);
    Some(header.request_id)
}

/// Serves `request` (a datagram's bytes after the frame header) on `partitions` as writer
/// `writer`, writing the reply into `out` (cleared first; empty when nothing is to be sent).
/// `nic_hash` is the hash the NIC computed over the request's steering key
/// ([`memcached::steering_key`]), reused instead of hashing it again.
pub fn serve(
    partitions: &[Store],
    writer: usize,
    request: &[u8],
    nic_hash: Option<u32>,
    time: ServeTime,
    out: &mut Vec<u8>,
    stats: &mut ServiceStats,
) {
    out.clear();
    stats.requests += 1;
    let (protocol, parsed) = memcached::parse(request);
    let mut w = ReplyWriter { out, protocol };
    let request = match parsed {
        Ok(r) => r,
        Err(why) => {
            stats.malformed[why.index()] += 1;
            w.malformed(why);
            return;
        }
    };
    // The first key's hash is the NIC's when it gave one (every key a request names first is
    // its steering key).
    let mut first = nic_hash;
    if let Some(h) = nic_hash {
        if stats.requests.is_multiple_of(NIC_HASH_CHECK_EVERY) {
            stats.nic_hash_checked += 1;
            stats.nic_hash_mismatched += (key_hash(first_key(&request)) != h) as u64;
        }
    }
    let mut hash = |key: &[u8]| first.take().unwrap_or_else(|| key_hash(key));
    let store_of = |h: u32| &partitions[owner(h, partitions.len())];
    match request {
        Request::Get { keys, with_cas_or_key, quiet } => {
            for key in keys.split(|&b| b == b' ').filter(|k| !k.is_empty()) {
                stats.get_keys += 1;
                let h = hash(key);
                let found = store_of(h).get(key, h, time.server_s, |item| {
                    w.value(key, item.flags, item.cas, item.value, with_cas_or_key);
                });
                match found {
                    Some(()) => stats.get_hits += 1,
                    None => w.miss(key, with_cas_or_key, quiet),
                }
            }
            w.end_of_values();
        }
        Request::Store { kind, key, flags, exptime, value, quiet } => {
            stats.stores += 1;
            let h = hash(key);
            let mode = match kind {
                StoreKind::Set => SetMode::Set,
                StoreKind::Add => SetMode::Add,
                StoreKind::Replace => SetMode::Replace,
                StoreKind::Cas(c) => SetMode::Cas(c),
            };
            let outcome =
                store_of(h).set(writer, key, h, (flags, time.expiry(exptime)), value, mode, time.server_s);
            let (ascii, status, cas): (&[u8], u16, u64) = match outcome {
                SetOutcome::Stored(cas) => {
                    stats.stored += 1;
                    (b"STORED\r\n", memcached::status::OK, cas)
                }
                SetOutcome::NotStored if kind == StoreKind::Add => {
                    (b"NOT_STORED\r\n", memcached::status::EXISTS, 0)
                }
                SetOutcome::NotStored => (b"NOT_STORED\r\n", memcached::status::NOT_STORED, 0),
                SetOutcome::Exists => (b"EXISTS\r\n", memcached::status::EXISTS, 0),
                SetOutcome::NotFound => (b"NOT_FOUND\r\n", memcached::status::NOT_FOUND, 0),
                SetOutcome::TooLarge => {
                    (b"SERVER_ERROR object too large for cache\r\n", memcached::status::TOO_LARGE, 0)
                }
            };
            // Quiet commands still report failures in the binary protocol (memcached does);
            // ASCII noreply says nothing at all.
            let silent = quiet && (protocol == memcached::Protocol::Ascii || status == memcached::status::OK);
            if !silent {
                w.answer(ascii, status, cas);
            }
        }
        Request::Delete { key, quiet } => {
            stats.deletes += 1;
            let h = hash(key);
            let present = store_of(h).delete(key, h, time.server_s);
            stats.deleted += present as u64;
            let (ascii, status): (&[u8], u16) = if present {
                (b"DELETED\r\n", memcached::status::OK)
            } else {
                (b"NOT_FOUND\r\n", memcached::status::NOT_FOUND)
            };
            let silent = quiet && (protocol == memcached::Protocol::Ascii || present);
            if !silent {
                w.answer(ascii, status, 0);
            }
        }
        Request::Version => w.version(),
        Request::Noop => w.noop(),
    }
}

/// A request's first key: its steering key (empty for requests without one).
fn first_key<'a>(r: &Request<'a>) -> &'a [u8] {
    match *r {
        Request::Get { keys, .. } => keys.split(|&b| b == b' ').find(|k| !k.is_empty()).unwrap_or(keys),
        Request::Store { key, .. } | Request::Delete { key, .. } => key,
        Request::Version | Request::Noop => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvs::store::StoreConfig;
    use std::collections::HashMap;

    const T: ServeTime = ServeTime { server_s: 1, unix_s: 1_700_000_000 };

    fn stores(n: usize) -> Vec<Store> {
        (0..n).map(|_| Store::new(StoreConfig::new(8 << 20, 2)).unwrap()).collect()
    }

    fn ask(p: &[Store], req: &[u8], stats: &mut ServiceStats) -> Vec<u8> {
        let mut out = Vec::new();
        serve(p, 0, req, None, T, &mut out, stats);
        out
    }

    #[test]
    fn the_checkers_conversation() {
        let p = stores(2);
        let mut s = ServiceStats::default();
        assert_eq!(ask(&p, b"set k1 0 0 3\r\nabc\r\n", &mut s), b"STORED\r\n");
        assert_eq!(ask(&p, b"get k1\r\n", &mut s), b"VALUE k1 0 3\r\nabc\r\nEND\r\n");
        assert_eq!(ask(&p, b"get nope\r\n", &mut s), b"END\r\n");
        assert_eq!(ask(&p, b"delete k1\r\n", &mut s), b"DELETED\r\n");
        assert_eq!(ask(&p, b"delete k1\r\n", &mut s), b"NOT_FOUND\r\n");
        assert_eq!(ask(&p, b"get k1\r\n", &mut s), b"END\r\n");
        let long = [b"get ".as_slice(), &[b'x'; 300], b"\r\n"].concat();
        assert!(ask(&p, &long, &mut s).starts_with(b"CLIENT_ERROR"));
        assert_eq!(ask(&p, b"stats\r\n", &mut s), b"ERROR\r\n");
        assert_eq!(s.malformed_total(), 2);
        assert_eq!(s.requests, 8);
    }

    #[test]
    fn multi_gets_cross_partitions() {
        let p = stores(3);
        let mut s = ServiceStats::default();
        for k in ["a", "b", "c", "d"] {
            ask(&p, format!("set {k} 1 0 1\r\n{k}\r\n").as_bytes(), &mut s);
        }
        assert_eq!(
            ask(&p, b"get a x b c d\r\n", &mut s),
            b"VALUE a 1 1\r\na\r\nVALUE b 1 1\r\nb\r\nVALUE c 1 1\r\nc\r\nVALUE d 1 1\r\nd\r\nEND\r\n"
        );
        assert_eq!(s.get_keys, 5);
        assert_eq!(s.get_hits, 4);
    }

    #[test]
    fn datagrams_need_one_frame_header() {
        let p = stores(1);
        let mut s = ServiceStats::default();
        let mut out = Vec::new();
        assert_eq!(serve_datagram(&p, 0, b"\0\x01\0", None, T, &mut out, &mut s), None);
        assert!(out.is_empty());
        let id = serve_datagram(&p, 0, b"\0\x07\0\0\0\x01\0\0version\r\n", None, T, &mut out, &mut s);
        assert_eq!(id, Some(7));
        assert!(out.starts_with(b"VERSION "));
        let id = serve_datagram(&p, 0, b"\0\x08\0\0\0\x02\0\0get a\r\n", None, T, &mut out, &mut s);
        assert_eq!(id, Some(8));
        assert_eq!(out, b"SERVER_ERROR multi-packet request not supported\r\n");
        assert_eq!((s.short_datagrams, s.requests, s.malformed_total()), (1, 2, 1));
    }

    #[test]
    fn exptimes_follow_memcached() {
        assert_eq!(T.expiry(0), 0);
        assert_eq!(T.expiry(10), 11);
        assert_eq!(T.expiry(-1), 1);
        assert_eq!(T.expiry(1_700_000_100), 101);
        assert_eq!(T.expiry(1_600_000_000), 1);
        let p = stores(1);
        let mut s = ServiceStats::default();
        ask(&p, b"set gone 0 -1 1\r\nx\r\n", &mut s);
        assert_eq!(ask(&p, b"get gone\r\n", &mut s), b"END\r\n");
    }

    #[test]
    fn a_nic_hash_is_used_and_checked() {
        let p = stores(2);
        let mut s = ServiceStats::default();
        let mut out = Vec::new();
        for i in 0..NIC_HASH_CHECK_EVERY * 2 {
            let req = format!("set key{i} 0 0 1\r\nv\r\n");
            serve(&p, 0, req.as_bytes(), Some(key_hash(format!("key{i}").as_bytes())), T, &mut out, &mut s);
        }
        assert_eq!((s.nic_hash_checked, s.nic_hash_mismatched), (2, 0));
        // A wrong hash is caught when checked.
        for i in 0..NIC_HASH_CHECK_EVERY {
            serve(&p, 0, format!("get key{i}\r\n").as_bytes(), Some(7), T, &mut out, &mut s);
        }
        assert_eq!(s.nic_hash_mismatched, 1);
    }

    /// Answers that are whole: memcached's error lines, or what the request asked for.
    fn well_formed(out: &[u8]) -> bool {
        out.is_empty() || out.ends_with(b"\r\n") || out.first() == Some(&0x81)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 3000, ..Default::default() })]

        /// Random bytes, and valid requests of both protocols cut or bit-flipped anywhere,
        /// never panic, and every answer is whole; the steering key is always a prefix-free
        /// piece of the request no longer than memcached takes.
        #[test]
        fn arbitrary_datagrams_never_panic(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            which in 0usize..6,
            cut in 0usize..120,
            flip in (0usize..120, 0u8..8),
        ) {
            // One store for every case (a store per case would be most of the test's time).
            static STORES: std::sync::OnceLock<Vec<Store>> = std::sync::OnceLock::new();
            let p = STORES.get_or_init(|| stores(2));
            let mut s = ServiceStats::default();
            let mut out = Vec::new();
            let header = [0u8, 1, 0, 0, 0, 1, 0, 0];
            let mut bin = vec![0x80, 0x01, 0, 1, 8, 0, 0, 0, 0, 0, 0, 11, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0];
            bin.extend_from_slice(&[0, 0, 0, 7, 0, 0, 0, 0, b'k', b'a', b'b']);
            let requests: [&[u8]; 6] = [
                b"set k 5 0 3\r\nabc\r\n",
                b"get k other\r\n",
                b"gets k\r\n",
                b"cas k 0 0 1 9\r\nx\r\n",
                b"delete k noreply\r\n",
                &bin,
            ];
            for datagram in [junk.clone(), [&header[..], &junk].concat()] {
                serve_datagram(p, 0, &datagram, None, T, &mut out, &mut s);
                proptest::prop_assert!(well_formed(&out), "{:?}", out);
            }
            let mut request = [&header[..], requests[which]].concat();
            let cut_at = cut.min(request.len());
            serve_datagram(p, 0, &request[..cut_at], None, T, &mut out, &mut s);
            proptest::prop_assert!(well_formed(&out));
            let i = flip.0 % request.len();
            request[i] ^= 1 << flip.1;
            serve_datagram(p, 1, &request, Some(flip.0 as u32), T, &mut out, &mut s);
            proptest::prop_assert!(well_formed(&out));
            if let Some(k) = memcached::steering_key(&request[8..]) {
                proptest::prop_assert!(!k.is_empty() && k.len() <= crate::kvs::store::MAX_KEY);
            }
        }
    }

    /// Random ASCII traffic over two partitions against a reference map.
    #[test]
    fn random_requests_agree_with_a_map() {
        let p = stores(2);
        let mut s = ServiceStats::default();
        let mut reference: HashMap<String, (u32, Vec<u8>)> = HashMap::new();
        let mut x = 0x1234_5678u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..5000 {
            let r = next();
            let key = format!("k{}", r % 97);
            match r >> 60 {
                0..=5 => {
                    let got = ask(&p, format!("get {key}\r\n").as_bytes(), &mut s);
                    let want = match reference.get(&key) {
                        Some((f, v)) => [
                            format!("VALUE {key} {f} {}\r\n", v.len()).into_bytes(),
                            v.clone(),
                            b"\r\nEND\r\n".to_vec(),
                        ]
                        .concat(),
                        None => b"END\r\n".to_vec(),
                    };
                    assert_eq!(got, want);
                }
                6..=7 => {
                    let got = ask(&p, format!("delete {key}\r\n").as_bytes(), &mut s);
                    let present = reference.remove(&key).is_some();
                    assert_eq!(
                        got,
                        if present { b"DELETED\r\n".to_vec() } else { b"NOT_FOUND\r\n".to_vec() }
                    );
                }
                8..=9 => {
                    let v = format!("{}", next()).into_bytes();
                    let got = ask(
                        &p,
                        &[format!("add {key} 3 0 {}\r\n", v.len()).as_bytes(), &v, b"\r\n"].concat(),
                        &mut s,
                    );
                    if let std::collections::hash_map::Entry::Vacant(e) = reference.entry(key) {
                        e.insert((3, v));
                        assert_eq!(got, b"STORED\r\n");
                    } else {
                        assert_eq!(got, b"NOT_STORED\r\n");
                    }
                }
                _ => {
                    let v = vec![b'a' + (r % 26) as u8; (r % 200) as usize];
                    let flags = (r % 1000) as u32;
                    let got = ask(
                        &p,
                        &[format!("set {key} {flags} 0 {}\r\n", v.len()).as_bytes(), &v, b"\r\n"].concat(),
                        &mut s,
                    );
                    assert_eq!(got, b"STORED\r\n");
                    reference.insert(key, (flags, v));
                }
            }
        }
        assert_eq!(s.malformed_total(), 0);
    }
}
