//! Reading a chat completion the server streams as server-sent events
//! (`data: {chunk}` lines, ended by `data: [DONE]`), the way mnemo asks
//! for every completion: a server that streams learns that mnemo gave up
//! when the connection closes, and stops generating at its next token
//! (a non-streamed answer is generated to the end whatever happens to the
//! caller, on llama.cpp's Python server for one). A server that answers
//! with one JSON body instead is read as such. Pure: bytes in, text out.

use serde::Deserialize;

/// The most bytes of an answer mnemo reads (a streamed answer repeats
/// framing around every token, so this is far above any `max_tokens`).
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
}

/// Token counts as a server reports them.
#[derive(Deserialize, Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Tokens of the prompt.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Tokens generated.
    #[serde(default)]
    pub completion_tokens: u64,
}

/// A streamed answer read so far.
#[derive(Debug, Default)]
pub struct StreamedAnswer {
    /// Bytes of an unfinished line.
    pending: Vec<u8>,
    /// Bytes read in all.
    read: usize,
    /// The assistant message's text so far.
    pub content: String,
    /// The finish reason, once a chunk gave one.
    pub finish_reason: Option<String>,
    /// The server's own counts, when a chunk carried them.
    pub usage: Option<Usage>,
    /// Chunks that carried text: the tokens generated, for servers that
    /// stream one token per chunk and report no usage.
    pub content_chunks: u64,
    /// `data: [DONE]` was read.
    pub done: bool,
}

impl StreamedAnswer {
    /// Reads the next bytes of the stream. Errors name what was wrong:
    /// an answer over [`MAX_ANSWER_BYTES`], a chunk that is no JSON, or
    /// an error the server sent inside the stream.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.read += bytes.len();
        if self.read > MAX_ANSWER_BYTES {
            return Err(format!(
                "the answer is larger than {} MiB",
                MAX_ANSWER_BYTES >> 20
            ));
        }
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.line(&line)?;
        }
        Ok(())
    }

    /// Reads what is left once the stream ended.
    pub fn finish(&mut self) -> Result<(), String> {
        let rest = std::mem::take(&mut self.pending);
        self.line(&rest)
    }

    fn line(&mut self, line: &[u8]) -> Result<(), String> {
        let line = String::from_utf8_lossy(line);
        let Some(data) = line.trim().strip_prefix("data:") else {
            // Comments (`: ping`), `event:`/`id:` fields and blank lines.
            return Ok(());
        };
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| format!("a streamed chunk is no JSON: {e}"))?;
        if let Some(error) = chunk.error {
            let text = error
                .get("message")
                .and_then(|m| m.as_str())
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(format!("the server sent an error in the stream: {text}"));
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        if let Some(choice) = chunk.choices.into_iter().next() {
            if let Some(text) = choice.delta.and_then(|d| d.content) {
                if !text.is_empty() {
                    self.content.push_str(&text);
                    self.content_chunks += 1;
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(content: &str, finish: Option<&str>) -> String {
        let finish = finish.map_or("null".to_owned(), |f| format!("\"{f}\""));
        format!(
            "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{}}},\"finish_reason\":{finish}}}]}}\n\n",
            serde_json::to_string(content).unwrap()
        )
    }

    #[test]
    fn chunks_split_anywhere_add_up_to_the_answer() {
        let stream = format!(
            ": ping\n\ndata: {{\"choices\":[{{\"delta\":{{\"role\":\"assistant\"}}}}]}}\n\n{}{}{}data: [DONE]\n\n",
            chunk("{\"deci", None),
            chunk("sions\": [] }", None),
            chunk("", Some("stop"))
        );
        for split in [1, 2, 7, 64, stream.len()] {
            let mut a = StreamedAnswer::default();
            for part in stream.as_bytes().chunks(split) {
                a.feed(part).unwrap();
            }
            a.finish().unwrap();
            assert_eq!(a.content, "{\"decisions\": [] }");
            assert_eq!(a.finish_reason.as_deref(), Some("stop"));
            assert_eq!(a.content_chunks, 2);
            assert!(a.done);
            assert_eq!(a.usage, None);
        }
    }

    #[test]
    fn usage_and_a_cut_off_are_read_when_the_server_sends_them() {
        let mut a = StreamedAnswer::default();
        a.feed(chunk("[1, 2", Some("length")).as_bytes()).unwrap();
        a.feed(
            b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":812,\"completion_tokens\":64}}\n",
        )
        .unwrap();
        // No newline after the last event: read at the end.
        a.feed(b"data: [DONE]").unwrap();
        a.finish().unwrap();
        assert_eq!(a.finish_reason.as_deref(), Some("length"));
        assert_eq!(
            a.usage,
            Some(Usage {
                prompt_tokens: 812,
                completion_tokens: 64
            })
        );
        assert!(a.done);
    }

    #[test]
    fn an_error_or_garbage_in_the_stream_is_named() {
        let mut a = StreamedAnswer::default();
        let e = a
            .feed(b"data: {\"error\":{\"message\":\"context window exceeded\"}}\n")
            .unwrap_err();
        assert!(e.contains("context window exceeded"), "{e}");
        let mut a = StreamedAnswer::default();
        let e = a.feed(b"data: {not json\n").unwrap_err();
        assert!(e.contains("no JSON"), "{e}");
    }

    #[test]
    fn an_endless_answer_is_cut_at_the_bound() {
        let mut a = StreamedAnswer::default();
        let line = chunk("x", None);
        let mut err = None;
        for _ in 0..(MAX_ANSWER_BYTES / line.len() + 2) {
            if let Err(e) = a.feed(line.as_bytes()) {
                err = Some(e);
                break;
            }
        }
        assert!(err.is_some_and(|e| e.contains("larger than")));
    }
}
