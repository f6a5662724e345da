"""docs/mcp.md's "Write your own server" example, as a person copies it: its Python saved to a file, its
engine.yaml lines (the Python and the file's path put in), and the model calling the server's tool in a turn."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from tests.engine.harness import running_engine
from tests.tools.mcp_client.test_mcp_tools_in_turns import status, tool_result

DOC = Path(__file__).parents[3] / "docs" / "mcp.md"


def example_blocks() -> tuple[str, str]:
    """The section's Python and YAML code blocks."""
    section = DOC.read_text(encoding="utf-8").split("### Write your own server", 1)[1].split("\n## ", 1)[0]
    python = re.search(r"```python\n(.*?)```", section, re.S)
    config = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert python is not None and config is not None, "docs/mcp.md's example lost a code block"
    return python.group(1), config.group(1)


async def test_the_docs_own_server_example_runs_as_a_real_server_through_klaw(tmp_path: Path) -> None:
    code, config = example_blocks()
    script = tmp_path / "weather.py"
    script.write_text(code, encoding="utf-8")
    settings = yaml.safe_load(config)
    weather = settings["mcp"]["servers"]["weather"]
    assert weather["args"] == ["/home/me/mcp/weather.py"]
    weather["command"], weather["args"] = sys.executable, [str(script)]  # this machine's Python and file
    settings["mcp"]["startWaitSeconds"] = 60  # a loaded machine starts Python slowly
    async with running_engine(tmp_path, tools=settings["tools"], mcp=settings["mcp"]) as h:
        h.server.reply_tool_calls([("weather__forecast", {"city": "Lisbon"})])
        h.server.reply_text("sunny")
        assert (await h.turn("weather in Lisbon tomorrow?")).text == "sunny"
        assert tool_result(h) == "Lisbon: sunny, 21 °C"
        assert "MCP weather: ready, 1 tool(s)" in await status(h)
        h.server.reply_tool_calls([("weather__forecast", {"city": " "})])
        h.server.reply_text("which city?")
        assert (await h.turn("weather tomorrow?")).text == "which city?"
        # the ToolError's message, as the SDK words it, for the model to read
        assert tool_result(h) == "Error executing tool forecast: give the city's name, e.g. Lisbon"
        log_text = (h.home.root / "mcp" / "weather.log").read_text(encoding="utf-8")
    assert "forecast asked for Lisbon" in log_text
