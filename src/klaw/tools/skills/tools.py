"""`skill_list` and `skill_read`: the skills group of `tools.enabled`.

Closures over the engine's `SkillCatalogue` (this package imports nothing from the engine). Both
look at the catalogue as it is now (a skill edited since the last turn is read fresh); `skill_read`
reads the file at call time, confined to the skill's folder (klaw/tools/skills/skill_files.py). A
mistake (no such skill, a path leading out, a missing file) raises ToolRefusal: the model reads the reason
as the call's result, and the engine's log gets no traceback for what is the model's slip, not a bug.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from pydantic import Field

from klaw.tools.calls import ToolRefusal
from klaw.tools.registry import ToolRegistry
from klaw.tools.skills.catalogue import SkillCatalogue
from klaw.tools.skills.skill_files import SKILL_FILE, Skill, SkillPathError, read_confined, split_front_matter


def register_skill_tools(registry: ToolRegistry, catalogue: SkillCatalogue, *, max_bytes: int) -> None:
    """Offer `skill_list` and `skill_read` over `catalogue` (files up to `max_bytes`)."""

    async def skill_list() -> list[dict[str, Any]] | str:
        """List skills: name, purpose, files."""
        scan = await asyncio.to_thread(catalogue.current)
        if not scan.skills:
            return "No skills are installed (a skill is a folder under workspace/skills/ with a SKILL.md)."
        return [{"name": s.name, "description": s.description, "files": list(s.files)} for s in scan.skills.values()]

    async def skill_read(
        name: Annotated[str, Field(description="As skill_list gives it")],
        path: Annotated[str | None, Field(description="Default SKILL.md")] = None,
    ) -> str:
        """Load a skill's instructions or one of its files."""
        return await asyncio.to_thread(_read, catalogue, name, path, max_bytes)

    registry.register(skill_list)
    registry.register(skill_read)


def _read(catalogue: SkillCatalogue, name: str, path: str | None, max_bytes: int) -> str:
    skill = catalogue.current().skills.get(name)
    if skill is None:
        raise ToolRefusal(f"there is no usable skill named {name!r}: skill_list lists the skills")
    try:
        if path is None or path.strip() in (SKILL_FILE, f"./{SKILL_FILE}"):
            return _instructions(skill, read_confined(skill.folder, SKILL_FILE, max_bytes=max_bytes))
        return read_confined(skill.folder, path, max_bytes=max_bytes)
    except SkillPathError as exc:
        raise ToolRefusal(f"skill {name!r}: {exc}") from None


def _instructions(skill: Skill, text: str) -> str:
    """The body of SKILL.md (its front matter is already in the skills layer) and the files to ask for."""
    _, body = split_front_matter(text)
    files = "\n".join(f"- {f}" for f in skill.files)
    tail = f"\n\nFiles of this skill (read one with skill_read({skill.name!r}, path)):\n{files}" if files else ""
    return f"# Skill: {skill.name}\n\n{body.strip()}{tail}"
