use super::*;

fn config() -> ToolServerConfig {
    ToolServerConfig {
        url: "http://127.0.0.1:4000/".into(),
        key: "k".into(),
    }
}

#[test]
fn each_session_has_its_own_secret_and_another_key_gives_others() {
    let a = config().session_secret("a");
    assert_eq!(a.len(), 64, "hex of 32 bytes: {a}");
    assert_eq!(a, config().session_secret("a"), "stable for one key");
    assert_ne!(a, config().session_secret("b"));
    let other = ToolServerConfig {
        key: "k2".into(),
        ..config()
    };
    assert_ne!(a, other.session_secret("a"));
    assert!(
        !format!("{:?}", config()).contains("\"k\""),
        "the key is not printed"
    );
}

#[test]
fn the_acp_entry_names_the_sessions_url_and_secret() {
    let entry = config().acp_server_entry("my session/1");
    assert_eq!(entry["type"], "http");
    assert_eq!(entry["name"], SERVER_NAME);
    assert_eq!(entry["url"], "http://127.0.0.1:4000/mcp/my%20session%2F1");
    assert_eq!(entry["headers"][0]["name"], "Authorization");
    assert_eq!(
        entry["headers"][0]["value"],
        format!("Bearer {}", config().session_secret("my session/1"))
    );
}

#[test]
fn session_ids_round_trip_through_the_path() {
    for id in ["s", "a b/c%d", "日本", "-._~"] {
        let entry = config().acp_server_entry(id);
        let url = entry["url"].as_str().unwrap();
        let segment = url.strip_prefix("http://127.0.0.1:4000/mcp/").unwrap();
        assert!(!segment.contains('/'), "one path segment: {segment}");
        assert_eq!(percent_decode(segment).as_deref(), Some(id));
    }
    assert_eq!(percent_decode("%zz"), None);
    assert_eq!(percent_decode("%4"), None);
    assert_eq!(percent_decode("%ff"), None, "not UTF-8");
}
