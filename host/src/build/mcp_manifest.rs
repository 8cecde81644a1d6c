//! Tests of the manifest's `[mcp.<name>]` sections (`runtime::mcp::settings`).

#[cfg(test)]
mod tests {
    use super::super::manifest::Manifest;
    use crate::runtime::mcp::settings::*;

    const BASE: &str = "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n[outbound]\nallow = [\"https://mcp.example.com\", \"http://plain.example.com\", \"http://127.0.0.1:9\", \"http://localhost:9\"]\n";

    #[test]
    fn reads_a_server_and_its_approval_rules() {
        let m = Manifest::parse(&format!(
            "{BASE}[mcp.docs]\nurl = \"https://mcp.example.com/mcp\"\nbearer_secret = \"DOCS_TOKEN\"\nheaders = {{ \"X-Tenant\" = \"acme\", \"X-Key\" = {{ secret = \"DOCS_KEY\" }} }}\napproval = [\"write\"]\ntimeout_secs = 5\n[mcp.ro]\nurl = \"https://mcp.example.com/ro\"\napproval = \"none\"\n[mcp.def]\nurl = \"https://mcp.example.com/d\"\n"
        ))
        .unwrap();
        let docs = &m.mcp["docs"];
        assert_eq!(docs.timeout_secs(), 5);
        let secrets: Vec<_> = docs.secret_names().collect();
        assert_eq!(secrets, ["DOCS_TOKEN", "DOCS_KEY"]);
        assert!(docs.gates("write", true) && docs.names_gated("write"));
        assert!(!docs.gates("read", false) && !docs.names_gated("read"));
        assert!(!m.mcp["ro"].gates("write", false));
        // Left out: every tool gated, whatever the server annotates.
        let default = &m.mcp["def"];
        assert_eq!(default.approval, Approval::Default);
        assert!(default.gates("write", false) && default.gates("read", true));
        assert!(!default.names_gated("write"));
        assert_eq!(m.mcp["def"].timeout_secs(), MCP_TIMEOUT_SECS);
    }

    #[test]
    fn annotations_count_only_when_trusted_and_ungated_tools_are_listed() {
        let m = Manifest::parse(&format!(
            "{BASE}[mcp.t]\nurl = \"https://mcp.example.com/t\"\ntrust_annotations = true\n[mcp.u]\nurl = \"https://mcp.example.com/u\"\nungated = [\"search\"]\n"
        ))
        .unwrap();
        let trusted = &m.mcp["t"];
        assert!(!trusted.gates("read", true) && trusted.gates("write", false));
        let listed = &m.mcp["u"];
        assert!(!listed.gates("search", false));
        assert!(listed.gates("read", true), "an annotation is not trusted");
        assert!(listed.gates("wipe", false), "a tool not listed is gated");
    }

