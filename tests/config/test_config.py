from __future__ import annotations

from pathlib import Path

import pytest

from klaw.config import AutoRagConfig, ContextConfig, EngineConfig
from klaw.config_loader import ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "engine.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_match_the_design() -> None:
    config = EngineConfig()
    assert config.processing.debounce_ms == 1500
    assert config.processing.max_concurrent_llm == 2
    assert config.processing.max_tool_call_rounds == 10
    assert config.context.sliding_window == 20
    assert config.context.subagent_history == 5
    rag = config.auto_rag
    assert (rag.enabled, rag.top_k, rag.max_tokens, rag.relevance_threshold, rag.min_message_tokens) == (
        True,
        3,
        400,
        0.5,
        10,
    )


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    loaded = load_config(tmp_path / "absent.yaml", env={})
    assert loaded.config == EngineConfig()
    assert loaded.sources == {}


def test_full_auto_rag_section_is_parsed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "autoRag:\n  enabled: false\n  topK: 5\n  maxTokens: 800\n  relevanceThreshold: 0.3\n  minMessageTokens: 4\n",
    )
    rag = load_config(path, env={}).config.auto_rag
    assert rag == AutoRagConfig(enabled=False, top_k=5, max_tokens=800, relevance_threshold=0.3, min_message_tokens=4)


def test_missing_section_takes_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "processing:\n  debounceMs: 300\n")
    config = load_config(path, env={}).config
    assert config.processing.debounce_ms == 300
    assert config.auto_rag == AutoRagConfig()
    assert config.context == ContextConfig()


def test_subagent_history_is_parsed(tmp_path: Path) -> None:
    path = write(tmp_path, "context:\n  subagentHistory: 7\n")
    assert load_config(path, env={}).config.context.subagent_history == 7


@pytest.mark.parametrize(
    ("yaml_text", "field", "value"),
    [
        ("autoRag:\n  topK: 0\n", "autoRag.topK", "0"),
        ("autoRag:\n  maxTokens: 0\n", "autoRag.maxTokens", "0"),
        ("autoRag:\n  relevanceThreshold: 0\n", "autoRag.relevanceThreshold", "0"),
        ("autoRag:\n  minMessageTokens: 0\n", "autoRag.minMessageTokens", "0"),
        ("context:\n  subagentHistory: 0\n", "context.subagentHistory", "0"),
        ("context:\n  slidingWindow: -1\n", "context.slidingWindow", "-1"),
        ("processing:\n  maxConcurrentLlm: 0\n", "processing.maxConcurrentLlm", "0"),
        ("processing:\n  debounceMs: soon\n", "processing.debounceMs", "'soon'"),
    ],
)
def test_invalid_value_names_field_value_and_rule(tmp_path: Path, yaml_text: str, field: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, yaml_text), env={})
    message = str(caught.value)
    assert field in message
    assert f"= {value}" in message
    assert "greater than" in message or "valid integer" in message


def test_unknown_field_is_rejected_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"processing\.debounce_millis: unknown field"):
        load_config(write(tmp_path, "processing:\n  debounce_millis: 5\n"), env={})


def test_an_unknown_field_is_answered_with_the_close_name_of_its_own_section(tmp_path: Path) -> None:
    """A newcomer's typos got "e.g. debounceMs" whatever the section; an env override's was not named."""
    path = write(tmp_path, "processng:\n  debounceMs: 5\n")
    env = {"KLAW__RAG__TOPK": "3", "KLAW__MODELS__LOCAL__MAXRETRIEZ": "2"}
    with pytest.raises(ConfigError) as caught:
        load_config(path, env=env)
    lines = str(caught.value).splitlines()
    assert "  - processng: unknown field (did you mean processing? fields are camelCase)" in lines
    # topK is a field of memory.autoRag, not of rag: rag's own fields are listed instead.
    assert (
        "  - rag.topK (from KLAW__RAG__TOPK): unknown field (this section has: conversationLimit, enabled,"
        " exchangeLimitPerConversation, maxTokens, minSimilarity; fields are camelCase)"
    ) in lines
    assert (
        "  - models.LOCAL.MAXRETRIEZ (from KLAW__MODELS__LOCAL__MAXRETRIEZ): unknown field"
        " (did you mean maxRetries? fields are camelCase)"
    ) in lines


