"""Whether a function is shaped as a tool group's provider (`def provide(setup: ToolSetup)`), asked in one place
by the two that need it (decision 474): an entry point naming a tool where a provider belongs (tools/groups.py,
where an unannotated `provide(setup)` is a provider), and a provider given as `Klaw(tools=[provide])`
(library_arguments.py, where an unannotated one-parameter function is a tool). `ToolSetup` is known by name, so
this imports nothing of klaw and the library's argument checks stay light.
"""

from __future__ import annotations

import inspect


def takes_tool_setup(fn: object, *, unannotated: bool = False) -> bool:
    """Whether `fn` has one parameter to fill (any others have defaults), annotated `ToolSetup`: the class or a
    string naming it (a module with `from __future__ import annotations`); with `unannotated`, or none at all."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    required = [p for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(required) > 1 or not parameters:
        return False
    annotation = parameters[0].annotation
    if annotation is parameters[0].empty:
        return unannotated
    return str(getattr(annotation, "__name__", annotation)).endswith("ToolSetup")
