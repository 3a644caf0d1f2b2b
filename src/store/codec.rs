//! Checksummed record envelopes. Every stored value is
//! `[format: u8][crc32 of payload: u32 LE][payload: postcard]`, verified on
//! every read: a mismatch or an undecodable payload is `DATA_LOSS`, never a
//! silently wrong answer.

use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};

/// Current record format. Bump when a stored type changes incompatibly and
/// keep a decoder for each older version.
const FORMAT_V1: u8 = 1;
const HEADER: usize = 5;

/// Encodes a value into a checksummed envelope.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut out = vec![FORMAT_V1, 0, 0, 0, 0];
    let out = postcard::to_extend(value, std::mem::take(&mut out))
        .map_err(|e| Error::Internal(format!("cannot encode record: {e}")))?;
    let mut out = out;
    let crc = crc32fast::hash(&out[HEADER..]);
    out[1..HEADER].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Decodes and verifies an envelope. `what` names the record for the error
/// message (e.g. "turn 7 of session ns/abc").
pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: impl FnOnce() -> String) -> Result<T> {
    if bytes.len() < HEADER {
        return Err(Error::DataLoss(format!(
            "{} is truncated ({} bytes)",
            what(),
            bytes.len()
        )));
    }
    if bytes[0] != FORMAT_V1 {
        return Err(Error::DataLoss(format!(
            "{} has unknown record format {}",
            what(),
            bytes[0]
        )));
    }
    let stored = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
    let actual = crc32fast::hash(&bytes[HEADER..]);
    if stored != actual {
        return Err(Error::DataLoss(format!(
            "{} failed its checksum (stored {stored:08x}, computed {actual:08x})",
            what()
        )));
    }
    postcard::from_bytes(&bytes[HEADER..])
        .map_err(|e| Error::DataLoss(format!("{} cannot be decoded: {e}", what())))
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