def test_routing_to_an_unknown_model_is_rejected(tmp_path: Path) -> None:
    text = "models:\n  openai/gpt-4o-mini:\n    baseUrl: https://api.openai.com/v1\nrouting:\n  default: nope/x\n"
    with pytest.raises(ConfigError, match=r"routing.default names model 'nope/x'.*openai/gpt-4o-mini"):
        load_config(write(tmp_path, text), env={})


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"engine.yaml line 2 has a tab character: YAML indents with spaces only"):
        load_config(write(tmp_path, "processing:\n\tdebounceMs: 5\n"), env={})


def test_env_override_wins_and_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "processing:\n  debounceMs: 300\n")
    loaded = load_config(path, env={"KLAW__PROCESSING__DEBOUNCE_MS": "50", "KLAW__AUTORAG__ENABLED": "false"})
    assert loaded.config.processing.debounce_ms == 50
    assert loaded.config.auto_rag.enabled is False
    assert loaded.sources["processing.debounceMs"] == "env KLAW__PROCESSING__DEBOUNCE_MS"
    assert loaded.sources["autoRag.enabled"] == "env KLAW__AUTORAG__ENABLED"


def test_env_overrides_reach_fields_of_a_model_declared_by_id(tmp_path: Path) -> None:
    """Model fields live under a dict of ids, not a section: their env names must still resolve."""
    env = {
        "KLAW__MODELS__LOCAL__BASEURL": "http://127.0.0.1:9/v1",
        "KLAW__MODELS__LOCAL__MAXRETRIES": "0",
        "KLAW__MODELS__LOCAL__CONTEXT_BUDGET": "2048",
        "KLAW__ROUTING__DEFAULT": "LOCAL",
    }
    loaded = load_config(write(tmp_path, ""), env=env)
    model = loaded.config.model("LOCAL")
    assert (model.base_url, model.max_retries, model.context_budget) == ("http://127.0.0.1:9/v1", 0, 2048)
    assert loaded.sources["models.LOCAL.maxRetries"] == "env KLAW__MODELS__LOCAL__MAXRETRIES"


def test_model_budget_falls_back_to_default_budget() -> None:
    config = EngineConfig.model_validate(
        {
            "models": {"a/x": {"baseUrl": "http://h/v1", "contextBudget": 1000}, "b/y": {"baseUrl": "http://h/v1"}},
            "routing": {"default": "a/x"},
            "context": {"defaultBudgetTokens": 3000},
        }
    )
    assert config.context_budget("a/x") == 1000
    assert config.context_budget("b/y") == 3000
    assert config.model("b/y").provider_model_name("b/y") == "y"
    assert config.model("a/x").provider_model_name("openrouter/anthropic/claude") == "anthropic/claude"


def test_a_field_of_a_newer_klaw_gets_no_misleading_guess(tmp_path: Path) -> None:
    """newcomer9: an engine.yaml a newer klaw wrote was answered "did you mean workspaceQuotaMb?" (for
    workspaceQuotaFiles, which this klaw now has: workspaceQuotaDirs stands for the next such field)."""
    path = write(tmp_path, "tools:\n  workspaceQuotaDirs: 5000\n  workspaceQuotaMbb: 10\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    said = str(caught.value)
    newer = next(line for line in said.splitlines() if "workspaceQuotaDirs" in line)
    assert "did you mean" not in newer and "this section has:" in newer
    assert "if a newer klaw wrote it, upgrade this one (docs/maintenance.md) or remove the field" in newer
    typo = next(line for line in said.splitlines() if "workspaceQuotaMbb" in line)
    assert "did you mean workspaceQuotaMb?" in typo and "newer klaw" not in typo
