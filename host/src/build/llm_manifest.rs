//! Tests of the manifest's `[llm.<alias>]` sections (`runtime::llm::settings`).

#[cfg(test)]
mod tests {
    use super::super::manifest::Manifest;
    use crate::runtime::llm::settings::*;

    const BASE: &str = "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n[outbound]\nallow = [\"https://api.example.com\"]\n";
    const MAIN: &str = "[llm.main]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\n";

    #[test]
    fn reads_aliases_with_their_fallbacks_and_prices() {
        let m = Manifest::parse(&format!(
            "{BASE}[llm.main]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"gpt-4.1-mini\"\napi_key = {{ secret = \"OPENAI_API_KEY\" }}\nfallbacks = [\"backup\"]\nmax_output_tokens = 2048\nprice = {{ input_per_mtok = 0.40, output_per_mtok = 1.60 }}\n[llm.backup]\nprovider = \"anthropic\"\nbase_url = \"https://api.example.com/v1/\"\nmodel = \"claude\"\n"
        ))
        .unwrap();
        let main = &m.llm.aliases["main"];
        assert_eq!(main.provider, Provider::Openai);
        assert_eq!(main.url(), "https://api.example.com/v1/chat/completions");
        assert_eq!(main.max_output_tokens(), 2048);
        assert_eq!(main.fallbacks, ["backup"]);
        assert_eq!(main.api_key.as_ref().unwrap().secret, "OPENAI_API_KEY");
        let backup = &m.llm.aliases["backup"];
        assert_eq!(backup.url(), "https://api.example.com/v1/messages");
        assert_eq!(backup.max_output_tokens(), LLM_MAX_OUTPUT_TOKENS);
        // The stored manifest reads back the same aliases.
        let stored = read(&format!("{BASE}{MAIN}"));
        assert_eq!(stored.aliases.keys().collect::<Vec<_>>(), ["main"]);
    }

    #[test]
    fn refuses_what_cannot_work_with_a_clear_error() {
        for (bad, needle) in [
            (
                "[llm.x]\nprovider = \"openai\"\nbase_url = \"https://elsewhere.example.com/v1\"\nmodel = \"m\"\n",
                "not in `[outbound] allow`",
            ),
            (
                "[llm.x]\nprovider = \"gemini\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\n",
                "unknown variant",
            ),
            (
                "[llm.x]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1?key=1\"\nmodel = \"m\"\n",
                "query string",
            ),
            (
                "[llm.x]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\napi_key = { secret = \"1bad\" }\n",
                "secret name",
            ),
            (
                "[llm.x]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\napi_key = \"sk-literal\"\n",
                "api_key",
            ),
            (
                "[llm.x]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\nfallbacks = [\"nope\"]\n",
                "`nope`, which is not",
            ),
            (
                "[llm.x]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\nfallbacks = [\"y\"]\n[llm.y]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\nfallbacks = [\"x\"]\n",
                "cycle",
            ),
            (
                "[llm.x]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\nmax_output_tokens = 0\n",
                "max_output_tokens",
            ),
            (
                "[llm.x]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\nprice = { input_per_mtok = -1.0, output_per_mtok = 1.0 }\n",
                "price",
            ),
            (
                "[llm.\"a b\"]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\n",
                "an alias is",
            ),
        ] {
            let err = Manifest::parse(&format!("{BASE}{bad}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{bad:?} gave {err}");
        }
        let many: String = (0..=MAX_LLM_ALIASES)
            .map(|i| format!("[llm.m{i}]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\n"))
            .collect();
        let err = Manifest::parse(&format!("{BASE}{many}"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("more than {MAX_LLM_ALIASES}")),
            "{err}"
        );
    }

    const PRICED: &str = "[llm.main]\nprovider = \"openai\"\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\nprice = { input_per_mtok = 1.0, output_per_mtok = 2.0 }\n";

    #[test]
    fn reads_the_budget_per_session_beside_the_aliases() {
        let m = Manifest::parse(&format!(
            "{BASE}[llm]\nbudget_per_session = {{ tokens = 5000 }}\n{MAIN}"
        ))
        .unwrap();
        assert_eq!(m.llm.budget_per_session.unwrap().tokens, Some(5000));
        assert_eq!(m.llm.aliases.keys().collect::<Vec<_>>(), ["main"]);
        let stored = read(&format!(
            "{BASE}[llm]\nbudget_per_session = {{ cost = 2.5 }}\n{PRICED}"
        ));
        assert_eq!(stored.budget_per_session.unwrap().cost, Some(2.5));
        // Documented default: no budget.
        assert!(read(&format!("{BASE}{MAIN}")).budget_per_session.is_none());
    }

    #[test]
    fn refuses_a_malformed_budget_naming_the_key() {
        for (budget, aliases, needle) in [
            ("{ tokens = 0 }", MAIN, "`tokens` must be 1 or more"),
            ("{ cost = 0.0 }", PRICED, "`cost` must be a number above 0"),
            ("{ tokens = 5, cost = 1.0 }", PRICED, "exactly one"),
            ("{}", MAIN, "exactly one"),
            ("{ tokens = -3 }", MAIN, "budget_per_session"),
            ("{ dollars = 3 }", MAIN, "budget_per_session"),
            ("{ cost = 1.0 }", MAIN, "`[llm.main]` needs a `price`"),
            ("{ cost = 1.0 }", "", "no `[llm.<alias>]` is declared"),
        ] {
            let manifest = format!("{BASE}[llm]\nbudget_per_session = {budget}\n{aliases}");
            let err = Manifest::parse(&manifest).unwrap_err().to_string();
            assert!(err.contains(needle), "{budget} gave {err}");
            assert!(err.contains("budget_per_session"), "{budget} gave {err}");
        }
    }
}
