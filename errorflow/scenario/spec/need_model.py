"""What a task needs: facts, each fetched by one tool call with given arguments.

The older form names one argument (`arg`, default `name`) and its `value`; the general
form gives every argument (`args`), and an argument may come from what another need
found (`{from: NEED, field: COLUMN}`): a dependent need. An upstream failure then
becomes a wrong or missing argument downstream, which is what the scorer follows.
`expect` states the correct answer; without it the answer is what the tool returns,
fault-free, for the right arguments. `sources` names other tools that serve the same
fact with the same arguments: an agent that checks a claim may check it with any of
them, so a claim that came from one tool is verified with another.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, JsonValue, model_validator

from errorflow.core.shapes import Extended, Ident, Strict


class FromNeed(Strict):
    """An argument taken from another need's value (one of its fields, for a record)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    from_: Ident = Field(alias="from")
    field: Ident | None = None


NeedArg = str | int | float | bool | list[str] | FromNeed


class NeedSpec(Extended):
    """One fact the task needs. `wording` is how the task phrases it; `value` (or the
    first of `args`) is the identifier the tool really accepts. When the tool carries
    a `bad_args` fault that identifier is not given to the model, which must guess it
    from the wording."""

    added_fields = frozenset({"args", "expect", "sources"})

    id: Ident
    tool: Ident
    arg: Ident = "name"
    wording: str
    value: str | list[str] | None = None
    args: dict[Ident, NeedArg] | None = Field(default=None, min_length=1, max_length=32)
    expect: JsonValue = None
    #: Other tools serving the same fact with the same arguments (a second source for
    #: checking agents); the ground truth is still `tool`'s.
    sources: list[Ident] = Field(default_factory=list, max_length=8)

    @property
    def tools(self) -> list[str]:
        """Every tool that serves the need: `tool`, then `sources`."""
        return [self.tool, *self.sources]

    @model_validator(mode="after")
    def _one_form(self) -> NeedSpec:
        if self.args is None and self.value is None:
            raise ValueError("a need gives `value` (with `arg`) or `args`")
        if self.args is not None and self.value is not None:
            raise ValueError("give `value` (with `arg`) or `args`, not both")
        if self.args is not None and self.arg != "name" and self.arg not in self.args:
            raise ValueError(f"arg {self.arg!r} is not one of args ({', '.join(self.args)})")
        return self

    @property
    def primary(self) -> str:
        """The argument that identifies what is looked up (hidden by `bad_args`)."""
        if self.args is None or self.arg in self.args:
            return self.arg
        return next(iter(self.args))  # `arg` left at its default: the first argument

    def arguments(self) -> dict[str, NeedArg]:
        """Every argument of the call that answers the need, in order."""
        if self.args is not None:
            return dict(self.args)
        assert self.value is not None
        return {self.primary: self.value}

    def depends_on(self) -> dict[str, FromNeed]:
        """Arguments that come from another need, by argument name."""
        return {k: v for k, v in self.arguments().items() if isinstance(v, FromNeed)}

    @property
    def identifier(self) -> JsonValue:
        """The primary argument's value when the task states it (None when it depends
        on another need)."""
        value = self.arguments()[self.primary]
        if isinstance(value, FromNeed):
            return None
        return list(value) if isinstance(value, list) else value


class TaskSpec(Strict):
    prompt: str = Field(min_length=1, max_length=10_000)
    needs: list[NeedSpec] = Field(min_length=1, max_length=64)
