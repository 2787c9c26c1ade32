//! What an Elasticsearch or OpenSearch `_bulk` answer says of each document of its request
//! (`elasticsearch-http()`, `opensearch()`): the answer's status covers the request, its
//! `items` each document, in the order they were sent.
//!
//! A document the cluster took (2xx) is delivered; one it asks for again (429, 5xx, and 408)
//! is sent again later; one it refuses for good (a mapping error, an invalid index name: any
//! other 4xx) is dropped and counted, with the cluster's reason in sluice's own log. An answer
//! without `"errors": true` is read no further: every document was taken.

use serde_json::Value;

/// Keeps the document of the action and document that start at `start` of `data` on one
/// line: a line end in it (a value of `template("{\"m\":\"${MSG}\"}")` holding one) would
/// end the document there and make the rest a bulk action of the sender's. Line ends become
/// `\n` and `\r`, which inside a JSON string are what the value held; anywhere else they
/// make the document one the cluster refuses, counted as any refusal.
pub(crate) fn keep_document_on_one_line(data: &mut Vec<u8>, start: usize) {
    let Some(action_end) = memchr::memchr(b'\n', &data[start..]) else {
        return;
    };
    let document = start + action_end + 1;
    if memchr::memchr2(b'\n', b'\r', &data[document..]).is_none() {
        return;
    }
    let tail = data.split_off(document);
    for &b in &tail {
        match b {
            b'\n' => data.extend_from_slice(b"\\n"),
            b'\r' => data.extend_from_slice(b"\\r"),
            b => data.push(b),
        }
    }
}

/// What became of one document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Taken,
    /// Sent again later: the status the cluster gave.
    Later(u16),
    /// Refused for good: the status and the cluster's reason.
    Refused(u16, String),
}

/// The outcome of each of the `sent` documents of a request whose answer was `body`. An
/// answer that says nothing of its documents, or of another number of them than was sent,
/// is an error: the caller sends them all again.
pub(crate) fn outcomes(body: &[u8], sent: usize) -> Result<Vec<Outcome>, String> {
    // The quick way for the answer of almost every request: `{"took":12,"errors":false,…`.
    let head = &body[..body.len().min(64)];
    if memchr::memmem::find(head, b"\"errors\":false").is_some() {
        return Ok(vec![Outcome::Taken; sent]);
    }
    let answer: Value =
        serde_json::from_slice(body).map_err(|e| format!("an answer that is not JSON ({e})"))?;
    if answer.get("errors").and_then(Value::as_bool) == Some(false) {
        return Ok(vec![Outcome::Taken; sent]);
    }
    let items = answer
        .get("items")
        .and_then(Value::as_array)
        .ok_or("an answer without the documents' results (no \"items\")")?;
    if items.len() != sent {
        return Err(format!(
            "an answer for {} documents to a request of {sent}",
            items.len()
        ));
    }
    items.iter().map(outcome).collect()
}

/// One entry of `items`: `{"index": {"status": 201, …}}`, or with an `error`.
fn outcome(item: &Value) -> Result<Outcome, String> {
    let result = item
        .as_object()
        .and_then(|o| o.values().next())
        .ok_or("a document's result that is not an object")?;
    let status = result
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .ok_or("a document's result without a status")?;
    Ok(match status {
        200..=299 => Outcome::Taken,
        408 | 429 | 500..=599 => Outcome::Later(status),
        _ => Outcome::Refused(status, reason(result.get("error"))),
    })
}

/// The cluster's words for a refusal: `mapper_parsing_exception: failed to parse field …`.
fn reason(error: Option<&Value>) -> String {
    match error {
        Some(Value::Object(e)) => {
            let kind = e.get("type").and_then(Value::as_str).unwrap_or("error");
            match e.get("reason").and_then(Value::as_str) {
                Some(reason) => format!("{kind}: {reason}"),
                None => kind.to_string(),
            }
        }
        Some(Value::String(s)) => s.clone(),
        _ => "no reason given".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_end_in_a_document_cannot_start_an_action() {
        let mut data = b"earlier".to_vec();
        data.extend_from_slice(b"{\"index\":{}}\n{\"m\":\"a\n{\\\"delete\\\":{}}\r\"}");
        keep_document_on_one_line(&mut data, 7);
        assert_eq!(
            data,
            b"earlier{\"index\":{}}\n{\"m\":\"a\\n{\\\"delete\\\":{}}\\r\"}".to_vec()
        );
        let mut plain = b"{\"index\":{}}\n{\"m\":1}".to_vec();
        keep_document_on_one_line(&mut plain, 0);
        assert_eq!(plain, b"{\"index\":{}}\n{\"m\":1}".to_vec());
    }

    #[test]
    fn an_answer_without_errors_takes_every_document() {
        let body = br#"{"took":3,"errors":false,"items":[{"index":{"status":201}}]}"#;
        assert_eq!(outcomes(body, 1).unwrap(), [Outcome::Taken]);
        // Formatted another way, read whole.
        let body = br#"{ "took" : 3, "errors" : false, "items" : [ ] }"#;
        assert_eq!(outcomes(body, 2).unwrap(), [Outcome::Taken, Outcome::Taken]);
    }

    #[test]
    fn each_document_has_the_outcome_its_status_says() {
        let body = br#"{"took":5,"errors":true,"items":[
            {"index":{"_index":"logs","status":201,"result":"created"}},
            {"index":{"_index":"logs","status":400,"error":{"type":"mapper_parsing_exception",
                "reason":"failed to parse field [n] of type [long]"}}},
            {"create":{"_index":"logs","status":429,"error":{"type":"es_rejected_execution_exception"}}},
            {"index":{"_index":"logs","status":503}},
            {"index":{"_index":"Bad","status":400,"error":"invalid_index_name_exception"}}
        ]}"#;
        assert_eq!(
            outcomes(body, 5).unwrap(),
            [
                Outcome::Taken,
                Outcome::Refused(
                    400,
                    "mapper_parsing_exception: failed to parse field [n] of type [long]".into()
                ),
                Outcome::Later(429),
                Outcome::Later(503),
                Outcome::Refused(400, "invalid_index_name_exception".into()),
            ]
        );
    }

    #[test]
    fn an_answer_that_does_not_account_for_each_document_is_an_error() {
        assert!(outcomes(b"<html>busy</html>", 1).is_err());
        assert!(outcomes(br#"{"errors":true}"#, 1).is_err());
        let two = br#"{"errors":true,"items":[{"index":{"status":201}},{"index":{"status":400}}]}"#;
        assert!(outcomes(two, 3).unwrap_err().contains("2 documents"));
        assert!(outcomes(br#"{"errors":true,"items":[{"index":{}}]}"#, 1).is_err());
        assert!(outcomes(br#"{"errors":true,"items":[7]}"#, 1).is_err());
    }
}
