//! Activation and rollback: exactly one current deployment per app; sessions
//! keep the deployment they were pinned to.

use serde_json::{Value, json};

use crate::support::{self, Server, bundle};

async fn rows(server: &Server) -> Vec<Value> {
    let (status, rows) = server.get("/apps/roll/deployments").await;
    assert_eq!(status, 200);
    rows.as_array().unwrap().clone()
}

async fn activate(server: &Server, id: &Value) -> u16 {
    let (status, _) = server
        .post(
            &format!("/deployments/{}/activate", id.as_str().unwrap()),
            json!({}),
        )
        .await;
    status
}

#[tokio::test]
async fn rollback_pins_new_sessions_while_old_ones_keep_their_version() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let hello = support::guest("hello");
    let v1 = server.deploy("roll", &hello).await;
    let v2 = server.deploy("roll", &hello).await;
    let on_v2 = server.session("roll", "/chat", json!("hi")).await;
    server
        .events(&on_v2, None)
        .await
        .until(&["TURN_ENDED"])
        .await;

    assert_eq!(activate(&server, &v1["id"]).await, 202);
    let current: Vec<(u64, bool, String)> = rows(&server)
        .await
        .iter()
        .map(|r| {
            (
                r["version"].as_u64().unwrap(),
                r["active"].as_bool().unwrap(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        current,
        [(2, false, "retired".into()), (1, true, "active".into())]
    );
    let on_v1 = server.session("roll", "/chat", json!("hi")).await;
    let (_, record) = server.get(&format!("/sessions/{on_v1}")).await;
    assert_eq!(record["deployment_id"], v1["id"]);

    // The v2 session keeps running on v2, also across a restart.
    server.kill();
    let server = Server::start(dir.path()).await;
    let (status, _) = server
        .post(
            &format!("/sessions/{on_v2}/input"),
            json!({"input": "still?"}),
        )
        .await;
    assert_eq!(status, 202);
    let mut stream = server.events(&on_v2, None).await;
    loop {
        let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
        if events.last().unwrap()["payload"]["turn"] == 2 {
            assert_eq!(events.last().unwrap()["type"], "TURN_ENDED");
            break;
        }
    }
    let (_, record) = server.get(&format!("/sessions/{on_v2}")).await;
    assert_eq!(record["deployment_id"], v2["id"]);
    let after_restart = server.session("roll", "/chat", json!("hi")).await;
    let (_, record) = server.get(&format!("/sessions/{after_restart}")).await;
    assert_eq!(record["deployment_id"], v1["id"]);

    // Building and failed deployments cannot be activated.
    let looping = support::guest("describe-loop");
    let manifest = "[app]\nslug = \"roll\"\n[agent]\nentry = \"agent.wasm\"\n";
    let (_, building) = server
        .upload(bundle(&[("agent.wasm", &looping)]), manifest)
        .await;
    assert_eq!(activate(&server, &building["id"]).await, 409);
    let failed = server.wait_built(&building).await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(activate(&server, &failed["id"]).await, 409);
    let (status, _) = server
        .post("/deployments/not-a-deployment/activate", json!({}))
        .await;
    assert_eq!(status, 404);

    // A retired deployment can be activated again, and the next successful
    // deploy becomes current again.
    assert_eq!(activate(&server, &v2["id"]).await, 202);
    assert_eq!(
        rows(&server)
            .await
            .iter()
            .filter(|r| r["active"] == true)
            .count(),
        1
    );
    let v4 = server.deploy("roll", &hello).await;
    let (_, app) = server.get("/apps/roll").await;
    assert_eq!(app["current_deployment"]["id"], v4["id"]);
}
