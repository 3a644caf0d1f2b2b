//! Checksummed record envelopes. Every stored value is
//! `[format: u8][crc32 of payload: u32 LE][payload: postcard]`, verified on
//! every read: a mismatch or an undecodable payload is `DATA_LOSS`, never a
//! silently wrong answer.

use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};

/// The first record format.
pub const FORMAT_V1: u8 = 1;
/// Sessions gained `owner_agent`, `lease_epoch` and `last_active_at`
/// (every other record is laid out as in V1).
pub const FORMAT_V2: u8 = 2;
/// Session settings gained `fact_extraction` and sessions
/// `episode_version`; facts, episodes and the index outbox appeared.
pub const FORMAT_V3: u8 = 3;
/// Fold records became opaque: a summarizer's name, its state format and
/// its state as bytes (formats 1 to 3 held the rule engine's state
/// inline). Every other record is laid out as in V3.
pub const FORMAT_V4: u8 = 4;
/// Sessions gained `removed_turns`. Every other record is laid out as in
/// V4.
pub const FORMAT_V5: u8 = 5;
/// Audit records and review items gained `reviewer_key` (older ones are
/// upgraded on read by [`decode`], see `store::upgrade`). Every other
/// record is laid out as in V5.
pub const FORMAT_V6: u8 = 6;
/// The format new records are written in. Bump it when a stored type
/// changes incompatibly, and keep a decoder for every older format (see
/// `store::legacy` and `store::upgrade`).
pub const FORMAT_CURRENT: u8 = FORMAT_V6;
const HEADER: usize = 5;

/// Encodes a value into a checksummed envelope.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    encode_as(FORMAT_CURRENT, value)
}

/// Encodes a value in a given format (tests write older formats with it).
pub fn encode_as<T: Serialize>(format: u8, value: &T) -> Result<Vec<u8>> {
    let mut out = vec![format, 0, 0, 0, 0];
    let out = postcard::to_extend(value, std::mem::take(&mut out))
        .map_err(|e| Error::Internal(format!("cannot encode record: {e}")))?;
    let mut out = out;
    let crc = crc32fast::hash(&out[HEADER..]);
    out[1..HEADER].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Decodes and verifies an envelope of a type laid out the same in every
/// format, or one whose older layouts `store::upgrade` knows (audit
/// records, review items). `what` names the record for the error message
/// (e.g. "turn 7 of session ns/abc").
pub fn decode<T: DeserializeOwned + 'static>(
    bytes: &[u8],
    what: impl FnOnce() -> String,
) -> Result<T> {
    check(bytes)
        .and_then(
            |(format, payload)| match super::upgrade::older::<T>(format, payload) {
                Some(upgraded) => upgraded,
                None => {
                    postcard::from_bytes(payload).map_err(|e| format!("cannot be decoded: {e}"))
                }
            },
        )
        .map_err(|reason| Error::DataLoss(format!("{} {reason}", what())))
}

/// Verifies an envelope's checksum and returns its format and payload, for
/// types whose layout depends on the format (see `store::legacy`).
pub fn open(bytes: &[u8], what: impl FnOnce() -> String) -> Result<(u8, &[u8])> {
    check(bytes).map_err(|reason| Error::DataLoss(format!("{} {reason}", what())))
}

/// The envelope checks; the error is the reason, without the record's name.
fn check(bytes: &[u8]) -> std::result::Result<(u8, &[u8]), String> {
    if bytes.len() < HEADER {
        return Err(format!("is truncated ({} bytes)", bytes.len()));
    }
    if !(FORMAT_V1..=FORMAT_CURRENT).contains(&bytes[0]) {
        return Err(format!(
            "has unknown record format {} (this build reads formats {FORMAT_V1} to {FORMAT_CURRENT}; was it written by a newer mnemo?)",
            bytes[0]
        ));
    }
    let stored = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
    let actual = crc32fast::hash(&bytes[HEADER..]);
    if stored != actual {
        return Err(format!(
            "failed its checksum (stored {stored:08x}, computed {actual:08x})"
        ));
    }
    Ok((bytes[0], &bytes[HEADER..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_every_single_byte_flip() {
        let v = ("hello".to_string(), 42u64, vec![1u32, 2, 3]);
        let bytes = encode(&v).unwrap();
        let back: (String, u64, Vec<u32>) = decode(&bytes, || "x".into()).unwrap();
        assert_eq!(back, v);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            let r: Result<(String, u64, Vec<u32>)> = decode(&bad, || "x".into());
            assert!(
                matches!(r, Err(Error::DataLoss(_))),
                "flip at {i} undetected"
            );
        }
    }
}
