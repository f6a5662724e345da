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


# A provider's one parameter annotated loosely (`setup: object`, `setup: Any`): a provider still, not a tool.
_LOOSE = ("object", "Any", "typing.Any")


def entry_point_misread(fn: object) -> tuple[str, str] | None:
    """What is wrong with a function an entry point names, as (what it is, what to write), or None for a provider.

    The documented way (docs/library.md): an entry point names a list of tools, or a plain `def` that builds them
    from the one `ToolSetup` it is given. So a plain function taking one parameter is a provider when nothing says
    otherwise: unannotated, annotated `ToolSetup`, `object` or `Any`, or named `setup` (before, `def provide(setup:
    object)` was taken for a tool and told to be written `provide = [provide]`, decision 540). It is the tool
    itself when it is `async def` (a provider is plain), or when it reads as a tool (a docstring, and a parameter
    typed as a tool's argument is, `city: str`); a function neither reads as is told both ways to mend it."""
    if not inspect.isfunction(fn):
        return None
    name = fn.__name__
    as_list = f"write {{attribute}} = [{name}]"
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return f"the tool {name} itself", as_list
    if takes_tool_setup(fn, unannotated=True) or _loose_setup(fn):
        return None
    if inspect.getdoc(fn):
        return f"the tool {name} itself", as_list
    return (
        f"the function {name}, which is neither a provider (one parameter, a klaw.ToolSetup) nor a tool (no docstring)",
        f"if {name} builds the group's tools, write its parameter as the docs do (def {name}(setup: ToolSetup)); if"
        f" it is a tool, give it a docstring and {as_list}",
    )


def _loose_setup(fn: object) -> bool:
    """One parameter to fill, named `setup` or annotated `object`/`Any`: a provider written loosely."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    required = [p for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(required) != 1:
        return False
    annotation = required[0].annotation
    shown = str(getattr(annotation, "__name__", annotation))
    return required[0].name == "setup" or shown in _LOOSE or annotation is object
