"""What each tool of a scenario is at run time: its argument model, what a model is told
about it, and (for Python tools) the loaded code, (for MCP tools) the server's tool.

Built once per agent (building pydantic models and importing code per trial would
cost more than the trial), shared by every trial's tool client and by ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from errorflow.scenario.spec.catalog import ARG_MODELS, ToolArgs, input_schema
from errorflow.scenario.spec.model import Scenario
from errorflow.scenario.spec.tool_args import tool_args_model, tool_description, tool_schema
from errorflow.world.mcp.checks import check_mcp_tools
from errorflow.world.mcp.tool import McpTool
from errorflow.world.python_tool import PythonTool, load_callable, signature_args_model


@dataclass
class ToolCatalog:
    models: dict[str, type[ToolArgs]] = field(default_factory=dict)
    schemas: dict[str, dict[str, JsonValue]] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    python: dict[str, PythonTool] = field(default_factory=dict)
    mcp: dict[str, McpTool] = field(default_factory=dict)

    @classmethod
    def of(cls, scenario: Scenario) -> ToolCatalog:
        catalog = cls()
        for name, spec in scenario.tools.items():
            model = tool_args_model(name, spec, scenario.world.tables)
            if spec.kind == "python":
                assert spec.function is not None
                fn = load_callable(spec.function)
                if model is None:
                    model = signature_args_model(fn, name)
                catalog.python[name] = PythonTool(fn, name=name, args_model=model)
            if spec.kind == "mcp":  # its server started here (or its session reused)
                remote = catalog.mcp[name] = McpTool.load(name, spec)
                model = remote.args_model
            assert model is not None
            catalog.models[name] = model
            if spec.kind in ARG_MODELS:  # the built-in kinds' own schemas
                catalog.schemas[name] = input_schema(spec.kind)
            elif spec.kind == "mcp":  # the server's own schema, as the server states it
                catalog.schemas[name] = catalog.mcp[name].input_schema
            else:
                catalog.schemas[name] = tool_schema(model)  # type: ignore[assignment]
            catalog.descriptions[name] = tool_description(spec)
            if spec.kind == "mcp" and not spec.description:
                catalog.descriptions[name] = catalog.mcp[name].description or "Call the tool."
        if catalog.mcp:
            check_mcp_tools(scenario, catalog.mcp)
        return catalog
