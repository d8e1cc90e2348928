//! Interop with the **official Copilot Rust SDK** (`github-copilot-sdk`, unmodified) for
//! canvases: a provider client (canvases declared, `CanvasHandler` installed) and a second
//! client that lists, opens, acts on and closes a canvas through the host; the provider
//! disconnecting makes the open canvas unavailable; a provider joining again rehydrates it.
//! Reference: `copilot-sdk.md` §5.2, `wire2.jsonl:24-49`.
//!
//! Driven like `tests/interop/copilot.rs`: `Client::from_streams` on one end of an in-process
//! pipe, `agentwire_tokio::Server` on the other.

use crate::support::sdk_scenarios;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use crate::support::connect_cuttable;
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use github_copilot_sdk::canvas::{CanvasDeclaration, CanvasHandler, CanvasResult};
use github_copilot_sdk::rpc::{
    CanvasAction, CanvasActionInvokeRequest, CanvasCloseRequest, CanvasOpenRequest,
    CanvasProviderCloseRequest, CanvasProviderInvokeActionRequest, CanvasProviderOpenRequest,
    CanvasProviderOpenResult,
};
use github_copilot_sdk::types::{ResumeSessionConfig, SessionConfig};
use sdk_scenarios::{within, Recorder};
use serde_json::{json, Value};

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the provider's handler was asked.
#[derive(Default)]
struct Seen {
    opened: Vec<CanvasProviderOpenRequest>,
    actions: Vec<CanvasProviderInvokeActionRequest>,
    closed: Vec<CanvasProviderCloseRequest>,
}

struct Board {
    seen: Arc<Mutex<Seen>>,
}

impl CanvasHandler for Board {
    fn on_open<'life0, 'async_trait>(
        &'life0 self,
        ctx: CanvasProviderOpenRequest,
    ) -> BoxFut<'async_trait, CanvasResult<CanvasProviderOpenResult>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.seen.lock().unwrap().opened.push(ctx);
        Box::pin(async move {
            Ok(CanvasProviderOpenResult {
                url: Some("http://localhost/board".into()),
                title: Some("Board 1".into()),
                status: None,
            })
        })
    }

    fn on_action<'life0, 'async_trait>(
        &'life0 self,
        ctx: CanvasProviderInvokeActionRequest,
    ) -> BoxFut<'async_trait, CanvasResult<Value>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let name = ctx.action_name.clone();
        self.seen.lock().unwrap().actions.push(ctx);
        Box::pin(async move { Ok(json!({"refreshed": true, "action": name})) })
    }

    fn on_close<'life0, 'async_trait>(
        &'life0 self,
        ctx: CanvasProviderCloseRequest,
    ) -> BoxFut<'async_trait, CanvasResult<()>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.seen.lock().unwrap().closed.push(ctx);
        Box::pin(async move { Ok(()) })
    }
}

fn board_declaration() -> CanvasDeclaration {
    let mut d = CanvasDeclaration::new("board", "Board", "A test canvas");
    d.input_schema = Some(json!({"type":"object","properties":{"title":{"type":"string"}}}));
    d.actions = Some(vec![CanvasAction {
        name: "refresh".into(),
        description: Some("Refresh board".into()),
        input_schema: None,
    }]);
    d
}

