//! The Internet checksum (RFC 1071) as the headers hyflow builds need it: a one's-complement
//! sum over 16-bit big-endian words, folded and inverted — IPv4 headers, UDP and DCCP over
//! their pseudo-headers.

/// `sum` plus the 16-bit big-endian words of `bytes` (an odd last byte padded with zero).
#[inline]
pub fn ones_sum(mut sum: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    sum
}

/// The checksum of a sum: carries folded in, inverted.
#[inline]
pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071s_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to 0xddf2 after folding.
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(ones_sum(0, &bytes)), !0xddf2);
        assert_eq!(ones_sum(0, &[0x12]), 0x1200);
    }
}