    #[test]
    fn a_url_may_take_a_path_secret_and_secrets_need_https_or_loopback() {
        let m = Manifest::parse(&format!(
            "{BASE}[mcp.z]\nurl = \"https://mcp.example.com/s/{{secret:ZAP_KEY}}/mcp\"\nbearer_secret = \"T\"\n[mcp.local]\nurl = \"http://127.0.0.1:9/s/{{secret:LOCAL_KEY}}/mcp\"\n[mcp.named]\nurl = \"http://localhost:9/mcp\"\nbearer_secret = \"T\"\n[mcp.open]\nurl = \"http://plain.example.com/mcp\"\n"
        ))
        .unwrap();
        let names: Vec<_> = m.mcp["z"].secret_names().collect();
        assert_eq!(names, ["T", "ZAP_KEY"]);
        assert_eq!(
            url_parts(&m.mcp["z"].url),
            [
                UrlPart::Text("https://mcp.example.com/s/"),
                UrlPart::Secret("ZAP_KEY"),
                UrlPart::Text("/mcp")
            ]
        );
        assert!(fits_a_url("zap-SECRET_9.x~") && !fits_a_url("a/b") && !fits_a_url("abc"));
        for (bad, needle) in [
            (
                "[mcp.x]\nurl = \"http://plain.example.com/m\"\nbearer_secret = \"T\"\n",
                "in clear over http://",
            ),
            (
                "[mcp.x]\nurl = \"http://plain.example.com/m\"\nheaders = { \"X-Key\" = { secret = \"K\" } }\n",
                "in clear over http://",
            ),
            (
                "[mcp.x]\nurl = \"http://plain.example.com/s/{secret:K}/m\"\n",
                "in clear over http://",
            ),
            (
                "[mcp.x]\nurl = \"https://{secret:K}.mcp.example.com/m\"\n",
                "in the path only",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/s/{secret:1K}/m\"\n",
                "secret name",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\napproval = \"all\"\nungated = [\"a\"]\n",
                "use one way",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\napproval = [\"a\"]\ntrust_annotations = true\n",
                "use one way",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\n[tools.x__wipe]\nneeds_approval = true\n",
                "prefix of the MCP server",
            ),
        ] {
            let err = Manifest::parse(&format!("{BASE}{bad}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{bad:?} gave {err}");
        }
    }

    #[test]
    fn refuses_what_cannot_work_with_a_clear_error() {
        for (bad, needle) in [
            (
                "[mcp.x]\nurl = \"https://elsewhere.example.com/mcp\"\n",
                "not in `[outbound] allow`",
            ),
            ("[mcp.x]\nurl = \"ftp://mcp.example.com/\"\n", "http://"),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m?key=1\"\n",
                "query string",
            ),
            (
                "[mcp.x]\nurl = \"https://me:pw@mcp.example.com/m\"\n",
                "credentials",
            ),
            (
                "[mcp.\"a_b\"]\nurl = \"https://mcp.example.com/m\"\n",
                "server name",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\nbearer_secret = \"1bad\"\n",
                "secret name",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\nheaders = { \"Mcp-Session-Id\" = \"s\" }\n",
                "sets \"Mcp-Session-Id\" itself",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\nbearer_secret = \"T\"\nheaders = { Authorization = \"x\" }\n",
                "use one",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\napproval = \"some\"\n",
                "approval",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\ntimeout_secs = 0\n",
                "timeout_secs",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\nretries = 3\n",
                "retries",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\nheaders = { H0 = \"v\", H1 = \"v\", H2 = \"v\", H3 = \"v\", H4 = \"v\", H5 = \"v\", H6 = \"v\", H7 = \"v\", H8 = \"v\", H9 = \"v\", H10 = \"v\", H11 = \"v\", H12 = \"v\", H13 = \"v\", H14 = \"v\", H15 = \"v\", H16 = \"v\" }\n",
                "more than 16 headers",
            ),
        ] {
            let err = Manifest::parse(&format!("{BASE}{bad}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{bad:?} gave {err}");
        }
        let nine: String = (0..9)
            .map(|i| format!("[mcp.s{i}]\nurl = \"https://mcp.example.com/m\"\n"))
            .collect();
        let err = Manifest::parse(&format!("{BASE}{nine}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than 8"), "{err}");
    }

    #[test]
    fn an_own_tool_may_not_wear_a_servers_prefix() {
        use crate::store::{AgentDescription, ToolInfo};
        let tool = |name: &str| ToolInfo {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
            needs_approval: false,
        };
        let description = AgentDescription {
            routes: vec!["/chat".into()],
            tools: vec![tool("lookup"), tool("docs__search")],
        };
        let servers = ["docs".to_string()];
        let err = super::super::own_tools_apart(&description, &servers).unwrap_err();
        assert!(
            err.to_string()
                .contains("`docs__search` starts with `docs__`"),
            "{err}"
        );
        assert!(super::super::own_tools_apart(&description, &["doc".into()]).is_ok());
    }
}
