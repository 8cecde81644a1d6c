"""`approver` on a tool: the keyword the host reads at deploy."""

import unittest

from agenthost import Agent
from agenthost.tools import APPROVER_KEYWORD, with_approver


class ApproverTest(unittest.TestCase):
    def test_end_user_marks_the_schema_and_the_default_leaves_it(self):
        agent = Agent(routes=["/shop"])

        @agent.tool(needs_approval=True, approver="end_user")
        def mine(order: str) -> str:
            """Mine."""
            return order

        @agent.tool(needs_approval=True)
        def theirs(order: str) -> str:
            """Theirs."""
            return order

        self.assertEqual(agent.tools["mine"].parameters[APPROVER_KEYWORD], "end_user")
        self.assertNotIn(APPROVER_KEYWORD, agent.tools["theirs"].parameters)
        schema = {"type": "object"}
        self.assertIs(with_approver("t", schema, "operator"), schema)
        self.assertNotIn(APPROVER_KEYWORD, schema)
        with self.assertRaises(ValueError):
            with_approver("t", schema, "anyone")
