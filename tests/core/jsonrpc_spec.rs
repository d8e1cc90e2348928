//! The JSON-RPC 2.0 specification's own examples (section 7), answered by a small dispatcher
//! built on `agentwire::jsonrpc`'s parser and writers.

use agentwire::jsonrpc::{
    self, code, write_batch, write_error, write_result_value, BatchPolicy, ErrorObject, Message,
    OwnedId, Parsed, Rejection,
};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// What the server answers for one request.
fn call(method: &str, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
    let params: Value = match params {
        Some(p) => {
            serde_json::from_str(p.get()).map_err(|e| ErrorObject::invalid_params(e.to_string()))?
        }
        None => Value::Null,
    };
    let num = |v: &Value| {
        v.as_i64()
            .ok_or_else(|| ErrorObject::invalid_params("not a number"))
    };
    match method {
        "subtract" => match &params {
            Value::Array(a) if a.len() == 2 => Ok(json!(num(&a[0])? - num(&a[1])?)),
            Value::Object(o) => {
                let field = |k: &str| {
                    o.get(k)
                        .ok_or_else(|| ErrorObject::invalid_params(k.to_string()))
                };
                Ok(json!(num(field("minuend")?)? - num(field("subtrahend")?)?))
            }
            _ => Err(ErrorObject::invalid_params("subtract takes two numbers")),
        },
        "sum" => match &params {
            Value::Array(a) => a.iter().map(num).sum::<Result<i64, _>>().map(|s| json!(s)),
            _ => Err(ErrorObject::invalid_params("sum takes an array")),
        },
        "get_data" => Ok(json!(["hello", 5])),
        // Methods the server only knows as notifications; calling them is not supported.
        _ => Err(ErrorObject::new(code::METHOD_NOT_FOUND, "Method not found")),
    }
}

/// Notifications the server knows; nothing is ever answered for a notification.
fn notify(method: &str, log: &mut Vec<String>) {
    if matches!(method, "update" | "foobar" | "notify_hello" | "notify_sum") {
        log.push(method.to_string());
    }
}

/// Answers one message (or rejection); `None` when nothing must be sent.
fn answer(item: Result<Message<'_>, Rejection>, log: &mut Vec<String>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match item {
        Ok(Message::Request { id, method, params }) => {
            let id = id.to_owned();
            match call(&method, params) {
                Ok(v) => write_result_value(&mut out, &id, &v).unwrap(),
                Err(e) => write_error(&mut out, Some(&id), &e),
            }
        }
        Ok(Message::Notification { method, .. }) => {
            notify(&method, log);
            return None;
        }
        Ok(Message::Response { .. }) => return None,
        Err(rejection) => rejection.write_response(&mut out),
    }
    Some(out)
}

/// Server: one body in, at most one body out.
fn serve(body: &str, policy: BatchPolicy, log: &mut Vec<String>) -> Option<Vec<u8>> {
    match jsonrpc::parse_with(body.as_bytes(), policy) {
        Parsed::Single(item) => answer(item, log),
        Parsed::Batch(items) => {
            let bodies: Vec<Vec<u8>> = items.into_iter().filter_map(|i| answer(i, log)).collect();
            let mut out = Vec::new();
            write_batch(&mut out, bodies.iter().map(Vec::as_slice)).then_some(out)
        }
    }
}

/// Canonical form for comparison: batches are compared ignoring order.
fn canonical(v: Value) -> Value {
    match v {
        Value::Array(mut items) => {
            // Keyed on id and error code (member order inside objects does not matter).
            items.sort_by_key(|i| format!("{}|{}", i["id"], i["error"]["code"]));
            Value::Array(items)
        }
        other => other,
    }
}

#[track_caller]
fn check(request: &str, expected: Option<&str>) {
    let mut log = Vec::new();
    let got = serve(request, BatchPolicy::Allow, &mut log);
    match (got, expected) {
        (None, None) => {}
        (Some(got), Some(expected)) => {
            let text = std::str::from_utf8(&got).unwrap();
            assert!(!text.contains('\n'), "compact single line: {text}");
            let got: Value = serde_json::from_slice(&got).unwrap();
            let expected: Value = serde_json::from_str(expected).unwrap();
            assert_eq!(canonical(got), canonical(expected), "request: {request}");
        }
        (got, expected) => panic!(
            "request {request}: got {:?}, expected {expected:?}",
            got.map(|g| String::from_utf8(g).unwrap())
        ),
    }
}

