"""What every config section shares: camelCase aliases, unknown keys refused, values frozen; and the rule
that a `…Env` field names an environment variable, never the secret itself."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def variable_name(secret: str, example: str) -> AfterValidator:
    """A `…Env` field names the environment variable holding a secret; the secret itself pasted there
    (`sk-…`, `123456:ABC…`) would be shown by `config show`, the settings page and every error naming
    the variable, so it is refused. The loader never repeats a `…Env` field's value in its error."""

    def check(value: str) -> str:
        if not ENV_VAR_NAME.match(value):
            raise ValueError(
                f"must be the name of an environment variable (letters, digits, _), not the {secret} itself:"
                f" put the {secret} in a variable (export {example}=…) and write its name ({example}) here"
            )
        return value

    return AfterValidator(check)


ApiKeyEnv = Annotated[str, variable_name("key", "OPENAI_API_KEY")]
DsnEnv = Annotated[str, variable_name("connection string", "KLAW_DATABASE_URL")]


class Section(BaseModel):
    """Base for every config section: camelCase aliases, unknown keys rejected, values frozen."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)
