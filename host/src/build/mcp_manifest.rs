//! Tests of the manifest's `[mcp.<name>]` sections (`runtime::mcp::settings`).

#[cfg(test)]
mod tests {
    use super::super::manifest::Manifest;
    use crate::runtime::mcp::settings::*;

    const BASE: &str = "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n[outbound]\nallow = [\"https://mcp.example.com\"]\n";

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
        assert!(docs.approval.gates("write", true));
        assert!(!docs.approval.gates("read", false));
        assert!(!m.mcp["ro"].approval.gates("write", false));
        let default = &m.mcp["def"].approval;
        assert_eq!(*default, Approval::NotReadOnly);
        assert!(default.gates("write", false) && !default.gates("read", true));
        assert_eq!(m.mcp["def"].timeout_secs(), MCP_TIMEOUT_SECS);
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
}
