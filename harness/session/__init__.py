"""The judged session: one fault plan, the recorder that writes the event log, the live judge."""

from harness.session.core import CURRENT_BATCH, BatchHold, EventList, Session, Ticket

__all__ = ["CURRENT_BATCH", "BatchHold", "EventList", "Session", "Ticket"]
