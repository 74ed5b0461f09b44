//! An incremental Server-Sent Events parser.
//!
//! The network cuts the body wherever it likes — inside a line, inside a UTF-8
//! character, between the `\r` and `\n` of one line ending — so the parser keeps raw
//! bytes until a line is complete and decodes only whole events.

/// Turns body chunks into the `data` payloads of complete events.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// The current line, not yet terminated.
    line: Vec<u8>,
    /// The current event's data lines, each followed by `\n`.
    data: Vec<u8>,
    /// Whether the event has a `data` field; `data:` alone still makes an empty event.
    has_data: bool,
    /// The previous chunk ended on `\r`: a leading `\n` belongs to that line ending.
    after_cr: bool,
}

impl SseParser {
    /// Feeds one chunk and returns the events it completed, in order.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &byte in chunk {
            let after_cr = std::mem::take(&mut self.after_cr);
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.end_line(&line) {
                        events.push(event);
                    }
                }
                _ => self.line.push(byte),
            }
        }
        events
    }

    fn end_line(&mut self, line: &[u8]) -> Option<String> {
        if line.is_empty() {
            return self.dispatch();
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return None,
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        if field == b"data" {
            self.data.extend_from_slice(value);
            self.data.push(b'\n');
            self.has_data = true;
        }
        None
    }

    fn dispatch(&mut self) -> Option<String> {
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        Some(String::from_utf8_lossy(&data).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::SseParser;

    fn parse_whole(input: &[u8]) -> Vec<String> {
        SseParser::default().feed(input)
    }

    fn parse_in_pieces(input: &[u8], cuts: &[usize]) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        let mut start = 0;
        for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
            events.extend(parser.feed(&input[start..cut]));
            start = cut;
        }
        events
    }

    #[test]
    fn joins_data_lines_and_dispatches_on_blank_lines() {
        let events = parse_whole(b"data: one\ndata:two\n\ndata:  three\n\n");
        assert_eq!(events, ["one\ntwo", " three"]);
    }

    #[test]
    fn ignores_comments_and_other_fields() {
        let input = b": keep-alive\nevent: message\nid: 7\nretry: 100\ndata: x\nunknown\n\n";
        assert_eq!(parse_whole(input), ["x"]);
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_but_empty_data_is() {
        assert_eq!(parse_whole(b"event: ping\n\ndata:\n\n"), [""]);
    }

    #[test]
    fn accepts_every_line_ending() {
        let expected = ["a\nb", "c"];
        assert_eq!(parse_whole(b"data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n"), expected);
        assert_eq!(parse_whole(b"data: a\rdata: b\r\rdata: c\r\r"), expected);
        assert_eq!(parse_whole(b"data: a\ndata: b\r\n\rdata: c\n\r\n"), expected);
    }

    #[test]
    fn a_cr_lf_split_across_chunks_is_one_line_ending() {
        let input = b"data: a\r\n\r\ndata: b\r\n\r\n";
        for cut in 0..=input.len() {
            assert_eq!(parse_in_pieces(input, &[cut]), ["a", "b"], "cut at {cut}");
        }
    }

    #[test]
    fn an_unfinished_event_waits_for_its_blank_line() {
        let mut parser = SseParser::default();
        assert!(parser.feed(b"data: par").is_empty());
        assert!(parser.feed(b"tial\n").is_empty());
        assert_eq!(parser.feed(b"\n"), ["partial"]);
    }

    #[test]
    fn byte_by_byte_and_random_splits_give_the_same_events() {
        let input = concat!(
            ": proxy keep-alive\r\n\r\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"héllo wörld 👋\"}}]}\r\n\r\n",
            "event: chunk\nid: 2\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"日本語\"}}]}\n\n",
            "data: first line\rdata: second line\r\r",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n",
            "data: [DONE]\n\n",
        )
        .as_bytes();
        let whole = parse_whole(input);
        assert_eq!(whole.len(), 5);
        assert!(whole[0].contains("héllo wörld 👋"));
        assert_eq!(whole[2], "first line\nsecond line");
        assert_eq!(whole[4], "[DONE]");

        let every_byte: Vec<usize> = (1..input.len()).collect();
        assert_eq!(parse_in_pieces(input, &every_byte), whole);

        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..200 {
            let mut cuts: Vec<usize> =
                (0..rng.usize(1..12)).map(|_| rng.usize(0..=input.len())).collect();
            cuts.sort_unstable();
            assert_eq!(parse_in_pieces(input, &cuts), whole, "cuts {cuts:?}");
        }
    }
}
