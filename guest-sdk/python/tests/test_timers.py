"""Timers (``Turn.schedule``, ``Turn.cancel_schedule``): the arguments the
SDK checks before the host sees them; outside a component the host is not
there, so a well-formed call reaches it and raises ``RuntimeError``."""

import unittest
from datetime import datetime, timedelta, timezone

from agenthost import Turn


def turn():
    return Turn("s", 1, "/chat", '"go"', None, {})


class TimersTest(unittest.TestCase):
    def test_exactly_one_time_and_an_aware_datetime(self):
        for kwargs in [{}, {"after": 1, "at": "2026-12-01T09:00:00Z"}]:
            with self.assertRaises(ValueError):
                turn().schedule({"text": "later"}, **kwargs)
        with self.assertRaises(ValueError):
            turn().schedule("later", at=datetime(2026, 12, 1, 9, 0))

    def test_a_well_formed_call_reaches_the_host(self):
        for kwargs in [
            {"after": 2},
            {"after": timedelta(minutes=5)},
            {"at": "2026-12-01T09:00:00+01:00"},
            {"at": datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)},
        ]:
            with self.assertRaises(RuntimeError):
                turn().schedule({"text": "later"}, **kwargs)
        with self.assertRaises(RuntimeError):
            turn().cancel_schedule("019aa8e2-7b3c-7d4e-8f10-1234567890ab")


if __name__ == "__main__":
    unittest.main()