#[test]
fn rpc_call_with_positional_parameters() {
    check(
        r#"{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}"#,
        Some(r#"{"jsonrpc": "2.0", "result": 19, "id": 1}"#),
    );
    check(
        r#"{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}"#,
        Some(r#"{"jsonrpc": "2.0", "result": -19, "id": 2}"#),
    );
}

#[test]
fn rpc_call_with_named_parameters() {
    check(
        r#"{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}"#,
        Some(r#"{"jsonrpc": "2.0", "result": 19, "id": 3}"#),
    );
    check(
        r#"{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}"#,
        Some(r#"{"jsonrpc": "2.0", "result": 19, "id": 4}"#),
    );
}

#[test]
fn a_notification() {
    let mut log = Vec::new();
    let a = serve(
        r#"{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}"#,
        BatchPolicy::Allow,
        &mut log,
    );
    let b = serve(
        r#"{"jsonrpc": "2.0", "method": "foobar"}"#,
        BatchPolicy::Allow,
        &mut log,
    );
    assert!(a.is_none() && b.is_none());
    assert_eq!(
        log,
        ["update", "foobar"],
        "both notifications were delivered"
    );
}

#[test]
fn rpc_call_of_non_existent_method() {
    check(
        r#"{"jsonrpc": "2.0", "method": "foobar", "id": "1"}"#,
        Some(
            r#"{"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "1"}"#,
        ),
    );
}

#[test]
fn rpc_call_with_invalid_json() {
    check(
        r#"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#,
        Some(
            r#"{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}"#,
        ),
    );
}

#[test]
fn rpc_call_with_invalid_request_object() {
    check(
        r#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#,
        Some(
            r#"{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}"#,
        ),
    );
}

#[test]
fn rpc_call_batch_invalid_json() {
    check(
        r#"[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]"#,
        Some(
            r#"{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}"#,
        ),
    );
}

#[test]
fn rpc_call_with_an_empty_array() {
    check(
        "[]",
        Some(
            r#"{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}"#,
        ),
    );
}

#[test]
fn rpc_call_with_an_invalid_batch_but_not_empty() {
    check(
        "[1]",
        Some(
            r#"[{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}]"#,
        ),
    );
}

#[test]
fn rpc_call_with_invalid_batch() {
    check(
        "[1,2,3]",
        Some(
            r#"[
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}
]"#,
        ),
    );
}

#[test]
fn rpc_call_batch() {
    check(
        r#"[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
    ]"#,
        Some(
            r#"[
        {"jsonrpc": "2.0", "result": 7, "id": "1"},
        {"jsonrpc": "2.0", "result": 19, "id": "2"},
        {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
        {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "5"},
        {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"}
    ]"#,
        ),
    );
}

#[test]
fn rpc_call_batch_all_notifications() {
    let mut log = Vec::new();
    let got = serve(
        r#"[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
    ]"#,
        BatchPolicy::Allow,
        &mut log,
    );
    assert!(
        got.is_none(),
        "nothing is returned for all notification batches"
    );
    assert_eq!(log, ["notify_sum", "notify_hello"]);
}

#[test]
fn batch_policy_reject_answers_one_invalid_request_in_an_array() {
    let mut log = Vec::new();
    let expected: Value = serde_json::from_str(
        r#"[{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}]"#,
    )
    .unwrap();
    for batch in [
        r#"[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"}]"#,
        r#"[{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]"#,
        "[1,2,3]",
        "[]",
    ] {
        let got = serve(batch, BatchPolicy::Reject, &mut log).expect("a batch is answered");
        assert_eq!(
            serde_json::from_slice::<Value>(&got).unwrap(),
            expected,
            "{batch}"
        );
    }
    assert!(
        log.is_empty(),
        "no element of a rejected batch is processed"
    );
    // Invalid JSON is still a parse error, not a rejected batch.
    let got = serve("[1,", BatchPolicy::Reject, &mut log).unwrap();
    let got: Value = serde_json::from_slice(&got).unwrap();
    assert_eq!(got["error"]["code"], -32700);
    // `parse` defaults to Reject.
    assert!(
        matches!(jsonrpc::parse(b"[{}]"), Parsed::Batch(ref items) if items.len() == 1 && items[0].is_err())
    );
}

#[test]
fn ids_are_echoed_byte_for_byte() {
    for raw in [
        "1.0",
        "-0",
        r#""a\u0041""#,
        "12345678901234567890",
        "1e2",
        "-12.50",
        r#""""#,
        r#""\ud83d\ude00""#,
    ] {
        let request = format!(r#"{{ "jsonrpc" : "2.0" , "id" : {raw} , "method" : "get_data" }}"#);
        let mut log = Vec::new();
        let got = serve(&request, BatchPolicy::Allow, &mut log).unwrap();
        let expected = format!(r#"{{"jsonrpc":"2.0","id":{raw},"result":["hello",5]}}"#);
        assert_eq!(String::from_utf8(got).unwrap(), expected);
        // Errors echo the id exactly too.
        let request = format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"nope"}}"#);
        let got = serve(&request, BatchPolicy::Allow, &mut log).unwrap();
        let text = String::from_utf8(got).unwrap();
        assert!(
            text.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{raw},"error":"#)),
            "{text}"
        );
    }
    // An id from an invalid request is echoed exactly as well.
    let Parsed::Single(Err(r)) =
        jsonrpc::parse(br#"{"jsonrpc":"1.0","id":12345678901234567890,"method":"x"}"#)
    else {
        panic!("expected a rejection")
    };
    assert_eq!(
        r.id.as_ref().map(OwnedId::as_raw),
        Some("12345678901234567890")
    );
}