#[tokio::test]
async fn canvas_open_action_close_round_trip_through_a_provider_client() {
    sdk_scenarios::bounded(async {
        let server = Server::new(HostConfig::default());
        let (a, _relay_a) = connect_cuttable(&server).await;
        let (b, relay_b) = connect_cuttable(&server).await;
        let id = sdk_scenarios::new_session_id();
        let prepared = a
            .prepare_session(
                SessionConfig::default()
                    .with_session_id(id.clone())
                    .with_model("fake-model"),
            )
            .expect("prepare_session");
        let mut ea = Recorder::new(prepared.subscribe());
        let sa = within("session.create", prepared.start())
            .await
            .expect("session.create");

        // B joins as the provider of `board`.
        let seen = Arc::new(Mutex::new(Seen::default()));
        let sb = within(
            "session.resume (provider)",
            b.resume_session(
                ResumeSessionConfig::new(id.clone())
                    .with_canvases([board_declaration()])
                    .with_canvas_handler(Arc::new(Board { seen: seen.clone() }))
                    .with_request_canvas_renderer(true),
            ),
        )
        .await
        .expect("join as a canvas provider");
        let registry = ea.wait_for("session.canvas.registry_changed").await;
        assert_eq!(registry.data["canvases"][0]["canvasId"], "board");

        // A lists and opens; B's handler runs; A gets the instance.
        let listed = within("session.canvas.list", sa.rpc().canvas().list())
            .await
            .expect("list");
        assert_eq!(listed.canvases.len(), 1);
        let extension_id = listed.canvases[0].extension_id.clone();
        let opened = within(
            "session.canvas.open",
            sa.rpc().canvas().open(CanvasOpenRequest {
                canvas_id: "board".into(),
                extension_id: None,
                input: Some(json!({"title": "T"})),
                instance_id: "inst-1".into(),
            }),
        )
        .await
        .expect("open");
        assert_eq!(opened.instance_id, "inst-1");
        assert_eq!(opened.extension_id, extension_id);
        assert_eq!(opened.title.as_deref(), Some("Board 1"));
        assert_eq!(opened.url.as_deref(), Some("http://localhost/board"));
        assert_eq!(opened.input, Some(json!({"title": "T"})));
        {
            let seen = seen.lock().unwrap();
            assert_eq!(seen.opened.len(), 1, "the provider was asked once");
            assert_eq!(seen.opened[0].canvas_id, "board");
            assert_eq!(seen.opened[0].instance_id, "inst-1");
            assert_eq!(seen.opened[0].input, Some(json!({"title": "T"})));
            assert_eq!(seen.opened[0].session_id, id);
        }
        let event = ea.wait_for("session.canvas.opened").await;
        assert_eq!(event.data["instanceId"], "inst-1");
        ea.wait_for("session.canvas.recorded").await;
        // The SDK tracks open canvases from the events.
        let open = sa.open_canvases();
        assert_eq!(open.len(), 1, "{open:?}");
        assert_eq!(open[0].instance_id, "inst-1");

        let list_open = within("listOpen", sa.rpc().canvas().list_open())
            .await
            .expect("listOpen");
        assert_eq!(list_open.open_canvases.len(), 1);

        // An action reaches the provider and its answer comes back as `result`.
        let acted = within(
            "session.canvas.action.invoke",
            sa.rpc()
                .canvas()
                .action()
                .invoke(CanvasActionInvokeRequest {
                    action_name: "refresh".into(),
                    input: Some(json!({})),
                    instance_id: "inst-1".into(),
                }),
        )
        .await
        .expect("action");
        assert_eq!(
            acted.result,
            Some(json!({"refreshed": true, "action": "refresh"}))
        );
        assert_eq!(seen.lock().unwrap().actions.len(), 1);

        // Close: the provider hears it; the instance is gone everywhere.
        within(
            "session.canvas.close",
            sa.rpc().canvas().close(CanvasCloseRequest {
                instance_id: "inst-1".into(),
            }),
        )
        .await
        .expect("close");
        assert_eq!(seen.lock().unwrap().closed.len(), 1);
        let closed = ea.wait_for("session.canvas.closed").await;
        assert_eq!(closed.data["instanceId"], "inst-1");
        ea.wait_for("session.canvas.removed").await;
        assert!(sa.open_canvases().is_empty());

        // Open again, then the provider vanishes: the canvas becomes unavailable.
        within(
            "session.canvas.open",
            sa.rpc().canvas().open(CanvasOpenRequest {
                canvas_id: "board".into(),
                extension_id: None,
                input: None,
                instance_id: "inst-2".into(),
            }),
        )
        .await
        .expect("open again");
        relay_b.abort();
        drop(sb);
        let unavailable = ea.wait_for("session.canvas.unavailable").await;
        assert_eq!(unavailable.data["instanceId"], "inst-2");
        let list_open = within("listOpen", sa.rpc().canvas().list_open())
            .await
            .expect("listOpen");
        assert!(list_open.open_canvases.is_empty());

        // A new provider connection re-declares the canvas: the instance comes back.
        let (c, _relay_c) = connect_cuttable(&server).await;
        let seen_c = Arc::new(Mutex::new(Seen::default()));
        let sc = within(
            "session.resume (provider again)",
            c.resume_session(
                ResumeSessionConfig::new(id.clone())
                    .with_canvases([board_declaration()])
                    .with_canvas_handler(Arc::new(Board {
                        seen: seen_c.clone(),
                    })),
            ),
        )
        .await
        .expect("rejoin as provider");
        let back = sc.open_canvases();
        assert_eq!(back.len(), 1, "resume returns openCanvases: {back:?}");
        assert_eq!(back[0].instance_id, "inst-2");
        loop {
            let ev = ea.wait_for("session.canvas.opened").await;
            if ev.data["instanceId"] == "inst-2"
                && ev.data["extensionId"] == back[0].extension_id.as_str()
            {
                break;
            }
        }
        within(
            "action on the rehydrated canvas",
            sa.rpc()
                .canvas()
                .action()
                .invoke(CanvasActionInvokeRequest {
                    action_name: "refresh".into(),
                    input: None,
                    instance_id: "inst-2".into(),
                }),
        )
        .await
        .expect("action reaches the new provider");
        assert_eq!(seen_c.lock().unwrap().actions.len(), 1);
        within("detach a", sa.disconnect()).await.expect("detach a");
    })
    .await;
}
