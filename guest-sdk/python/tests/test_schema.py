"""Tool schemas from type hints, and arguments checked against them."""

import dataclasses
import enum
import unittest
from typing import Annotated, Any, Dict, List, Literal, Optional, Tuple, TypedDict, Union

from agenthost import Agent, Turn
from agenthost.schema import ArgumentError, convert, convert_arguments, schema_of


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Address:
    """Where an order goes."""

    street: str
    city: str
    floor: Optional[int] = None


class Point(TypedDict):
    x: float
    y: float


def spec(agent: Agent, name: str):
    return agent.tools[name]


class SchemaTest(unittest.TestCase):
    def test_scalars_containers_and_unions(self):
        self.assertEqual(schema_of(str), {"type": "string"})
        self.assertEqual(schema_of(int), {"type": "integer"})
        self.assertEqual(schema_of(float), {"type": "number"})
        self.assertEqual(schema_of(bool), {"type": "boolean"})
        self.assertEqual(schema_of(Any), {})
        self.assertEqual(schema_of(List[int]), {"type": "array", "items": {"type": "integer"}})
        self.assertEqual(schema_of(list[str]), {"type": "array", "items": {"type": "string"}})
        self.assertEqual(
            schema_of(Dict[str, bool]), {"type": "object", "additionalProperties": {"type": "boolean"}}
        )
        self.assertEqual(schema_of(Optional[str]), {"type": ["string", "null"]})
        self.assertEqual(schema_of(str | None), {"type": ["string", "null"]})
        self.assertEqual(
            schema_of(Union[int, str]), {"anyOf": [{"type": "integer"}, {"type": "string"}]}
        )
        self.assertEqual(schema_of(Literal["a", "b"]), {"enum": ["a", "b"], "type": "string"})
        self.assertEqual(schema_of(Colour), {"enum": ["red", "blue"], "type": "string"})
        self.assertEqual(
            schema_of(Tuple[int, ...]), {"type": "array", "items": {"type": "integer"}}
        )
        self.assertEqual(
            schema_of(Annotated[str, "The id."]), {"type": "string", "description": "The id."}
        )
        with self.assertRaises(TypeError):
            schema_of(Dict[int, str])
        with self.assertRaises(TypeError):
            schema_of(complex)

    def test_dataclasses_and_typeddicts_are_objects(self):
        self.assertEqual(
            schema_of(Address),
            {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "city": {"type": "string"},
                    "floor": {"type": ["integer", "null"]},
                },
                "required": ["street", "city"],
                "additionalProperties": False,
                "description": "Where an order goes.",
            },
        )
        self.assertEqual(schema_of(Point)["required"], ["x", "y"])

    def test_a_tool_takes_its_name_docstring_and_parameters(self):
        agent = Agent(routes=["/chat"])

        @agent.tool(needs_approval=True)
        def refund_order(turn: Turn, order_id: str, amount: float = 0.0, note: Optional[str] = None) -> dict:
            """Refunds a paid order in full.

            A person approves each refund first.

            Args:
                order_id: The order's id, such as A1001.
                amount: How much; 0 for all of it.
            """
            return {}

        tool = spec(agent, "refund_order")
        self.assertTrue(tool.needs_approval)
        self.assertEqual(tool.description, "Refunds a paid order in full.\n\nA person approves each refund first.")
        self.assertEqual(tool.turn_params, ["turn"])
        self.assertEqual(
            tool.parameters,
            {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string", "description": "The order's id, such as A1001."},
                    "amount": {"type": "number", "description": "How much; 0 for all of it.", "default": 0.0},
                    "note": {"type": ["string", "null"], "default": None},
                },
                "required": ["order_id"],
                "additionalProperties": False,
            },
        )

        @agent.tool(name="lookup", parameters={"type": "object"}, description="By hand.")
        def anything(**arguments):
            return arguments

        self.assertEqual(spec(agent, "lookup").parameters, {"type": "object"})
        self.assertEqual(spec(agent, "lookup").description, "By hand.")
        with self.assertRaises(ValueError):
            agent.tool(name="has space")(anything)
        with self.assertRaises(ValueError):
            agent.tool(name="lookup")(anything)

    def test_arguments_are_checked_and_converted(self):
        hints = {"address": Address, "colour": Colour, "count": int, "tags": List[str]}
        out = convert_arguments(
            hints,
            ["address"],
            False,
            {"address": {"street": "Main St", "city": "Oslo"}, "colour": "red", "count": 3, "tags": ["a"]},
        )
        self.assertEqual(out["address"], Address("Main St", "Oslo"))
        self.assertIs(out["colour"], Colour.RED)

        def error(arguments) -> str:
            with self.assertRaises(ArgumentError) as caught:
                convert_arguments(hints, ["address"], False, arguments)
            return str(caught.exception)

        self.assertEqual(error({}), "missing field `address`")
        self.assertEqual(error({"address": {"street": "s", "city": "c"}, "x": 1}), "unknown field `x`")
        self.assertEqual(
            error({"address": {"street": 1, "city": "x"}}),
            "`address`.street: invalid type: integer `1`, expected a string",
        )
        self.assertEqual(error({"address": {"street": "s"}}), "`address`: missing field `city`")
        self.assertIn("unknown variant string 'green'", error({"address": {"street": "s", "city": "c"}, "colour": "green"}))
        self.assertEqual(
            error({"address": {"street": "s", "city": "c"}, "count": True}),
            "`count`: invalid type: boolean `true`, expected an integer",
        )
        self.assertEqual(error([1]), "invalid type: an array, expected an object")
        self.assertEqual(convert(float, 3), 3.0)
        self.assertEqual(convert(Optional[int], None), None)
        self.assertEqual(convert(Tuple[int, str], [1, "a"]), (1, "a"))


if __name__ == "__main__":
    unittest.main()
