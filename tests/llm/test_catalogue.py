"""`ModelCatalogue`: the one place a model id is looked up, so "unknown model" reads the same everywhere."""

from __future__ import annotations

import pytest

from klaw.config import EngineConfig
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.errors import LlmError, UnknownModelError

URL = "http://127.0.0.1:9/v1"


def _catalogue() -> ModelCatalogue:
    return ModelCatalogue.from_config(
        EngineConfig.model_validate(
            {
                "models": {"fake/small": {"baseUrl": URL, "contextBudget": 4096}, "fake/large": {"baseUrl": URL}},
                "routing": {"default": "fake/small", "tasks": {"subagent": "fake/large"}},
                "context": {"defaultBudgetTokens": 6000},
            }
        )
    )


def test_an_unknown_id_names_itself_and_the_configured_ones() -> None:
    catalogue = _catalogue()
    with pytest.raises(UnknownModelError) as caught:
        catalogue.get("nope/x")
    assert str(caught.value) == "unknown model 'nope/x'; configured models: fake/large, fake/small"
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, LlmError)  # bad input, and a model error
    assert (caught.value.model_id, caught.value.known) == ("nope/x", ("fake/large", "fake/small"))
    with pytest.raises(UnknownModelError):
        catalogue.check("nope/x")
    catalogue.check(None)
    catalogue.check("fake/large")


def test_routing_and_budgets() -> None:
    catalogue = _catalogue()
    routing = catalogue.routing
    assert (routing.default, routing.summarization_model, routing.subagent_model) == (
        "fake/small",
        "fake/small",
        "fake/large",
    )
    assert (catalogue.context_budget("fake/small"), catalogue.context_budget("fake/large")) == (4096, 6000)
    assert "fake/small" in catalogue and "nope/x" not in catalogue
    assert catalogue.ids == ("fake/large", "fake/small")
